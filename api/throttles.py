"""Per-user request throttles; rates come from ``HETPLANNER_API_THROTTLE_RATES`` (read at
request time, so deployments and tests can change them). A throttled request gets 429 with
``Retry-After`` (seconds)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import throttling


class _SettingsRate:
    """Reads the rate of ``scope`` from the settings on every request."""

    scope: str

    def get_rate(self) -> str | None:
        return settings.HETPLANNER_API_THROTTLE_RATES.get(self.scope)


class UserRateThrottle(_SettingsRate, throttling.UserRateThrottle):
    """Every request of a signed-in user (anonymous requests by address)."""

    scope = "user"

    def __init__(self) -> None:
        # DRF resolves the rate in __init__; do it here from the current settings.
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        if request.user and request.user.is_authenticated:
            ident = request.user.pk
            scope = self.scope
        else:
            ident = self.get_ident(request)
            scope = "anon"
            self.rate = settings.HETPLANNER_API_THROTTLE_RATES.get("anon")
            self.num_requests, self.duration = self.parse_rate(self.rate)
        return self.cache_format % {"scope": scope, "ident": ident}


class ScopedUserThrottle(_SettingsRate, throttling.SimpleRateThrottle):
    """A per-user rate for one kind of action, applied only to the methods in ``methods``."""

    scope = ""
    methods: tuple[str, ...] = ("POST",)

    def __init__(self) -> None:
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)

    def allow_request(self, request: Any, view: Any) -> bool:
        if request.method not in self.methods:
            return True
        return super().allow_request(request, view)

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        if not (request.user and request.user.is_authenticated):
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}


class RunSubmitThrottle(ScopedUserThrottle):
    """Run submissions (``HETPLANNER_API_THROTTLE_RATES["run_submit"]``, 30/min)."""

    scope = "run_submit"


class SweepSubmitThrottle(ScopedUserThrottle):
    """Sweep submissions."""

    scope = "sweep_submit"


class PlanSubmitThrottle(ScopedUserThrottle):
    """Capacity-plan submissions (``plan_submit``; the ``sweep_submit`` rate if unset)."""

    scope = "plan_submit"

    def get_rate(self) -> str | None:
        rates = settings.HETPLANNER_API_THROTTLE_RATES
        return rates.get(self.scope, rates.get("sweep_submit"))


class UploadThrottle(ScopedUserThrottle):
    """Trace uploads and Hugging Face imports."""

    scope = "upload"


class TokenThrottle(ScopedUserThrottle):
    """Token creation."""

    scope = "token"


class TokenExchangeThrottle(_SettingsRate, throttling.SimpleRateThrottle):
    """Password → token exchanges, by client address (the caller is not signed in), counted
    whatever the outcome so that passwords cannot be guessed quickly
    (``HETPLANNER_API_THROTTLE_RATES["token_exchange"]``)."""

    scope = "token_exchange"

    def __init__(self) -> None:
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
