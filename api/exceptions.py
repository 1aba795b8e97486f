"""API error responses: every error is JSON with field-level detail where there is a field.

Besides DRF's own exceptions this maps the domain errors the services raise:
Django ``ValidationError`` (field → messages) and the scenario/sweep validation errors
(JSON path → messages) to 400, a used-up quota to 429, and deleting a row that others
still refer to to 409.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import ProtectedError, RestrictedError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found
from django.views.defaults import server_error as django_server_error
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from simulations.core.errors import ScenarioValidationError
from simulations.jobs import QuotaExceededError
from simulations.scenarios.services import TraceInUseError
from simulations.sweeps.expand import SweepValidationError


def django_errors(exc: DjangoValidationError) -> dict[str, Any]:
    """A Django ValidationError as ``{field: [messages]}`` (``non_field_errors`` for the rest)."""
    if hasattr(exc, "error_dict"):
        return {
            ("non_field_errors" if k == "__all__" else k): v for k, v in exc.message_dict.items()
        }
    return {"non_field_errors": exc.messages}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler plus the domain errors above."""
    if isinstance(exc, RequestDataTooBig):
        return Response(
            {"detail": f"Request body too large: {exc}"},
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, DjangoValidationError):
        return Response(django_errors(exc), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, ScenarioValidationError):
        return Response({"document": exc.errors}, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, SweepValidationError):
        return Response(exc.errors, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, QuotaExceededError):
        return Response({"detail": str(exc)}, status=status.HTTP_429_TOO_MANY_REQUESTS)
    if isinstance(exc, TraceInUseError):
        return Response(
            {"detail": str(exc), "referrers": exc.referrers}, status=status.HTTP_409_CONFLICT
        )
    if isinstance(exc, ProtectedError | RestrictedError):
        return Response(
            {"detail": "Still in use: other rows refer to it, so it cannot be deleted."},
            status=status.HTTP_409_CONFLICT,
        )
    return drf_exception_handler(exc, context)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """The site's 404 handler: JSON under ``/api/`` (a path no API route matches, e.g. a
    slug with characters a slug cannot hold), Django's page elsewhere — an API client is
    never handed an HTML error page."""
    if request.path.startswith("/api/"):
        return JsonResponse(
            {"detail": "No such endpoint or object."}, status=status.HTTP_404_NOT_FOUND
        )
    return page_not_found(request, exception or Http404())


def server_error(request: HttpRequest) -> HttpResponse:
    """The site's 500 handler: JSON under ``/api/``, Django's page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse(
            {"detail": "Internal server error."}, status=status.HTTP_500_INTERNAL_SERVER_ERROR
        )
    return django_server_error(request)
