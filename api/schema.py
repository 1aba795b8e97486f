"""OpenAPI post-processing: document the error responses every operation can give."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerFieldExtension,
)

_ERROR = {"$ref": "#/components/schemas/Error"}
_ERROR_SCHEMA = {
    "type": "object",
    "description": "An error: ``detail`` for the request as a whole, or field → messages "
    "(JSON path → messages for scenario documents and sweep axes).",
    "properties": {"detail": {"type": "string"}},
    "additionalProperties": True,
}
_TEXT = {
    "400": "Invalid input: field-level errors.",
    "401": "Not signed in (no session, no valid token).",
    "403": "Signed in but not allowed (e.g. a catalog write by a non-staff user, a CSRF "
    "failure, or a change to another user's shared row).",
    "404": "No such object, or not visible to you.",
    "405": "Method not allowed.",
    "409": "Still referred to by other rows.",
    "413": "Request body too large.",
    "429": "Throttled (see Retry-After) or a per-user quota is used up.",
}


def align_with_the_server(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Make the schema say what the server accepts (checked by schemathesis):

    - request bodies refuse unknown properties (:class:`api.fields.RejectUnknownMixin`), so
      their components get ``additionalProperties: false``;
    - free-text query filters refuse an empty value (:class:`api.filters.StrictFilterSet`),
      so they get ``minLength: 1``.
    """
    for name, component in result.get("components", {}).get("schemas", {}).items():
        if name.endswith("Request") and component.get("type") == "object":
            component.setdefault("additionalProperties", False)
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict):
                continue
            for param in operation.get("parameters", []):
                schema = param.get("schema", {})
                if (
                    param.get("in") == "query"
                    and schema.get("type") == "string"
                    and "enum" not in schema
                    and "pattern" not in schema
                ):
                    schema.setdefault("minLength", 1)
    return result


class PositiveFloatFieldExtension(OpenApiSerializerFieldExtension):
    """A number greater than zero: ``minimum: 0`` with ``exclusiveMinimum`` (OpenAPI 3.0)."""

    target_class = "api.fields.PositiveFloatField"

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> Any:
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        schema["minimum"] = 0
        schema["exclusiveMinimum"] = True
        return schema


class ListSerializerExtension(OpenApiSerializerFieldExtension):
    """A nested ``many=True`` serializer's ``min_length``/``max_length`` as ``minItems``/
    ``maxItems`` (drf-spectacular leaves them out, so the schema allowed e.g. ``axes: []``)."""

    target_class = "rest_framework.serializers.ListSerializer"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> Any:
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        if getattr(self.target, "min_length", None) is not None:
            schema["minItems"] = self.target.min_length
        if getattr(self.target, "max_length", None) is not None:
            schema["maxItems"] = self.target.max_length
        return schema


def document_error_responses(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Add the shared ``Error`` schema and the 4xx responses to every operation."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = _ERROR_SCHEMA
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            codes = ["401", "403", "405", "429"]
            if "{" in path:
                codes.append("404")
            if method in ("post", "put", "patch"):
                codes += ["400", "413"]
            if method == "get" and operation.get("parameters"):
                codes += ["400", "404"]
            if method == "delete":
                codes.append("409")
            responses = operation.setdefault("responses", {})
            for code in codes:
                responses.setdefault(
                    code,
                    {
                        "description": _TEXT[code],
                        "content": {"application/json": {"schema": _ERROR}},
                    },
                )
    return result


class ApiTokenScheme(OpenApiAuthenticationExtension):
    """Documents ``Authorization: Token <key>`` in the OpenAPI schema."""

    target_class = "api.authentication.ApiTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": 'API token: "Token <key>" (create one at /api/auth/tokens/).',
        }
