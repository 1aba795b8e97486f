"""Choices for model fields; values mirror the core enums in :mod:`simulations.core.spec`.

The core's enums are the source of truth; these add human labels for the admin and the
pages. ``tests/simulations/test_choices.py`` proves the value sets stay equal.
"""

from django.db import models


class DeviceKind(models.TextChoices):
    """What a device is; selects its cost model in the core."""

    GPU = "gpu", "GPU"
    FPGA = "fpga", "FPGA"
    NPU = "npu", "NPU"
    CPU = "cpu", "CPU"
    SOC = "soc", "SoC"
    MEMORY_ACCEL = "memory-accel", "Memory-side accelerator"


class MemoryKind(models.TextChoices):
    """Technology of a memory tier."""

    HBM = "hbm", "HBM"
    GDDR = "gddr", "GDDR"
    LPDDR = "lpddr", "LPDDR"
    DDR = "ddr", "DDR"
    SRAM = "sram", "SRAM"


class LinkKind(models.TextChoices):
    """Kind of interconnect."""

    PCIE = "pcie", "PCIe"
    NVLINK = "nvlink", "NVLink"
    C2C = "c2c", "Chip-to-chip"
    UNIFIED = "unified", "Unified (on-SoC shared memory)"
    INFINITY_FABRIC = "infinity-fabric", "AMD Infinity Fabric"
    INFINIBAND = "infiniband", "InfiniBand"
    ETHERNET = "ethernet", "Ethernet"
    ICI = "ici", "Google TPU ICI"


class FfnKind(models.TextChoices):
    """Feed-forward block shape."""

    GATED = "gated", "Gated (SwiGLU: gate, up, down)"
    PLAIN = "plain", "Plain (up, down)"


class LengthDistKind(models.TextChoices):
    """How token lengths are drawn (a workload's input/output lengths)."""

    FIXED = "fixed", "Fixed"
    UNIFORM = "uniform", "Uniform"
    LOGNORMAL = "lognormal", "Log-normal"
    TRACE = "trace", "From a trace"


class ArrivalKind(models.TextChoices):
    """Arrival process of a workload."""

    CLOSED = "closed", "Closed (all requests at t = 0)"
    POISSON = "poisson", "Poisson"
    TRACE = "trace", "Trace timestamps"


class TraceVisibility(models.TextChoices):
    """Who may see a trace and use it in scenarios, workloads, sweeps and plans.

    ``private``: its owner only (the default for uploads). ``shared``: every signed-in
    user; only its owner (or staff) changes or deletes it. ``public``: part of the shared
    catalog (built-in and example traces); only catalog editors publish or delete one.
    """

    PRIVATE = "private", "Private (only me)"
    SHARED = "shared", "Shared (every signed-in user)"
    PUBLIC = "public", "Public (built-in catalog)"


class ChunkStatus(models.TextChoices):
    """Lifecycle of a sweep's or a plan's chunk of configurations: queued → running → done
    (every configuration of it recorded)."""

    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"


class TraceParseStatus(models.TextChoices):
    """Parsing of an uploaded trace: small files are parsed in the request (``done`` at
    once); larger ones are stored ``queued`` and parsed by a worker (``running`` →
    ``done`` / ``failed``)."""

    QUEUED = "queued", "Queued for parsing"
    RUNNING = "running", "Parsing"
    DONE = "done", "Parsed"
    FAILED = "failed", "Failed"


class RunStatus(models.TextChoices):
    """Lifecycle of a simulation run: queued → running → succeeded / failed / cancelled.

    ``succeeded``, ``failed`` and ``cancelled`` are final: a run never leaves them.
    """

    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


#: Statuses a run never leaves.
FINAL_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)
#: Statuses of a run that is still in progress (may change).
ACTIVE_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING)


class RunEventKind(models.TextChoices):
    """What happened to a run (the audit trail of its lifecycle)."""

    CREATED = "created", "Created and queued"
    CLAIMED = "claimed", "Claimed by a worker"
    REQUEUED = "requeued", "Re-queued by the reconciler"
    SUCCEEDED = "succeeded", "Result stored"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
