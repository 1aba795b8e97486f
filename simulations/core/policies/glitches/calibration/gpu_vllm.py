"""Derive the vLLM-like FP16 GPU profile (``vllm-fp16``) from the eager FP16 fit.

None of the four papers publishes an absolute vLLM latency or power that a fit could use
(Neo reports only throughput ratios against its own GPU-only baseline), so this profile is
*derived*, not fitted:

- ``compute_eff`` and ``bw_eff``: those fitted for ``hf-eager-fp16`` (both stacks run the
  same cuBLAS GEMM/GEMV kernels on the same GPUs);
- power fractions: those fitted for ``hf-eager-fp16`` (same GPUs, same activity classes);
- ``kernel_launch_us`` = 0: vLLM replays decode steps as captured CUDA graphs, so the host
  issues no kernel one by one; prefill runs its ~10 fused kernels per layer, each far longer
  than a launch;
- fused attention (PagedAttention / FlashAttention), 10 kernels per layer (counted in
  ``data/runtimes/gpu.json``).

Run ``python -m simulations.core.policies.glitches.calibration.gpu_vllm`` (``--check``
compares with the file).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from simulations.core.calibration.common import calibration_main

from . import gpu_fp16

SLUG = "vllm-fp16"
FILENAME = "gpu.json"
CARRIED = ("compute_eff", "bw_eff", *gpu_fp16.POWER_KEYS)


def derived_values() -> dict[str, float]:
    """The derived values (what the catalog must hold)."""
    eager = gpu_fp16.fitted_values()
    out = {k: eager[k] for k in CARRIED}
    out["kernel_launch_us"] = 0.0
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Print the derived values; ``--check`` compares with the catalog."""
    return calibration_main(
        argv, doc=__doc__, slug=SLUG, filename=FILENAME, values=derived_values, verb="derived"
    )


if __name__ == "__main__":
    sys.exit(main())
