"""Django forms of the dashboard (the scenario builder has its own module, ``builder``)."""

from __future__ import annotations

import math
from typing import Any

from django import forms
from django.core.validators import RegexValidator

from simulations.choices import TraceVisibility
from simulations.core import scenario as rules
from simulations.fields import slug_validator

#: Largest config.json accepted (bytes).
MAX_CONFIG_BYTES = 1024 * 1024
#: Largest trace upload through the page (bytes).
MAX_TRACE_UPLOAD_BYTES = 32 * 1024 * 1024


class HfImportForm(forms.Form):
    """Import a model from a Hugging Face ``config.json``, pasted or uploaded."""

    slug = forms.CharField(
        max_length=64,
        validators=[slug_validator],
        help_text="Identifier scenarios will use (lowercase, e.g. my-llama-3b).",
    )
    name = forms.CharField(max_length=200, required=False, help_text="Display name.")
    origin = forms.CharField(
        max_length=500,
        required=False,
        help_text="Where the config comes from (e.g. the Hugging Face repository and revision).",
    )
    config = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false"}),
        required=False,
        help_text="Paste config.json here, or upload it below.",
    )
    config_file = forms.FileField(required=False, help_text="config.json (at most 1 MiB).")

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data  # what clean() returns, typed as such
        upload = data.get("config_file")
        if upload is not None:
            if upload.size > MAX_CONFIG_BYTES:
                self.add_error("config_file", "config.json is larger than 1 MiB")
            else:
                data["config"] = upload.read().decode("utf-8", errors="replace")
        if not (data.get("config") or "").strip():
            self.add_error("config", "paste a config.json or upload one")
        elif len(data["config"]) > MAX_CONFIG_BYTES:
            self.add_error("config", "config.json is larger than 1 MiB")
        return data

    def config_text(self) -> str:
        """The config.json text (pasted or uploaded)."""
        return str(self.cleaned_data.get("config") or "")


LENGTH_CHOICES = [
    ("fixed", "fixed"),
    ("uniform", "uniform"),
    ("lognormal", "log-normal"),
    ("trace", "from the trace"),
]
ARRIVAL_CHOICES = [
    ("closed", "closed (all at t = 0)"),
    ("poisson", "Poisson"),
    ("trace", "trace timestamps"),
]


class WorkloadForm(forms.Form):
    """The workload editor: request count, length distributions, arrivals, seed."""

    name = forms.CharField(max_length=200)
    shared = forms.BooleanField(required=False, help_text="Other users may read it.")
    requests = forms.IntegerField(
        min_value=1, max_value=rules.MAX_REQUESTS, help_text="Requests to simulate."
    )
    in_dist = forms.ChoiceField(choices=LENGTH_CHOICES, label="Distribution")
    in_value = forms.IntegerField(
        label="value (tokens)", required=False, min_value=1, max_value=rules.MAX_TOKENS
    )
    in_low = forms.IntegerField(
        label="low (tokens)", required=False, min_value=1, max_value=rules.MAX_TOKENS
    )
    in_high = forms.IntegerField(
        label="high (tokens)", required=False, min_value=1, max_value=rules.MAX_TOKENS
    )
    in_median = forms.FloatField(
        label="median (tokens)", required=False, min_value=1, max_value=rules.MAX_TOKENS
    )
    in_sigma = forms.FloatField(
        label="σ of log-length", required=False, min_value=0.0001, max_value=rules.MAX_SIGMA
    )
    out_dist = forms.ChoiceField(choices=LENGTH_CHOICES, label="Distribution")
    out_value = forms.IntegerField(
        label="value (tokens)", required=False, min_value=1, max_value=rules.MAX_TOKENS
    )
    out_low = forms.IntegerField(
        label="low (tokens)", required=False, min_value=1, max_value=rules.MAX_TOKENS
    )
    out_high = forms.IntegerField(
        label="high (tokens)", required=False, min_value=1, max_value=rules.MAX_TOKENS
    )
    out_median = forms.FloatField(
        label="median (tokens)", required=False, min_value=1, max_value=rules.MAX_TOKENS
    )
    out_sigma = forms.FloatField(
        label="σ of log-length", required=False, min_value=0.0001, max_value=rules.MAX_SIGMA
    )
    arrival = forms.ChoiceField(choices=ARRIVAL_CHOICES, label="Process")
    rate_per_s = forms.FloatField(
        required=False,
        min_value=1e-9,
        max_value=rules.MAX_RATE_PER_S,
        label="Rate (requests/s)",
    )
    trace = forms.ChoiceField(
        choices=[("", "—")], required=False, help_text="For trace arrivals or trace lengths."
    )
    time_scale = forms.FloatField(
        required=False,
        min_value=1e-9,
        max_value=rules.MAX_TIME_SCALE,
        initial=1.0,
        label="Time scale (trace timestamps)",
    )
    seed = forms.IntegerField(min_value=0, max_value=rules.MAX_SEED, initial=0)

    def __init__(self, *args: Any, traces: list[tuple[str, str]] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        trace = self.fields["trace"]
        assert isinstance(trace, forms.ChoiceField)
        trace.choices = [("", "—"), *(traces or [])]

    def _length(self, prefix: str) -> Any:
        d = self.cleaned_data
        kind = d.get(f"{prefix}_dist")
        if kind == "fixed":
            return d.get(f"{prefix}_value")
        if kind == "uniform":
            return {
                "dist": "uniform",
                "low": d.get(f"{prefix}_low"),
                "high": d.get(f"{prefix}_high"),
            }
        if kind == "lognormal":
            out: dict[str, Any] = {
                "dist": "lognormal",
                "median": d.get(f"{prefix}_median"),
                "sigma": d.get(f"{prefix}_sigma"),
            }
            for k in ("low", "high"):
                if d.get(f"{prefix}_{k}") is not None:
                    out[k] = d[f"{prefix}_{k}"]
            return out
        return {"dist": "trace"}

    def model_fields(self) -> dict[str, Any]:
        """Keyword arguments of :func:`simulations.scenarios.services.workload_create`."""
        d = self.cleaned_data
        return {
            "requests": d["requests"],
            "input_tokens": self._length("in"),
            "output_tokens": self._length("out"),
            "arrival_kind": d["arrival"],
            "rate_per_s": d.get("rate_per_s") if d["arrival"] == "poisson" else None,
            "time_scale": d.get("time_scale") or 1.0,
            "seed": d["seed"],
        }


#: Where the core's workload paths go on the workload form.
WORKLOAD_PATH_FIELDS = {
    "workload.requests": "requests",
    "workload.seed": "seed",
    "workload.arrival.rate_per_s": "rate_per_s",
    "workload.arrival.trace": "trace",
    "workload.arrival.time_scale": "time_scale",
    "workload.arrival.kind": "arrival",
}


def workload_error_field(path: str) -> str | None:
    """The WorkloadForm field that shows an error at the core's JSON ``path``."""
    if path in WORKLOAD_PATH_FIELDS:
        return WORKLOAD_PATH_FIELDS[path]
    for doc_key, prefix in (("input_tokens", "in"), ("output_tokens", "out")):
        base = f"workload.{doc_key}"
        if path == base:
            return f"{prefix}_value"
        if path.startswith(base + "."):
            tail = path[len(base) + 1 :]
            if tail == "trace":
                return "trace"
            if tail in ("value", "low", "high", "median", "sigma"):
                return f"{prefix}_{tail}"
            return f"{prefix}_dist"
    return None


class TraceUploadForm(forms.Form):
    """Upload a trace in the Azure LLM inference format."""

    slug = forms.CharField(
        max_length=64,
        validators=[slug_validator],
        help_text="Identifier workloads will use (lowercase, e.g. azure-code-2023).",
    )
    name = forms.CharField(max_length=200, required=False)
    source = forms.CharField(
        max_length=1000, required=False, help_text="Where the trace comes from."
    )
    file = forms.FileField(help_text="CSV with TIMESTAMP,ContextTokens,GeneratedTokens.")
    visibility = forms.ChoiceField(
        choices=TraceVisibility.choices,
        initial=TraceVisibility.PRIVATE,
        required=False,
        help_text="Private: only you. Shared: every signed-in user may use it (only you delete "
        "it). Public: the built-in catalog (staff only).",
    )

    def clean_visibility(self) -> str:
        return self.cleaned_data.get("visibility") or TraceVisibility.PRIVATE

    def clean_file(self) -> Any:
        f = self.cleaned_data["file"]
        if f.size > MAX_TRACE_UPLOAD_BYTES:
            raise forms.ValidationError("the trace is larger than 32 MiB")
        return f


class TokenForm(forms.Form):
    """Create an API token."""

    name = forms.CharField(
        max_length=100,
        validators=[RegexValidator(r"\S", "name the token")],
        help_text="What the token is for (e.g. CI).",
    )


def sweep_parameters(document: Any) -> list[tuple[str, str, type]]:
    """The numeric settings of a scenario document a sweep may vary, as (path, label,
    type): the Poisson arrival rate (the default; any other arrival process is replaced),
    the request count and seed, each system's device counts and each numeric option its
    policy declares."""
    from simulations.core.errors import UnknownPolicyError
    from simulations.core.policies import get_policy

    doc: dict[str, Any] = document if isinstance(document, dict) else {}
    raw_workload = doc.get("workload")
    workload: dict[str, Any] = raw_workload if isinstance(raw_workload, dict) else {}
    raw_arrival = workload.get("arrival")
    arrival: dict[str, Any] = raw_arrival if isinstance(raw_arrival, dict) else {}
    # the arrival rate is always offered: a sweep of it makes the arrivals Poisson
    rate = "Poisson arrival rate (requests/s)"
    if arrival.get("kind", "poisson") != "poisson":
        rate += f", replacing {arrival.get('kind')} arrivals"
    out: list[tuple[str, str, type]] = [("workload.arrival.rate_per_s", rate, float)]
    out.append(("workload.requests", "requests", int))
    out.append(("workload.seed", "seed", int))
    raw_systems = doc.get("systems")
    systems: list[Any] = raw_systems if isinstance(raw_systems, list) else []
    for i, system in enumerate(systems):
        if not isinstance(system, dict):
            continue
        name = str(system.get("name") or f"system {i}")
        raw_devices = system.get("devices")
        devices: list[Any] = raw_devices if isinstance(raw_devices, list) else []
        for j, d in enumerate(devices):
            if isinstance(d, dict):
                out.append(
                    (f"systems[{i}].devices[{j}].count", f"{name}: {d.get('device')} count", int)
                )
        try:
            options = get_policy(str(system.get("policy"))).options
        except UnknownPolicyError:
            continue
        for o in options:
            if o.type in (int, float):
                unit = f" ({o.unit})" if o.unit else ""
                out.append((f"systems[{i}].options.{o.name}", f"{name}: {o.name}{unit}", o.type))
    return out


class SweepForm(forms.Form):
    """Sweep one numeric setting of a scenario (the arrival rate by default: latency
    against load, Neo Fig. 6) over the given values."""

    parameter = forms.ChoiceField(choices=(), label="Vary")
    values = forms.CharField(
        max_length=1000,
        help_text="Values, comma-separated (e.g. 0.5, 1, 2, 4).",
    )

    def __init__(self, *args: Any, document: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.parameters = {p: (label, kind) for p, label, kind in sweep_parameters(document)}
        field = self.fields["parameter"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(p, lab) for p, (lab, _) in self.parameters.items()]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        path, text = data.get("parameter"), data.get("values")
        if path is None or text is None:
            return data
        kind = self.parameters[path][1]
        values: list[float | int] = []
        for part in text.replace(";", ",").split(","):
            part = part.strip()
            if not part:
                continue
            try:
                v = float(part)
            except ValueError:
                self.add_error("values", f"{part!r} is not a number")
                return data
            if not math.isfinite(v) or v <= 0 or v > 1e9:
                self.add_error("values", f"{part}: values must be finite, above 0, at most 1e9")
                return data
            if kind is int:
                if v != int(v):
                    self.add_error(
                        "values", f"{part}: {self.parameters[path][0]} takes whole numbers"
                    )
                    return data
                values.append(int(v))
            else:
                values.append(v)
        if not 2 <= len(set(values)) <= 50:
            self.add_error("values", "give between 2 and 50 different values")
            return data
        data["values"] = sorted(set(values))
        data["name"] = path.rsplit(".", 1)[-1]
        return data


class PlanForm(forms.Form):
    """A capacity plan as a form: model, workload (a stored trace's lengths or uniform
    ranges, Poisson arrivals), targets, device types and their largest count, policies,
    budget, objective and running costs. :meth:`document` writes the plan document the CLI,
    the API and the JSON box accept, so one parser (``parse_plan``) validates all three."""

    name = forms.CharField(max_length=200, initial="My plan")
    model = forms.ChoiceField(choices=())
    lengths = forms.ChoiceField(
        choices=(),
        label="Prompt and output lengths",
        help_text="A stored trace's lengths, or uniform ranges.",
    )
    in_low = forms.IntegerField(
        label="prompt low (tokens)", required=False, min_value=1, max_value=rules.MAX_TOKENS
    )
    in_high = forms.IntegerField(
        label="prompt high (tokens)", required=False, min_value=1, max_value=rules.MAX_TOKENS
    )
    out_low = forms.IntegerField(
        label="output low (tokens)", required=False, min_value=1, max_value=rules.MAX_TOKENS
    )
    out_high = forms.IntegerField(
        label="output high (tokens)", required=False, min_value=1, max_value=rules.MAX_TOKENS
    )
    requests = forms.IntegerField(
        min_value=1, max_value=rules.MAX_REQUESTS, initial=1000, help_text="Requests per run."
    )
    rate_per_s = forms.FloatField(
        min_value=1e-9,
        max_value=rules.MAX_RATE_PER_S,
        initial=1.0,
        label="Poisson rate (requests/s)",
    )
    seed = forms.IntegerField(min_value=0, max_value=2**31 - 1, initial=0)
    ttft_p90_ms = forms.FloatField(
        min_value=1e-6, max_value=1e9, initial=1000, label="p90 TTFT ≤ (ms)"
    )
    tpot_p90_ms = forms.FloatField(
        min_value=1e-6, max_value=1e9, initial=50, label="p90 TPOT ≤ (ms)"
    )
    min_throughput_tok_s = forms.FloatField(
        required=False, min_value=0, max_value=1e12, label="Throughput ≥ (tokens/s)"
    )
    devices = forms.MultipleChoiceField(
        choices=(), widget=forms.CheckboxSelectMultiple, label="Device types"
    )
    max_count = forms.IntegerField(
        min_value=1, max_value=256, initial=8, label="Up to (devices of each type)"
    )
    policies = forms.MultipleChoiceField(
        choices=(), widget=forms.CheckboxSelectMultiple, label="How they serve"
    )
    max_capex_usd = forms.FloatField(
        required=False, min_value=1e-6, max_value=1e12, label="Budget (capex, USD)"
    )
    max_power_w = forms.FloatField(
        required=False, min_value=1e-6, max_value=1e9, label="Power cap (sum of TDPs, W)"
    )
    max_devices_per_node = forms.IntegerField(min_value=1, max_value=256, initial=8)
    objective = forms.ChoiceField(choices=())
    electricity_usd_per_kwh = forms.FloatField(
        required=False, min_value=0, max_value=10, label="Electricity ($/kWh)"
    )
    amortisation_years = forms.FloatField(
        required=False, min_value=1e-6, max_value=50, label="Amortisation (years)"
    )
    sensitivity = forms.BooleanField(
        required=False, initial=True, label="Find how far the load can grow"
    )

    def __init__(
        self,
        *args: Any,
        models: list[tuple[str, str]],
        traces: list[tuple[str, str]],
        devices: list[tuple[str, str]],
        policies: list[tuple[str, str]],
        objectives: list[tuple[str, str]],
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        for name, choices in (
            ("model", models),
            ("lengths", [("uniform", "uniform ranges"), *traces]),
            ("devices", devices),
            ("policies", policies),
            ("objective", objectives),
        ):
            field = self.fields[name]
            assert isinstance(field, forms.ChoiceField)
            field.choices = choices

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if data.get("lengths") == "uniform":
            for low, high in (("in_low", "in_high"), ("out_low", "out_high")):
                lo, hi = data.get(low), data.get(high)
                if lo is None or hi is None:
                    self.add_error(low if lo is None else high, "give both ends of the range")
                elif lo > hi:
                    self.add_error(high, "must not be below the low end")
        if data.get("objective") in ("tco_per_year", "usd_per_million_tokens"):
            for name in ("electricity_usd_per_kwh", "amortisation_years"):
                if data.get(name) is None:
                    self.add_error(name, "this objective needs the running costs")
        return data

    def document(self) -> dict[str, Any]:
        """The plan document of the cleaned form."""
        d = self.cleaned_data
        if d["lengths"] == "uniform":
            lengths_in = {"dist": "uniform", "low": d["in_low"], "high": d["in_high"]}
            lengths_out = {"dist": "uniform", "low": d["out_low"], "high": d["out_high"]}
        else:
            lengths_in = {"dist": "trace", "trace": d["lengths"]}
            lengths_out = {"dist": "trace", "trace": d["lengths"]}
        targets: dict[str, Any] = {"ttft_p90_ms": d["ttft_p90_ms"], "tpot_p90_ms": d["tpot_p90_ms"]}
        if d.get("min_throughput_tok_s") is not None:
            targets["min_throughput_tok_s"] = d["min_throughput_tok_s"]
        constraints: dict[str, Any] = {"max_devices_per_node": d["max_devices_per_node"]}
        for key in ("max_capex_usd", "max_power_w"):
            if d.get(key) is not None:
                constraints[key] = d[key]
        doc: dict[str, Any] = {
            "name": d["name"],
            "model": d["model"],
            "workload": {
                "requests": d["requests"],
                "input_tokens": lengths_in,
                "output_tokens": lengths_out,
                "arrival": {"kind": "poisson", "rate_per_s": d["rate_per_s"]},
                "seed": d["seed"],
            },
            "targets": targets,
            "space": {
                "devices": [{"device": s, "max_count": d["max_count"]} for s in d["devices"]],
                "policies": [{"policy": p} for p in d["policies"]],
            },
            "constraints": constraints,
            "objective": d["objective"],
            "search": {"sensitivity": bool(d.get("sensitivity"))},
        }
        if d.get("electricity_usd_per_kwh") is not None and d.get("amortisation_years"):
            doc["costs"] = {
                "electricity_usd_per_kwh": d["electricity_usd_per_kwh"],
                "amortisation_years": d["amortisation_years"],
            }
        return doc
