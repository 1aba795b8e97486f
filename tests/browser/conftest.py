"""Browser fixtures: Debian's Chromium driven by Playwright against a live server.

The browser is ``/usr/bin/chromium`` (``.ci/run`` installs Debian's ``chromium`` with
apt-get when it is missing); Playwright's own browser downloads are never used. Each test
gets a fresh user-data directory. The tests are skipped, with the reason, only when the
Playwright package or the Chromium binary cannot be found.

Playwright's sync API runs an asyncio loop in the test thread, which makes Django refuse
database calls there ("async unsafe"); the tests only touch the database between browser
steps, never concurrently with them, so the check is lifted for this package.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

REPO = Path(__file__).resolve().parent.parent.parent
SCREENSHOTS = REPO / ".artifacts" / "screenshots"
CHROMIUM = os.environ.get("HETPLANNER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PASSWORD = "correct horse battery staple"


def _chromium() -> str | None:
    if Path(CHROMIUM).is_file():
        return CHROMIUM
    return shutil.which("chromium")


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """Debian's Chromium, or skip the browser tests saying why."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("the playwright package is not installed (requirements-dev.txt pins it)")
    path = _chromium()
    if path is None:
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)")
    return path


@pytest.fixture(scope="session")
def playwright_driver(chromium_path: str) -> Iterator[Any]:
    """The Playwright driver process for the session."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


@pytest.fixture
def browser_page(playwright_driver: Any, chromium_path: str, tmp_path: Path) -> Iterator[Any]:
    """A page of a headless Chromium with a fresh user-data directory."""
    context = playwright_driver.chromium.launch_persistent_context(
        str(tmp_path / "chromium-profile"),
        executable_path=chromium_path,
        headless=True,
        args=CHROMIUM_ARGS,
        viewport={"width": 1360, "height": 900},
        accept_downloads=True,
    )
    context.set_default_timeout(20_000)
    page = context.pages[0] if context.pages else context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.js_errors = errors  # type: ignore[attr-defined]
    try:
        yield page
    finally:
        context.close()


@pytest.fixture
def seeded_live(transactional_db: Any) -> Any:
    """The built-in catalog, committed where the live server and the worker see it."""
    from simulations.catalog.services import catalog_seed

    return catalog_seed()


def make_user(username: str) -> Any:
    """A planner who signs in with :data:`PASSWORD`."""
    from tests.factories import UserFactory

    return UserFactory(username=username)


def sign_in(page: Any, base_url: str, username: str) -> None:
    """Sign in through the login form."""
    page.goto(f"{base_url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("#login-form button[type=submit]")
    page.wait_for_url(f"{base_url}/")


def screenshot(page: Any, name: str) -> Path:
    """Save a full-page screenshot under ``.artifacts/screenshots/`` (git-ignored)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
