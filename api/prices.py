"""Cloud prices: ``/api/cloud-offers/``, the published rental prices the catalog ships
(``simulations/core/data/prices/``), each with its device, provider, date and source — what
a ``costs.cloud_usd_per_device_hour`` entry may name instead of a number."""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from api import fields as strict
from api.filters import StrictQueryMixin
from simulations.core.catalog import builtin_cloud_offers

#: A device slug as the catalog spells them.
SLUG_RE = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


class CloudOfferSerializer(strict.Serializer):
    """A published cloud rental price of one catalog device."""

    slug = strict.CharField(help_text="What a costs entry names: slug, or slug@low/slug@high.")
    device = strict.CharField(help_text="The catalog device it prices.")
    provider = strict.CharField()
    usd_per_device_hour_low = strict.FloatField(help_text="USD per device-hour (low end).")
    usd_per_device_hour_high = strict.FloatField(
        help_text="USD per device-hour (high end; equal to the low end for a single price)."
    )
    as_of = strict.CharField(help_text="The date the source gives its price.")
    # a field named "source" shadows DRF's Field.source attribute for the type checker only:
    # the serializer's metaclass collects declared fields before any instance exists
    source = strict.CharField()  # type: ignore[assignment]
    notes = strict.CharField(allow_blank=True)


def _offers(device: str | None) -> list[dict[str, Any]]:
    return [
        o.as_document()
        for o in builtin_cloud_offers().values()
        if device is None or o.device == device
    ]


@extend_schema_view(
    list=extend_schema(
        summary="Published cloud rental prices",
        tags=["catalog"],
        parameters=[
            OpenApiParameter(
                "device",
                {"type": "string", "pattern": SLUG_RE.pattern, "minLength": 1, "maxLength": 100},
                description="Only the offers of this device slug.",
            )
        ],
    ),
    retrieve=extend_schema(summary="A cloud rental price", tags=["catalog"]),
)
class CloudOfferViewSet(StrictQueryMixin, viewsets.ViewSet):
    """The catalog's cloud offers (read-only: they ship with the code and carry sources)."""

    serializer_class = CloudOfferSerializer
    lookup_field = "slug"
    lookup_value_regex = r"[A-Za-z0-9._-]+"

    def list(self, request: Request) -> Response:
        """Every offer, or those of ``?device=`` (not paginated: the list is short)."""
        unknown = sorted(set(request.query_params) - {"device", "format"})
        if unknown:
            raise ValidationError({k: ["Unknown query parameter."] for k in unknown})
        device = request.query_params.get("device")
        if device is not None and not SLUG_RE.fullmatch(device):
            raise ValidationError({"device": ["Give a device slug (letters, digits, . _ -)."]})
        return Response(CloudOfferSerializer(_offers(device), many=True).data)

    def retrieve(self, request: Request, slug: str | None = None) -> Response:
        """One offer."""
        offer = builtin_cloud_offers().get(str(slug))
        if offer is None:
            raise NotFound(f"No cloud offer named {slug!r}.")
        return Response(CloudOfferSerializer(offer.as_document()).data)
