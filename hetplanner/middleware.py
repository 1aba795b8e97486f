"""Site-wide request guards that run before any view."""

from __future__ import annotations

from collections.abc import Callable

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse

from simulations.core.json_fields import NUL_MESSAGE


class RejectNulMiddleware:
    """A NUL character (``%00``) in the URL: 404 for a path (no object is named so), 400
    naming the parameter for a query string.

    Views pass path parts and query values to database lookups, and PostgreSQL refuses NUL
    in text outright (a 500 otherwise); no legitimate URL of the site holds one.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path or "\x00" in request.path_info:
            raise Http404("No such page.")
        bad = sorted(
            {
                key.replace("\x00", "\\u0000")
                for key, values in request.GET.lists()
                if "\x00" in key or any("\x00" in v for v in values)
            }
        )
        if bad:
            if request.path.startswith("/api/"):
                return JsonResponse({key: [NUL_MESSAGE] for key in bad}, status=400)
            return HttpResponseBadRequest(
                f"Query parameter {', '.join(bad)} {NUL_MESSAGE}.".encode(),
                content_type="text/plain; charset=utf-8",
            )
        return self.get_response(request)
