"""Strict request fields and serializers: the server accepts what the OpenAPI schema says and
nothing else.

DRF coerces quietly: ``"name": 0`` becomes ``"0"``, ``"shared": 1`` becomes ``True``,
``"requests": "5"`` and ``true`` become integers, and unknown body properties are dropped.
The schema promises strings, booleans and integers and (``additionalProperties: false``) no
other properties, so a client relying on the schema, and schemathesis, saw the server accept
what the schema forbids. Form-encoded bodies (multipart trace uploads, the browsable API)
carry every value as text, so text is still parsed there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import models
from django.http import QueryDict
from rest_framework import serializers


def _from_form(field: serializers.Field) -> bool:
    """Whether the body being validated is form-encoded (values arrive as text)."""
    root: Any = field
    while getattr(root, "parent", None) is not None:
        root = root.parent
    return isinstance(getattr(root, "initial_data", None), QueryDict)


class CharField(serializers.CharField):
    """Text only: a number or a boolean is refused, not turned into text."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class BooleanField(serializers.BooleanField):
    """``true``/``false`` only in JSON (0, 1 and strings are refused)."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool) and not (isinstance(data, str) and _from_form(self)):
            self.fail("invalid", input=data)
        return bool(super().to_internal_value(data))


class IntegerField(serializers.IntegerField):
    """Integers only in JSON (booleans, strings and fractions are refused)."""

    def to_internal_value(self, data: Any) -> int:
        integral_float = isinstance(data, float) and data.is_integer()
        if isinstance(data, bool) or not (
            isinstance(data, int) or integral_float or (isinstance(data, str) and _from_form(self))
        ):
            self.fail("invalid")
        return int(super().to_internal_value(data))


class FloatField(serializers.FloatField):
    """Numbers only in JSON (booleans and strings are refused)."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not (
            isinstance(data, int | float) or (isinstance(data, str) and _from_form(self))
        ):
            self.fail("invalid")
        return float(super().to_internal_value(data))


class PositiveFloatField(FloatField):
    """A number greater than zero (``exclusiveMinimum`` in the schema, see
    :class:`api.schema.PositiveFloatFieldExtension`)."""

    default_error_messages = {"not_positive": "Must be greater than zero."}

    def __init__(self, **kwargs: Any) -> None:
        # No min_value: its MinValueValidator would make drf-spectacular drop the
        # exclusiveMinimum the extension sets; the bound is checked below instead.
        kwargs.pop("min_value", None)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> float:
        value = super().to_internal_value(data)
        if value <= 0:
            self.fail("not_positive")
        return value


class RejectUnknownMixin:
    """Refuse body properties the serializer does not declare (``additionalProperties:
    false`` in the schema). Read-only fields, and the keys a representation adds beyond the
    fields (``output_only_keys``), are tolerated, so a GET body can be sent back."""

    #: Keys of the representation that are not fields (ignored on input).
    output_only_keys: tuple[str, ...] = ()

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping) and not isinstance(data, QueryDict):
            known = {*self.fields, *self.output_only_keys}  # type: ignore[attr-defined]
            unknown = sorted(str(k) for k in data if k not in known)
            if unknown:
                raise serializers.ValidationError({k: ["Unknown field."] for k in unknown})
        return super().to_internal_value(data)  # type: ignore[misc]


class Serializer(RejectUnknownMixin, serializers.Serializer):
    """A serializer that refuses unknown properties."""


class ModelSerializer(RejectUnknownMixin, serializers.ModelSerializer):
    """A model serializer with strict generated fields that refuses unknown properties."""

    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.CharField: CharField,
        models.TextField: CharField,
        models.BooleanField: BooleanField,
        models.IntegerField: IntegerField,
        models.BigIntegerField: IntegerField,
        models.PositiveIntegerField: IntegerField,
        models.PositiveSmallIntegerField: IntegerField,
        models.SmallIntegerField: IntegerField,
        models.FloatField: FloatField,
    }
