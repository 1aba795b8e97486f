"""Request parsers with a size cap: a body larger than the cap is refused with 413 before it
is read (Django's own cap applies to ``request.body`` only, which DRF's parsers bypass).

JSON bodies go through the project's one JSON sanitiser (:mod:`simulations.core.json_fields`):
nesting deeper than its limit is refused before parsing (a linear scan, so a 200 KB body of
100,000 nested arrays cannot reach the parser's recursion), and NUL characters and non-finite
numbers anywhere in the body are refused with 400 keyed by their JSON path.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from rest_framework import exceptions, parsers, status

from simulations.core import json_fields
from simulations.scenarios.services import MAX_TRACE_BYTES


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
    """JSON bodies up to ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes, at most
    :data:`~simulations.core.json_fields.MAX_JSON_DEPTH` levels deep, with no NUL character
    and no NaN, Infinity or overflowing number (each refused with its JSON path)."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        limit = int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        _check_length(parser_context, limit)
        # Read one byte past the cap: a body without (or with a lying) Content-Length is
        # still bounded.
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise RequestTooLarge(f"Request body is over {limit} bytes.")
        try:
            text = raw.decode((parser_context or {}).get("encoding") or settings.DEFAULT_CHARSET)
        except (UnicodeDecodeError, LookupError) as exc:
            raise exceptions.ParseError(f"JSON parse error - not UTF-8 text: {exc}") from None
        too_deep = json_fields.json_depth_error(text)
        if too_deep:
            raise exceptions.ParseError(f"JSON parse error - {too_deep}.")
        try:
            data = json.loads(text, parse_constant=float)
        except ValueError as exc:
            raise exceptions.ParseError(f"JSON parse error - {exc}") from None
        problems = json_fields.storable_problems(data)
        if problems:
            raise exceptions.ValidationError(problems)
        return data


class BoundedMultiPartParser(parsers.MultiPartParser):
    """Multipart uploads (trace files) up to the trace cap plus 64 KiB of form fields."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        _check_length(parser_context, MAX_TRACE_BYTES + 64 * 1024)
        return super().parse(stream, media_type, parser_context)
