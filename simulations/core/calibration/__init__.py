"""Calibration of runtime profiles against published measurements.

Device specs are datasheet facts; what a software stack achieves on them (fractions of peak
compute and bandwidth, host overhead per kernel, power by activity, FPGA instruction
overhead) is fitted here, once per stack, across every device the stack was measured on.
Each module re-derives the fitted values of one profile in ``data/runtimes/`` from the
published measurements (in :mod:`simulations.core.reproduce.targets`, or measurement sets in
``data/measurements/``) and prints them with the residuals::

    python -m simulations.core.calibration.gpu_fp16        # HuggingFace eager FP16 (GPUs)
    python -m simulations.core.calibration.gpu_vllm        # vLLM-like FP16 (A100 kernels)
    python -m simulations.core.calibration.fpga_flightllm  # FlightLLM W4A8 (FPGAs)

:mod:`.fit` is the general service behind ``gpu_vllm`` and ``manage.py calibrate``: it fits
a GPU stack's kernel-class parameters to any measurement set (:mod:`.measurements`).

``--check`` compares the result with the catalog file and exits non-zero on a mismatch
(the tests run the same comparison). Fitted values are rounded to four significant digits
before they are stored or printed.
"""

from .common import round_sig

__all__ = ["round_sig"]
