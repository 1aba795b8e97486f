"""Memory energy per generated token (H2M2 §5.5): accesses per tier × energy per bit.

The paper's "static power model focuses solely on memory accesses, assuming equal energy
consumptions for read and write"; its HBM/LPDDR ratio comes from CXL-PNM [36], whose figures
the paper does not print. The per-bit energies below are published access energies (device
core + I/O) for the closest generations we could source:

* HBM: 3.97 pJ/bit — HBM2, O'Connor et al., "Fine-Grained DRAM: Energy-Efficient DRAM for
  Extreme Bandwidth Systems", MICRO 2017 (used for HBM3; deviation: one generation older).
* LPDDR: 14.0 pJ/bit — 32 Gb LPDDR4 (single-die package), H. Ha, "Understanding and
  Improving the Energy Efficiency of DRAM", Stanford PhD thesis 2018, DramDSE (used for
  LPDDR5X; deviation: two generations older, and a different methodology from the HBM figure).

Data crossing the interconnect is counted once as a read in its source memory and once as a
write in its destination (the evaluation's traffic already does so).
"""

from __future__ import annotations

HBM_PJ_PER_BIT = 3.97
LPDDR_PJ_PER_BIT = 14.0
SOURCES = {
    "HBM_PJ_PER_BIT": "O'Connor et al., Fine-Grained DRAM, MICRO 2017: HBM2 3.97 pJ/bit",
    "LPDDR_PJ_PER_BIT": "H. Ha, Stanford PhD thesis 2018 (DramDSE): 32Gb LPDDR4 SDP 14.0 pJ/bit",
}


def memory_energy_j(bytes_hbm: float, bytes_lpddr: float) -> float:
    """Joules of one iteration's memory accesses."""
    return 8e-12 * (bytes_hbm * HBM_PJ_PER_BIT + bytes_lpddr * LPDDR_PJ_PER_BIT)
