"""Who may do what, as plain functions both the API's permission classes and the pages call.

One rule per decision, so a page can never allow what the API refuses.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied

from simulations.choices import TraceVisibility


def signed_in(user: Any) -> User:
    """``user`` as the signed-in account it is in a view that requires one (the API's
    IsAuthenticated, the pages' login_required); PermissionDenied (403) for anyone else,
    which only a view without that requirement could let through."""
    if not isinstance(user, User) or not user.is_authenticated:
        raise PermissionDenied("sign in first")
    return user


def can_edit_catalog(user: Any) -> bool:
    """Whether ``user`` may create, change or delete shared catalog rows (devices, memory
    tiers, runtime profiles, models — also by import): active staff only.

    The catalog is shared by every user: a change alters what everyone's scenarios simulate.
    """
    return bool(
        user is not None
        and getattr(user, "is_authenticated", False)
        and getattr(user, "is_active", False)
        and getattr(user, "is_staff", False)
    )


def can_delete_trace(user: Any, trace: Any) -> bool:
    """Whether ``user`` may delete ``trace`` (in-use traces are refused separately, by
    :func:`simulations.scenarios.services.trace_delete`): its owner deletes a private or
    shared one; catalog editors delete any, and only they a public (built-in) one."""
    if can_edit_catalog(user):
        return True
    return bool(
        getattr(user, "is_authenticated", False)
        and trace.visibility != TraceVisibility.PUBLIC
        and trace.owner_id is not None
        and trace.owner_id == user.pk
    )
