"""Permissions: deny by default (signed in), editor-only catalog writes, owner-only writes.

Objects a user may not read are filtered out of the querysets (each capability's
``selectors``), so they answer 404 — never 403, which would confirm that they exist.
"""

from __future__ import annotations

from typing import Any

from rest_framework import permissions

from simulations.permissions import can_edit_catalog


class CatalogEditorOrReadOnly(permissions.BasePermission):
    """Any signed-in user reads the catalog; only catalog editors write it
    (:func:`simulations.permissions.can_edit_catalog`, the rule the pages apply too)."""

    def has_permission(self, request: Any, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        return request.method in permissions.SAFE_METHODS or can_edit_catalog(request.user)


class IsOwnerOrReadOnly(permissions.BasePermission):
    """Shared rows are readable by every signed-in user; only the owner changes them."""

    def has_object_permission(self, request: Any, view: Any, obj: Any) -> bool:
        if request.method in permissions.SAFE_METHODS:
            return True
        return getattr(obj, "owner_id", None) == request.user.pk
