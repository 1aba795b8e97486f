"""API tokens: create (the key is shown once), list and revoke.

Uses the API's :class:`api.models.ApiToken` (SHA-256 of the key stored, key shown once) and
the same per-user limit as ``POST /api/tokens/`` (``HETPLANNER_MAX_TOKENS_PER_USER``).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from api.models import ApiToken, hash_key, new_key
from frontend.forms import TokenForm
from frontend.views.common import int_or_404
from simulations.permissions import signed_in


def token_create(user: User, name: str) -> tuple[ApiToken | None, str, str]:
    """Create a token for ``user``: (token, key, "") or (None, "", why not)."""
    limit = int(getattr(settings, "HETPLANNER_MAX_TOKENS_PER_USER", 20))
    key = new_key()
    with transaction.atomic():
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        if ApiToken.objects.filter(user=user).count() >= limit:
            return None, "", f"At most {limit} tokens per user; revoke one first."
        token = ApiToken.objects.create(
            user=user, name=name.strip(), key_hash=hash_key(key), key_hint=key[:10]
        )
    return token, key, ""


@never_cache
@login_required
def token_list(request: HttpRequest) -> HttpResponse:
    """The user's tokens and the form to create one; a new key is shown once, here."""
    new_key_value = ""
    form = TokenForm()
    status = 200
    if request.method == "POST":
        form = TokenForm(request.POST)
        if form.is_valid():
            token, new_key_value, error = token_create(
                signed_in(request.user), form.cleaned_data["name"]
            )
            if token is None:
                form.add_error(None, error)
                status = 400
            else:
                messages.success(request, f"Created token “{token.name}”. Copy the key now.")
        else:
            status = 400
    tokens = list(
        ApiToken.objects.filter(user=signed_in(request.user)).order_by("-created_at", "-id")
    )
    return render(
        request,
        "frontend/tokens.html",
        {"tokens": tokens, "form": form, "new_key": new_key_value},
        status=status,
    )


@login_required
@require_POST
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    """Revoke (delete) one of the user's tokens."""
    deleted, _ = ApiToken.objects.filter(user=signed_in(request.user), pk=int_or_404(pk)).delete()
    if not deleted:
        raise Http404("no such token")
    messages.success(request, "Token revoked.")
    return redirect("frontend:tokens")
