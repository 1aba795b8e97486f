"""Strict query parameters: each given once, ``ordering`` limited to the view's fields.

DRF and django-filter quietly ignore what they do not understand (an unknown ordering
field, a repeated parameter); the API answers 400 instead, naming the parameter.
"""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django_filters import rest_framework as filters
from drf_spectacular.utils import extend_schema_field
from rest_framework.exceptions import ValidationError
from rest_framework.filters import OrderingFilter


def ordering_pattern(fields: Any) -> str:
    """The regular expression of an ``ordering`` value over ``fields``: one or more of
    them, each optionally prefixed with ``-``, comma-separated, nothing else (no blanks).
    The schema publishes it and the server applies it, so both accept the same values."""
    name = "|".join(re.escape(f) for f in sorted(fields, key=lambda f: (-len(f), f)))
    return rf"^-?(?:{name})(?:,-?(?:{name}))*$"


class StrictOrderingFilter(OrderingFilter):
    """``?ordering=a,-b`` over the view's ``ordering_fields`` only; anything else is a 400."""

    def get_ordering(self, request: Any, queryset: Any, view: Any) -> Any:
        values = request.query_params.getlist(self.ordering_param)
        if not values:
            return self.get_default_ordering(view)
        if len(values) > 1:
            raise ValidationError({self.ordering_param: ["Give this parameter once."]})
        allowed = {name for name, _ in self.get_valid_fields(queryset, view, {"request": request})}
        # fullmatch with \Z semantics: "$" would also let a trailing newline through.
        if not re.fullmatch(ordering_pattern(allowed).rstrip("$"), values[0]):
            raise ValidationError(
                {
                    self.ordering_param: [
                        f"Order by one or more of (comma-separated, '-' for descending): "
                        f"{', '.join(sorted(allowed))}."
                    ]
                }
            )
        return values[0].split(",")

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        params = super().get_schema_operation_parameters(view)
        fields = [f for f in getattr(view, "ordering_fields", ()) or ()]
        for param in params:
            if param["name"] == self.ordering_param and fields:
                choices = ", ".join(f"{f}, -{f}" for f in fields)
                param["description"] = f"Comma-separated fields to order by: {choices}."
                param["schema"] = {"type": "string", "pattern": ordering_pattern(fields)}
        return params


class StrictQueryMixin:
    """Refuse a query parameter given more than once (after authentication and throttles,
    so anonymous callers still get 401); errors are always JSON, even under ?format=csv."""

    def finalize_response(self, request: Any, response: Any, *args: Any, **kwargs: Any) -> Any:
        if (
            getattr(response, "status_code", 200) >= 400
            and getattr(request, "accepted_renderer", None) is not None
            and request.accepted_renderer.format != "json"
        ):
            from rest_framework.renderers import JSONRenderer

            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        repeated = sorted(k for k, v in request.query_params.lists() if len(v) > 1)
        if repeated:
            raise ValidationError({k: ["Give this parameter once."] for k in repeated})


#: Largest primary key (PostgreSQL bigint); a larger id would be a database error.
MAX_ID = 2**63 - 1


class IdField(forms.IntegerField):
    """A row id in [1, 2**63 - 1]."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(**kwargs)


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": MAX_ID})
class IdFilter(filters.NumberFilter):
    """Rows whose foreign key is this id; an id that matches nothing gives an empty list,
    not a 400 (whether another user's row exists is not revealed either way)."""

    field_class = IdField


class StrictFilterSet(filters.FilterSet):
    """A FilterSet that refuses empty values and non-boolean booleans (django-filter would
    ignore them and return everything)."""

    def is_valid(self) -> bool:
        errors: dict[str, list[str]] = {}
        for name, declared in self.filters.items():
            if name not in self.data:
                continue
            value = self.data.get(name)
            if value == "":
                errors[name] = ["Must not be empty."]
            elif isinstance(declared, filters.BooleanFilter) and str(value).lower() not in (
                "true",
                "false",
            ):
                errors[name] = ["Must be true or false."]
        if errors:
            raise ValidationError(errors)
        return super().is_valid()


class StrictFilterBackend(filters.DjangoFilterBackend):
    """django-filter's backend building :class:`StrictFilterSet` for ``filterset_fields``."""

    filterset_base = StrictFilterSet
