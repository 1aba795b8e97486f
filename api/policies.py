"""Policies: ``/api/policies/``, the registered policies with their roles and options."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    extend_schema,
    extend_schema_view,
)
from rest_framework import serializers, viewsets
from rest_framework.exceptions import (
    NotFound,
)
from rest_framework.request import Request
from rest_framework.response import Response

from api import fields as strict
from api.filters import StrictQueryMixin
from simulations.core.errors import UnknownPolicyError
from simulations.core.policies import get_policy, policy_names

# --- serializers -----------------------------------------------------------------------------


# --- policies --------------------------------------------------------------------------------


class PolicyRoleSerializer(strict.Serializer):
    """A device role a policy understands."""

    name = strict.CharField()
    help = strict.CharField()
    kinds = serializers.ListField(child=strict.CharField())
    required = strict.BooleanField()  # type: ignore[assignment]  # a field named like a Field attribute


class PolicyOptionSerializer(strict.Serializer):
    """An option a policy accepts, with its type, default and bounds."""

    name = strict.CharField()
    type = strict.CharField()
    default = serializers.JSONField()
    help = strict.CharField()
    minimum = strict.FloatField(required=False)
    maximum = strict.FloatField(required=False)
    choices = serializers.ListField(child=serializers.JSONField(), required=False)
    unit = strict.CharField(required=False)
    catalog = strict.CharField(
        required=False,
        help_text="The catalog collection whose slug the option names (links: an "
        "interconnect, e.g. nvlink4 or pcie5-x16).",
    )


class PolicySerializer(strict.Serializer):
    """A registered scheduling policy."""

    name = strict.CharField()
    summary = strict.CharField()
    roles = PolicyRoleSerializer(many=True)
    options = PolicyOptionSerializer(many=True)
    defaults = serializers.DictField(help_text="Option name → default value.")


# --- views -----------------------------------------------------------------------------------


# --- policies --------------------------------------------------------------------------------


def _policy_entry(name: str) -> dict[str, Any]:
    cls = get_policy(name)
    entry = cls.describe()
    entry["defaults"] = {o.name: o.default for o in cls.options}
    return entry


@extend_schema_view(
    list=extend_schema(summary="Registered scheduling policies", tags=["policies"]),
    retrieve=extend_schema(summary="A policy: roles, options, defaults", tags=["policies"]),
)
class PolicyViewSet(StrictQueryMixin, viewsets.ViewSet):
    """The policy registry of the simulation core: names, device roles, option schemas and
    defaults (what the scenario builder renders)."""

    serializer_class = PolicySerializer
    lookup_field = "name"
    lookup_value_regex = r"[A-Za-z0-9._+-]+"

    def list(self, request: Request) -> Response:
        """Every registered policy, by name (not paginated: the registry is small)."""
        return Response(
            PolicySerializer([_policy_entry(n) for n in policy_names()], many=True).data
        )

    def retrieve(self, request: Request, name: str | None = None) -> Response:
        """One policy."""
        try:
            entry = _policy_entry(str(name))
        except UnknownPolicyError:
            raise NotFound(f"No policy named {name!r}.") from None
        return Response(PolicySerializer(entry).data)
