"""Who owns a row and who else may see it: the ``owner`` and ``visibility`` columns of
traces, measurement sets and runtime profiles, and the rules on them.

A row has an owner (the user who stored it; empty for a built-in or catalog row) and a
:class:`~simulations.choices.TraceVisibility`: private (its owner only), shared (every
signed-in user) or public (everyone, as part of the catalog, which only catalog editors
publish to).

The models declare the two columns with :func:`owner_field` and :func:`visibility_field`
rather than inheriting them from an abstract model: each keeps its own reverse accessor
(``user.traces``, ``user.runtime_profiles``, ``user.measurement_sets``), its own help text
(which the API schema shows) and, for runtime profiles, a public default; and a column
declared in place keeps its position among the model's columns, which the admin's forms
follow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django.db.models.expressions import Combinable

from simulations.choices import TraceVisibility
from simulations.permissions import can_edit_catalog

#: Who may see an owned row (the same three levels for every kind of row).
Visibility = TraceVisibility


def owner_field(
    *, related_name: str, help_text: str
) -> models.ForeignKey[User | Combinable | None, User | None]:
    """The ``owner`` column: the user who stored the row, empty for a built-in row; deleting
    the user empties it rather than deleting the row (others may use a shared row)."""
    return models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name=related_name,
        help_text=help_text,
    )


def visibility_field(
    *, help_text: str, default: str = Visibility.PRIVATE
) -> models.CharField[str | int | Combinable, str]:
    """The ``visibility`` column: one of :data:`Visibility`'s values (private by default)."""
    return models.CharField(
        max_length=16, choices=Visibility.choices, default=default, help_text=help_text
    )


def visibility_constraint() -> models.CheckConstraint:
    """The check that ``visibility`` is one of :data:`Visibility`'s values (named per model)."""
    return models.CheckConstraint(
        condition=Q(visibility__in=Visibility.values),
        name="%(app_label)s_%(class)s_visibility_valid",
    )


def visible_to(user: Any) -> Q:
    """The rows a signed-in ``user`` may see: their own, shared and public ones (callers
    decide what an anonymous user sees)."""
    return Q(owner=user) | Q(visibility__in=(Visibility.SHARED, Visibility.PUBLIC))


def stored_visibility(owner: Any, visibility: str | None, *, what: str) -> str:
    """The visibility a new row stored for ``owner`` gets: ``visibility``, by default
    private for a user's row and public for a built-in one (no owner). Raises
    ValidationError on ``visibility`` when a user who may not edit the catalog asks for
    public (``what`` names the row in the message)."""
    if visibility is None:
        visibility = Visibility.PRIVATE if owner is not None else Visibility.PUBLIC
    if visibility == Visibility.PUBLIC and owner is not None and not can_edit_catalog(owner):
        raise ValidationError(
            {"visibility": [f"only staff publish a {what}; choose private or shared"]}
        )
    return visibility
