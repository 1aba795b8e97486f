"""Dashboard pages (server-rendered)."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from simulations import selectors


def index(request: HttpRequest) -> HttpResponse:
    """The catalog: devices with their key datasheet figures, models and runtime profiles."""
    return render(request, "frontend/index.html", selectors.catalog_overview())
