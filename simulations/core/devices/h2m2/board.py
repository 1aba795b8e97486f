"""The H2M2 memory system (Table 1) and its variants (Table 4, §5.5), as two :class:`Side`s.

Constants here are the paper's own configuration (Table 1 follows NVIDIA's Grace Hopper). When
a scenario names catalog devices, their memory tiers and links replace these defaults.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from simulations.core.errors import SpecError
from simulations.core.spec import DevicePlacement, DeviceSpec, MemoryKind, check_positive

from .accel import AcceleratorConfig, Side, accelerator_of

TABLE1 = "H2M2 paper, Table 1 (following NVIDIA Grace Hopper [32])"

#: Table 1 of the paper; used when no catalog device is given.
HBM3_CAPACITY_GB = 96.0
HBM3_BW_GBPS = 3000.0
LPDDR5X_CAPACITY_GB = 512.0
LPDDR5X_BW_GBPS = 544.0
INTERCONNECT_GBPS = 960.0
SOURCES = {
    "HBM3_CAPACITY_GB": f"{TABLE1}: HBM3 96 GB",
    "HBM3_BW_GBPS": f"{TABLE1}: HBM3 3 TB/s",
    "LPDDR5X_CAPACITY_GB": f"{TABLE1}: LPDDR5X 512 GB",
    "LPDDR5X_BW_GBPS": f"{TABLE1}: LPDDR5X 544 GB/s",
    "INTERCONNECT_GBPS": f"{TABLE1}: interconnect between the two accelerators 960 GB/s",
}


@dataclass(frozen=True)
class H2M2Hardware:
    """An asymmetric memory: an HBM side and an LPDDR side, each with its accelerator chips,
    joined by an interconnect of ``link_gbps`` (both directions share it)."""

    hbm: Side
    lpddr: Side
    link_gbps: float = INTERCONNECT_GBPS

    def __post_init__(self) -> None:
        check_positive("hardware.link_gbps", self.link_gbps)

    @classmethod
    def table1(cls, accel: AcceleratorConfig | None = None) -> H2M2Hardware:
        """The paper's configuration (Tables 1 and 2)."""
        cfg = accel or AcceleratorConfig()
        return cls(
            Side(MemoryKind.HBM, HBM3_CAPACITY_GB, HBM3_BW_GBPS, 1, cfg),
            Side(MemoryKind.LPDDR, LPDDR5X_CAPACITY_GB, LPDDR5X_BW_GBPS, 1, cfg),
            INTERCONNECT_GBPS,
        )

    @classmethod
    def from_device(cls, device: DeviceSpec) -> H2M2Hardware:
        """An H2M2 board described as one catalog device with an HBM and an LPDDR tier."""
        return cls.from_devices([device])

    @classmethod
    def from_devices(cls, devices: Iterable[DeviceSpec]) -> H2M2Hardware:
        """Collect the HBM and LPDDR tiers (one chip beside each) and the link of ``devices``.

        A device may carry both tiers (one board) or one tier each (two records). The link is
        the first ``peer_link`` found, else Table 1's interconnect.
        """
        base = cls.table1()
        hbm: Side | None = None
        lpddr: Side | None = None
        link = None
        for dev in devices:
            accel = accelerator_of(dev, base.hbm.accel)
            for tier in dev.memory:
                side = Side(tier.kind, tier.capacity_gb, tier.bw_gbps, 1, accel)
                if tier.kind is MemoryKind.HBM and hbm is None:
                    hbm = side
                elif tier.kind is MemoryKind.LPDDR and lpddr is None:
                    lpddr = side
            if link is None and dev.peer_link is not None:
                link = dev.peer_link.bw_gbps
        if hbm is None:
            raise SpecError("devices", "an H2M2 system needs a device with an HBM memory tier")
        if lpddr is None:
            raise SpecError("devices", "an H2M2 system needs a device with an LPDDR memory tier")
        return cls(hbm, lpddr, link or INTERCONNECT_GBPS)

    @classmethod
    def from_placements(cls, placements: Iterable[DevicePlacement]) -> H2M2Hardware:
        """As :meth:`from_devices`; ``count`` multiplies the chips beside that device's tiers
        (Table 4's ``HBMChip-More``: two chips on the HBM side)."""
        placements = list(placements)
        hw = cls.from_devices(p.device for p in placements)
        hbm_chips = sum(
            p.count for p in placements if any(t.kind is MemoryKind.HBM for t in p.device.memory)
        )
        lpddr_chips = sum(
            p.count for p in placements if any(t.kind is MemoryKind.LPDDR for t in p.device.memory)
        )
        return cls(
            replace(hw.hbm, chips=max(1, hbm_chips)),
            replace(hw.lpddr, chips=max(1, lpddr_chips)),
            hw.link_gbps,
        )

    def variant(self, name: str) -> H2M2Hardware:
        """A Table 4 variant of this hardware (``Original`` returns it unchanged)."""
        h, lp = self.hbm, self.lpddr
        changes: dict[str, Any] = {
            "Original": {},
            "HBMcap-Less": {"hbm": replace(h, capacity_gb=h.capacity_gb * 0.5)},
            "HBMcap-More": {"hbm": replace(h, capacity_gb=h.capacity_gb * 2.0)},
            "HBMbw-Less": {"hbm": replace(h, bw_gbps=2250.0)},
            "HBMbw-More": {"hbm": replace(h, bw_gbps=4000.0)},
            "LPDDRbw-Less": {"lpddr": replace(lp, bw_gbps=408.0)},
            "LPDDRbw-More": {"lpddr": replace(lp, bw_gbps=680.0)},
            "HBMChip-More": {"hbm": replace(h, chips=h.chips * 2)},
            "LPDDRChip-More": {"lpddr": replace(lp, chips=lp.chips * 2)},
        }
        if name not in changes:
            raise SpecError("variant", f"unknown Table 4 variant {name!r}")
        return replace(self, **changes[name])

    # --- the homogeneous systems the paper compares against --------------------------------

    def lpddr_only(self) -> Side:
        """The baseline: LPDDR-only homogeneous memory (Fig. 4b) *with sublayer-granular
        mapping* (Fig. 5a). The text, read together:

        * §3.1: speedups are "normalized to the baseline: LPDDR-only homogeneous memory
          (Figure 4(b)) with sublayer-granular mapping (Figure 5(a))";
        * §3.1 on Fig. 5(a): under sublayer granularity each sublayer sits wholly on one side
          and "parallelization is not available and the accelerator cores are under-utilized";
        * §5.1 "Baseline": "All comparison configurations, including the baseline system
          configuration, consist of two accelerator chips that provide the same computational
          power"; §1: "with the same number of computation units".

        So the baseline has H2M2's two chips, but each sublayer runs wholly on one of them
        while the other waits on the dependency: every kernel sees one chip (group) beside
        the full 544 GB/s (Table 1). Whether the LPDDR is one module both chips share or one
        per chip does not matter here, as only one chip streams at a time. The other reading,
        both chips splitting every kernel (:meth:`lpddr_only_pooled`), is head-aware
        granularity on a homogeneous memory, which §3.1 introduces as the paper's own
        contribution over the baseline; it is kept for comparison only.

        Units: Table 1's GB are taken as 10^9 bytes (the paper does not say; its §4.2.1
        arithmetic, 156 MB = 0.16 % of 96 GB, holds in either unit)."""
        return replace(self.lpddr, chips=max(self.hbm.chips, self.lpddr.chips))

    def lpddr_only_pooled(self) -> Side:
        """Both chips beside the LPDDR splitting every kernel between them (not the paper's
        baseline, see :meth:`lpddr_only`; kept for comparison: it is what head-aware
        granularity would give on a homogeneous LPDDR)."""
        return replace(self.lpddr, chips=self.hbm.chips + self.lpddr.chips)

    def hbm_both_chips(self) -> Side:
        """Fig. 4(c)'s compute: both chips beside the HBM (strict hierarchy), splitting every
        kernel between them. The paper gives no mapping for the hierarchy, but §5.2.1 says a
        hierarchy whose footprint fits "become[s] equivalent to the multi-HBM memory without
        communication cost", and multi-HBM splits every kernel (see :meth:`multi_hbm`)."""
        return replace(self.hbm, chips=self.hbm.chips + self.lpddr.chips)

    def multi_hbm(self, devices: int) -> Side:
        """§5.5's 8-HBM: ``devices`` HBM stacks (capacity and bandwidth add up), the same two
        chips (§5.5: "the computational capability of both H2M2 and 8-HBM remains
        unchanged"), both busy on every kernel: multi-HBM is Fig. 4(a)'s "model parallelism
        across multiple GPUs" with "frequent synchronization among devices" (§2.3), whose
        cost §5.5 adds as communication measured on eight A100s; kernels split across the
        devices are what needs that synchronization."""
        return replace(
            self.hbm,
            capacity_gb=self.hbm.capacity_gb * devices,
            bw_gbps=self.hbm.bw_gbps * devices,
            chips=self.hbm.chips + self.lpddr.chips,
        )


TABLE4_VARIANTS = (
    "Original",
    "HBMcap-Less",
    "HBMcap-More",
    "HBMbw-Less",
    "HBMbw-More",
    "LPDDRbw-Less",
    "LPDDRbw-More",
    "HBMChip-More",
    "LPDDRChip-More",
)
