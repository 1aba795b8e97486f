"""``manage.py simulate SCENARIO.json [--format json|table]`` (docs/architecture.md).

Reads a scenario document, validates it against the database catalog
(:func:`simulations.core.scenario.parse_scenario` with
:func:`simulations.adapters.catalog_from_db`), runs every system on the simulation core and
prints the result document: as JSON on stdout (``--format json``, the default; the shape
docs/architecture.md gives; non-finite numbers become ``null``), or as a table no wider
than 80 columns with each metric of each system beside the first system's (the baseline) as a ratio
(``--format table``). Trace names in the document resolve to uploaded traces, else to
Azure-format CSV files relative to the scenario file's folder.

A progress bar (tqdm) goes to stderr — by default only when stderr is a terminal
(``--progress``/``--no-progress`` force it) — so stdout stays clean JSON. Invalid input
exits with status 1 and a message naming each offending field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from simulations.core.errors import SpecError, UnknownPolicyError
from simulations.core.jsonsafe import finite
from simulations.management.cli import Progress, add_progress_flags, read_document, spec_error

WIDTH = 80
LABEL = 24
COLUMN = 18
PER_BLOCK = (WIDTH - LABEL) // COLUMN  # systems side by side


def _num(v: Any) -> str:
    """A number in at most 9 characters."""
    if v is None or isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return "n/a"
    a = abs(v)
    if a != 0 and (a >= 1e6 or a < 1e-3):
        return f"{v:.2e}"
    if a >= 1000:
        return f"{v:,.0f}"
    return f"{v:.4g}"


def _ratio(v: Any, base: Any) -> str:
    ok = (
        isinstance(v, int | float)
        and isinstance(base, int | float)
        and not isinstance(v, bool)
        and math.isfinite(v)
        and math.isfinite(base)
        and base != 0
    )
    if not ok:
        return ""
    r = v / base
    return f"{r:.2f}×" if r < 100 else f"{r:.0f}×"


#: (label, getter) rows of the comparison table.
ROWS: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("throughput (tok/s)", lambda s: s.get("throughput_tok_s")),
    ("prompt (tok/s)", lambda s: s.get("prompt_tok_s")),
    ("requests/s", lambda s: s.get("requests_per_s")),
    *[
        (f"{name} {q} ({unit})", lambda s, k=key, q=q: (s.get(k) or {}).get(q))
        for name, key, unit in (
            ("TTFT", "ttft_ms", "ms"),
            ("TPOT", "tpot_ms", "ms"),
            ("E2E", "e2e_s", "s"),
        )
        for q in ("mean", "p50", "p90", "p99")
    ],
    ("capex ($)", lambda s: s.get("capex_usd")),
    ("cost eff (tok/s/$)", lambda s: s.get("cost_efficiency_tok_s_per_usd")),
    ("avg power (W)", lambda s: s.get("avg_power_w")),
    ("energy (J/tok)", lambda s: s.get("energy_j_per_token")),
    ("energy eff (tok/s/W)", lambda s: s.get("energy_efficiency_tok_s_per_w")),
    ("SLO attainment", lambda s: s.get("slo_attainment")),
]


#: Rows for a scenario with ``costs`` (docs/architecture.md "TCO").
TCO_ROWS: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("TCO ($/year)", lambda s: s.get("tco_usd_per_year")),
    ("  capex share ($/yr)", lambda s: (s.get("tco") or {}).get("capex_share_usd_per_year")),
    ("  energy ($/yr)", lambda s: (s.get("tco") or {}).get("energy_usd_per_year")),
    ("  hosting ($/yr)", lambda s: (s.get("tco") or {}).get("hosting_usd_per_year")),
    ("  cloud ($/yr)", lambda s: (s.get("tco") or {}).get("cloud_usd_per_year")),
    ("$ per M tokens", lambda s: s.get("usd_per_million_tokens")),
]

#: Rows for a scenario with ``capacity`` (docs/architecture.md "Capacity").
CAPACITY_ROWS: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("max load @SLO (req/s)", lambda s: s.get("max_load_rps_at_slo")),
    ("saturation (req/s)", lambda s: (s.get("capacity") or {}).get("saturation_rps")),
    ("offered (req/s)", lambda s: (s.get("capacity") or {}).get("offered_rps")),
]


def table_rows(
    systems: Sequence[dict[str, Any]],
) -> list[tuple[str, Callable[[dict[str, Any]], Any]]]:
    """The table's rows: the TCO and capacity ones only when the result carries them."""
    rows = list(ROWS)
    if any("tco" in s for s in systems):
        rows += TCO_ROWS
    if any("capacity" in s for s in systems):
        rows += CAPACITY_ROWS
    return rows


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def render_table(result: dict[str, Any]) -> str:
    """The result document as text no wider than 80 columns (ratios against system 1)."""
    systems: list[dict[str, Any]] = result["systems"]
    base = systems[0]
    lines = [
        _clip(f"Scenario: {result.get('scenario', '')}  (model {result.get('model', '')})", WIDTH),
        _clip(f"Ratios: each system / the baseline, the first system ({base['name']}).", WIDTH),
        "Lower is better for latency, capex, power and J/token; higher for the rest.",
    ]
    others = systems[1:] or []
    blocks: list[Sequence[dict[str, Any]]] = [
        [base, *others[i : i + PER_BLOCK - 1]] for i in range(0, max(len(others), 1), PER_BLOCK - 1)
    ]
    for block in blocks:
        lines.append("")
        head = f"{'metric':<{LABEL}}" + "".join(
            f"{_clip(s['name'], COLUMN - 1):>{COLUMN}}" for s in block
        )
        lines.append(head)
        lines.append("-" * len(head))
        for label, get in table_rows(systems):
            cells = []
            for i, s in enumerate(block):
                v = get(s)
                r = "" if i == 0 else _ratio(v, get(base))
                cells.append(f"{_num(v):>10}{r:>{COLUMN - 10}}" if r else f"{_num(v):>{COLUMN}}")
            lines.append(f"{label:<{LABEL}}" + "".join(cells))
    for s in systems:
        lines.append("")
        lines.append(_clip(f"{s['name']} ({s.get('policy', '')}): devices", WIDTH))
        reason = (s.get("tco") or {}).get("unavailable_reason")
        if reason:
            lines.append(_clip(f"  TCO n/a: {reason}", WIDTH))
        if s.get("overloaded"):
            cap = s.get("capacity") or {}
            lines.append(
                _clip(
                    f"  OVERLOADED: offered {_num(cap.get('offered_rps'))} req/s > "
                    f"{_num(cap.get('saturation_rps'))} req/s it serves (queues grow)",
                    WIDTH,
                )
            )
        cap_reason = (s.get("capacity") or {}).get("reason")
        if cap_reason:
            lines.append(_clip(f"  max load n/a: {cap_reason}", WIDTH))
        for d in s.get("devices", []):
            role = f" [{d['role']}]" if d.get("role") else ""
            busy = d.get("busy_fraction")
            text = (
                f"  {d['count']}× {d['device']}{role}: busy {busy:.1%}, "
                f"energy {_num(d.get('energy_j'))} J"
            )
            lines.append(_clip(text, WIDTH))
            par = d.get("parallel")
            if par:
                lines.append(
                    _clip(
                        f"    {par['replicas']}× TP{par['tensor_parallel']}×PP"
                        f"{par['pipeline_parallel']} over {par['link']}: comm "
                        f"{par['comm_share']:.1%}, bubbles {par['bubble_fraction']:.1%}",
                        WIDTH,
                    )
                )
    return "\n".join(lines)


class Command(BaseCommand):
    """Run a scenario document on the simulation core and print the results."""

    help = "Simulate SCENARIO.json and print each system's metrics (JSON or an 80-column table)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("scenario", help="path to a scenario document (docs/architecture.md)")
        parser.add_argument("--format", choices=("json", "table"), default="json")
        add_progress_flags(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        # Imported here, not at module level: the core (its policy registry, numpy work)
        # is not needed to start the command or print its help.
        from simulations.core.scenario import parse_scenario
        from simulations.core.simulate import simulate

        spec = read_document(Path(options["scenario"]), parse_scenario, "scenario")
        progress = Progress(options["progress"], "simulating")
        try:
            result = simulate(spec, progress=progress)
        except UnknownPolicyError as exc:
            raise CommandError(str(exc)) from None
        except SpecError as exc:
            raise spec_error(exc) from None
        finally:
            progress.close()
        if options["format"] == "json":
            self.stdout.write(json.dumps(finite(result), indent=2, allow_nan=False))
        else:
            self.stdout.write(render_table(finite(result)))
