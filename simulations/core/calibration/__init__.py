"""Generic helpers for calibrating runtime profiles against published measurements.

Device specs are datasheet facts; what a software stack achieves on them (fractions of peak
compute and bandwidth, host overhead per kernel, power by activity, FPGA instruction
overhead) is fitted once per stack, across every device the stack was measured on. The
fits belong to the papers whose measurements they use and live in each paper's package
(``simulations/core/policies/<paper>/calibration/``), e.g.::

    python -m simulations.core.policies.glitches.calibration.gpu_fp16        # eager FP16
    python -m simulations.core.policies.glitches.calibration.gpu_vllm        # vLLM-like
    python -m simulations.core.policies.glitches.calibration.fpga_flightllm  # FlightLLM
    python -m simulations.core.policies.heterollm.calibration.npu_w4a16      # QNN W4A16

This package holds what they share (:mod:`.common`): rounding, applying fitted values, the
command line whose ``--check`` compares the result with the catalog file and exits non-zero
on a mismatch (the tests run the same comparison). Fitted values are rounded to four
significant digits before they are stored or printed.
"""

from .common import round_sig

__all__ = ["round_sig"]
