"""A static-files finder that serves the Plotly JavaScript bundled with plotly.py.

plotly.py ships ``plotly.min.js`` (the exact version its figures are written for) in its
package data. This finder exposes it as ``frontend/vendor/plotly.min.js`` so whitenoise
serves it from the app's own static files (``collectstatic`` copies it like any other
file) and the pages never load JavaScript from a CDN.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.contrib.staticfiles.utils import matches_patterns
from django.core.checks import CheckMessage, Error
from django.core.files.storage import FileSystemStorage

#: Where the pages refer to the bundle under STATIC_URL.
PREFIX = "frontend/vendor"
NAME = "plotly.min.js"
STATIC_PATH = f"{PREFIX}/{NAME}"


def plotly_js_path() -> Path:
    """The ``plotly.min.js`` of the installed plotly.py package."""
    return Path(plotly.__file__).resolve().parent / "package_data" / NAME


class PlotlyJsFinder(BaseFinder):
    """Finds ``frontend/vendor/plotly.min.js`` in the installed plotly.py package."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.source = plotly_js_path()
        self.storage = FileSystemStorage(location=str(self.source.parent))
        # collectstatic and whitenoise put a storage's files under its ``prefix``.
        self.storage.prefix = PREFIX  # type: ignore[attr-defined]

    def check(self, **kwargs: Any) -> list[CheckMessage]:
        """An error when plotly.py's bundle is missing (a broken install)."""
        if self.source.is_file():
            return []
        return [
            Error(
                f"plotly.py's {NAME} is missing at {self.source}",
                hint="Reinstall plotly (requirements.txt pins it).",
                id="frontend.E001",
            )
        ]

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> Any:
        """The bundle's absolute path for ``frontend/vendor/plotly.min.js``."""
        find_all = find_all or bool(kwargs.get("all", False))
        if path == STATIC_PATH and self.source.is_file():
            return [str(self.source)] if find_all else str(self.source)
        return [] if find_all else None

    def list(self, ignore_patterns: Any) -> Iterator[tuple[str, FileSystemStorage]]:
        """The one file, relative to its storage (whose prefix places it)."""
        if self.source.is_file() and not matches_patterns(NAME, ignore_patterns or []):
            yield NAME, self.storage
