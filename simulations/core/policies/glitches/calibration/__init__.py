"""GLITCHES' calibration: the runtime profiles fitted to its measurements.

* :mod:`.gpu_fp16` — ``hf-eager-fp16``, fitted to the Table I A100/V100S latencies and
  powers at once;
* :mod:`.fpga_flightllm` — ``flightllm-w4a8``, fitted to the U280 Table I latencies and two
  Fig. 9 speedups.

Every figure a parameter is fitted to is a calibration target in the reproduction, never a
prediction. The generic helpers (rounding, ``--check`` against the catalog) are
:mod:`simulations.core.calibration`.
"""
