"""Catalog rows: devices (with their memory tiers), runtime profiles and LLM models.

Catalog rows hold datasheet facts (devices, memory tiers), fitted software behaviour
(runtime profiles) and model shapes, each number with its unit in ``help_text`` and its
origin in ``sources`` (field name → datasheet or paper table). Rows become core specs only in
:mod:`simulations.adapters`; writes go through :mod:`simulations.catalog.services`.

Database CheckConstraints back the core's positive/finite rules (:mod:`simulations.fields`).
"""

from __future__ import annotations

import math

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Mod
from django.db.models.lookups import Exact

from simulations.choices import (
    FfnKind,
    LinkKind,
    MemoryKind,
    TraceVisibility,
)
from simulations.core.devices import CONTAINER_KINDS
from simulations.core.errors import SpecError
from simulations.core.provenance import calibration_from_dict
from simulations.core.spec import ARCHITECTURE_BLOCKS
from simulations.device_families import device_kind_choices, params_errors
from simulations.fields import (
    MAX_MODEL_DIM,
    PRECISION_BITS,
    bounded,
    positive_float,
    positive_int,
    slug_validator,
    validate_finite,
    validate_strictly_positive,
)
from simulations.ownership import owner_field, visibility_constraint, visibility_field


class CatalogItem(models.Model):
    """Common fields of catalog rows: a slug scenarios refer to, a name, sources and notes."""

    slug = models.CharField(
        max_length=64,
        validators=[slug_validator],
        help_text="Identifier scenarios use (e.g. a100-80gb, llama2-7b).",
    )
    name = models.CharField(max_length=200, help_text="Display name.")
    sources = models.JSONField(
        default=dict,
        blank=True,
        help_text="Where each number comes from: field name → source text "
        "(datasheet, paper table or section).",
    )
    notes = models.TextField(blank=True, help_text="Free-text remarks (assumptions, caveats).")
    seed_values = models.JSONField(
        default=dict,
        blank=True,
        editable=False,
        help_text="What ``seed_catalog`` last wrote to this row (column → value; empty: not a "
        "built-in row). A reseed updates the row only while its values still equal these, so "
        "a staff edit is never overwritten.",
    )
    created_at = models.DateTimeField(auto_now_add=True, help_text="When the row was created.")
    updated_at = models.DateTimeField(auto_now=True, help_text="When the row last changed.")

    class Meta:
        abstract = True
        ordering = ("slug",)

    def __str__(self) -> str:
        return self.name or self.slug

    def clean(self) -> None:
        """Sources must map field names to non-empty text."""
        super().clean()
        if not isinstance(self.sources, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in self.sources.items()
        ):
            raise ValidationError({"sources": "Must map field names to non-empty source texts."})


# --- hardware ------------------------------------------------------------------------------

_LINK_FIELDS = ("bw_gbps", "latency_us", "pcie_gen", "lanes")


def _link_constraints(prefix: str) -> list[models.CheckConstraint]:
    """A link is either absent (kind empty, every field NULL) or has a kind and a bandwidth."""
    absent = Q(**{f"{prefix}_kind": ""}) & Q(
        **{f"{prefix}_{f}__isnull": True for f in _LINK_FIELDS}
    )
    present = ~Q(**{f"{prefix}_kind": ""}) & Q(**{f"{prefix}_bw_gbps__isnull": False})
    return [
        models.CheckConstraint(
            condition=absent | present, name=f"%(app_label)s_%(class)s_{prefix}_complete"
        ),
        bounded(f"{prefix}_bw_gbps"),
        bounded(f"{prefix}_latency_us", allow_zero=True),
        bounded(f"{prefix}_pcie_gen", minimum=1, maximum=10),
        bounded(f"{prefix}_lanes", minimum=1, maximum=256),
    ]


class Device(CatalogItem):
    """One device's datasheet facts (no software behaviour): compute, memory, links, power.

    Peak compute is dense (no sparsity). Memory tiers are :class:`MemoryTier` rows, the
    first (``order`` 0) being the device's local memory. A host link and a peer link are
    stored as ``host_link_*`` and ``peer_link_*`` columns (absent when the kind is empty).
    Kind-specific facts are ``params``, checked against what the kind's device family
    declares (:mod:`simulations.device_families`). ``parent`` is the SoC a component (a
    phone SoC's GPU, NPU or CPU) belongs to.
    Mirrors :class:`simulations.core.spec.DeviceSpec`.
    """

    # choices from the device-family registry (a callable: a new family, no migration)
    kind = models.CharField(
        max_length=16, choices=device_kind_choices, help_text="Device kind (its family)."
    )
    vendor = models.CharField(max_length=100, help_text="Manufacturer (e.g. NVIDIA, AMD Xilinx).")
    parent = models.ForeignKey(
        "self",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="components",
        help_text="The SoC this component belongs to (empty for stand-alone devices).",
    )
    # Peak dense compute per precision.
    fp16_tflops = positive_float("Peak dense FP16 tensor compute, TFLOP/s.")
    bf16_tflops = positive_float("Peak dense BF16 tensor compute, TFLOP/s.")
    fp8_tflops = positive_float("Peak dense FP8 tensor compute, TFLOP/s (empty: no FP8 path).")
    fp32_tflops = positive_float("Peak dense FP32 compute, TFLOP/s.")
    int8_tops = positive_float("Peak dense INT8 compute, TOP/s.")
    int4_tops = positive_float("Peak dense INT4 compute, TOP/s.")
    # Power and price.
    # Nullable: Google publishes no TDP for its TPUs nor AMD for the Alveo V80, and the
    # catalog never invents one; a scenario or plan placing such a device quotes it.
    tdp_w = positive_float(
        "Thermal design power (board/TDP limit), W; empty when the vendor publishes none; "
        "scenarios then must give tdp_w."
    )
    idle_w = positive_float(
        "Power drawn while idle, W; 0 if unknown (idle time then adds no energy, so energy "
        "figures are a lower bound).",
        null=False,
        allow_zero=True,
    )
    typical_w = positive_float("Typical power under load, W.")
    price_usd = positive_float("List price, US dollars.")
    # Host link (to the host CPU / system).
    host_link_kind = models.CharField(
        max_length=16,
        choices=LinkKind.choices,
        blank=True,
        help_text="Kind of link to the host (empty: none).",
    )
    host_link_bw_gbps = positive_float("Host link bandwidth per direction, GB/s.")
    host_link_latency_us = positive_float("Host link latency per transfer, µs.", allow_zero=True)
    host_link_pcie_gen = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(10)],
        help_text="PCIe generation of the host link (1–10; empty if not PCIe).",
    )
    host_link_lanes = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(256)],
        help_text="Lanes of the host link (count).",
    )
    # Peer link (device to device: NVLink, C2C, PCIe peer-to-peer).
    peer_link_kind = models.CharField(
        max_length=16,
        choices=LinkKind.choices,
        blank=True,
        help_text="Kind of device-to-device link (empty: none).",
    )
    peer_link_bw_gbps = positive_float("Peer link bandwidth per direction, GB/s.")
    peer_link_latency_us = positive_float("Peer link latency per transfer, µs.", allow_zero=True)
    peer_link_pcie_gen = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(10)],
        help_text="PCIe generation of the peer link (1–10; empty if not PCIe).",
    )
    peer_link_lanes = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(256)],
        help_text="Lanes of the peer link (count).",
    )
    # Kind-specific facts (an FPGA's clock, an NPU's array, a CPU's cores …): the device
    # family declares them, so a new family needs no column and no migration.
    params = models.JSONField(
        default=dict,
        blank=True,
        help_text="The kind-specific parameters the device's family declares: name → value "
        "(names, units and bounds: the family's schema, e.g. GET /api/devices/kinds/).",
    )

    class Meta(CatalogItem.Meta):
        constraints = [
            models.UniqueConstraint(fields=["slug"], name="%(app_label)s_%(class)s_unique_slug"),
            *(
                bounded(f)
                for f in (
                    "fp16_tflops",
                    "bf16_tflops",
                    "fp8_tflops",
                    "fp32_tflops",
                    "int8_tops",
                    "int4_tops",
                    "typical_w",
                    "price_usd",
                )
            ),
            bounded("tdp_w"),
            bounded("idle_w", nullable=False, allow_zero=True),
            # An unpublished TDP (NULL) bounds nothing; the quote is checked against idle_w
            # when a scenario gives it.
            models.CheckConstraint(
                condition=Q(tdp_w__isnull=True) | Q(idle_w__lte=F("tdp_w")),
                name="%(app_label)s_%(class)s_idle_le_tdp",
            ),
            *_link_constraints("host_link"),
            *_link_constraints("peer_link"),
            models.CheckConstraint(
                condition=Q(parent__isnull=True) | ~Q(parent=F("id")),
                name="%(app_label)s_%(class)s_not_own_parent",
            ),
        ]

    def clean(self) -> None:
        """Cross-field rules of DeviceSpec, reported per field."""
        super().clean()
        errors: dict[str, str] = {}
        if self.tdp_w is not None and self.idle_w is not None and self.idle_w > self.tdp_w:
            errors["idle_w"] = "Must not exceed the TDP."
        for prefix in ("host_link", "peer_link"):
            kind = getattr(self, f"{prefix}_kind")
            values = {f: getattr(self, f"{prefix}_{f}") for f in _LINK_FIELDS}
            if kind and values["bw_gbps"] is None:
                errors[f"{prefix}_bw_gbps"] = "A link needs its bandwidth."
            if not kind and any(v is not None for v in values.values()):
                errors[f"{prefix}_kind"] = "Set the link kind, or clear the link's fields."
        if self.parent_id is not None:
            if self.pk is not None and self.parent_id == self.pk:
                errors["parent"] = "A device cannot be its own parent."
            elif self.parent is not None and self.parent.kind not in CONTAINER_KINDS:
                errors["parent"] = "The parent must be a SoC."
        # the family's declaration decides the params (errors keyed ``params.<name>``)
        errors.update(params_errors(self.kind, self.params))
        if errors:
            raise ValidationError(errors)


class MemoryTier(models.Model):
    """One memory tier of a device: technology, capacity and peak bandwidth.

    ``order`` 0 is the device's local (primary) memory, where weights and KV cache live by
    default; further tiers (e.g. H2M2's LPDDR beside its HBM) follow. Sources of these
    numbers are kept in the device's ``sources`` (keys ``memory[i].capacity_gb`` etc.).
    Mirrors :class:`simulations.core.spec.MemoryTier`.
    """

    device = models.ForeignKey(
        Device,
        on_delete=models.CASCADE,
        related_name="memory_tiers",
        help_text="The device this memory belongs to.",
    )
    order = models.PositiveSmallIntegerField(
        default=0, help_text="Position among the device's tiers (0 = local memory)."
    )
    kind = models.CharField(
        max_length=16, choices=MemoryKind.choices, help_text="Memory technology."
    )
    capacity_gb = positive_float("Capacity, GB (10^9 bytes).", null=False)
    bw_gbps = positive_float("Peak bandwidth, GB/s.", null=False)

    class Meta:
        ordering = ("device", "order")
        constraints = [
            models.UniqueConstraint(
                fields=["device", "order"], name="%(app_label)s_%(class)s_unique_order"
            ),
            models.CheckConstraint(
                condition=Q(kind__in=MemoryKind.values), name="%(app_label)s_%(class)s_kind_valid"
            ),
            bounded("capacity_gb", nullable=False),
            bounded("bw_gbps", nullable=False),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.capacity_gb:g} GB @ {self.bw_gbps:g} GB/s"


# --- software stacks -----------------------------------------------------------------------


class RuntimeProfile(CatalogItem):
    """Behaviour of one software stack on one kind of device (e.g. eager FP16 on GPUs).

    Achieved fractions of peak compute and bandwidth, launch overheads and precisions are
    fitted across every device the profile is calibrated on at once; ``params`` carries extra
    fitted parameters a device model documents. ``default_for_kind`` marks the profile a
    device uses when a scenario names none (at most one per kind). Mirrors
    :class:`simulations.core.spec.RuntimeProfile`.
    """

    device_kind = models.CharField(
        max_length=16,
        choices=device_kind_choices,
        help_text="Kind of device this stack runs on (a device family).",
    )
    weight_bits = models.PositiveSmallIntegerField(
        choices=[(b, f"{b}-bit") for b in PRECISION_BITS], help_text="Weight precision, bits."
    )
    act_bits = models.PositiveSmallIntegerField(
        choices=[(b, f"{b}-bit") for b in PRECISION_BITS], help_text="Activation precision, bits."
    )
    kv_bits = models.PositiveSmallIntegerField(
        choices=[(b, f"{b}-bit") for b in PRECISION_BITS], help_text="KV-cache precision, bits."
    )
    compute_eff = models.FloatField(
        validators=[validate_finite, validate_strictly_positive, MaxValueValidator(1.0)],
        help_text="Achieved fraction of peak compute, in (0, 1] (dimensionless).",
    )
    bw_eff = models.FloatField(
        validators=[validate_finite, validate_strictly_positive, MaxValueValidator(1.0)],
        help_text="Achieved fraction of peak memory bandwidth, in (0, 1] (dimensionless).",
    )
    kernel_launch_us = positive_float(
        "Launch overhead per kernel, µs.", null=False, allow_zero=True, default=0.0
    )
    kernels_per_layer = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(10**6)],
        help_text="Kernels launched per transformer layer and step (count).",
    )
    fp8 = models.BooleanField(
        default=False,
        help_text="8-bit weights, activations and KV cache are FP8 floats run on the "
        "device's FP8 tensor path (not integers).",
    )
    params = models.JSONField(
        default=dict,
        blank=True,
        help_text="Extra fitted parameters a device model reads: name → number "
        "(units documented by the device model).",
    )
    default_for_kind = models.BooleanField(
        default=False, help_text="Use this profile for devices of its kind when none is named."
    )
    calibration = models.JSONField(
        default=dict,
        blank=True,
        help_text="What the profile was fitted on: devices and models (slugs), measurement "
        "sets, method, fit error (fractions) and notes; empty devices = derived, not measured.",
    )
    # Profiles saved from a user's calibration are theirs until published: the
    # catalog's own rows have no owner and are public.
    owner = owner_field(
        related_name="runtime_profiles",
        help_text="Who saved it from a calibration (empty: a catalog profile).",
    )
    visibility = visibility_field(
        default=TraceVisibility.PUBLIC,
        help_text="Who may see and simulate with it: its owner only, every signed-in user, "
        "or everyone as part of the catalog (catalog editors only).",
    )

    class Meta(CatalogItem.Meta):
        constraints = [
            models.UniqueConstraint(fields=["slug"], name="%(app_label)s_%(class)s_unique_slug"),
            models.UniqueConstraint(
                fields=["device_kind"],
                condition=Q(default_for_kind=True),
                name="%(app_label)s_%(class)s_one_default_per_kind",
            ),
            visibility_constraint(),
            # a kind's default runs for every user: only a catalog (public) profile may be it
            models.CheckConstraint(
                condition=Q(default_for_kind=False) | Q(visibility=TraceVisibility.PUBLIC),
                name="%(app_label)s_%(class)s_default_is_public",
            ),
            *(
                models.CheckConstraint(
                    condition=Q(**{f"{f}__in": PRECISION_BITS}),
                    name=f"%(app_label)s_%(class)s_{f}_valid",
                )
                for f in ("weight_bits", "act_bits", "kv_bits")
            ),
            bounded("compute_eff", nullable=False, maximum=1.0),
            bounded("bw_eff", nullable=False, maximum=1.0),
            bounded("kernel_launch_us", nullable=False, allow_zero=True),
            bounded("kernels_per_layer", nullable=False, allow_zero=True, maximum=10**6),
        ]

    def clean(self) -> None:
        """``params`` must map names to finite numbers; ``calibration`` must be a valid
        provenance block."""
        super().clean()
        try:
            calibration_from_dict(self.calibration or {})
        except SpecError as exc:
            raise ValidationError({"calibration": f"{exc.field}: {exc.message}"}) from exc
        params = self.params
        if not isinstance(params, dict) or not all(
            isinstance(k, str)
            and isinstance(v, int | float)
            and not isinstance(v, bool)
            and math.isfinite(v)
            for k, v in params.items()
        ):
            raise ValidationError({"params": "Must map parameter names to finite numbers."})


# --- models --------------------------------------------------------------------------------


class LLMModel(CatalogItem):
    """Shapes of a decoder-only LLM (MHA when ``n_kv_heads == n_heads``, else GQA/MQA).

    Importable from a Hugging Face ``config.json`` (``hf_config`` keeps the imported file).
    Mirrors :class:`simulations.core.spec.ModelSpec`.
    """

    n_layers = positive_int("Transformer layers (count).", null=False)
    hidden_size = positive_int("Hidden size (model width), elements.", null=False)
    n_heads = positive_int("Attention (query) heads (count).", null=False)
    n_kv_heads = positive_int("Key/value heads (count; equals n_heads for MHA).", null=False)
    head_dim = positive_int("Dimension of one attention head, elements.", null=False)
    ffn_size = positive_int("Feed-forward inner size, elements.", null=False)
    ffn_kind = models.CharField(
        max_length=16, choices=FfnKind.choices, help_text="Feed-forward block shape."
    )
    vocab_size = positive_int("Vocabulary size (tokens).", null=False)
    tied_embeddings = models.BooleanField(
        default=False, help_text="Input embedding and output head share one matrix."
    )
    max_context = positive_int("Longest supported context, tokens.", null=False, default=4096)
    hf_config = models.JSONField(
        default=dict,
        blank=True,
        help_text="The Hugging Face config.json this model was imported from (if any).",
    )
    architecture = models.JSONField(
        default=dict,
        blank=True,
        help_text="Mixture-of-experts (moe), multi-head latent attention (mla) and "
        "sliding-window blocks of the model (core ModelSpec.architecture()); empty for a "
        "dense model.",
    )

    class Meta(CatalogItem.Meta):
        verbose_name = "LLM model"
        constraints = [
            models.UniqueConstraint(fields=["slug"], name="%(app_label)s_%(class)s_unique_slug"),
            models.CheckConstraint(
                condition=Q(ffn_kind__in=FfnKind.values),
                name="%(app_label)s_%(class)s_ffn_kind_valid",
            ),
            *(
                bounded(f, nullable=False, minimum=1, maximum=MAX_MODEL_DIM)
                for f in (
                    "n_layers",
                    "hidden_size",
                    "n_heads",
                    "n_kv_heads",
                    "head_dim",
                    "ffn_size",
                    "vocab_size",
                    "max_context",
                )
            ),
            models.CheckConstraint(
                condition=Exact(Mod(F("n_heads"), F("n_kv_heads")), 0),
                name="%(app_label)s_%(class)s_kv_heads_divide_heads",
            ),
        ]

    def clean(self) -> None:
        """``n_kv_heads`` must divide ``n_heads``; ``architecture`` holds only the known
        blocks, each an object."""
        super().clean()
        if self.n_heads and self.n_kv_heads and self.n_heads % self.n_kv_heads:
            raise ValidationError({"n_kv_heads": "Must divide the number of heads."})
        arch = self.architecture
        if not isinstance(arch, dict) or any(
            k not in ARCHITECTURE_BLOCKS or not isinstance(v, dict) for k, v in arch.items()
        ):
            raise ValidationError(
                {"architecture": f"Must map {', '.join(ARCHITECTURE_BLOCKS)} to objects."}
            )
