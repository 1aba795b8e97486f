"""Request parsers with a size cap: a body larger than the cap is refused with 413 before it
is read (Django's own cap applies to ``request.body`` only, which DRF's parsers bypass)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import exceptions, parsers, status

from simulations.services import MAX_TRACE_BYTES


class RequestTooLarge(exceptions.APIException):
    """413: the request body is larger than allowed."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "Request body too large."
    default_code = "too_large"


def _check_length(parser_context: Any, limit: int) -> None:
    request = (parser_context or {}).get("request")
    if request is None:
        return
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise exceptions.ParseError("Invalid Content-Length.") from None
    if length > limit:
        raise RequestTooLarge(f"Request body is {length} bytes; at most {limit} are accepted.")


class BoundedJSONParser(parsers.JSONParser):
    """JSON bodies up to ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes (NaN/Infinity rejected)."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        _check_length(parser_context, int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE))
        return super().parse(stream, media_type, parser_context)


class BoundedMultiPartParser(parsers.MultiPartParser):
    """Multipart uploads (trace files) up to the trace cap plus 64 KiB of form fields."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        _check_length(parser_context, MAX_TRACE_BYTES + 64 * 1024)
        return super().parse(stream, media_type, parser_context)
