"""Password reset tells the truth about mail: the default backend
prints mail on the server's console (configurable with ``EMAIL_URL`` or ``EMAIL_BACKEND``),
and the reset pages say where the mail went when it is not really sent."""

from __future__ import annotations

import html
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from tests.conftest import REPO_ROOT
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

CONSOLE = "django.core.mail.backends.console.EmailBackend"
FILES = "django.core.mail.backends.filebased.EmailBackend"


def email_backend(**env: str) -> str:
    """The EMAIL_BACKEND local settings resolve to with ``env`` (and no other EMAIL_*)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("EMAIL_")}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from django.conf import settings; "
            "print(settings.EMAIL_BACKEND, settings.EMAIL_HOST)",
        ],
        cwd=REPO_ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "hetplanner.settings.local", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_mail_goes_to_the_console_by_default_and_the_environment_can_change_it() -> None:
    assert email_backend().split()[0] == CONSOLE
    assert email_backend(EMAIL_URL="smtp://mail.example.com:587").split() == [
        "django.core.mail.backends.smtp.EmailBackend",
        "mail.example.com",
    ]
    assert email_backend(EMAIL_BACKEND=FILES).split()[0] == FILES


def test_the_reset_pages_say_that_mail_is_printed_on_the_console(settings: Any) -> None:
    settings.EMAIL_BACKEND = CONSOLE
    UserFactory(username="dora", email="dora@example.com")
    client = Client()
    form = client.get("/accounts/password_reset/")
    assert form.status_code == 200
    assert "printed on the server's console" in html.unescape(form.content.decode())
    done = client.post("/accounts/password_reset/", {"email": "dora@example.com"}, follow=True)
    assert done.status_code == 200
    page = html.unescape(done.content.decode())
    assert "printed on the server's console" in page
    assert "emailed you" not in page and "has been sent" not in page


def test_with_the_file_backend_the_link_lands_in_the_folder_the_page_names(
    settings: Any, tmp_path: Path
) -> None:
    settings.EMAIL_BACKEND = FILES
    settings.EMAIL_FILE_PATH = str(tmp_path)
    UserFactory(username="dora", email="dora@example.com")
    done = Client().post("/accounts/password_reset/", {"email": "dora@example.com"}, follow=True)
    assert str(tmp_path) in done.content.decode()
    (mail,) = tmp_path.iterdir()
    assert "/accounts/reset/" in mail.read_text()


def test_with_a_real_mail_server_the_pages_say_nothing_about_the_console(settings: Any) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    page = Client().get("/accounts/password_reset/").content.decode()
    assert "console" not in page
