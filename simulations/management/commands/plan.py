"""``manage.py plan SPEC.json [--format json|table]``: capacity search.

Reads a plan document (:mod:`simulations.core.planner.document`), validates it against the
database catalog (:func:`simulations.adapters.catalog_from_db`), searches the space in this
process — the analytic screen, then the request-level engine on the survivors, cheapest
first (``--processes N`` confirms each round in N processes) — and prints the plan's result
document (:mod:`simulations.core.planner.report`): as JSON on stdout (the default), or as
an 80-column summary (``--format table``). Trace names resolve to uploaded traces, else to
Azure-format CSV files relative to the plan file's folder.

Progress goes to stderr (a tqdm bar, by default only when stderr is a terminal), so stdout
stays clean JSON. Invalid input exits with status 1 and names each offending field.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from simulations.core.errors import SpecError
from simulations.core.jsonsafe import finite
from simulations.core.planner import Search, parse_plan
from simulations.core.planner.parallel import ProcessPoolEvaluator
from simulations.management.cli import Progress, add_progress_flags, read_document, spec_error

WIDTH = 80


def _money(v: Any) -> str:
    return f"${v:,.0f}" if isinstance(v, int | float) and math.isfinite(v) else "n/a"


def _num(v: Any, fmt: str = ".4g") -> str:
    if v is None or isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return "n/a"
    return format(v, fmt)


def _wrap(text: str, indent: str = "  ", first: str | None = None) -> list[str]:
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=indent if first is None else first,
        subsequent_indent=indent + ("  " if first is not None else ""),
    )


_TARGETS = {
    "ttft_p90_ms": "p90 TTFT ≤ {} ms",
    "tpot_p90_ms": "p90 TPOT ≤ {} ms",
    "ttft_p99_ms": "p99 TTFT ≤ {} ms",
    "tpot_p99_ms": "p99 TPOT ≤ {} ms",
    "min_throughput_tok_s": "throughput ≥ {} tok/s",
}


def _target_text(key: str, value: float) -> str:
    return _TARGETS.get(key, key + " {}").format(f"{value:g}")


def _metrics_line(m: dict[str, Any]) -> str:
    ttft = (m.get("ttft_ms") or {}).get("p90", m.get("ttft_p90_ms"))
    tpot = (m.get("tpot_ms") or {}).get("p90", m.get("tpot_p90_ms"))
    return (
        f"p90 TTFT {_num(ttft)} ms | p90 TPOT {_num(tpot)} ms | "
        f"{_num(m.get('throughput_tok_s'), '.4g')} tok/s | "
        f"{_num(m.get('energy_j_per_token'), '.3g')} J/tok"
    )


def render_table(doc: dict[str, Any]) -> str:
    """The plan's result as text no wider than 80 columns."""
    out: list[str] = []
    out += _wrap(f"Plan: {doc['plan']} (model {doc['model']})", "", "")
    wl = doc["workload"]
    rate = f" at {_num(wl.get('rate_per_s'))} requests/s" if wl.get("rate_per_s") else ""
    targets = ", ".join(_target_text(k, v) for k, v in doc["targets"].items())
    out += _wrap(f"Workload: {wl['requests']} requests, {wl['arrival']} arrivals{rate}.", "", "")
    out += _wrap(f"Targets: {targets}.", "", "")
    sp, conf = doc["space"], doc["confirmation"]
    excluded = sum(sp["excluded_by_constraints"].values())
    screened = sum(sp["screened_out"].values())
    out += _wrap(
        f"Space: {sp['configurations']} configurations; {excluded} excluded by the "
        f"constraints; the screen ruled out {screened} of {sp['admitted']} in "
        f"{_num(doc['screen']['seconds'], '.2f')} s; the engine simulated "
        f"{conf['engine_runs']} of the {sp['survivors']} survivors in {conf['rounds']} "
        f"rounds; {conf['feasible']} meet every target"
        + ("." if conf["complete"] else " (budget spent: not exhaustive)."),
        "",
        "",
    )
    out.append("")
    rec = doc.get("recommendation")
    if rec is None:
        out += _wrap(f"No recommendation: {doc.get('why_no_recommendation', '')}.", "", "")
    else:
        out += _wrap(f"Recommendation: {rec['description']}", "", "")
        out.append(f"  capex {_money(rec['capex_usd'])} | " + _metrics_line(rec["metrics"]))
        objective = rec.get("objective")
        if objective:
            # Plans with costs or another objective say what the recommendation minimises.
            m = rec["metrics"]
            out += _wrap(
                f"Objective {objective['name']}: {_num(objective['value'], '.4g')}; TCO "
                f"{_money(m.get('tco_usd_per_year'))}/year, "
                f"{_num(m.get('usd_per_million_tokens'), '.4g')} $ per million tokens",
                "  ",
                "  ",
            )
        out.append("Why:")
        for reason in rec["reasons"]:
            out += _wrap(reason, "  ", "  - ")
    out.append("")
    out.append("Prices (USD per device):")
    for item in doc["per_device_type"]:
        if item.get("price_usd") is not None:
            out += _wrap(
                f"{item.get('label') or item['device']}: {_money(item['price_usd'])} from "
                f"{item.get('price_source', 'the catalog')}",
                "    ",
                "  ",
            )
    quoted_power = [item for item in doc["per_device_type"] if item.get("tdp_w") is not None]
    if quoted_power:  # only quoted powers are listed: the catalog's are its datasheet figures
        out.append("")
        out.append("Quoted power (W per device):")
        for item in quoted_power:
            out += _wrap(
                f"{item.get('label') or item['device']}: {_num(item['tdp_w'], '.4g')} from "
                f"{item.get('power_source', 'the plan document')}",
                "    ",
                "  ",
            )
    out.append("")
    out.append("Cheapest feasible system per device type:")
    for item in doc["per_device_type"]:
        c = item.get("cheapest")
        if c is None:
            out += _wrap(
                f"{item.get('label') or item['device']}: none — {item.get('why_none', '')}",
                "  ",
                "  ",
            )
        else:
            name = item.get("label") or item["device"]
            out += _wrap(
                f"{name}: {_money(c['capex_usd'])} {c['description']}",
                "  ",
                "  ",
            )
    for key, title in (
        ("capex_vs_throughput", "Pareto front, capex vs throughput:"),
        ("capex_vs_energy_per_token", "Pareto front, capex vs energy per token:"),
    ):
        out.append("")
        out.append(title)
        out.append(f"  {'capex':>10} {'tok/s':>8} {'J/tok':>6}  system")
        for p in doc["pareto"][key]:
            line = (
                f"  {_money(p['capex_usd']):>10} {_num(p['throughput_tok_s'], '.4g'):>8} "
                f"{_num(p['energy_j_per_token'], '.3g'):>6}  {p['description']}"
            )
            out.append(line if len(line) <= WIDTH else line[: WIDTH - 1] + "…")
    sens = doc.get("sensitivity")
    if sens:
        out.append("")
        text = sens.get("summary") or sens.get("why", "")
        out += _wrap(f"Load sensitivity: {text}", "", "")
    return "\n".join(out)


class Command(BaseCommand):
    """Search a plan's space for the cheapest system that meets its targets."""

    help = (
        "Find the cheapest system in SPEC.json's space that meets its latency targets; "
        "print the recommendation, Pareto fronts and load sensitivity (JSON or a table)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("spec", help="path to a plan document (JSON)")
        parser.add_argument("--format", choices=("json", "table"), default="json")
        parser.add_argument(
            "--processes",
            type=int,
            default=1,
            help="confirm each round in this many processes (default 1)",
        )
        add_progress_flags(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        processes = options["processes"]
        if not 1 <= processes <= 64:
            raise CommandError("--processes: must be between 1 and 64")
        plan = read_document(Path(options["spec"]), parse_plan, "plan")
        progress = Progress(options["progress"], "planning")
        try:
            search = Search(plan, progress=progress)
            if processes > 1:
                with ProcessPoolEvaluator(plan, processes) as pool:
                    result = search.run(pool)
            else:
                result = search.run()
        except SpecError as exc:
            raise spec_error(exc) from None
        finally:
            progress.close()
        result = finite(result)
        if options["format"] == "json":
            self.stdout.write(json.dumps(result, indent=2, allow_nan=False))
        else:
            self.stdout.write(render_table(result))
