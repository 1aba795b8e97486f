"""Generic API views: Swagger UI and the JSON 404 for unknown paths under /api/.

Deny by default: every view needs a signed-in user (session or token). Private rows are
filtered out of the querysets, so another user's scenario, workload, run, sweep, plan or token
answers 404 (never 403). Session writes need the CSRF token (DRF's SessionAuthentication).
Work-queuing POSTs are throttled per user and bounded by per-user quotas.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.views import redirect_to_login
from drf_spectacular.views import SpectacularSwaggerView
from rest_framework.exceptions import (
    NotAuthenticated,
    NotFound,
)
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.filters import StrictQueryMixin


class ApiDocsView(SpectacularSwaggerView):
    """Swagger UI of the API. A signed-out browser (asking for HTML) is sent to sign in and
    back here, rather than shown a bare 401 page; other callers still get the 401."""

    def handle_exception(self, exc: Exception) -> Any:
        if isinstance(exc, NotAuthenticated) and "text/html" in self.request.headers.get(
            "Accept", ""
        ):
            return redirect_to_login(self.request.get_full_path())
        return super().handle_exception(exc)


class NotFoundView(StrictQueryMixin, APIView):
    """Any other path under /api/: a JSON 404 for signed-in callers (401 for the rest)."""

    schema = None  # not an operation of the API

    def _not_found(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        raise NotFound("No such endpoint or object.")

    get = post = put = patch = delete = _not_found
