"""Shared pieces of the API's resource modules: field helpers and validators for
serializers, the owner filter, the per-user lock the quota checks take, and the results
action (paginated JSON or CSV) of sweeps and plans.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from django.core.validators import RegexValidator
from django.db.models import QuerySet
from django_filters import rest_framework as filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import GenericViewSet

from api import fields as strict
from api.filters import StrictFilterSet
from api.renderers import CSVRenderer
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


# --- results of sweeps and plans -------------------------------------------------------------


def results_endpoint(
    *,
    summary: str,
    tags: list[str],
    filter_param: OpenApiParameter,
    serializer_class: type[serializers.BaseSerializer],
    page_serializer: type[serializers.BaseSerializer],
    csv_description: str,
) -> Callable[[Callable[..., Response]], Callable[..., Response]]:
    """The ``results`` action of a job viewset: a GET on one job listing the rows it
    recorded so far, paginated JSON (``page_serializer``'s shape, items
    ``serializer_class``) or one CSV table (``?format=csv``), narrowed by ``filter_param``;
    filter backends are off (the rows are the job's, in the job's order)."""
    schema = extend_schema(
        summary=summary,
        tags=tags,
        parameters=[
            OpenApiParameter(
                "format", OpenApiTypes.STR, enum=["json", "csv"], description="Output format."
            ),
            filter_param,
            OpenApiParameter("page", OpenApiTypes.INT, description="Page number (JSON)."),
            OpenApiParameter(
                "page_size", OpenApiTypes.INT, description="Items per page (JSON, at most 100)."
            ),
        ],
        responses={
            (200, "application/json"): page_serializer,
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description=csv_description),
        },
    )
    route = action(
        detail=True,
        methods=["get"],
        renderer_classes=[JSONRenderer, CSVRenderer],
        serializer_class=serializer_class,
        filter_backends=[],
    )

    def decorate(method: Callable[..., Response]) -> Callable[..., Response]:
        return schema(route(method))

    return decorate


def query_choice(request: Request, name: str, choices: Collection[str], message: str) -> str | None:
    """The query parameter ``name`` (None when absent); a 400 keyed by ``name`` saying
    ``message`` when it is not one of ``choices``."""
    value = request.query_params.get(name)
    if value is not None and value not in choices:
        raise ValidationError({name: [message]})
    return value


def csv_attachment(table: Mapping[str, Any], filename: str) -> Response:
    """``table`` (``columns`` and ``rows``, for :class:`~api.renderers.CSVRenderer`) as a
    file download named ``filename``."""
    response = Response(table)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def results_response(
    view: GenericViewSet,
    request: Request,
    rows: QuerySet[Any],
    *,
    table: Callable[[QuerySet[Any]], Mapping[str, Any]],
    filename: str,
) -> Response:
    """What a :func:`results_endpoint` action answers: ``table(rows)`` as the CSV download
    ``filename``, or one page of ``rows`` in the action's serializer (JSON)."""
    if request.accepted_renderer.format == "csv":
        return csv_attachment(table(rows), filename)
    page = view.paginate_queryset(rows)
    data = view.get_serializer_class()(page, many=True).data
    return view.get_paginated_response(data)
