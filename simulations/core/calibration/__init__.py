"""Calibration of runtime profiles against measurements: the generic fitting service and
the helpers every calibration shares.

Device specs are datasheet facts; what a software stack achieves on them (fractions of peak
compute and bandwidth, host overhead per kernel, power by activity, FPGA instruction
overhead) is fitted once per stack, across every device the stack was measured on. A fit to
a paper's published figures belongs to that paper and lives in its package
(``simulations/core/policies/<paper>/calibration/``); a serving stack fitted to measurement
sets (``data/measurements/``) is no paper's and lives here::

    python -m simulations.core.calibration.gpu_vllm                           # vLLM FP16
    python -m simulations.core.policies.glitches.calibration.gpu_fp16        # eager FP16
    python -m simulations.core.policies.glitches.calibration.fpga_flightllm  # FlightLLM
    python -m simulations.core.policies.heterollm.calibration.npu_w4a16      # QNN W4A16

:mod:`.fit` is the general service behind ``gpu_vllm`` and ``manage.py calibrate``: it fits
a GPU stack's kernel-class parameters to any measurement set (:mod:`.measurements`).

:mod:`.common` holds what the calibrations share: rounding, applying fitted values, the
command line whose ``--check`` compares the result with the catalog file and exits non-zero
on a mismatch (the tests run the same comparison). Fitted values are rounded to four
significant digits before they are stored or printed.
"""

from .common import round_sig

__all__ = ["round_sig"]
