"""GLITCHES single-device figures: Table I, Table II, the §I/§III ratios and Fig. 9.

Workload (GLITCHES Table I): LLaMA2-7B, batch 1, prefill 1536 tokens, then 512 decode steps
whose cached context grows from 1536 to 2047 tokens; per-token decode figures are averages
over those steps (energy-weighted for power). GPUs run the default eager FP16 stack
(``hf-eager-fp16``), the U280 the default FlightLLM W4A8 stack at its default prefetch
ratio 4. Table II figures are derived from the simulated Table I figures exactly as the
paper derives them (one token per prefill, one per decode step).
"""

from __future__ import annotations

from dataclasses import dataclass

from simulations.core.catalog import builtin_catalog
from simulations.core.devices import build_device_model
from simulations.core.devices.base import DeviceModel
from simulations.core.devices.fpga import FIG9_RATIOS, FpgaModel
from simulations.core.graph import decode_graph
from simulations.core.roofline import stack_peak_ops
from simulations.core.spec import DeviceSpec, ModelSpec, RuntimeProfile

from .base import Check, runner
from .targets import target

PROMPT = 1536
STEPS = 512
DEVICES = {"a100": "a100-80gb", "v100s": "v100s", "u280": "u280"}
GIB = 2**30

_GB_NOTE = (
    "GB = 1e9 bytes (Table II's bandwidth utilisations only come out so); Table I's "
    "operational-intensity column implies GiB instead — simulated {gib:.2f} GiB"
)
_CAL_GPU = (
    "calibration target: hf-eager-fp16 is fitted to the four A100/V100S latencies at once "
    "(3 parameters); leave-one-out predicts within 2 %"
)
_CAL_FPGA = (
    "calibration target: flightllm-w4a8 (3 parameters) is fitted to U280 prefill, decode and "
    "the two Fig. 9 speedups at once"
)
_POWER_GPU = (
    "power = TDP × (fraction while compute-bound / memory-bound / waiting for the host), "
    "3 fractions fitted to the four A100/V100S powers; no activity-monotone model with "
    "shared fractions reproduces V100S drawing 89 % of TDP in a decode that is 54 % "
    "host-bound while A100 draws 56 % at 68 % host-bound"
)


@dataclass(frozen=True, slots=True)
class _Sim:
    """Simulated Table I figures of one device."""

    prefill_s: float
    prefill_j: float
    prefill_flops: float
    prefill_bytes: float
    decode_s: float
    decode_j: float
    decode_flops: float
    decode_bytes: float


def _simulate(dm: DeviceModel, model: ModelSpec) -> _Sim:
    p = dm.prefill(model, [PROMPT])
    s = j = f = b = 0.0
    for i in range(STEPS):
        c = dm.decode_step(model, 1, PROMPT + i)
        s, j, f, b = s + c.seconds, j + c.joules, f + c.flops, b + c.bytes
    return _Sim(p.seconds, p.joules, p.flops, p.bytes, s / STEPS, j / STEPS, f / STEPS, b / STEPS)


def _check(tid: str, simulated: float, note: str = "", **details: object) -> Check:
    t = target(tid)
    return Check.of_target(t, simulated, "; ".join(x for x in (t.note, note) if x), details)


def _setup() -> tuple[ModelSpec, dict[str, tuple[DeviceSpec, RuntimeProfile, DeviceModel]]]:
    cat = builtin_catalog()
    model = cat.model("llama2-7b")
    out = {}
    for key, slug in DEVICES.items():
        dev = cat.device(slug)
        rt = cat.default_runtime(dev)
        out[key] = (dev, rt, build_device_model(dev, rt))
    return model, out


@runner("glitches")
def table1_table2() -> list[Check]:
    """Every Table I and Table II figure of A100, V100S and U280."""
    model, devs = _setup()
    checks: list[Check] = []
    sims: dict[str, _Sim] = {}
    for key, (dev, rt, dm) in devs.items():
        sim = _simulate(dm, model)
        sims[key] = sim
        is_gpu = key != "u280"
        cal = _CAL_GPU if is_gpu else _CAL_FPGA
        prec = f"{rt.slug}: W{rt.weight_bits}A{rt.act_bits}KV{rt.kv_bits}"
        for phase in ("prefill", "decode"):
            secs = getattr(sim, f"{phase}_s")
            joules = getattr(sim, f"{phase}_j")
            flops = getattr(sim, f"{phase}_flops")
            nbytes = getattr(sim, f"{phase}_bytes")
            per = (
                f"mean of {STEPS} steps, {PROMPT}-{PROMPT + STEPS - 1} cached tokens"
                if phase == "decode"
                else f"{PROMPT}-token prompt"
            )
            traffic_note = _GB_NOTE.format(gib=nbytes / GIB)
            if not is_gpu and phase == "decode":
                traffic_note += "; activations stay on chip, traffic = weights + metadata + KV"
            if not is_gpu:
                traffic_note += "; includes 1/32 quantisation metadata (§V-B tile sizes)"
            base = f"glitches.table1.{key}.{phase}"
            checks += [
                _check(f"{base}_gflops", flops / 1e9, f"{per}; eager full s×s attention"),
                _check(f"{base}_gb", nbytes / 1e9, f"{per}; {prec}; {traffic_note}"),
                _check(
                    f"{base}_oi",
                    flops / nbytes,
                    "FLOP per byte (10^9 bytes); the paper's column divides by GiB",
                ),
                _check(
                    f"{base}_w",
                    joules / secs,
                    _POWER_GPU if is_gpu else cal + "; one constant design power",
                ),
                _check(f"{base}_ms", secs * 1e3, f"{per}; {cal}"),
            ]
            peak = stack_peak_ops(dev, rt)
            bw = dev.mem_bw_gbps * 1e9
            t2 = f"glitches.table2.{key}.{phase}"
            checks += [
                _check(f"{t2}_bw_util", nbytes / secs / bw),
                _check(f"{t2}_compute_util", flops / secs / peak),
                _check(f"{t2}_energy_eff", 1.0 / joules, "1 / (latency × simulated power)"),
                _check(
                    f"{t2}_cost_eff",
                    1.0 / (secs * (dev.price_usd or float("nan"))),
                    f"price ${dev.price_usd:,.0f} from the catalog" if dev.price_usd else "",
                ),
            ]
        checks += [
            _check(f"glitches.table2.{key}.peak_tops", stack_peak_ops(dev, rt) / 1e12),
            _check(f"glitches.table2.{key}.bw_gbps", dev.mem_bw_gbps),
            _check(f"glitches.table2.{key}.cost_usd", dev.price_usd or float("nan")),
        ]
    checks += [
        _check(
            "glitches.text.u280_over_a100_prefill",
            sims["u280"].prefill_s / sims["a100"].prefill_s,
        ),
        _check(
            "glitches.text.u280_over_v100s_prefill",
            sims["u280"].prefill_s / sims["v100s"].prefill_s,
        ),
    ]
    return checks


@runner("glitches")
def fig9_prefetch() -> list[Check]:
    """Fig. 9: decode speedup of prefetch ratio M over M = 1 on U280."""
    model, devs = _setup()
    fm = devs["u280"][2]
    if not isinstance(fm, FpgaModel):
        raise TypeError("u280 must use the FPGA cost model")
    checks = []
    sweep: dict[int, dict[int, float]] = {}
    for seq in (128, 1024):
        base = fm.with_prefetch(1).decode_step(model, 1, seq).seconds
        sweep[seq] = {
            m: base / fm.with_prefetch(m).decode_step(model, 1, seq).seconds for m in FIG9_RATIOS
        }
        layers = {}
        g = decode_graph(model, 1, seq, fm.precision)
        for layer in ("q_proj", "up_proj"):
            t1 = fm.with_prefetch(1).op_seconds(g)[layer]
            layers[layer] = {m: t1 / fm.with_prefetch(m).op_seconds(g)[layer] for m in FIG9_RATIOS}
        checks.append(
            _check(
                f"glitches.fig9.speedup_seq{seq}",
                sweep[seq][4],
                f"decode step with {seq} cached tokens; {_CAL_FPGA}",
                sweep=sweep[seq],
                layers=layers,
            )
        )
    totals = {m: sum(1 / sweep[s][m] for s in sweep) for m in FIG9_RATIOS}
    best = min(totals, key=lambda m: totals[m])
    per_seq = {s: max(sweep[s], key=lambda m: sweep[s][m]) for s in sweep}
    checks.append(
        _check(
            "glitches.fig9.best_ratio",
            float(best),
            "fastest M for both sequence lengths; the 72 KB per-channel buffer (assumed, "
            "not published) makes two prefetches stop fitting from M = 8 on",
            best_per_sequence=per_seq,
        )
    )
    return checks
