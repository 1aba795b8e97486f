"""The plan's result document: the recommendation and why it wins, the Pareto fronts, the
cheapest feasible system per device type, the load sensitivity and every confirmed run.

Shape (units in the key names; ``null`` where a figure does not exist)::

    {"plan", "description", "model", "workload": {"requests", "arrival", "rate_per_s"},
     "targets", "constraints",
     "space": {"configurations", "excluded_by_constraints", "admitted", "screened_out",
               "survivors"},
     "screen": {"seconds", "configurations_per_s", "cost_tables_seconds"},
     "confirmation": {"engine_runs", "feasible", "rounds", "engine_seconds", "budget",
                      "complete"},
     "recommendation": {"key", "description", "system", "capex_usd", "metrics",
                        "calibration", "exact", "binding", "reasons", "runner_up",
                        "cheaper"} | null,
     "per_device_type": [{"device", "label", "runtime", "price_usd", "price_source",
                          ["tdp_w", "power_source" when the plan quotes the power,]
                          "cheapest" | null, "exact", "why_none"}],
     "pareto": {"capex_vs_throughput", "capex_vs_energy_per_token", "tolerance", "exact"},
     "sensitivity": {...} | null,
     "evaluated": [{"key", "description", "capex_usd", "feasible", "why", "metrics",
                    "screen"}],
     "scenario": a scenario document (docs/architecture.md) with the recommendation and its
                 alternatives, to re-run with ``manage.py simulate``; device entries the
                 plan quotes a price for carry it as ``price_usd``, so the re-run reports
                 the plan's capex, and a quoted power as ``tdp_w``,
     "scenario_omits": {"keys", "why"} (only when some are left out of the scenario)}

A ``system`` entry (recommendation, runner-up, cheapest per device type) is a scenario
``systems`` entry carrying the same quoted prices and powers; beside it, ``calibration``
says for each placement whether its runtime profile was measured on that device,
transferred from others or derived (:func:`simulations.core.provenance.device_calibration`).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

from simulations.core.provenance import device_calibration
from simulations.core.scenario import MAX_SYSTEMS, scenario_to_document
from simulations.core.spec import ScenarioSpec

from .evaluate import Evaluation, objective_value
from .screen import REASON_TEXT, REASONS
from .sensitivity import base_rate_per_s
from .space import CONSTRAINT_ORDER, Config, describe, system_document, system_spec

if TYPE_CHECKING:
    from .document import PlanSpec
    from .search import Candidate, Search

_TARGET_WORDS = {
    "ttft_p90_ms": ("p90 TTFT", "ttft_ms", "p90", "ms"),
    "tpot_p90_ms": ("p90 TPOT", "tpot_ms", "p90", "ms"),
    "ttft_p99_ms": ("p99 TTFT", "ttft_ms", "p99", "ms"),
    "tpot_p99_ms": ("p99 TPOT", "tpot_ms", "p99", "ms"),
    "min_throughput_tok_s": ("throughput", "throughput_tok_s", None, "tok/s"),
}
_CONSTRAINT_WORDS = {
    "max_devices": "more devices than a system may hold",
    "max_capex_usd": "capex cap",
    "max_power_w": "power cap (sum of TDPs)",
    "max_devices_per_node": "devices per node (single-node policy)",
    "max_nodes": "number of nodes",
}


def _money(x: float) -> str:
    return f"${x:,.0f}"


def _compact(metrics: dict[str, Any]) -> dict[str, Any]:
    def pct(key: str, q: str) -> Any:
        return (metrics.get(key) or {}).get(q)

    return {
        "ttft_p90_ms": pct("ttft_ms", "p90"),
        "ttft_p99_ms": pct("ttft_ms", "p99"),
        "tpot_p90_ms": pct("tpot_ms", "p90"),
        "tpot_p99_ms": pct("tpot_ms", "p99"),
        "throughput_tok_s": metrics.get("throughput_tok_s"),
        "energy_j_per_token": metrics.get("energy_j_per_token"),
        "avg_power_w": metrics.get("avg_power_w"),
    }


def _value(metrics: dict[str, Any], target: str) -> float | None:
    _, key, q, _ = _TARGET_WORDS[target]
    v = metrics.get(key)
    if q is not None:
        v = (v or {}).get(q)
    return float(v) if isinstance(v, int | float) else None


def _quotes(config: Config, plan: PlanSpec) -> list[float | None]:
    """The plan's quoted price per device of each of ``config``'s placements (``None``
    where the catalog price applies). A memory configuration's price is not a quote for
    the catalog device its scenario entry names, so it carries none (such systems stay out
    of the report's scenario)."""
    out: list[float | None] = []
    for _, entry in config.signature.roles:
        choice = plan.devices[entry]
        out.append(None if choice.variant else choice.quoted_price_usd)
    return out


def _system_document(config: Config, plan: PlanSpec) -> dict[str, Any]:
    """The configuration as a scenario ``systems`` entry with the plan's quoted prices and
    quoted powers (a power quote applies to a memory configuration too: it is the board's)."""
    doc = system_document(config, plan)
    for item, quote, (_, entry) in zip(
        doc["devices"], _quotes(config, plan), config.signature.roles, strict=True
    ):
        if quote is not None:
            item["price_usd"] = quote
        tdp_quote = plan.devices[entry].quoted_tdp_w
        if tdp_quote is not None:
            item["tdp_w"] = tdp_quote
    return doc


def _calibration(config: Config, plan: PlanSpec) -> list[dict[str, Any]]:
    """How each placement's runtime profile was calibrated (measured on the device,
    transferred from others, or derived), in the placements' order."""
    out = []
    for _, entry in config.signature.roles:
        choice = plan.devices[entry]
        slug = choice.device.slug
        out.append(
            {
                "device": slug,
                "runtime": choice.runtime.slug,
                **device_calibration(slug, plan.model.slug, choice.runtime),
            }
        )
    return out


def _entry(search: Search, config: Config, ev: Evaluation) -> dict[str, Any]:
    plan = search.plan
    return {
        "key": config.key,
        "description": describe(config, plan),
        "system": _system_document(config, plan),
        "capex_usd": config.capex_usd,
        "devices": config.device_count,
        "power_tdp_w": config.power_w,
        "metrics": ev.metrics,
        "calibration": _calibration(config, plan),
    }


def _binding(plan_targets: dict[str, float], metrics: dict[str, Any]) -> dict[str, Any] | None:
    """The target closest to its limit (value / limit, or limit / value for a minimum)."""
    best: dict[str, Any] | None = None
    for target, limit in plan_targets.items():
        v = _value(metrics, target)
        if v is None:
            continue
        used = (limit / v if v > 0 else math.inf) if target.startswith("min_") else v / limit
        if best is None or used > best["fraction_of_limit"]:
            words, _, _, unit = _TARGET_WORDS[target]
            best = {
                "target": target,
                "value": v,
                "limit": limit,
                "fraction_of_limit": used,
                "text": f"{words} {v:.4g} {unit} against {limit:.4g} {unit} ({used:.0%} of it)",
            }
    return best


def _cheaper(search: Search, capex: float) -> dict[str, Any]:
    """Why every admitted configuration cheaper than ``capex`` is not recommended."""
    screen: Counter[str] = Counter()
    for group, gs in zip(search.groups, search.verdicts, strict=True):
        mask = (group.capex_usd < capex) & (gs.reason != 0)
        for code, n in zip(*np.unique(gs.reason[mask], return_counts=True), strict=True):
            screen[REASONS[int(code)]] += int(n)
    engine: Counter[str] = Counter()
    closest: tuple[float, str, Evaluation] | None = None
    unconfirmed = 0
    for cand in search.candidates:
        if cand.config.capex_usd >= capex:
            break
        ev = search.results.get(cand.config.key)
        if ev is None:
            unconfirmed += 1
            continue
        what = "does not fit" if ev.error else (ev.misses[0]["target"] if ev.misses else "")
        engine[what] += 1
        if closest is None or cand.config.capex_usd >= closest[0]:
            closest = (cand.config.capex_usd, cand.config.key, ev)
    constraints: Counter[str] = Counter()
    ex = search.space.excluded_capex < capex
    for code, n in zip(*np.unique(search.space.excluded_code[ex], return_counts=True), strict=True):
        constraints[CONSTRAINT_ORDER[int(code)]] += int(n)
    out: dict[str, Any] = {
        "configurations": int(sum(screen.values()) + sum(engine.values()) + unconfirmed),
        "ruled_out_by_screen": dict(sorted(screen.items())),
        "missed_in_engine": dict(sorted(engine.items())),
        "not_confirmed": unconfirmed,
        "excluded_by_constraints": dict(sorted(constraints.items())),
    }
    if closest is not None:
        cfg = search.by_key[closest[1]].config
        out["closest"] = {
            "key": cfg.key,
            "description": describe(cfg, search.plan),
            "capex_usd": cfg.capex_usd,
            "why": closest[2].first_miss(),
            "metrics": _compact(closest[2].metrics),
        }
    return out


def _reasons(
    search: Search,
    win: Candidate,
    ev: Evaluation,
    runner: tuple[Candidate, Evaluation] | None,
    cheaper: dict[str, Any],
    binding: dict[str, Any] | None,
) -> list[str]:
    plan = search.plan
    met = []
    for target, limit in plan.targets.as_dict().items():
        words, _, _, unit = _TARGET_WORDS[target]
        v = _value(ev.metrics, target)
        rel = "≥" if target.startswith("min_") else "≤"
        shown = f"{v:.4g} {unit}" if v is not None else "n/a"
        met.append(f"{words} {shown} ({rel} {limit:.4g} {unit})")
    out = [
        f"Cheapest configuration that meets every target: {describe(win.config, plan)} for "
        f"{_money(win.config.capex_usd)} — " + "; ".join(met) + "."
    ]
    if binding is not None:
        out.append(f"Binding target: {binding['text']}.")
    out.extend(str(x) for x in ev.metrics.get("explanation", ()))
    n = cheaper["configurations"]
    if n:
        parts = [
            f"{k} ruled out by the screen ({REASON_TEXT.get(r, r)})"
            for r, k in cheaper["ruled_out_by_screen"].items()
        ]
        for what, k in cheaper["missed_in_engine"].items():
            label = _TARGET_WORDS.get(what, (what,))[0]
            parts.append(
                f"{k} simulated and "
                + ("did not fit" if what == "does not fit" else f"missed {label}")
            )
        if cheaper["not_confirmed"]:
            parts.append(f"{cheaper['not_confirmed']} not simulated (budget exhausted)")
        lead = (
            "The one cheaper configuration fails"
            if n == 1
            else f"All {n} cheaper configurations fail"
        )
        out.append(f"{lead}: " + "; ".join(parts) + ".")
        if "closest" in cheaper:
            c = cheaper["closest"]
            out.append(
                f"The closest cheaper one, {c['description']} at {_money(c['capex_usd'])}, "
                f"fails in the engine: {c['why']}."
            )
    else:
        out.append("No cheaper configuration is in the space.")
    if cheaper["excluded_by_constraints"]:
        ex = ", ".join(
            f"{k} by the {_CONSTRAINT_WORDS.get(c, c)}"
            for c, k in cheaper["excluded_by_constraints"].items()
        )
        out.append(f"Cheaper configurations excluded before simulation: {ex}.")
    if runner is not None:
        rc = runner[0]
        delta = rc.config.capex_usd - win.config.capex_usd
        pct = delta / win.config.capex_usd if win.config.capex_usd else 0.0
        tie = " (same capex; the recommendation uses less energy per token)" if delta == 0 else ""
        out.append(
            f"Runner-up: {describe(rc.config, plan)} at {_money(rc.config.capex_usd)} "
            f"(+{_money(delta)}, +{pct:.1%}){tie}."
        )
    else:
        out.append("No other configuration of the space meets the targets.")
    return out


def _front(points: list[tuple[Candidate, Evaluation]], metric: str) -> list[dict[str, Any]]:
    """Non-dominated feasible points over (capex ↓, metric ↑ for throughput, ↓ for energy)."""
    higher = metric == "throughput_tok_s"

    def val(ev: Evaluation) -> float:
        return ev.throughput_tok_s if higher else ev.energy_j_per_token

    pts = sorted(
        points,
        key=lambda x: (x[0].config.capex_usd, -val(x[1]) if higher else val(x[1]), x[0].config.key),
    )
    out: list[dict[str, Any]] = []
    best = -math.inf if higher else math.inf
    for cand, ev in pts:
        v = val(ev)
        if (v > best) if higher else (v < best):
            best = v
            out.append(
                {
                    "key": cand.config.key,
                    "description": "",
                    "capex_usd": cand.config.capex_usd,
                    "throughput_tok_s": ev.throughput_tok_s,
                    "energy_j_per_token": ev.energy_j_per_token,
                    **{k: v for k, v in _compact(ev.metrics).items() if k.endswith("_ms")},
                }
            )
    return out


def build_report(search: Search, sensitivity: dict[str, Any] | None) -> dict[str, Any]:
    """The plan's result document (see the module notes)."""
    plan = search.plan
    feas = search.feasible()
    pending = search.pending()
    unknown = sorted(k for k, ev in search.results.items() if ev.unknown)
    complete = not pending and not unknown
    wl = plan.workload
    doc: dict[str, Any] = {
        "plan": plan.name,
        "description": plan.description,
        "model": plan.model.slug,
        "workload": {
            "requests": wl.requests,
            "arrival": wl.arrival.kind.value,
            "rate_per_s": base_rate_per_s(wl),
            "seed": wl.seed,
        },
        "targets": plan.targets.as_dict(),
        "constraints": plan.constraints.as_dict(),
        "space": {
            "configurations": search.space.total,
            "excluded_by_constraints": {k: v for k, v in search.space.excluded.items() if v},
            "admitted": search.admitted,
            "screened_out": {k: v for k, v in search.screen_counts().items() if k != "possible"},
            "survivors": len(search.candidates),
        },
        "screen": {
            "seconds": search.screen_seconds,
            "configurations_per_s": search.admitted / search.screen_seconds
            if search.screen_seconds > 0
            else None,
            "cost_tables_seconds": search.cache.seconds,
        },
        "confirmation": {
            "engine_runs": len(search.results),
            "feasible": len(feas),
            "rounds": search.rounds,
            "engine_seconds": search.engine_seconds,
            "budget": plan.search.max_confirmations,
            "complete": complete,
            "still_needed": len(pending),
            "no_verdict": unknown,
        },
    }
    # Recommendation.
    rec: dict[str, Any] | None = None
    if feas:
        win, wev = feas[0]
        runner = feas[1] if len(feas) > 1 else None
        cheaper = _cheaper(search, win.config.capex_usd)
        binding = _binding(plan.targets.as_dict(), wev.metrics)
        if plan.objective == "capex":
            exact = not any(
                c.config.capex_usd <= win.config.capex_usd for c in pending
            ) and not any(
                search.by_key[k].config.capex_usd <= win.config.capex_usd for k in unknown
            )
        else:
            # Only the objective's floors say what could still beat the recommendation.
            best = objective_value(wev, win.config.capex_usd, plan.objective)
            exact = not any(search.objective_floor(c) <= best for c in pending) and not any(
                search.objective_floor(search.by_key[k]) <= best for k in unknown
            )
        rec = {
            **_entry(search, win.config, wev),
            "screen": search.screen_row(win.config.key),
            "exact": exact,
            "binding": binding,
            "cheaper": cheaper,
            "runner_up": _entry(search, runner[0].config, runner[1]) if runner else None,
            "reasons": _reasons(search, win, wev, runner, cheaper, binding),
        }
    if rec is not None and (plan.objective != "capex" or plan.costs is not None):
        # Only plans that ask for it say so: a plain capex plan's report is unchanged.
        rec["objective"] = {
            "name": plan.objective,
            "value": objective_value(wev, win.config.capex_usd, plan.objective),
        }
    doc["recommendation"] = rec
    if rec is None:
        doc["why_no_recommendation"] = _no_winner(search, complete)
    # Per device type.
    per_type = []
    for choice in plan.devices:
        e = choice.index
        using = [(c, ev) for c, ev in feas if e in c.config.entries()]
        item: dict[str, Any] = {
            "device": choice.device.slug,
            "label": choice.label,
            "runtime": choice.runtime.slug,
            "price_usd": choice.price_usd,
            "price_source": choice.price_source,
        }
        if choice.quoted_tdp_w is not None:
            # Only a quoted power adds keys: reports of catalog-powered plans keep their shape.
            item["tdp_w"] = choice.quoted_tdp_w
            item["power_source"] = choice.power_source
        if using:
            c, ev = using[0]
            item["cheapest"] = {**_entry(search, c.config, ev)}
            item["exact"] = not any(
                e in p.config.entries() and p.config.capex_usd <= c.config.capex_usd
                for p in (*pending, *(search.by_key[k] for k in unknown))
            )
        else:
            item["cheapest"] = None
            item["exact"] = not any(
                e in p.config.entries() for p in (*pending, *(search.by_key[k] for k in unknown))
            )
            item["why_none"] = _why_none(search, e)
        per_type.append(item)
    doc["per_device_type"] = per_type
    thr = _front(feas, "throughput_tok_s")
    energy = _front(feas, "energy_j_per_token")
    for pt in (*thr, *energy):
        pt["description"] = describe(search.by_key[pt["key"]].config, plan)
    doc["pareto"] = {
        "capex_vs_throughput": thr,
        "capex_vs_energy_per_token": energy,
        "tolerance": plan.search.pareto_tolerance,
        "exact": complete,
    }
    doc["sensitivity"] = sensitivity
    evaluated = []
    for key in sorted(search.results, key=lambda k: (search.by_key[k].config.capex_usd, k)):
        ev = search.results[key]
        cfg = search.by_key[key].config
        evaluated.append(
            {
                "key": key,
                "description": describe(cfg, plan),
                "capex_usd": cfg.capex_usd,
                "feasible": ev.feasible,
                "why": ev.first_miss(),
                "metrics": _compact(ev.metrics),
                "screen": search.screen_row(key),
            }
        )
    doc["evaluated"] = evaluated
    doc["scenario"] = _scenario(search, doc)
    return doc


def _why_none(search: Search, entry: int) -> str:
    counts: Counter[str] = Counter()
    for group, gs in zip(search.groups, search.verdicts, strict=True):
        if entry not in [e for _, e in group.signature.roles]:
            continue
        for code, n in zip(*np.unique(gs.reason, return_counts=True), strict=True):
            if code:
                counts[REASON_TEXT.get(REASONS[int(code)], REASONS[int(code)])] += int(n)
    for cand in search.candidates:
        if entry not in cand.config.entries():
            continue
        ev = search.results.get(cand.config.key)
        if ev is None:
            counts["not simulated (budget exhausted or not needed)"] += 1
        elif not ev.feasible:
            counts["simulated and missed a target" if not ev.error else "did not fit"] += 1
    if not counts:
        return "no configuration with it satisfies the constraints"
    return "; ".join(f"{n} {what}" for what, n in counts.most_common())


def _no_winner(search: Search, complete: bool) -> str:
    if not search.admitted:
        return "every configuration of the space violates a constraint"
    if not search.candidates:
        return "the screen rules out every configuration: " + ", ".join(
            f"{n} {REASON_TEXT.get(r, r)}" for r, n in search.screen_counts().items()
        )
    if not complete:
        return "no feasible configuration found before the confirmation budget ran out"
    return "every configuration the screen let through misses a target in the engine"


def _scenario(search: Search, doc: dict[str, Any]) -> dict[str, Any] | None:
    plan = search.plan
    keys: list[str] = []
    rec = doc.get("recommendation")
    if rec is not None:
        keys.append(rec["key"])
        if rec.get("runner_up"):
            keys.append(rec["runner_up"]["key"])
    for item in doc["per_device_type"]:
        if item.get("cheapest"):
            keys.append(item["cheapest"]["key"])
    keys = list(dict.fromkeys(keys))
    # A memory configuration of memory_options is not a catalog device: a scenario names
    # devices by slug, so it would rerun with the catalog's capacities instead.
    variants = [
        k for k in keys if any(plan.devices[e].variant for e in search.by_key[k].config.entries())
    ]
    keys = [k for k in keys if k not in variants]
    # Quoted prices do travel (a scenario entry's price_usd), so only these are left out.
    overflow = keys[MAX_SYSTEMS:]
    keys = keys[:MAX_SYSTEMS]
    why = []
    if variants:
        why.append(
            "memory configurations (their capacities and memory prices come from "
            "memory_options, not the catalog; a scenario names catalog devices)"
        )
    if overflow:
        why.append(f"beyond the {MAX_SYSTEMS} systems a scenario may hold")
    if variants or overflow:
        doc["scenario_omits"] = {"keys": variants + overflow, "why": "; ".join(why)}
    if not keys:
        return None
    systems = tuple(system_spec(search.by_key[k].config, plan) for k in keys)
    spec = ScenarioSpec(
        name=f"{plan.name}: recommendation and alternatives"[:200],
        model=plan.model,
        workload=plan.workload,
        systems=systems,
        slo=plan.targets.slo(),
        costs=plan.costs,
    )
    return scenario_to_document(spec)


__all__ = ["build_report"]
