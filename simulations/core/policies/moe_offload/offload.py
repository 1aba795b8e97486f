"""The cost of one GPU whose cold experts live in host memory (:class:`OffloadedGpu`).

Per MoE layer and pass of ``T`` tokens the offloaded experts (the ``E − R`` least popular,
``R`` = ``resident_experts`` on the GPU) receive ``c = T·Σ q_i`` routed copies and touch
``D = Σ 1 − (1 − q_i)^T`` distinct experts (:func:`~simulations.core.graph.
offloaded_expert_load`). Two ways to run them:

* **host CPU** — the CPU reads the ``D`` touched experts from its DRAM and computes the
  ``c`` copies (``CpuModel.roofline_s``: Neo's bandwidth/compute roofline of the host), the
  copies' activations cross PCIe both ways: ``t_cpu = roofline(2·c·P, D·P·w) +
  2 × link(c·h·2)``;
* **stream** — the ``D`` experts' weights cross PCIe and the GPU computes them at its
  achieved rate: ``t_stream = link(D·P·w) + 2·c·P / rate``.

**Rule** (per layer and pass, option ``offload_mode`` ``auto``): the smaller of the two.
Decode steps (few tokens, few copies per expert) go to the CPU, whose DRAM outruns PCIe;
long prefills (many copies per expert) stream, where the CPU's FLOPs would bind. All MoE
layers of a model are alike, so one choice holds for every layer of a pass; the counts of
each choice are reported.

Deviations: no overlap of the host's work with the GPU's (the layer waits for the cold
experts; conservative — kTransformers overlaps them); expert weights on the host are the
GPU stack's format; streamed experts are not cached between passes; the CPU's energy is
charged at its model's active power into the GPU unit's energy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from simulations.core.devices.base import DeviceModel, PhaseCost, StreamFloor
from simulations.core.devices.cpu import CpuModel
from simulations.core.errors import SpecError
from simulations.core.graph import Precision, expert_params, offloaded_expert_load
from simulations.core.spec import LinkSpec, ModelSpec

#: Choices of the per-layer rule.
MODES = ("auto", "cpu", "stream")


def resident_model(model: ModelSpec, resident: int) -> ModelSpec:
    """``model`` as the GPU holds it: ``resident`` experts per MoE layer."""
    if model.moe is None:
        raise SpecError("model", f"{model.slug} is not a mixture of experts")
    if not 1 <= resident <= model.moe.n_experts:
        raise SpecError("options.gpu_experts", f"must lie in [1, {model.moe.n_experts}]")
    if resident == model.moe.n_experts:
        return model
    return replace(model, moe=replace(model.moe, resident_experts=resident))


def expert_weight_bytes(model: ModelSpec, prec: Precision) -> float:
    """Bytes per parameter of a routed expert: the stack's weight width, or the experts'
    published format when narrower (e.g. MXFP4)."""
    moe = model.moe
    assert moe is not None
    if moe.expert_weight_bits is None:
        return prec.w
    return min(prec.w, moe.expert_weight_bits / 8)


def cold_expert_bytes(model: ModelSpec, resident: int, prec: Precision) -> float:
    """Bytes of the experts not resident on the fast side (every MoE layer's
    ``n_experts - resident``)."""
    moe = model.moe
    assert moe is not None
    cold = moe.n_experts - resident
    return model.moe_layers * cold * expert_params(model) * expert_weight_bytes(model, prec)


class OffloadedGpu(DeviceModel):
    """A GPU cost model plus its offloaded experts on the host (see the module notes)."""

    def __init__(
        self,
        gpu: DeviceModel,
        cpu: CpuModel,
        link: LinkSpec,
        resident: int,
        mode: str = "auto",
    ) -> None:
        self.device = gpu.device
        self.runtime = gpu.runtime
        self.device_params = gpu.device_params
        if mode not in MODES:
            raise SpecError("options.offload_mode", f"must be one of {', '.join(MODES)}")
        self.gpu = gpu
        self.cpu = cpu
        self.link = link
        self.resident = resident
        self.mode = mode
        self.prec = Precision.of(gpu.runtime)
        rate = gpu.compute_rate_bound()
        if not rate:
            raise SpecError("devices", "the GPU's cost model gives no compute rate")
        self.gpu_rate = float(rate)
        self._memo: dict[tuple[ModelSpec, int], tuple[float, float, str]] = {}

    # --- the offloaded experts -------------------------------------------------------------

    def layer_offload(self, model: ModelSpec, tokens: int) -> tuple[float, float, str]:
        """(seconds, host CPU seconds, ``"cpu"`` or ``"stream"``) of one MoE layer's
        offloaded experts for a pass of ``tokens`` tokens, by the rule."""
        key = (model, tokens)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        moe = model.moe
        assert moe is not None
        load = offloaded_expert_load(replace(moe, resident_experts=self.resident), tokens)
        p = float(expert_params(model))
        ew = expert_weight_bytes(model, self.prec)
        act = load.routed * model.hidden_size * 2.0
        t_cpu = self.cpu.roofline_s(2.0 * load.routed * p, load.distinct * p * ew)
        cpu_total = t_cpu + 2 * self.link.transfer_s(act) if load.routed > 0 else 0.0
        stream = (
            self.link.transfer_s(load.distinct * p * ew) + 2.0 * load.routed * p / self.gpu_rate
            if load.routed > 0
            else 0.0
        )
        if self.mode == "cpu" or (self.mode == "auto" and cpu_total <= stream):
            out = (cpu_total, t_cpu, "cpu")
        else:
            out = (stream, 0.0, "stream")
        if len(self._memo) >= 65536:
            self._memo.clear()
        self._memo[key] = out
        return out

    def _with_offload(self, model: ModelSpec, c: PhaseCost, tokens: int) -> PhaseCost:
        seconds, host_s, _ = self.layer_offload(model, tokens)
        layers = model.moe_layers
        extra = layers * seconds
        joules = c.joules + extra * self.gpu.idle_power_w + layers * host_s * self.cpu.power_w
        return PhaseCost(c.seconds + extra, joules, c.flops, c.bytes)

    # --- DeviceModel -----------------------------------------------------------------------

    def _gpu_model(self, model: ModelSpec) -> ModelSpec:
        return resident_model(model, self.resident)

    def prefill(self, model: ModelSpec, seq_lens: Sequence[int]) -> PhaseCost:
        """The GPU's prefill of its resident part plus the offloaded experts' layers."""
        c = self.gpu.prefill(self._gpu_model(model), seq_lens)
        return self._with_offload(model, c, sum(seq_lens))

    def decode_step(self, model: ModelSpec, batch: int, kv_tokens: int) -> PhaseCost:
        """The GPU's decode step of its resident part plus the offloaded experts' layers."""
        c = self.gpu.decode_step(self._gpu_model(model), batch, kv_tokens)
        return self._with_offload(model, c, batch)

    def weights_bytes(self, model: ModelSpec) -> float:
        """The weights the GPU holds (resident experts only)."""
        return self.gpu.weights_bytes(self._gpu_model(model))

    def host_weights_bytes(self, model: ModelSpec) -> float:
        """The offloaded experts' bytes in host memory."""
        return cold_expert_bytes(model, self.resident, self.prec)

    def kv_bytes_per_token(self, model: ModelSpec) -> float:
        """The GPU keeps the whole KV cache."""
        return self.gpu.kv_bytes_per_token(model)

    @property
    def memory_capacity_bytes(self) -> float:
        """The GPU's memory."""
        return self.gpu.memory_capacity_bytes

    @property
    def idle_power_w(self) -> float:
        """The GPU's idle power (the host's is not counted while it waits)."""
        return self.gpu.idle_power_w

    def host_sampling_s(self, model: ModelSpec) -> float:
        """As the GPU's."""
        return self.gpu.host_sampling_s(model)

    def compute_rate_bound(self) -> float | None:
        """The GPU's rate (a bound: the offloaded work only adds time)."""
        return self.gpu.compute_rate_bound()

    def floor_power_w(self) -> float:
        """The GPU's floor."""
        return self.gpu.floor_power_w()

    def decode_stream_floor(self, model: ModelSpec) -> StreamFloor | None:
        """None: the host's share is not a weight stream of the GPU (safe, weaker)."""
        return None

    def report(self, model: ModelSpec, max_batch: int, prompt_tokens: int) -> dict[str, Any]:
        """What the result's ``expert_offload`` block shows for this GPU: the placement and
        the rule's choice (with its per-layer seconds) for a decode step of 1 and of
        ``max_batch`` sequences and a prefill of ``prompt_tokens`` tokens."""
        moe = model.moe
        assert moe is not None

        def choice(tokens: int) -> dict[str, Any]:
            seconds, _host_s, where = self.layer_offload(model, tokens)
            return {"tokens": tokens, "runs_on": where, "layer_ms": seconds * 1e3}

        return {
            "gpu_experts_per_layer": self.resident,
            "host_experts_per_layer": moe.n_experts - self.resident,
            "gpu_weights_gb": self.weights_bytes(model) / 1e9,
            "host_weights_gb": self.host_weights_bytes(model) / 1e9,
            "offload_mode": self.mode,
            "rule": "per MoE layer and pass: host CPU if its time (DRAM roofline + "
            "activations over the link) is at most streaming's (weights over the link + "
            "GPU GEMMs), else stream",
            "decode_batch_1": choice(1),
            "decode_max_batch": choice(max_batch),
            "prefill": choice(prompt_tokens),
            "link": self.link.slug or str(self.link.kind),
        }
