"""The workload GLITCHES measures its Table I on (LLaMA2-7B, batch 1, a 1536-token prefill
then 512 decode steps), shared by the fits of its GPU and FPGA stacks."""

from __future__ import annotations

from simulations.core.catalog import builtin_catalog
from simulations.core.devices.base import DeviceModel
from simulations.core.spec import ModelSpec

#: GLITCHES Table I workload: LLaMA2-7B, prefill 1536 tokens, then 512 decode steps.
PROMPT_TOKENS = 1536
DECODE_STEPS = 512


def llama2_7b() -> ModelSpec:
    """The model GLITCHES measures."""
    return builtin_catalog().model("llama2-7b")


def decode_average(dm: DeviceModel, model: ModelSpec) -> tuple[float, float, float, float]:
    """Mean (seconds, joules, FLOPs, bytes) per decode step over the 512 GLITCHES steps
    (cached context 1536 … 2047 tokens before each step)."""
    s = j = f = b = 0.0
    for i in range(DECODE_STEPS):
        c = dm.decode_step(model, 1, PROMPT_TOKENS + i)
        s += c.seconds
        j += c.joules
        f += c.flops
        b += c.bytes
    n = DECODE_STEPS
    return s / n, j / n, f / n, b / n
