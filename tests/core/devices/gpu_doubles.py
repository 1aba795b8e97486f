"""A kernel-class GPU stack with round numbers, for tests about the model's form (not the
catalog's fit)."""

from __future__ import annotations

#: Every kernel-class parameter plus the structure a fused stack sets.
KERNEL_PARAMS_DOUBLE: dict[str, float] = {
    "kernels_per_pass": 10.0,
    "fused_attention": 1.0,
    "gemm_n_half": 64.0,
    "norm_bw_eff": 0.4,
    "rope_bw_eff": 0.4,
    "act_bw_eff": 0.5,
    "copy_bw_eff": 0.8,
    "kernel_floor_us": 4.0,
    "attn_prefill_eff": 0.3,
    "attn_prefill_n_half": 512.0,
    "attn_decode_bw_eff": 0.8,
    "attn_decode_fixed_us": 10.0,
    "layer_fixed_us": 2.0,
    "host_step_us": 300.0,
    "host_step_per_seq_us": 50.0,
}
