"""Frozen specifications the simulation core works on: hardware, software stacks, models,
workloads and systems.

Hardware specs hold datasheet facts only (units in the field names); software behaviour
(achieved fractions of peak, launch overheads, precisions) lives in :class:`RuntimeProfile`.
Every spec validates itself on construction and raises :class:`~.errors.SpecError` naming
the field, so nothing non-finite or non-positive reaches a cost model.

``sources`` maps a numeric field name to where the number comes from (datasheet, paper
table); it is carried along for display and never takes part in equality or hashing.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .errors import SpecError
from .provenance import CalibrationInfo, calibration_from_dict

# --- enumerations ----------------------------------------------------------------------------


class DeviceKind(StrEnum):
    """The built-in kinds of device; a kind selects its cost model (its device family) in
    :mod:`.devices`. A device family may register a kind of its own (a slug, see
    :func:`device_kind`): specs hold kinds as strings, the built-in ones as these members.
    """

    GPU = "gpu"
    FPGA = "fpga"
    NPU = "npu"
    CPU = "cpu"
    SOC = "soc"
    MEMORY_ACCEL = "memory-accel"


#: Kinds that are containers of other devices (a phone SoC): no cost model and no memory of
#: their own.
CONTAINER_KINDS = frozenset({DeviceKind.SOC})


class MemoryKind(StrEnum):
    """Technology of a memory tier."""

    HBM = "hbm"
    GDDR = "gddr"
    LPDDR = "lpddr"
    DDR = "ddr"
    SRAM = "sram"


class LinkKind(StrEnum):
    """Kind of interconnect between two places that hold data."""

    PCIE = "pcie"
    NVLINK = "nvlink"
    C2C = "c2c"
    UNIFIED = "unified"  # on-SoC shared memory: a "transfer" is a cache flush / map
    INFINITY_FABRIC = "infinity-fabric"  # AMD's GPU-to-GPU links (xGMI)
    INFINIBAND = "infiniband"
    ETHERNET = "ethernet"
    ICI = "ici"  # Google TPU inter-chip interconnect (chip-to-chip torus links)


class FfnKind(StrEnum):
    """Feed-forward block shape: gated (SwiGLU: gate, up, down) or plain (up, down)."""

    GATED = "gated"
    PLAIN = "plain"


# --- validation helpers ----------------------------------------------------------------------

#: Upper bound for any physical quantity a spec may hold; guards against absurd inputs
#: (1e15 is far above any real TFLOPS, GB/s, GB, W or USD figure).
MAX_QUANTITY = 1e15


def check_positive(path: str, value: float, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a float if it is finite, bounded and positive, else raise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(path, f"must be a number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v):
        raise SpecError(path, "must be finite (NaN and Infinity are rejected)")
    if v < 0 or (v == 0 and not allow_zero):
        raise SpecError(path, "must be positive" if not allow_zero else "must not be negative")
    if v > MAX_QUANTITY:
        raise SpecError(path, f"is absurdly large (> {MAX_QUANTITY:g})")
    return v


def check_fraction(path: str, value: float) -> float:
    """Return ``value`` if it lies in (0, 1], else raise."""
    v = check_positive(path, value)
    if v > 1.0:
        raise SpecError(path, "must be a fraction in (0, 1]")
    return v


def check_count(path: str, value: int, *, minimum: int = 1, maximum: int = 10**9) -> int:
    """Return ``value`` if it is an integer in [minimum, maximum], else raise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(path, f"must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise SpecError(path, f"must be at least {minimum}")
    if value > maximum:
        raise SpecError(path, f"must be at most {maximum}")
    return value


_KIND_RE = re.compile(r"^[a-z][a-z0-9-]{0,15}$")


def device_kind(value: Any, path: str = "kind") -> str:
    """``value`` as a device kind: the built-in :class:`DeviceKind` member, else the slug a
    device family registers (lower-case letters, digits and ``-``, at most 16 characters)."""
    if isinstance(value, DeviceKind):
        return value
    if not isinstance(value, str) or not _KIND_RE.match(value):
        raise SpecError(path, f"not a device kind: {value!r}")
    try:
        return DeviceKind(value)
    except ValueError:
        return value


class Params(Mapping[str, Any]):
    """A device's kind-specific parameters: an immutable, hashable mapping from a parameter
    name to a finite number or a tuple of them. Which names a kind accepts, their units and
    bounds are declared by its device family (:attr:`.devices.base.DeviceModel.params`)."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | None = None, *, path: str = "params") -> None:
        out: dict[str, Any] = {}
        for key, value in (items or {}).items():
            if not isinstance(key, str) or not key:
                raise SpecError(path, f"parameter names must be non-empty strings, got {key!r}")
            out[key] = _param_value(value, f"{path}.{key}")
        self._items = dict(sorted(out.items()))

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._items == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"Params({self._items!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Params, (self._items,))


def _param_value(value: Any, path: str) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_param_value(v, f"{path}[{i}]") for i, v in enumerate(value))
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(path, f"must be a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise SpecError(path, "must be finite (NaN and Infinity are rejected)")
    if abs(value) > MAX_QUANTITY:
        raise SpecError(path, f"is absurdly large (> {MAX_QUANTITY:g})")
    return value


def _check_optional_positive(obj: Any, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(obj, name)
        if value is not None:
            check_positive(f"{type(obj).__name__}.{name}", value)


# --- hardware --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemoryTier:
    """One memory tier attached to a device (its capacity and peak bandwidth)."""

    kind: MemoryKind
    capacity_gb: float
    bw_gbps: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", MemoryKind(self.kind))
        check_positive("memory.capacity_gb", self.capacity_gb)
        check_positive("memory.bw_gbps", self.bw_gbps)

    @property
    def capacity_bytes(self) -> float:
        """Capacity in bytes (GB = 1e9 bytes, as datasheets use)."""
        return self.capacity_gb * 1e9


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """An interconnect: transfer time = ``latency_us`` + bytes / ``bw_gbps``.

    ``bw_gbps`` is the bandwidth **per direction** one device has on the link (GB/s,
    1e9 bytes); ``latency_us`` the time of one hop before the first byte arrives (µs).
    A link of the catalog (``data/links/*.json``, a system's ``link`` option) has a
    ``slug`` and a ``name``; a device's own ``host_link`` / ``peer_link`` need neither.
    ``sources`` says where each number comes from (no part in equality).
    """

    kind: LinkKind
    bw_gbps: float
    latency_us: float = 0.0
    pcie_gen: int | None = None
    lanes: int | None = None
    slug: str = ""
    name: str = ""
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", LinkKind(self.kind))
        where = f"{self.slug}." if self.slug else "link."
        check_positive(f"{where}bw_gbps", self.bw_gbps)
        check_positive(f"{where}latency_us", self.latency_us, allow_zero=True)

    def transfer_s(self, nbytes: float) -> float:
        """Seconds to move ``nbytes`` over this link."""
        return self.latency_us * 1e-6 + nbytes / (self.bw_gbps * 1e9)


def unpublished_power_why(slug: str) -> str:
    """The refusal of a placement of ``slug`` whose catalog record has no ``tdp_w`` and
    which quotes none (one wording for scenarios, plans and the engine)."""
    return (
        f"{slug} has no published power (see its source); give the board power you "
        "measured or were quoted, in W"
    )


@dataclass(frozen=True)
class DeviceSpec:
    """Datasheet facts of one device (no software behaviour).

    Peak compute is dense (no sparsity). ``memory[0]`` is the device's primary (local)
    memory. ``kind`` selects the device family; ``params`` holds the facts only that family
    reads (an FPGA's design clock, an NPU's array shape, a CPU's cores), checked against the
    family's declaration when the catalog loads the record
    (:func:`simulations.core.devices.check_device`). ``parent`` names the SoC a component
    (GPU/NPU/CPU of a phone SoC) belongs to.

    ``tdp_w`` is ``None`` when the vendor publishes no power figure (Google's TPUs, AMD's
    Alveo V80): the catalog never invents one, so a scenario or plan placing such a device
    must quote the board power itself (a placement's ``tdp_w``, see
    :class:`DevicePlacement`), which replaces this ``None`` before any device model reads it.
    """

    slug: str
    name: str
    kind: str
    vendor: str
    memory: tuple[MemoryTier, ...]
    tdp_w: float | None
    idle_w: float
    price_usd: float | None = None
    fp16_tflops: float | None = None
    bf16_tflops: float | None = None
    fp8_tflops: float | None = None
    int8_tops: float | None = None
    int4_tops: float | None = None
    fp32_tflops: float | None = None
    typical_w: float | None = None
    host_link: LinkSpec | None = None
    peer_link: LinkSpec | None = None
    parent: str | None = None
    params: Mapping[str, Any] = field(default_factory=Params)
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not self.slug:
            raise SpecError("slug", "must not be empty")
        object.__setattr__(self, "kind", device_kind(self.kind, f"{self.slug}.kind"))
        object.__setattr__(self, "memory", tuple(self.memory))
        if not isinstance(self.params, Params):
            if not isinstance(self.params, Mapping):
                raise SpecError(f"{self.slug}.params", "must be a mapping")
            object.__setattr__(self, "params", Params(self.params, path=f"{self.slug}.params"))
        if not self.memory and self.kind not in CONTAINER_KINDS:
            raise SpecError(f"{self.slug}.memory", "a device needs at least one memory tier")
        # None = not published; the bound against idle power can only be checked once the
        # board power is known (here, or when a placement's quote fills it in).
        if self.tdp_w is not None:
            check_positive(f"{self.slug}.tdp_w", self.tdp_w)
        check_positive(f"{self.slug}.idle_w", self.idle_w, allow_zero=True)
        if self.tdp_w is not None and self.idle_w > self.tdp_w:
            raise SpecError(f"{self.slug}.idle_w", "must not exceed tdp_w")
        _check_optional_positive(
            self,
            (
                "price_usd",
                "fp16_tflops",
                "bf16_tflops",
                "fp8_tflops",
                "int8_tops",
                "int4_tops",
                "fp32_tflops",
                "typical_w",
            ),
        )

    @property
    def board_power_w(self) -> float:
        """``tdp_w`` for the models that compute energy from it (read on first use, so a
        roofline needs none). A placement fills in an unpublished figure from its quote
        (the scenario and plan parsers refuse a placement with neither); an energy figure
        asked of a record without power (e.g. a roofline point of such a catalog device)
        is refused by name rather than failing as arithmetic on ``None``."""
        if self.tdp_w is None:
            raise SpecError(f"{self.slug}.tdp_w", unpublished_power_why(self.slug))
        return float(self.tdp_w)

    @property
    def primary_memory(self) -> MemoryTier:
        """The device's local memory (weights and KV cache live here by default)."""
        return self.memory[0]

    @property
    def memory_capacity_bytes(self) -> float:
        """Capacity of the primary memory tier in bytes."""
        return self.primary_memory.capacity_bytes

    @property
    def mem_bw_gbps(self) -> float:
        """Peak bandwidth of the primary memory tier in GB/s."""
        return self.primary_memory.bw_gbps

    def peak_ops_per_s(self, act_bits: int, weight_bits: int, *, fp8: bool = False) -> float:
        """Peak dense operations per second for a precision pair (FLOP/s or OP/s).

        ``fp8``: 8-bit operands are FP8 floats and run on the FP8 tensor path
        (``fp8_tflops``; SpecError naming it on a device without one). Otherwise integer
        paths are used when both operands are integers of that width or narrower (W4A8 runs
        on INT8 units), else the FP16/BF16 tensor path (weight-only quantisation, W4A16,
        computes in FP16 after dequantising).
        """
        if fp8:
            if self.fp8_tflops is None:
                raise SpecError(
                    f"{self.slug}.fp8_tflops",
                    f"{self.name} has no FP8 tensor path; run an FP16/BF16 or integer profile",
                )
            return self.fp8_tflops * 1e12
        if act_bits <= 8 and weight_bits <= 8 and self.int8_tops is not None:
            if act_bits <= 4 and self.int4_tops is not None:
                return self.int4_tops * 1e12
            return self.int8_tops * 1e12
        peak = self.fp16_tflops or self.bf16_tflops or self.fp32_tflops
        if peak is None:
            raise SpecError(f"{self.slug}.fp16_tflops", "no peak compute for this precision")
        return peak * 1e12


# --- software stacks -------------------------------------------------------------------------


@dataclass(frozen=True)
class RuntimeProfile:
    """Behaviour of one software stack (e.g. HuggingFace eager FP16, FlightLLM W4A8).

    One profile is fitted across every device it is calibrated on at once (see
    ``simulations/core/calibration``); nothing here is specific to one (device, workload).
    ``params`` carries extra fitted parameters a device model documents (e.g. FPGA prefetch
    or power coefficients); unknown keys are rejected by the device model that reads them.
    ``calibration`` records what the profile was fitted on (devices, models, measurement
    sets, fit error; see :mod:`~.provenance`); like ``sources`` it takes no part in equality.
    ``fp8``: the stack's 8-bit weights, activations and KV cache are FP8 floats (E4M3) run
    on the device's FP8 tensor path, not integers.
    """

    slug: str
    name: str
    device_kind: str
    weight_bits: int
    act_bits: int
    kv_bits: int
    compute_eff: float
    bw_eff: float
    kernel_launch_us: float = 0.0
    kernels_per_layer: int = 0
    fp8: bool = False
    params: Mapping[str, float] = field(default_factory=dict, compare=False, hash=False)
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    calibration: CalibrationInfo = field(default_factory=CalibrationInfo, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "device_kind", device_kind(self.device_kind, f"{self.slug}.device_kind")
        )
        if not isinstance(self.calibration, CalibrationInfo):
            object.__setattr__(
                self,
                "calibration",
                calibration_from_dict(self.calibration, f"{self.slug}.calibration"),
            )
        for name in ("weight_bits", "act_bits", "kv_bits"):
            bits = getattr(self, name)
            if bits not in (2, 3, 4, 8, 16, 32):
                raise SpecError(f"{self.slug}.{name}", f"unknown precision: {bits} bits")
        if not isinstance(self.fp8, bool):
            raise SpecError(f"{self.slug}.fp8", "must be true or false")
        if self.fp8 and (self.weight_bits, self.act_bits) != (8, 8):
            raise SpecError(f"{self.slug}.fp8", "FP8 profiles run 8-bit weights and activations")
        check_fraction(f"{self.slug}.compute_eff", self.compute_eff)
        check_fraction(f"{self.slug}.bw_eff", self.bw_eff)
        check_positive(f"{self.slug}.kernel_launch_us", self.kernel_launch_us, allow_zero=True)
        check_count(f"{self.slug}.kernels_per_layer", self.kernels_per_layer, minimum=0)
        for key, value in self.params.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise SpecError(f"{self.slug}.params.{key}", "must be a number")
            if not math.isfinite(float(value)):
                raise SpecError(f"{self.slug}.params.{key}", "must be finite")

    def param(self, key: str, default: float | None = None) -> float:
        """A fitted extra parameter; raises SpecError naming it when absent and no default."""
        if key in self.params:
            return float(self.params[key])
        if default is None:
            raise SpecError(f"{self.slug}.params.{key}", "missing runtime parameter")
        return default


# --- models ----------------------------------------------------------------------------------


def _sub_spec(cls: type[Any], value: Any, path: str) -> Any:
    """``value`` as a ``cls`` sub-spec: the dataclass itself, or a mapping of its fields
    (catalog records and stored JSON), SpecError naming ``path`` otherwise."""
    if value is None or isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise SpecError(path, "must be an object")
    known = {f for f in cls.__dataclass_fields__} - {"where"}
    unknown = sorted(set(value) - known)
    if unknown:
        raise SpecError(f"{path}.{unknown[0]}", "unknown field")
    try:
        return cls(**dict(value), where=path) if "where" in known else cls(**dict(value))
    except TypeError as exc:
        raise SpecError(path, str(exc)) from exc


@dataclass(frozen=True)
class MoeSpec:
    """Mixture-of-experts feed-forward shapes (Mixtral, DeepSeek-V3, Qwen3-MoE, gpt-oss).

    Every layer after the first ``first_dense_layers`` (which keep the dense
    ``ModelSpec.ffn_size`` FFN, DeepSeek-V3's ``first_k_dense_replace``) replaces its FFN by a
    router (a ``hidden × n_experts`` GEMM), ``n_experts`` routed experts of width
    ``expert_ffn_size`` of which each token uses ``experts_per_token`` (top-k), and
    ``n_shared_experts`` shared experts of width ``shared_ffn_size`` every token uses.
    Experts have the model's FFN kind (gated: gate, up, down).

    ``expert_weight_bits``: the format the routed experts' weights are *published* in when it
    differs from the rest of the model (gpt-oss: MXFP4, 4-bit elements plus one 8-bit scale
    per 32 = 4.25 bits per parameter); a stack whose weight precision is wider stores the
    experts at this width, a narrower one at its own. ``None``: the stack's precision.
    ``where`` is the path SpecErrors name (not a shape).
    """

    n_experts: int
    experts_per_token: int
    expert_ffn_size: int
    n_shared_experts: int = 0
    shared_ffn_size: int = 0
    first_dense_layers: int = 0
    expert_weight_bits: float | None = None
    #: Routing and layout assumptions a system sets (not published shapes): the Zipf
    #: exponent of expert popularity (0 = uniform routing, :func:`~.graph.expert_inclusion`),
    #: the devices the experts are spread over (``expert_parallel``, each holding
    #: ``n_experts / expert_parallel``) and the attention groups whose tokens one device's
    #: experts receive (``token_groups``, data-parallel attention under expert parallelism).
    routing_zipf: float = 0.0
    expert_parallel: int = 1
    token_groups: int = 1
    #: Experts of each MoE layer a device keeps (the most popular; 0 = all): the rest live
    #: elsewhere (host memory under expert offloading) and their work is costed there.
    resident_experts: int = 0
    where: str = field(default="moe", compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        w = self.where
        check_count(f"{w}.n_experts", self.n_experts, minimum=2, maximum=4096)
        check_count(f"{w}.experts_per_token", self.experts_per_token, maximum=self.n_experts)
        check_count(f"{w}.expert_ffn_size", self.expert_ffn_size, maximum=10**7)
        check_count(f"{w}.n_shared_experts", self.n_shared_experts, minimum=0, maximum=64)
        check_count(f"{w}.shared_ffn_size", self.shared_ffn_size, minimum=0, maximum=10**7)
        if self.n_shared_experts and not self.shared_ffn_size:
            object.__setattr__(self, "shared_ffn_size", self.expert_ffn_size)
        check_count(f"{w}.first_dense_layers", self.first_dense_layers, minimum=0, maximum=10**6)
        if self.expert_weight_bits is not None:
            bits = check_positive(f"{w}.expert_weight_bits", self.expert_weight_bits)
            if bits > 32:
                raise SpecError(f"{w}.expert_weight_bits", "must be at most 32")
            object.__setattr__(self, "expert_weight_bits", bits)
        if isinstance(self.routing_zipf, bool) or not isinstance(self.routing_zipf, int | float):
            raise SpecError(f"{w}.routing_zipf", "must be a number")
        if not (math.isfinite(self.routing_zipf) and 0.0 <= self.routing_zipf <= 10.0):
            raise SpecError(f"{w}.routing_zipf", "must lie in [0, 10]")
        object.__setattr__(self, "routing_zipf", float(self.routing_zipf))
        check_count(f"{w}.expert_parallel", self.expert_parallel, maximum=self.n_experts)
        if self.n_experts % self.expert_parallel:
            raise SpecError(
                f"{w}.expert_parallel",
                f"{self.n_experts} experts do not spread evenly over "
                f"{self.expert_parallel} devices",
            )
        check_count(f"{w}.token_groups", self.token_groups, maximum=4096)
        check_count(
            f"{w}.resident_experts", self.resident_experts, minimum=0, maximum=self.n_experts
        )
        if self.resident_experts and self.expert_parallel > 1:
            raise SpecError(f"{w}.resident_experts", "is modelled without expert parallelism")

    @property
    def held_experts(self) -> int:
        """Routed experts one device stores (all of them without expert parallelism or
        offloading)."""
        if self.resident_experts:
            return self.resident_experts
        return self.n_experts // self.expert_parallel


def _moe_fields(moe: MoeSpec) -> dict[str, Any]:
    return {f: getattr(moe, f) for f in MoeSpec.__dataclass_fields__ if f != "where"}


def _replace(obj: Any, **changes: Any) -> Any:
    return dataclasses.replace(obj, **changes)


@dataclass(frozen=True)
class MlaSpec:
    """DeepSeek's multi-head latent attention (DeepSeek-V2 §2.1, V3 §2.1.1).

    Queries go through a low-rank ``q_lora_rank`` bottleneck (0: a plain ``hidden → heads ×
    (nope + rope)`` projection); keys and values share one compressed latent of
    ``kv_lora_rank`` elements plus a decoupled RoPE key of ``qk_rope_head_dim`` elements per
    token and layer — the whole KV cache. Prefill up-projects the latent to per-head keys
    (``qk_nope_head_dim`` + rope) and values (``v_head_dim``); decode absorbs the up-projections
    into the query and output sides and attends over the latent directly (one KV "head" of
    ``kv_lora_rank + qk_rope_head_dim``), as FlashMLA / vLLM's MLA backend do.
    """

    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int = 0
    where: str = field(default="mla", compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        w = self.where
        for name in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            check_count(f"{w}.{name}", getattr(self, name), maximum=10**6)
        check_count(f"{w}.q_lora_rank", self.q_lora_rank, minimum=0, maximum=10**6)

    @property
    def kv_elems_per_token_layer(self) -> int:
        """Cached elements per token and layer: the latent plus the rope key."""
        return self.kv_lora_rank + self.qk_rope_head_dim


@dataclass(frozen=True)
class SlidingWindowSpec:
    """Layers that attend to a window of the last ``window_tokens`` positions only (gpt-oss
    alternates them with full-attention layers, with learned attention sinks); ``layers`` of
    the model's layers are windowed."""

    window_tokens: int
    layers: int
    where: str = field(default="sliding_window", compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        check_count(f"{self.where}.window_tokens", self.window_tokens, maximum=10**7)
        check_count(f"{self.where}.layers", self.layers, maximum=10**6)


#: The optional architecture blocks of a :class:`ModelSpec` (stored together as one JSON
#: document by the database catalog).
ARCHITECTURE_BLOCKS = ("moe", "mla", "sliding_window")


@dataclass(frozen=True)
class ModelSpec:
    """Shapes of a decoder-only LLM (MHA when ``n_kv_heads == n_heads``, else GQA/MQA).

    Optional architecture blocks: ``moe`` (mixture-of-experts FFN, :class:`MoeSpec`),
    ``mla`` (multi-head latent attention, :class:`MlaSpec`; ``n_kv_heads`` then equals
    ``n_heads`` and ``head_dim`` is the per-head query/key width ``nope + rope``) and
    ``sliding_window`` (:class:`SlidingWindowSpec`). Each may be given as its dataclass or
    as a mapping of its fields (catalog records).
    """

    slug: str
    name: str
    n_layers: int
    hidden_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn_size: int
    ffn_kind: FfnKind
    vocab_size: int
    tied_embeddings: bool = False
    max_context: int = 4096
    moe: MoeSpec | None = None
    mla: MlaSpec | None = None
    sliding_window: SlidingWindowSpec | None = None
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ffn_kind", FfnKind(self.ffn_kind))
        for name, cls in (
            ("moe", MoeSpec),
            ("mla", MlaSpec),
            ("sliding_window", SlidingWindowSpec),
        ):
            path = f"{self.slug}.{name}"
            object.__setattr__(self, name, _sub_spec(cls, getattr(self, name), path))
        for name in (
            "n_layers",
            "hidden_size",
            "n_heads",
            "n_kv_heads",
            "head_dim",
            "ffn_size",
            "vocab_size",
            "max_context",
        ):
            check_count(f"{self.slug}.{name}", getattr(self, name), maximum=10**7)
        if self.n_heads % self.n_kv_heads:
            raise SpecError(f"{self.slug}.n_kv_heads", "must divide n_heads")
        if self.moe is not None and self.moe.first_dense_layers >= self.n_layers:
            raise SpecError(
                f"{self.slug}.moe.first_dense_layers", "must leave at least one MoE layer"
            )
        if self.sliding_window is not None and self.sliding_window.layers > self.n_layers:
            raise SpecError(f"{self.slug}.sliding_window.layers", "must not exceed n_layers")
        if self.mla is not None:
            mla = self.mla
            if self.head_dim != mla.qk_nope_head_dim + mla.qk_rope_head_dim:
                raise SpecError(
                    f"{self.slug}.head_dim", "must be mla.qk_nope_head_dim + mla.qk_rope_head_dim"
                )

    @property
    def gqa_group(self) -> int:
        """Query heads per KV head (1 for MHA)."""
        return self.n_heads // self.n_kv_heads

    @property
    def moe_layers(self) -> int:
        """Layers whose FFN is a mixture of experts (0 for a dense model)."""
        return 0 if self.moe is None else self.n_layers - self.moe.first_dense_layers

    @property
    def dense_ffn_layers(self) -> int:
        """Layers with the dense ``ffn_size`` FFN."""
        return self.n_layers - self.moe_layers

    def with_routing_zipf(self, zipf_s: float, path: str = "options.moe_routing_zipf") -> ModelSpec:
        """This model with its experts' popularity skewed by ``zipf_s`` (0: uniform, the
        model itself); SpecError naming ``path`` for a dense model or a bad exponent."""
        if not zipf_s:
            return self
        if self.moe is None:
            raise SpecError(path, f"{self.slug} is not a mixture of experts")
        try:
            moe = MoeSpec(**{**_moe_fields(self.moe), "routing_zipf": zipf_s})
        except SpecError as exc:
            raise SpecError(path, exc.message) from exc
        return _replace(self, moe=moe)

    def architecture(self) -> dict[str, dict[str, Any]]:
        """The ``moe``, ``mla`` and ``sliding_window`` blocks as a JSON document (each
        block's fields that differ from their defaults; empty for a dense GQA model):
        ``ModelSpec(**plain fields, **architecture())`` gives this spec back."""
        out: dict[str, dict[str, Any]] = {}
        for name in ARCHITECTURE_BLOCKS:
            block = getattr(self, name)
            if block is None:
                continue
            doc: dict[str, Any] = {}
            for f in dataclasses.fields(block):
                value = getattr(block, f.name)
                if f.name == "where" or (
                    f.default is not dataclasses.MISSING and value == f.default
                ):
                    continue
                doc[f.name] = value
            out[name] = doc
        return out

    def kv_bytes_per_token(self, kv_bits: int) -> float:
        """Exact KV-cache bytes one token occupies: 2 × layers × KV heads × head dim × bytes;
        under MLA layers × (``kv_lora_rank`` + ``qk_rope_head_dim``) × bytes (the latent and
        the rope key are the whole cache)."""
        if self.mla is not None:
            return self.n_layers * self.mla.kv_elems_per_token_layer * kv_bits / 8
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * kv_bits / 8


# --- workloads -------------------------------------------------------------------------------


class LengthDistKind(StrEnum):
    """How token lengths are drawn."""

    FIXED = "fixed"
    UNIFORM = "uniform"
    LOGNORMAL = "lognormal"
    TRACE = "trace"


@dataclass(frozen=True, slots=True)
class LengthDist:
    """A token-length distribution.

    fixed: ``value``; uniform: integers in [``low``, ``high``]; lognormal: ``median`` and
    ``sigma`` (of log-length), clipped to [``low``, ``high``]; trace: taken from the trace.
    """

    kind: LengthDistKind
    value: int | None = None
    low: int | None = None
    high: int | None = None
    median: float | None = None
    sigma: float | None = None


class ArrivalKind(StrEnum):
    """Arrival process."""

    CLOSED = "closed"  # every request is present at t = 0 (offline / saturated throughput)
    POISSON = "poisson"
    TRACE = "trace"


@dataclass(frozen=True, slots=True)
class ArrivalSpec:
    """Arrival process: closed, Poisson at ``rate_per_s``, or a trace's timestamps scaled by
    ``time_scale`` (2.0 = twice as slow)."""

    kind: ArrivalKind
    rate_per_s: float | None = None
    time_scale: float = 1.0


@dataclass(frozen=True)
class TraceData:
    """Rows of an Azure-format trace: arrival offsets (s from the first row) and lengths."""

    arrival_s: tuple[float, ...]
    input_tokens: tuple[int, ...]
    output_tokens: tuple[int, ...]
    name: str = ""


@dataclass(frozen=True, slots=True)
class SharedPrefixSpec:
    """A system prompt of ``tokens`` tokens at the start of the prompts of a ``fraction`` of
    the requests (drawn per request from the workload's seed); a serving stack with prefix
    caching prefills it once and shares its KV blocks."""

    tokens: int
    fraction: float

    def __post_init__(self) -> None:
        check_count("workload.shared_prefix.tokens", self.tokens)
        if not (0.0 <= self.fraction <= 1.0):
            raise SpecError("workload.shared_prefix.fraction", "must lie in [0, 1]")


@dataclass(frozen=True)
class WorkloadSpec:
    """A workload: how many requests, their lengths and arrivals, the seed, and an optional
    shared prefix."""

    requests: int
    input_tokens: LengthDist
    output_tokens: LengthDist
    arrival: ArrivalSpec
    seed: int = 0
    trace: TraceData | None = field(default=None, compare=False)
    shared_prefix: SharedPrefixSpec | None = None


# --- systems and scenarios -------------------------------------------------------------------


#: Where a placement's price per device comes from (the result's ``price_source``).
PRICE_FROM_SCENARIO = "scenario"
PRICE_FROM_CATALOG = "catalog"
#: Where a placement's power per device comes from (the result's ``power_source``, given
#: only for a quoted power: the catalog's figure is the default and adds no key).
POWER_FROM_SCENARIO = "scenario"


@dataclass(frozen=True)
class DevicePlacement:
    """``count`` identical devices in a system, with a policy role and a software stack.

    ``quoted_price_usd`` is the scenario's ``price_usd`` for this entry — the user's quote
    per device, which overrides the catalog's ``price_usd`` (e.g. for devices the catalog
    has no price for). Every capex figure reads :attr:`unit_price_usd`, never the catalog
    price directly.

    ``quoted_tdp_w`` is the scenario's ``tdp_w`` for this entry — the board power per device
    the user measured or was quoted, for devices whose vendor publishes none (catalog
    ``tdp_w`` ``None``) or to override the catalog's. Unlike a price, power feeds the device
    models, so the quote is folded into :attr:`device` itself (a copy of the catalog record
    with ``tdp_w`` replaced): every model reading ``device.tdp_w`` sees the one effective
    figure. A placement with neither a catalog figure nor a quote is refused here.
    """

    device: DeviceSpec
    count: int
    runtime: RuntimeProfile
    role: str = ""
    quoted_price_usd: float | None = None
    quoted_tdp_w: float | None = None

    def __post_init__(self) -> None:
        if self.quoted_price_usd is not None:
            check_positive(f"{self.device.slug}.price_usd", self.quoted_price_usd)
        if self.quoted_tdp_w is not None:
            quote = check_positive(f"{self.device.slug}.tdp_w", self.quoted_tdp_w)
            if self.device.idle_w > quote:
                raise SpecError(
                    f"{self.device.slug}.tdp_w",
                    f"the quoted power {quote:g} W is below the device's idle power "
                    f"{self.device.idle_w:g} W",
                )
            if self.device.tdp_w != quote:
                object.__setattr__(self, "device", dataclasses.replace(self.device, tdp_w=quote))
        elif self.device.tdp_w is None:
            raise SpecError(f"{self.device.slug}.tdp_w", unpublished_power_why(self.device.slug))

    @property
    def unit_price_usd(self) -> float | None:
        """Price of one device: the scenario's quote if given, else the catalog's (``None``
        when neither exists)."""
        if self.quoted_price_usd is not None:
            return float(self.quoted_price_usd)
        return None if self.device.price_usd is None else float(self.device.price_usd)

    @property
    def price_source(self) -> str | None:
        """``"scenario"`` (the quote), ``"catalog"`` or ``None`` (no price known)."""
        if self.quoted_price_usd is not None:
            return PRICE_FROM_SCENARIO
        return PRICE_FROM_CATALOG if self.device.price_usd is not None else None

    def price_fields(self) -> dict[str, Any]:
        """The ``price_usd`` (per device) and ``price_source`` keys of a result's device
        entry, plus ``tdp_w`` and ``power_source`` (``"scenario"``) when the placement
        quotes its power — absent otherwise, so results of catalog-powered systems keep
        their shape."""
        fields: dict[str, Any] = {
            "price_usd": self.unit_price_usd,
            "price_source": self.price_source,
        }
        if self.quoted_tdp_w is not None:
            fields["tdp_w"] = float(self.quoted_tdp_w)
            fields["power_source"] = POWER_FROM_SCENARIO
        return fields


@dataclass(frozen=True)
class SystemSpec:
    """A candidate system: devices, the policy that runs them and its options.

    ``interconnect`` is the catalog link its ``link`` option names, resolved by the
    scenario parser (``None`` when the system names none).
    """

    name: str
    policy: str
    devices: tuple[DevicePlacement, ...]
    options: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    interconnect: LinkSpec | None = field(default=None, compare=False, hash=False)

    def by_role(self, role: str) -> tuple[DevicePlacement, ...]:
        """The placements that play ``role``."""
        return tuple(p for p in self.devices if p.role == role)

    @property
    def capex_usd(self) -> float | None:
        """Purchase cost of the system: every placement's :attr:`~DevicePlacement.
        unit_price_usd` × ``count`` — including devices a policy leaves idle (they were
        bought) — or ``None`` when some device has no price (a partial sum would look
        cheaper than the system is)."""
        total = 0.0
        for p in self.devices:
            price = p.unit_price_usd
            if price is None:
                return None
            total += price * p.count
        return total if self.devices else None

    def cost_fields(self, throughput_tok_s: float) -> dict[str, Any]:
        """The result's ``capex_usd``, ``cost_efficiency_tok_s_per_usd`` (throughput per
        dollar) and ``prices`` (per placement: device, role, count, ``price_usd`` per device
        and ``price_source``) — the one place every policy takes its cost figures from."""
        capex = self.capex_usd
        return {
            "capex_usd": capex,
            "cost_efficiency_tok_s_per_usd": throughput_tok_s / capex if capex else None,
            "prices": [
                {"device": p.device.slug, "role": p.role, "count": p.count, **p.price_fields()}
                for p in self.devices
            ],
        }


@dataclass(frozen=True, slots=True)
class SloSpec:
    """Latency and throughput targets; ``None`` means no target."""

    ttft_p90_ms: float | None = None
    tpot_p90_ms: float | None = None
    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    e2e_p90_s: float | None = None

    @property
    def has_targets(self) -> bool:
        """Whether any latency target is set."""
        return any(
            v is not None
            for v in (
                self.ttft_p90_ms,
                self.tpot_p90_ms,
                self.ttft_p99_ms,
                self.tpot_p99_ms,
                self.e2e_p90_s,
            )
        )


@dataclass(frozen=True, slots=True)
class CostSpec:
    """The running costs of a scenario or plan (its ``costs``), for the total cost of
    ownership (:mod:`~simulations.core.tco`, docs/architecture.md "TCO").

    ``electricity_usd_per_kwh`` and ``amortisation_years`` are required (no invented
    defaults); ``pue`` (facility power over IT power, 1 = no overhead) and ``utilisation``
    (fraction of the year the system serves at the simulated load) default to 1.
    Hosting is either ``hosting_usd_per_device_year`` or ``hosting_fraction_of_capex``
    (per year), never both. ``cloud_usd_per_device_hour`` maps a device slug to a rental
    price that replaces its capex, hosting and energy: a number, or a catalog cloud offer
    (:class:`CloudOffer`) by reference, kept in ``cloud_offer_refs``.
    """

    electricity_usd_per_kwh: float
    amortisation_years: float
    pue: float = 1.0
    utilisation: float = 1.0
    hosting_usd_per_device_year: float = 0.0
    hosting_fraction_of_capex: float = 0.0
    cloud_usd_per_device_hour: Mapping[str, float] = field(default_factory=dict)
    #: Device slug -> the catalog cloud offer its price was taken from (``slug``, or
    #: ``slug@low``/``slug@high`` of a range); devices priced by a number are absent.
    cloud_offer_refs: Mapping[str, str] = field(default_factory=dict)
    #: Device slug -> where its price comes from (offer, provider, date, source; or "given
    #: in costs"), shown with the TCO breakdown. No part in equality.
    cloud_price_sources: Mapping[str, Mapping[str, Any]] = field(
        default_factory=dict, compare=False, hash=False
    )

    def as_document(self) -> dict[str, Any]:
        """The ``costs`` object of a document (parsing it again gives an equal spec)."""
        doc: dict[str, Any] = {
            "electricity_usd_per_kwh": self.electricity_usd_per_kwh,
            "amortisation_years": self.amortisation_years,
            "pue": self.pue,
            "utilisation": self.utilisation,
        }
        if self.hosting_fraction_of_capex:
            doc["hosting_fraction_of_capex"] = self.hosting_fraction_of_capex
        else:
            doc["hosting_usd_per_device_year"] = self.hosting_usd_per_device_year
        if self.cloud_usd_per_device_hour:
            doc["cloud_usd_per_device_hour"] = {
                slug: self.cloud_offer_refs.get(slug, price)
                for slug, price in self.cloud_usd_per_device_hour.items()
            }
        return doc


@dataclass(frozen=True, slots=True)
class CloudOffer:
    """A published cloud rental price of one catalog device (``data/prices/*.json``).

    ``usd_per_device_hour_low``/``_high`` are equal when the source quotes one price and
    bound a range when it quotes one (a tier of providers); a ``costs`` object names a
    single-price offer by its slug and a range by ``slug@low`` or ``slug@high`` — the
    catalog never picks a point inside a range. ``as_of`` is the date the source gives
    its price (prices change; a stale one is visible), ``source`` where it comes from.
    """

    slug: str
    device: str
    provider: str
    usd_per_device_hour_low: float
    usd_per_device_hour_high: float
    as_of: str
    source: str
    notes: str = ""

    def __post_init__(self) -> None:
        check_positive(f"{self.slug}.usd_per_device_hour_low", self.usd_per_device_hour_low)
        check_positive(f"{self.slug}.usd_per_device_hour_high", self.usd_per_device_hour_high)
        if self.usd_per_device_hour_high < self.usd_per_device_hour_low:
            raise SpecError(
                f"{self.slug}.usd_per_device_hour_high", "must not be below the low price"
            )
        for name in ("slug", "device", "provider", "as_of", "source"):
            if not getattr(self, name):
                raise SpecError(f"{self.slug or 'cloud offer'}.{name}", "is required")

    @property
    def is_range(self) -> bool:
        """True when the source quotes a range, not one price."""
        return self.usd_per_device_hour_high != self.usd_per_device_hour_low

    def price(self, end: str | None) -> float:
        """The price a reference names: ``None`` for a single-price offer, ``"low"`` or
        ``"high"`` for an end of the range."""
        if end == "high":
            return self.usd_per_device_hour_high
        return self.usd_per_device_hour_low

    def as_document(self) -> dict[str, Any]:
        """The offer as the API and pages show it."""
        return {
            "slug": self.slug,
            "device": self.device,
            "provider": self.provider,
            "usd_per_device_hour_low": self.usd_per_device_hour_low,
            "usd_per_device_hour_high": self.usd_per_device_hour_high,
            "as_of": self.as_of,
            "source": self.source,
            "notes": self.notes,
        }


@dataclass(frozen=True, slots=True)
class CapacitySpec:
    """A scenario's ``capacity``: find each system's highest arrival rate within the SLO
    by bisection (:mod:`~simulations.core.capacity`) on ``requests`` requests per engine
    run, ``steps`` bisection steps."""

    requests: int = 200
    steps: int = 6


@dataclass(frozen=True)
class ScenarioSpec:
    """A validated scenario (docs/architecture.md) with every catalog slug resolved to a
    spec. ``costs`` and ``capacity`` are ``None`` when the document has none (the result
    then carries no TCO or capacity figures)."""

    name: str
    model: ModelSpec
    workload: WorkloadSpec
    systems: tuple[SystemSpec, ...]
    slo: SloSpec = field(default_factory=SloSpec)
    costs: CostSpec | None = None
    capacity: CapacitySpec | None = None
