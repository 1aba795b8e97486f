"""Token authentication against :class:`api.models.ApiToken` (hashed keys, expiry)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import authentication, exceptions

from api.models import ApiToken, hash_key

#: ``last_used_at`` is written at most this often per token (keeps reads write-free).
LAST_USED_RESOLUTION = timedelta(minutes=1)


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Token <key>`` (``Bearer`` is accepted too)."""

    keywords = ("token", "bearer")

    def authenticate(self, request: Any) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].decode("latin-1").lower() not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Invalid token header.")
        try:
            key = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        if len(key) > 128:
            raise exceptions.AuthenticationFailed("Invalid token.")
        token = ApiToken.objects.select_related("user").filter(key_hash=hash_key(key)).first()
        now = timezone.now()
        if token is None or (token.expires_at is not None and token.expires_at <= now):
            raise exceptions.AuthenticationFailed("Invalid or expired token.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request: Any) -> str:
        return "Token"
