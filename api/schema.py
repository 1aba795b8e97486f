"""OpenAPI post-processing: document the error responses every operation can give."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension

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
