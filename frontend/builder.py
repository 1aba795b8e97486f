"""The scenario builder: form fields ↔ scenario document (docs/architecture.md) ↔ field errors.

The builder page is one HTML form whose fields are named after the document:

* ``name``, ``description``, ``model``;
* the workload: ``wl-source`` (``custom`` or the id of a saved workload), ``wl-requests``,
  ``wl-in-dist``/``wl-out-dist`` (fixed, uniform, lognormal, trace) with ``-value``,
  ``-low``, ``-high``, ``-median``, ``-sigma``; ``wl-arrival`` (closed, poisson, trace),
  ``wl-rate``, ``wl-trace``, ``wl-time-scale``, ``wl-seed``;
* the SLO: ``slo-<key>`` for each target of :data:`SLO_FIELDS`;
* the running costs: ``costs-<key>`` for each of :data:`COST_FIELDS` and ``costs-cloud``
  (``device=price`` pairs, a price being a number or a catalog cloud offer such as
  ``specialty-a100-80gb-2026-05@low``); the capacity search: ``capacity-on`` and
  ``capacity-<key>`` for each of :data:`CAPACITY_FIELDS`;
* systems ``sys-<i>-…``: ``name``, ``policy``, ``opt-<policy>-<option>`` (the options of every
  registered policy, from its schema; only the chosen policy's are read) and devices
  ``dev-<j>-device|count|role|runtime|price_usd|tdp_w``; ``sys-count``/``sys-<i>-dev-count``
  give the sizes. ``price_usd`` is the user's quote per device (empty: the catalog's price),
  ``tdp_w`` the board power per device the user measured or was quoted (empty: the
  catalog's; required for a device whose vendor publishes none);
* ``baseline``: the index of the system the others are compared with. The document lists
  it first (the CLI and the charts read the first system as the baseline).

:func:`state_from_post` reads a submitted form, :func:`state_from_document` pre-fills one
from a document (an example, a stored scenario), :meth:`BuilderState.to_document` builds the
document and :meth:`BuilderState.attach_errors` puts the core's JSON-path errors beside the
fields they concern (what no field shows stays in ``top_errors`` with its path).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from simulations.core import scenario as rules
from simulations.core.errors import UnknownPolicyError
from simulations.core.policies import get_policy, policy_names
from simulations.core.policies.base import OptionSpec

#: SLO targets the builder offers: (document key, label, unit).
SLO_FIELDS = (
    ("ttft_p90_ms", "p90 TTFT", "ms"),
    ("tpot_p90_ms", "p90 TPOT", "ms"),
    ("ttft_p99_ms", "p99 TTFT", "ms"),
    ("tpot_p99_ms", "p99 TPOT", "ms"),
    ("e2e_p90_s", "p90 end-to-end", "s"),
)
#: Running costs the builder offers (the scenario's ``costs``): (key, label, unit).
COST_FIELDS = (
    ("electricity_usd_per_kwh", "Electricity", "$/kWh"),
    ("amortisation_years", "Amortisation", "years"),
    ("pue", "PUE", "facility / IT power"),
    ("utilisation", "Utilisation", "fraction of the year"),
    ("hosting_usd_per_device_year", "Hosting", "$ per device-year"),
)
#: The capacity search (the scenario's ``capacity``): (key, label, unit).
CAPACITY_FIELDS = (
    ("requests", "Requests per engine run", "requests"),
    ("steps", "Bisection steps", "steps"),
)
LENGTH_KINDS = ("fixed", "uniform", "lognormal", "trace")
ARRIVAL_KINDS = ("closed", "poisson", "trace")
#: Sizes the builder allows (the core's caps apply on top).
MAX_SYSTEMS = rules.MAX_SYSTEMS
MAX_DEVICES = rules.MAX_PLACEMENTS_PER_SYSTEM
#: Characters read from any one text field.
MAX_FIELD_CHARS = 4096
#: Names the error messages of these device-row fields start with: a row's cells have no
#: label of their own, and the core's message ("must be positive") does not say which value.
DEVICE_FIELD_LABELS = {"price_usd": "Price (USD)", "tdp_w": "Power (W)"}
#: What an empty price field of a row without a device says.
PRICE_HINT = "catalog price"
#: What an empty power field of a row without a device says.
POWER_HINT = "catalog power"


def catalog_price_hint(price: float | None) -> str:
    """What an empty price field says for a device whose catalog price is ``price``."""
    return f"catalog: {_str(price)}" if price is not None else "no catalog price"


def catalog_power_hint(tdp_w: float | None) -> str:
    """What an empty power field says for a device whose catalog power is ``tdp_w`` (a
    device without a published one needs the field filled in)."""
    return f"catalog: {_str(tdp_w)}" if tdp_w is not None else "not published: required"


def policies() -> list[dict[str, Any]]:
    """The policy registry as the builder renders it (name, summary, roles, options)."""
    from simulations.core import policies as _registry  # noqa: F401  (fills the registry)

    return [get_policy(name).describe() for name in policy_names()]


# --- state -----------------------------------------------------------------------------------


@dataclass
class DeviceRow:
    """One ``devices`` entry as typed in the form (strings), with its errors."""

    device: str = ""
    count: str = "1"
    role: str = ""
    runtime: str = ""
    #: the quote per device, in US dollars (empty: the catalog's price)
    price_usd: str = ""
    #: the board power per device, in W (empty: the catalog's, which may not exist)
    tdp_w: str = ""
    errors: dict[str, list[str]] = field(default_factory=dict)


def new_system_options(policy: str = "homogeneous") -> dict[str, dict[str, str]]:
    """The option fields of a system block the user adds: the policy's
    ``new_system_options`` (continuous batching with chunked prefill for ``homogeneous``),
    as the form shows them."""
    from simulations.core import policies as _registry  # noqa: F401  (fills the registry)

    try:
        fresh = get_policy(policy).new_system_options
    except UnknownPolicyError:  # not implemented: nothing to pre-fill
        return {}
    return {policy: {name: _str(value) for name, value in fresh.items()}} if fresh else {}


@dataclass
class SystemBlock:
    """One system as typed in the form, with its errors. A block made without options (a
    new system) starts with its policy's ``new_system_options``."""

    name: str = ""
    policy: str = "homogeneous"
    description: str = ""
    options: dict[str, dict[str, str]] = field(
        default_factory=new_system_options
    )  # policy → option → text
    devices: list[DeviceRow] = field(default_factory=lambda: [DeviceRow()])
    errors: dict[str, list[str]] = field(default_factory=dict)

    def option_text(self, policy: str, option: str) -> str:
        """What the form shows for ``option`` of ``policy`` (empty: the default)."""
        return self.options.get(policy, {}).get(option, "")


@dataclass
class LengthFields:
    """A token-length field: an integer or a distribution."""

    dist: str = "fixed"
    value: str = ""
    low: str = ""
    high: str = ""
    median: str = ""
    sigma: str = ""


@dataclass
class WorkloadFields:
    """The workload part of the form."""

    source: str = "custom"
    requests: str = "100"
    input: LengthFields = field(default_factory=lambda: LengthFields(value="512"))
    output: LengthFields = field(default_factory=lambda: LengthFields(value="128"))
    arrival: str = "closed"
    rate: str = ""
    trace: str = ""
    time_scale: str = ""
    seed: str = "0"


@dataclass
class BuilderState:
    """Everything the builder form holds, and the errors to show beside its fields."""

    name: str = ""
    description: str = ""
    model: str = ""
    workload: WorkloadFields = field(default_factory=WorkloadFields)
    slo: dict[str, str] = field(default_factory=dict)
    costs: dict[str, str] = field(default_factory=dict)
    #: ``device=price`` pairs (a number or a catalog cloud offer), comma-separated
    cloud_prices: str = ""
    capacity: dict[str, str] = field(default_factory=dict)
    capacity_on: bool = False
    systems: list[SystemBlock] = field(default_factory=lambda: [SystemBlock()])
    baseline: int = 0
    errors: dict[str, list[str]] = field(default_factory=dict)
    top_errors: list[str] = field(default_factory=list)
    #: position in the document of each block (filled by :meth:`to_document`)
    order: list[int] = field(default_factory=list)

    @property
    def has_errors(self) -> bool:
        """Whether any field or the form as a whole has an error."""
        return bool(
            self.errors
            or self.top_errors
            or any(s.errors or any(d.errors for d in s.devices) for s in self.systems)
        )

    def error_count(self) -> int:
        """Messages shown on the form."""
        n = sum(len(v) for v in self.errors.values()) + len(self.top_errors)
        for s in self.systems:
            n += sum(len(v) for v in s.errors.values())
            n += sum(len(v) for d in s.devices for v in d.errors.values())
        return n

    # --- form → document -------------------------------------------------------------------

    def to_document(
        self, saved_workloads: Mapping[str, Mapping[str, Any]] | None = None
    ) -> dict[str, Any]:
        """The scenario document the form describes, the baseline first.

        Text that is not a number where a number belongs is kept as text: the core's
        validation then reports it at its JSON path like any other bad value.
        ``saved_workloads`` maps a saved workload's id (text) to its workload object.
        """
        doc: dict[str, Any] = {"name": self.name.strip(), "model": self.model.strip()}
        if self.description.strip():
            doc["description"] = self.description.strip()
        wl = self.workload
        if wl.source != "custom":
            chosen = (saved_workloads or {}).get(wl.source)
            if chosen is None:
                self.errors.setdefault("wl-source", []).append(
                    "choose a saved workload you can read"
                )
                doc["workload"] = None
            else:
                doc["workload"] = copy.deepcopy(dict(chosen))
        else:
            doc["workload"] = self._custom_workload()
        indexes = list(range(len(self.systems)))
        base = self.baseline if 0 <= self.baseline < len(self.systems) else 0
        indexes.remove(base)
        indexes.insert(0, base)
        self.order = [indexes.index(i) for i in range(len(self.systems))]
        doc["systems"] = [self._system_document(self.systems[i]) for i in indexes]
        slo = {}
        for key, _, _ in SLO_FIELDS:
            text = self.slo.get(key, "").strip()
            if text:
                slo[key] = _number(text)
        if slo:
            doc["slo"] = slo
        costs: dict[str, Any] = {}
        for key, _, _ in COST_FIELDS:
            text = self.costs.get(key, "").strip()
            if text:
                costs[key] = _number(text)
        cloud = self._cloud_prices()
        if cloud:
            costs["cloud_usd_per_device_hour"] = cloud
        if costs:
            doc["costs"] = costs
        if self.capacity_on:
            doc["capacity"] = {
                key: _number(text)
                for key, _, _ in CAPACITY_FIELDS
                if (text := self.capacity.get(key, "").strip())
            }
        return doc

    def _cloud_prices(self) -> dict[str, Any]:
        """``device=price`` pairs as the costs' cloud prices (a price that is not a number
        is kept as text: a catalog offer, or an error the parser names)."""
        out: dict[str, Any] = {}
        for part in self.cloud_prices.split(","):
            device, sep, price = part.partition("=")
            if not part.strip():
                continue
            # a pair without "=" has no price: the parser names it beside the field
            out[device.strip()] = _number(price) if sep else None
        return out

    def _custom_workload(self) -> dict[str, Any]:
        wl = self.workload
        arrival: dict[str, Any] = {"kind": wl.arrival}
        if wl.arrival == "poisson":
            arrival["rate_per_s"] = _number(wl.rate) if wl.rate.strip() else None
        elif wl.arrival == "trace":
            arrival["trace"] = wl.trace.strip() or None
            if wl.time_scale.strip():
                arrival["time_scale"] = _number(wl.time_scale)
        out: dict[str, Any] = {
            "requests": _integer(wl.requests),
            "input_tokens": self._length(wl.input),
            "output_tokens": self._length(wl.output),
            "arrival": arrival,
            "seed": _integer(wl.seed) if wl.seed.strip() else 0,
        }
        return out

    def _length(self, f: LengthFields) -> Any:
        if f.dist == "fixed":
            return _integer(f.value)
        if f.dist == "uniform":
            return {"dist": "uniform", "low": _integer(f.low), "high": _integer(f.high)}
        if f.dist == "lognormal":
            out: dict[str, Any] = {
                "dist": "lognormal",
                "median": _number(f.median),
                "sigma": _number(f.sigma),
            }
            if f.low.strip():
                out["low"] = _integer(f.low)
            if f.high.strip():
                out["high"] = _integer(f.high)
            return out
        if f.dist == "trace":
            trace = self.workload.trace.strip()
            return {"dist": "trace", "trace": trace} if trace else {"dist": "trace"}
        return {"dist": f.dist}

    def _system_document(self, s: SystemBlock) -> dict[str, Any]:
        out: dict[str, Any] = {"name": s.name.strip(), "policy": s.policy}
        if s.description.strip():
            out["description"] = s.description.strip()
        devices = []
        for d in s.devices:
            entry: dict[str, Any] = {"device": d.device.strip(), "count": _integer(d.count)}
            if d.role.strip():
                entry["role"] = d.role.strip()
            if d.runtime.strip():
                entry["runtime"] = d.runtime.strip()
            if d.price_usd.strip():
                entry["price_usd"] = _price(d.price_usd)
            if d.tdp_w.strip():
                entry["tdp_w"] = _price(d.tdp_w)  # a quote like the price: same number rules
            devices.append(entry)
        out["devices"] = devices
        options: dict[str, Any] = {}
        specs = _option_specs(s.policy)
        for name, text in s.options.get(s.policy, {}).items():
            if not text.strip():
                continue
            spec = specs.get(name)
            options[name] = _option_value(spec, text) if spec is not None else text
        if options:
            out["options"] = options
        return out

    # --- errors → fields -------------------------------------------------------------------

    def attach_errors(self, errors: Mapping[str, Sequence[str]]) -> None:
        """Put each JSON-path error beside its field (see :func:`field_for_path`)."""
        block_of = {doc_i: block_i for block_i, doc_i in enumerate(self.order)}
        for path, messages in errors.items():
            target = field_for_path(path, block_of, self)
            msgs = [str(m) for m in messages]
            if target is None:
                self.top_errors.extend(f"{path}: {m}" if path != rules.ROOT else m for m in msgs)
            elif target[0] == "form":
                self.errors.setdefault(target[1], []).extend(msgs)
            elif target[0] == "system":
                self.systems[target[1]].errors.setdefault(target[2], []).extend(msgs)
            else:
                row = self.systems[target[1]].devices[target[2]]
                label = DEVICE_FIELD_LABELS.get(target[3])
                if label is not None:
                    # "must be positive" needs the field's name; a sentence naming the
                    # device ("tpu-v6e has no published power …") reads on its own
                    msgs = [f"{label} {m}" if m.startswith(("must", "is ")) else m for m in msgs]
                row.errors.setdefault(target[3], []).extend(msgs)


_SYSTEM_PATH = re.compile(r"^systems\[(\d+)\](?:\.(.*))?$")
_DEVICE_PATH = re.compile(r"^devices\[(\d+)\](?:\.(\w+))?$")
_WL_LENGTH_KEYS = {"value", "low", "high", "median", "sigma", "dist", "trace"}


def field_for_path(
    path: str, block_of: Mapping[int, int], state: BuilderState
) -> tuple[Any, ...] | None:
    """Where an error at JSON ``path`` is shown: ``("form", field)``,
    ``("system", block, key)``, ``("device", block, row, key)``, or None (top of the form)."""
    if path in ("name", "description", "model"):
        return ("form", path)
    if path.startswith("slo"):
        key = path.partition(".")[2]
        return ("form", f"slo-{key}" if key else "slo")
    if path.startswith("costs.cloud_usd_per_device_hour"):
        return ("form", "costs-cloud")
    if path.startswith(("costs", "capacity")):
        head, _, key = path.partition(".")
        known = {k for k, _, _ in (COST_FIELDS if head == "costs" else CAPACITY_FIELDS)}
        return ("form", f"{head}-{key}" if key in known else f"{head}-section")
    if path.startswith("workload"):
        if state.workload.source != "custom":
            return ("form", "wl-source")
        rest = path.partition(".")[2]
        if not rest:
            return ("form", "wl-source")
        head, _, tail = rest.partition(".")
        if head == "requests":
            return ("form", "wl-requests")
        if head == "seed":
            return ("form", "wl-seed")
        if head in ("input_tokens", "output_tokens"):
            prefix = "wl-in" if head == "input_tokens" else "wl-out"
            if tail == "trace":
                return ("form", "wl-trace")
            if tail in _WL_LENGTH_KEYS:
                return ("form", f"{prefix}-{tail}")
            fields = state.workload.input if head == "input_tokens" else state.workload.output
            return ("form", f"{prefix}-value" if fields.dist == "fixed" else f"{prefix}-dist")
        if head == "arrival":
            return (
                "form",
                {
                    "rate_per_s": "wl-rate",
                    "trace": "wl-trace",
                    "time_scale": "wl-time-scale",
                }.get(tail, "wl-arrival"),
            )
        return ("form", "wl-source")
    if path == "systems":
        return ("form", "systems")
    m = _SYSTEM_PATH.match(path)
    if m is None:
        return None
    doc_i, rest = int(m.group(1)), m.group(2) or ""
    block = block_of.get(doc_i)
    if block is None or block >= len(state.systems):
        return None
    if rest in ("", "name", "policy", "description", "devices", "options"):
        return ("system", block, rest or "system")
    if rest.startswith("options."):
        return ("system", block, "opt-" + rest.partition(".")[2].split(".")[0])
    d = _DEVICE_PATH.match(rest)
    if d is not None:
        row = int(d.group(1))
        if row < len(state.systems[block].devices):
            return ("device", block, row, d.group(2) or "device")
        return ("system", block, "devices")
    return ("system", block, "system")


# --- parsing helpers -------------------------------------------------------------------------


def _number(text: str) -> Any:
    """``text`` as an int or a float if it is one, else the text (validation reports it)."""
    t = text.strip()
    try:
        return int(t)
    except ValueError:
        pass
    try:
        v = float(t)
    except ValueError:
        return t
    return v if math.isfinite(v) else t


def _price(text: str) -> Any:
    """A quoted price: :func:`_number`, except that NaN and ±Infinity stay floats so the
    core's validation says they are not finite (rather than "not a number")."""
    v = _number(text)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return v
    return v


def _integer(text: str) -> Any:
    """``text`` as an int if it is one (``"4.0"`` too), else the text."""
    v = _number(text)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(text, str) and not text.strip():
        return None
    return v


def _option_specs(policy: str) -> dict[str, OptionSpec]:
    try:
        return {o.name: o for o in get_policy(policy).options}
    except LookupError:
        return {}


def _option_value(spec: OptionSpec, text: str) -> Any:
    t = text.strip()
    if spec.type is bool:
        return {"true": True, "false": False}.get(t.lower(), t)
    if spec.type is int:
        return _integer(t)
    if spec.type is float:
        return _number(t)
    return t


def _text(data: Mapping[str, Any], key: str, default: str = "") -> str:
    value = data.get(key, default)
    if value is None:
        return default
    return str(value)[:MAX_FIELD_CHARS]


def _index(text: str, limit: int) -> int:
    try:
        return max(0, min(int(text), limit))
    except (TypeError, ValueError):
        return 0


# --- form data → state -----------------------------------------------------------------------


def state_from_post(data: Mapping[str, Any]) -> BuilderState:
    """The builder state of a submitted form (a QueryDict or any mapping of strings)."""
    state = BuilderState(
        name=_text(data, "name"),
        description=_text(data, "description"),
        model=_text(data, "model"),
    )
    wl = state.workload
    wl.source = _text(data, "wl-source", "custom") or "custom"
    wl.requests = _text(data, "wl-requests")
    for prefix, target in (("wl-in", wl.input), ("wl-out", wl.output)):
        target.dist = _text(data, f"{prefix}-dist", "fixed")
        for key in ("value", "low", "high", "median", "sigma"):
            setattr(target, key, _text(data, f"{prefix}-{key}"))
    wl.arrival = _text(data, "wl-arrival", "closed")
    wl.rate = _text(data, "wl-rate")
    wl.trace = _text(data, "wl-trace")
    wl.time_scale = _text(data, "wl-time-scale")
    wl.seed = _text(data, "wl-seed", "0")
    state.slo = {key: _text(data, f"slo-{key}") for key, _, _ in SLO_FIELDS}
    state.costs = {key: _text(data, f"costs-{key}") for key, _, _ in COST_FIELDS}
    state.cloud_prices = _text(data, "costs-cloud")
    state.capacity_on = _text(data, "capacity-on") == "on"
    state.capacity = {key: _text(data, f"capacity-{key}") for key, _, _ in CAPACITY_FIELDS}
    n_systems = _index(_text(data, "sys-count", "1"), MAX_SYSTEMS)
    registry = {p["name"]: p for p in policies()}
    state.systems = []
    for i in range(n_systems):
        p = f"sys-{i}-"
        block = SystemBlock(
            name=_text(data, p + "name"),
            policy=_text(data, p + "policy", "homogeneous"),
            description=_text(data, p + "description"),
        )
        for name, entry in registry.items():
            block.options[name] = {
                o["name"]: _text(data, f"{p}opt-{name}-{o['name']}") for o in entry["options"]
            }
        n_devices = _index(_text(data, p + "dev-count", "1"), MAX_DEVICES)
        block.devices = [
            DeviceRow(
                device=_text(data, f"{p}dev-{j}-device"),
                count=_text(data, f"{p}dev-{j}-count"),
                role=_text(data, f"{p}dev-{j}-role"),
                runtime=_text(data, f"{p}dev-{j}-runtime"),
                price_usd=_text(data, f"{p}dev-{j}-price_usd"),
                tdp_w=_text(data, f"{p}dev-{j}-tdp_w"),
            )
            for j in range(n_devices)
        ]
        state.systems.append(block)
    state.baseline = _index(_text(data, "baseline", "0"), max(0, len(state.systems) - 1))
    return state


def apply_action(state: BuilderState, action: str) -> bool:
    """Apply an editing button (add/remove a system or a device row); True if it was one."""
    if action == "add_system":
        if len(state.systems) < MAX_SYSTEMS:
            state.systems.append(SystemBlock(name=f"system {len(state.systems) + 1}"))
        return True
    m = re.fullmatch(r"remove_system-(\d+)", action)
    if m:
        i = int(m.group(1))
        if 0 <= i < len(state.systems) and len(state.systems) > 1:
            del state.systems[i]
            if state.baseline == i:
                state.baseline = 0
            elif state.baseline > i:
                state.baseline -= 1
        return True
    m = re.fullmatch(r"add_device-(\d+)", action)
    if m:
        i = int(m.group(1))
        if 0 <= i < len(state.systems) and len(state.systems[i].devices) < MAX_DEVICES:
            state.systems[i].devices.append(DeviceRow())
        return True
    m = re.fullmatch(r"remove_device-(\d+)-(\d+)", action)
    if m:
        i, j = int(m.group(1)), int(m.group(2))
        devices = state.systems[i].devices if 0 <= i < len(state.systems) else []
        if 0 <= j < len(devices) and len(devices) > 1:
            del devices[j]
        return True
    return False


# --- document → state ------------------------------------------------------------------------


def _length_fields(value: Any) -> LengthFields:
    if isinstance(value, Mapping):
        return LengthFields(
            dist=str(value.get("dist", "fixed")),
            value=_str(value.get("value")),
            low=_str(value.get("low")),
            high=_str(value.get("high")),
            median=_str(value.get("median")),
            sigma=_str(value.get("sigma")),
        )
    return LengthFields(dist="fixed", value=_str(value))


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def _str(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def state_from_document(doc: Mapping[str, Any]) -> BuilderState:
    """A builder state showing ``doc`` (its first system as the baseline)."""
    state = BuilderState(
        name=_str(doc.get("name")),
        description=_str(doc.get("description")),
        model=_str(doc.get("model")),
    )
    wl_doc = _mapping(doc.get("workload"))
    wl = state.workload
    wl.requests = _str(wl_doc.get("requests"))
    wl.input = _length_fields(wl_doc.get("input_tokens"))
    wl.output = _length_fields(wl_doc.get("output_tokens"))
    wl.seed = _str(wl_doc.get("seed", 0))
    arrival = _mapping(wl_doc.get("arrival"))
    wl.arrival = _str(arrival.get("kind", "closed")) or "closed"
    wl.rate = _str(arrival.get("rate_per_s"))
    wl.time_scale = _str(arrival.get("time_scale"))
    trace = arrival.get("trace")
    for length in (wl_doc.get("input_tokens"), wl_doc.get("output_tokens")):
        if trace is None and isinstance(length, Mapping):
            trace = length.get("trace")
    wl.trace = _str(trace)
    slo = _mapping(doc.get("slo"))
    state.slo = {key: _str(slo.get(key)) for key, _, _ in SLO_FIELDS}
    costs = _mapping(doc.get("costs"))
    state.costs = {key: _str(costs.get(key)) for key, _, _ in COST_FIELDS}
    cloud = _mapping(costs.get("cloud_usd_per_device_hour"))
    state.cloud_prices = ", ".join(f"{d}={_str(p)}" for d, p in cloud.items())
    capacity = doc.get("capacity")
    state.capacity_on = isinstance(capacity, Mapping)
    state.capacity = {key: _str(_mapping(capacity).get(key)) for key, _, _ in CAPACITY_FIELDS}
    state.systems = []
    for s in doc.get("systems") or ():
        if not isinstance(s, Mapping):
            continue
        policy = _str(s.get("policy")) or "homogeneous"
        options = _mapping(s.get("options"))
        block = SystemBlock(
            name=_str(s.get("name")),
            policy=policy,
            description=_str(s.get("description")),
            options={policy: {str(k): _str(v) for k, v in options.items()}},
            devices=[
                DeviceRow(
                    device=_str(d.get("device")),
                    count=_str(d.get("count")),
                    role=_str(d.get("role")),
                    runtime=_str(d.get("runtime")),
                    price_usd=_str(d.get("price_usd")),
                    tdp_w=_str(d.get("tdp_w")),
                )
                for d in (s.get("devices") or ())
                if isinstance(d, Mapping)
            ]
            or [DeviceRow()],
        )
        state.systems.append(block)
    if not state.systems:
        state.systems = [SystemBlock()]
    state.baseline = 0
    return state
