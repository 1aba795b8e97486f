"""The H2M2 accelerator chip (Hwang et al., H2M2, §4.1 and Table 2) beside one memory.

Each memory side of H2M2 carries one accelerator chip of four cores; every core has a
128×128 weight-stationary matrix-matrix (MM) unit, a matrix-vector (MV) unit of 32 dot-product
lanes 128 wide, a 128-lane vector unit and a special-function unit (lookup table, 128
requests/cycle), shares a double-buffered scratchpad (2 × 16 MB), and runs at 1 GHz. Models
are INT8 (§5.1). This module turns one kernel of the generation phase into seconds on
``chips`` such chips beside a memory of a given bandwidth and latency:

* **GEMM** (a batched weight × activation product, M = batch rows): the weight matrix is cut
  into 128×128 tiles that are distributed over the cores. A weight-stationary array holds one
  tile while the M activation rows stream through it (M cycles) and shifts the next tile in
  behind it, one row per cycle (128 cycles, double-buffered as in the TPU v1 matrix unit,
  Jouppi et al., ISCA 2017, §2). A tile therefore occupies the array for max(M, 128) cycles;
  at small batches the array is limited by how fast weights can be shifted in, not by MACs.
* **GEMV** (attention's score and context products, or a linear at batch 1): the MV unit does
  32 dot products of 128 elements per cycle per core; every KV-cache element is used once per
  query head that reads it (GQA: ``group`` heads).
* **vector / SFU** work (softmax, layer norm, residual add, activation functions): 128
  elements per cycle per core.
* each kernel streams its operands through the double-buffered scratchpad, so its time is the
  larger of compute and memory time (``bytes / bandwidth``), plus one exposed memory access
  latency (Table 2) and, for GEMMs, the array's fill/drain (128 + 128 cycles).

This is the "peak-execution model with arithmetic intensity" of §4.3.2 made explicit per
unit; it replaces the paper's cycle-level simulator (which is not published).

Deviations: no DRAM timing (bank conflicts, refresh) — memories deliver their peak bandwidth
(Table 1); the scratchpad is assumed large enough for every tile of one kernel (2 × 16 MB per
core holds a 128-column slab of the largest GPT3-175B weight matrix: 49152 × 128 B = 6 MB).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from simulations.core.spec import DeviceSpec, MemoryKind, check_count, check_positive

FloatArray = npt.NDArray[Any]
ArrayLike = float | npt.NDArray[Any]

TABLE2 = "H2M2 paper, Table 2 (accelerator parameter configuration)"


@dataclass(frozen=True)
class AcceleratorConfig:
    """One H2M2 accelerator chip (Table 2). Every field is a paper fact; see ``SOURCES``."""

    cores: int = 4
    mm_rows: int = 128
    mm_cols: int = 128
    mv_lanes: int = 32
    mv_width: int = 128
    vector_width: int = 128
    sfu_per_cycle: int = 128
    clock_ghz: float = 1.0
    spm_bytes_per_core: float = 2 * 16e6
    hbm_latency_ns: float = 32.0
    lpddr_latency_ns: float = 45.0
    tlb_miss_ns: float = 300.0
    tlb_entries: int = 2048

    SOURCES = {
        "cores": "H2M2 §4.1: each accelerator chip is comprised of four cores",
        "mm_rows": f"{TABLE2}: MM unit systolic array 128 × 128, weight stationary",
        "mm_cols": f"{TABLE2}: MM unit systolic array 128 × 128, weight stationary",
        "mv_lanes": f"{TABLE2}: MV unit 32 × 1D array (128 × 1), dot product",
        "mv_width": f"{TABLE2}: MV unit 32 × 1D array (128 × 1), dot product",
        "vector_width": f"{TABLE2}: vector unit ADD/SUB/MUL/DIV 1D array (128 × 1)",
        "sfu_per_cycle": f"{TABLE2}: SFU lookup table 128 req/cycle",
        "clock_ghz": f"{TABLE2}: core frequency 1 GHz",
        "spm_bytes_per_core": f"{TABLE2}: on-chip SPM (16 MB × 2) per core",
        "hbm_latency_ns": f"{TABLE2}: HBM access latency 32 ns",
        "lpddr_latency_ns": f"{TABLE2}: LPDDR access latency 45 ns",
        "tlb_miss_ns": f"{TABLE2}: TLB miss latency 300 ns",
        "tlb_entries": "H2M2 §4.2.1: each accelerator has an MMU with 2048 TLB entries",
    }

    def __post_init__(self) -> None:
        for name in (
            "cores",
            "mm_rows",
            "mm_cols",
            "mv_lanes",
            "mv_width",
            "vector_width",
            "sfu_per_cycle",
            "tlb_entries",
        ):
            check_count(f"accelerator.{name}", getattr(self, name), maximum=10**6)
        for name in (
            "clock_ghz",
            "spm_bytes_per_core",
            "hbm_latency_ns",
            "lpddr_latency_ns",
            "tlb_miss_ns",
        ):
            check_positive(f"accelerator.{name}", getattr(self, name))

    @property
    def cycle_s(self) -> float:
        """Seconds per core cycle."""
        return 1e-9 / self.clock_ghz

    @property
    def mm_peak_ops(self) -> float:
        """Peak INT8 operations per second of one chip's MM units (2 ops per MAC)."""
        return 2.0 * self.cores * self.mm_rows * self.mm_cols * self.clock_ghz * 1e9

    @property
    def mv_peak_ops(self) -> float:
        """Peak INT8 operations per second of one chip's MV units."""
        return 2.0 * self.cores * self.mv_lanes * self.mv_width * self.clock_ghz * 1e9

    @property
    def mm_weight_bytes_per_s(self) -> float:
        """Fastest rate one chip's MM units can take in INT8 weights (one tile row per cycle
        per core): the bound that makes small-batch GEMMs array-limited."""
        return self.cores * self.mm_cols * self.clock_ghz * 1e9

    def latency_s(self, kind: MemoryKind) -> float:
        """Exposed access latency of a memory technology (Table 2)."""
        ns = self.hbm_latency_ns if kind is MemoryKind.HBM else self.lpddr_latency_ns
        return ns * 1e-9


@dataclass(frozen=True)
class Side:
    """A memory with ``chips`` accelerator chips computing beside it.

    ``bw_gbps`` is shared by the chips; ``latency_s`` is exposed once per kernel.
    """

    kind: MemoryKind
    capacity_gb: float
    bw_gbps: float
    chips: int = 1
    accel: AcceleratorConfig = AcceleratorConfig()
    #: extra seconds exposed at the start of every kernel (on-demand page migration of a
    #: strict hierarchy, §2.3); 0 for memory the chips read directly
    fault_s: float = 0.0
    #: TLB-miss stall added to every page a kernel streams (memory abstraction, §4.2);
    #: 0 when translation is free (the paper's Oracle)
    tlb_miss_s: float = 0.0
    page_bytes: float = 2 * 2**20

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", MemoryKind(self.kind))
        check_positive("side.capacity_gb", self.capacity_gb)
        check_positive("side.bw_gbps", self.bw_gbps)
        check_count("side.chips", self.chips, maximum=1024)
        check_positive("side.fault_s", self.fault_s, allow_zero=True)
        check_positive("side.tlb_miss_s", self.tlb_miss_s, allow_zero=True)
        check_positive("side.page_bytes", self.page_bytes)

    @property
    def capacity_bytes(self) -> float:
        """Capacity in bytes."""
        return self.capacity_gb * 1e9

    @property
    def bw_bytes_per_s(self) -> float:
        """Peak bandwidth in bytes per second."""
        return self.bw_gbps * 1e9

    @property
    def latency_s(self) -> float:
        """Exposed per-kernel latency: one memory access (Table 2) plus any page fault."""
        return self.accel.latency_s(self.kind) + self.fault_s

    def mem_s(self, nbytes: FloatArray) -> FloatArray:
        """Seconds to stream ``nbytes``; with TLB misses, every page's miss stalls the stream
        of the core that touched it (a core streams 1/cores of the kernel's pages)."""
        t = nbytes / self.bw_bytes_per_s
        if self.tlb_miss_s > 0:
            pages = np.ceil(nbytes / self.page_bytes)
            t = t + np.ceil(pages / (self.accel.cores * self.chips)) * self.tlb_miss_s
        return np.asarray(t, dtype=np.float64)

    # --- kernel times (vectorised over numpy arrays of sizes) -----------------------------

    def gemm_s(
        self,
        m: int,
        k: ArrayLike,
        n: ArrayLike,
        *,
        act_bytes: float = 1.0,
        weight_bytes: float = 1.0,
    ) -> FloatArray:
        """Seconds for a GEMM of ``m`` activation rows, ``k`` inputs and ``n`` output columns
        on this side (0 where ``n`` is 0), its weights ``weight_bytes`` wide (1: INT8, §5.1).
        Batch 1 runs on the MV unit."""
        k_arr = np.asarray(k, dtype=np.float64)
        n_arr = np.asarray(n, dtype=np.float64)
        a = self.accel
        units = a.cores * self.chips
        if m == 1:
            dots = np.ceil(k_arr / a.mv_width) * n_arr
            cycles = np.ceil(dots / (a.mv_lanes * units))
        else:
            tiles = np.ceil(k_arr / a.mm_rows) * np.ceil(n_arr / a.mm_cols)
            # each resident tile sees all m rows stream through; the next tile's 128 weight
            # rows shift in meanwhile, so a tile holds the array for max(m, 128) cycles
            per_tile = max(m, a.mm_rows)
            cycles = np.ceil(tiles / units) * per_tile + a.mm_rows + a.mm_cols
        compute = cycles * a.cycle_s
        nbytes = weight_bytes * k_arr * n_arr + act_bytes * m * (k_arr + n_arr)
        mem = self.mem_s(nbytes)
        out = np.maximum(compute, mem) + self.latency_s
        return np.where(n_arr > 0, out, 0.0)

    def attention_s(
        self, heads: ArrayLike, kv_bytes: ArrayLike, kv_tokens: float, head_dim: int
    ) -> FloatArray:
        """Seconds for the fused attention kernel (q·Kᵀ, softmax, ·V) of ``heads`` query heads
        over ``kv_tokens`` cached tokens summed across the batch, reading ``kv_bytes``."""
        h = np.asarray(heads, dtype=np.float64)
        kv = np.asarray(kv_bytes, dtype=np.float64)
        a = self.accel
        units = a.cores * self.chips
        dots = 2.0 * h * kv_tokens * math.ceil(head_dim / a.mv_width)
        mv = np.ceil(dots / (a.mv_lanes * units)) * a.cycle_s
        # softmax: a max pass, an exp+sum pass through the SFU and a normalising pass
        sfu = 3.0 * h * kv_tokens / (a.sfu_per_cycle * units) * a.cycle_s
        mem = self.mem_s(kv)
        out = np.maximum(np.maximum(mv, sfu), mem) + self.latency_s
        return np.where(h > 0, out, 0.0)

    def vector_s(self, elements: ArrayLike, nbytes: ArrayLike, passes: float = 1.0) -> FloatArray:
        """Seconds for element-wise work (layer norm, residual, activation function)."""
        e = np.asarray(elements, dtype=np.float64)
        b = np.asarray(nbytes, dtype=np.float64)
        a = self.accel
        compute = passes * e / (a.vector_width * a.cores * self.chips) * a.cycle_s
        out = np.maximum(compute, b / self.bw_bytes_per_s) + self.latency_s
        return np.where(e > 0, out, 0.0)


def accelerator_of(device: DeviceSpec, base: AcceleratorConfig | None = None) -> AcceleratorConfig:
    """The chip beside ``device``'s memories: ``base`` (Table 2's by default) with the
    matrix-unit shape the record gives in ``params`` (``array_rows`` and ``array_cols``, both
    or neither)."""
    cfg = base or AcceleratorConfig()
    rows, cols = device.params.get("array_rows"), device.params.get("array_cols")
    if rows is not None and cols is not None:
        cfg = replace(cfg, mm_rows=int(rows), mm_cols=int(cols))
    return cfg
