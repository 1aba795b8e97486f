"""Writes of the API app: API tokens."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from api.models import ApiToken, hash_key, new_key


def api_token_create(
    *, user: Any, name: str, expires_in_days: int | None = None
) -> tuple[ApiToken, str]:
    """Create a token for ``user`` and return it with its key (shown once; only the hash is
    stored). Raises ValidationError (``non_field_errors``) past
    ``HETPLANNER_MAX_TOKENS_PER_USER``; nothing is stored then."""
    limit = int(settings.HETPLANNER_MAX_TOKENS_PER_USER)
    key = new_key()
    with transaction.atomic():
        # Serialise one user's quota check (row lock on PostgreSQL).
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        if ApiToken.objects.filter(user=user).count() >= limit:
            raise ValidationError(
                {"non_field_errors": [f"At most {limit} tokens per user; revoke one first."]}
            )
        token = ApiToken.objects.create(
            user=user,
            name=name.strip(),
            key_hash=hash_key(key),
            key_hint=key[:10],
            expires_at=timezone.now() + timedelta(days=expires_in_days)
            if expires_in_days
            else None,
        )
    return token, key
