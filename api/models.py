"""API tokens for automation: several per user, named, revocable, stored only as a hash.

The key (``hp_`` + 43 URL-safe characters, 256 bits) is shown once when the token is
created; the database keeps its SHA-256, so a leaked database does not leak usable keys.
"""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q

KEY_PREFIX = "hp_"


def hash_key(key: str) -> str:
    """SHA-256 (hex) of a token key, the form stored and looked up."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> str:
    """A fresh random token key."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


class ApiToken(models.Model):
    """A user's API token (``Authorization: Token <key>``); deleting it revokes it."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="api_tokens",
        help_text="Whose requests the token authenticates.",
    )
    name = models.CharField(max_length=100, help_text="What the token is for (e.g. 'CI').")
    key_hash = models.CharField(
        max_length=64, unique=True, editable=False, help_text="SHA-256 of the key (hex)."
    )
    key_hint = models.CharField(
        max_length=12, editable=False, help_text="First characters of the key, to recognise it."
    )
    created_at = models.DateTimeField(auto_now_add=True, help_text="When it was created.")
    last_used_at = models.DateTimeField(
        null=True, blank=True, help_text="Last request it authenticated (to the minute)."
    )
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="After this it no longer authenticates (empty: never)."
    )

    class Meta:
        ordering = ("-created_at", "-id")
        constraints = [
            models.CheckConstraint(
                condition=~Q(name=""), name="%(app_label)s_%(class)s_name_not_empty"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.key_hint}…)"
