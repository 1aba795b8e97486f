"""Shared pieces of the API's resource modules: field helpers and validators for
serializers, the owner filter and the per-user lock the quota checks take.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.core.validators import RegexValidator
from django.db.models import QuerySet
from django_filters import rest_framework as filters
from rest_framework import serializers

from api import fields as strict
from api.filters import StrictFilterSet
from simulations.core.errors import SpecError
from simulations.core.spec import MAX_QUANTITY
from simulations.fields import MAX_MODEL_DIM, PRECISION_BITS

# --- serializers -----------------------------------------------------------------------------


#: Entries of a ``sources`` object, and characters of one source text.
MAX_SOURCES = 200
MAX_SOURCE_CHARS = 2000
#: Characters of free-text notes.
MAX_NOTES_CHARS = 10_000
#: Memory tiers of one device.
MAX_MEMORY_TIERS = 8
#: Extra fitted parameters of one runtime profile.
MAX_PARAMS = 64

#: Precisions (bits) a runtime profile may use, as choices.
PRECISION_CHOICES = [(b, f"{b}-bit") for b in PRECISION_BITS]

SLUG = RegexValidator(
    r"^[a-z0-9][a-z0-9._-]*\Z",
    "Use lowercase letters, digits, '.', '_' and '-', starting with a letter or digit.",
)


def quantity(*, required: bool = False, allow_zero: bool = False, **kw: Any) -> Any:
    """A finite physical quantity in (0, 1e15] (or [0, 1e15]); null allowed unless required."""
    field = strict.FloatField if allow_zero else strict.PositiveFloatField
    return field(
        required=required,
        allow_null=not required,
        min_value=0.0,
        max_value=MAX_QUANTITY,
        **kw,
    )


def dimension(*, required: bool = False, maximum: int = MAX_MODEL_DIM, **kw: Any) -> Any:
    """An integer count or size in [1, maximum]."""
    return strict.IntegerField(
        required=required, allow_null=not required, min_value=1, max_value=maximum, **kw
    )


class SourcesField(serializers.DictField):
    """Field name → source text (datasheet, paper table or section)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(
            child=strict.CharField(max_length=MAX_SOURCE_CHARS),
            required=False,
            **kw,
        )

    def to_internal_value(self, data: Any) -> dict[str, str]:
        value = super().to_internal_value(data)
        if len(value) > MAX_SOURCES:
            raise serializers.ValidationError(f"At most {MAX_SOURCES} entries.")
        return value


def spec_error(exc: SpecError) -> serializers.ValidationError:
    """A core SpecError as a field error keyed by the last part of its path."""
    key = exc.field.rsplit(".", 1)[-1] or "non_field_errors"
    key = key.split("[", 1)[0] or "non_field_errors"
    return serializers.ValidationError({key: [exc.message]})


def catalog_spec(build: Callable[[dict[str, Any]], Any], record: dict[str, Any]) -> Any:
    """``build(record)`` (a catalog record to its spec), its errors as validation errors: a
    SpecError under its field, any other bad value under ``non_field_errors``."""
    try:
        return build(record)
    except SpecError as exc:
        raise spec_error(exc) from exc
    except (TypeError, ValueError) as exc:
        raise serializers.ValidationError({"non_field_errors": [str(exc)]}) from exc


def drop_none(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


# --- views -----------------------------------------------------------------------------------


CATALOG_METHODS = ["get", "post", "put", "delete", "head", "options"]
#: Catalog slugs may contain dots (llama3.1-8b), which DRF's default lookup excludes.
SLUG_LOOKUP = r"[a-z0-9][a-z0-9._-]*"


class OwnedFilter(StrictFilterSet):
    """``mine=true`` keeps the caller's own rows; ``shared`` filters on the sharing flag."""

    mine = filters.BooleanFilter(method="filter_mine", label="Only my own rows")

    def filter_mine(self, queryset: QuerySet[Any], name: str, value: bool) -> QuerySet[Any]:
        user = self.request.user
        return queryset.filter(owner=user) if value else queryset.exclude(owner=user)
