"""``/healthz``: 200 when the deployment is healthy, 503 with the failing checks otherwise."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from ops.selectors import health_report


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """The health report as JSON (no sign-in: load balancers and compose call it)."""
    report = health_report()
    return JsonResponse(report, status=200 if report["status"] == "ok" else 503)
