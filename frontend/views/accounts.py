"""Account pages: password reset in the dashboard's look, saying where its mail goes."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views

_NOT_SENT = {
    "django.core.mail.backends.console.EmailBackend": (
        "This server sends no mail: messages are printed on the server's console "
        "(the terminal running the server, or the web service's log)."
    ),
    "django.core.mail.backends.locmem.EmailBackend": (
        "This server sends no mail: messages are kept in the server's memory (tests)."
    ),
    "django.core.mail.backends.dummy.EmailBackend": (
        "This server sends no mail: messages are discarded."
    ),
}


def mail_destination() -> str | None:
    """Where mail goes when the configured backend does not deliver it, for the page to say;
    None when it is really sent (SMTP or another delivering backend)."""
    backend = settings.EMAIL_BACKEND
    if backend == "django.core.mail.backends.filebased.EmailBackend":
        return (
            "This server sends no mail: messages are written as files to "
            f"{settings.EMAIL_FILE_PATH} on the server."
        )
    return _NOT_SENT.get(backend)


class _MailDestination:
    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)  # type: ignore[misc]
        context["mail_destination"] = mail_destination()
        return context


class PasswordResetView(_MailDestination, auth_views.PasswordResetView):
    """Ask for a reset link by e-mail address."""

    template_name = "frontend/accounts/password_reset_form.html"


class PasswordResetDoneView(_MailDestination, auth_views.PasswordResetDoneView):
    """After the request: where the link went."""

    template_name = "frontend/accounts/password_reset_done.html"
