"""Command-line plumbing shared by the ``simulate`` and ``plan`` commands: reading a JSON
document and validating it against the database catalog, the progress bar on stderr, and
errors worded for the terminal (a :class:`CommandError` exits with status 1)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from django.core.management.base import CommandError, CommandParser
from tqdm import tqdm

from simulations.adapters import catalog_from_db, traces_from_db
from simulations.core.errors import ScenarioValidationError, SpecError
from simulations.core.scenario import trace_names

_Parsed = TypeVar("_Parsed")


def add_progress_flags(parser: CommandParser) -> None:
    """``--progress``/``--no-progress`` (default: a bar only when stderr is a terminal)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=None,
        help="always show the progress bar on stderr",
    )
    group.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        help="never show the progress bar",
    )


def load_json(path: Path) -> Any:
    """The JSON document in the file ``path``; CommandError saying why it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise CommandError(f"{path}: not UTF-8 text") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(
            f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None


def read_document(path: Path, parse: Callable[..., _Parsed], noun: str) -> _Parsed:
    """The document in ``path`` parsed by ``parse`` (``parse_scenario`` or ``parse_plan``)
    against the database catalog, its trace names resolved to uploaded traces, else to CSV
    files beside it. Invalid input is a CommandError listing every offending field."""
    doc = load_json(path)
    catalog = catalog_from_db()
    try:
        return parse(
            doc,
            catalog,
            traces=traces_from_db(trace_names(doc)),
            trace_dir=path.resolve().parent,
        )
    except ScenarioValidationError as exc:
        lines = [f"  {p}: {'; '.join(msgs)}" for p, msgs in exc.errors.items()]
        msg = f"invalid {noun}:\n" + "\n".join(lines)
        if not catalog.models:
            msg += "\n(the catalog is empty: run `manage.py seed_catalog` or `make setup`)"
        raise CommandError(msg) from None


def spec_error(exc: SpecError) -> CommandError:
    """The CommandError for a SpecError raised while running (``field: message``)."""
    return CommandError(f"{exc.field}: {exc.message}")


class Progress:
    """tqdm bar on stderr fed by the core's progress fractions (0 … 1)."""

    def __init__(self, enabled: bool | None, desc: str) -> None:
        self.bar = tqdm(
            total=100,
            file=sys.stderr,
            disable=(not sys.stderr.isatty()) if enabled is None else not enabled,
            unit="%",
            desc=desc,
            leave=False,
        )
        self.done = 0

    def __call__(self, fraction: float) -> None:
        pct = int(min(max(fraction, 0.0), 1.0) * 100)
        if pct > self.done:
            self.bar.update(pct - self.done)
            self.done = pct

    def close(self) -> None:
        """Remove the bar."""
        self.bar.close()
