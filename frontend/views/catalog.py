"""Catalog pages: overview, devices (filters, detail with sources and roofline), models
(detail with sizes, Hugging Face config import)."""

from __future__ import annotations

import logging
from typing import Any, cast

from django.contrib import messages
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db.models import Field, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from frontend import analysis
from frontend.charts import chart
from frontend.charts.roofline import roofline_figure
from frontend.forms import HfImportForm
from frontend.views.common import catalog_editor_required, validation_messages
from simulations.adapters import device_spec, model_spec, runtime_spec
from simulations.catalog import selectors, services
from simulations.catalog.models import Device, LLMModel, RuntimeProfile
from simulations.choices import TraceVisibility
from simulations.core.catalog import builtin_cloud_offers
from simulations.core.devices import roofline_kinds
from simulations.device_families import device_kind_choices, param_schema
from simulations.permissions import can_edit_catalog

logger = logging.getLogger(__name__)

#: Device columns the detail page lists in this order (then the parameters its family
#: declares, then the memory tiers).
DEVICE_FIELDS = (
    "kind",
    "vendor",
    "fp16_tflops",
    "bf16_tflops",
    "fp8_tflops",
    "fp32_tflops",
    "int8_tops",
    "int4_tops",
    "tdp_w",
    "typical_w",
    "idle_w",
    "price_usd",
    "host_link_kind",
    "host_link_bw_gbps",
    "host_link_latency_us",
    "host_link_pcie_gen",
    "host_link_lanes",
    "peer_link_kind",
    "peer_link_bw_gbps",
    "peer_link_latency_us",
    "peer_link_pcie_gen",
    "peer_link_lanes",
)


#: What a device's detail page shows for a power figure its vendor does not publish.
UNPUBLISHED_POWER = "— (not published — give a figure in the scenario)"


def _cache_get(key: str) -> Any:
    # a cache outage must not fail the page: the figure is computed again
    try:
        return cache.get(key)
    except Exception:  # any cache backend error means "not cached"
        logger.warning("catalog cache unavailable (get %s)", key, exc_info=True)
        return None


def _cache_set(key: str, value: Any) -> None:
    try:
        cache.set(key, value, 24 * 3600)
    except Exception:  # see _cache_get
        logger.warning("catalog cache unavailable (set %s)", key, exc_info=True)


def overview(request: HttpRequest) -> HttpResponse:
    """The whole catalog on one page: devices, models and runtime profiles."""
    return render(request, "frontend/catalog/overview.html", selectors.catalog_overview())


def split_help(text: str) -> tuple[str, str]:
    """A help text ``"Peak dense FP16 tensor compute, TFLOP/s."`` as (what, unit)."""
    text = text.strip().rstrip(".")
    head, sep, tail = text.rpartition(", ")
    if sep and len(tail) <= 16 and " " not in tail.strip("() "):
        return head, tail
    return text, ""


def _source_key_candidates(field: str) -> list[str]:
    keys = [field]
    for prefix in ("host_link", "peer_link"):
        if field.startswith(prefix + "_"):
            keys.append(f"{prefix}.{field[len(prefix) + 1 :]}")
    return keys


def device_list(request: HttpRequest) -> HttpResponse:
    """Devices filtered by kind, vendor and a search text."""
    kind = request.GET.get("kind", "")
    vendor = request.GET.get("vendor", "")
    q = request.GET.get("q", "").strip()[:100]
    devices = selectors.device_list()
    kinds = device_kind_choices()
    if kind in dict(kinds):
        devices = devices.filter(kind=kind)
    if vendor:
        devices = devices.filter(vendor=vendor)
    if q:
        devices = devices.filter(Q(slug__icontains=q) | Q(name__icontains=q))
    vendors = Device.objects.order_by("vendor").values_list("vendor", flat=True).distinct()
    return render(
        request,
        "frontend/catalog/device_list.html",
        {
            "devices": list(devices),
            "kinds": kinds,
            "vendors": list(vendors),
            "kind": kind,
            "vendor": vendor,
            "q": q,
        },
    )


def device_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """Every datasheet figure of a device with its unit and source, and its roofline under
    each runtime profile of its kind."""
    device = get_object_or_404(
        Device.objects.select_related("parent").prefetch_related("memory_tiers", "components"),
        slug=slug,
    )
    sources: dict[str, str] = dict(device.sources or {})
    used: set[str] = set()
    rows: list[dict[str, Any]] = []
    for name in DEVICE_FIELDS:
        f = cast("Field[Any, Any]", Device._meta.get_field(name))
        value = getattr(device, name)
        if value is None and name == "tdp_w":
            # an unpublished power is a fact worth a row: scenarios must supply the figure
            value = UNPUBLISHED_POWER
        elif value in (None, "", []):
            continue
        display = getattr(device, f"get_{name}_display")() if getattr(f, "choices", None) else value
        source = ""
        for key in _source_key_candidates(name):
            if key in sources:
                source = sources[key]
                used.add(key)
                break
        rows.append(
            {
                "field": name,
                "label": f.verbose_name,
                "value": display,
                "help": f.help_text,
                "source": source,
            }
        )
    params = device.params or {}
    for entry in param_schema(device.kind):
        # label, unit and help text from the family's declaration (no per-kind list here)
        name = entry["name"]
        if params.get(name) in (None, "", []):
            continue
        value = params[name]
        key = f"params.{name}"
        if key in sources:
            used.add(key)
        rows.append(
            {
                "field": f"params-{name}",
                "label": entry["label"],
                "value": ", ".join(map(str, value)) if isinstance(value, list) else value,
                "help": entry["help"] + (f", {entry['unit']}" if entry.get("unit") else ""),
                "source": sources.get(key, ""),
            }
        )
    tiers = []
    for i, t in enumerate(sorted(device.memory_tiers.all(), key=lambda t: t.order)):
        tier_sources = {
            k.split(".", 1)[1]: v for k, v in sources.items() if k.startswith(f"memory[{i}].")
        }
        used.update(f"memory[{i}].{k}" for k in tier_sources)
        tiers.append({"tier": t, "sources": tier_sources})
    other_sources = sorted((k, v) for k, v in sources.items() if k not in used)
    # the catalog's (public) profiles only: the roofs are cached per device for every user,
    # and a user's private profile (saved from a calibration) is theirs alone
    runtimes = list(
        RuntimeProfile.objects.filter(
            device_kind=device.kind, visibility=TraceVisibility.PUBLIC
        ).order_by("slug")
    )
    roofs: list[dict[str, Any]] = []
    roof_chart = None
    if device.memory_tiers.all() and device.kind in roofline_kinds():
        # the roofs evaluate the device and runtime models (the page's main cost): cached
        # per device and catalog version, so any catalog edit gives fresh figures
        key = f"device-roofline:v1:{device.slug}:{selectors.catalog_version()}"
        cached = _cache_get(key)
        if isinstance(cached, tuple) and len(cached) == 2:
            roofs, roof_chart = cached
        else:
            spec = device_spec(device)
            roofs = analysis.device_roofs(spec, [runtime_spec(r) for r in runtimes])
            if roofs:
                roof_chart = chart(
                    "roofline",
                    roofline_figure(
                        roofs,
                        f"Roofline of {device.name}",
                        subtitle="datasheet roof (solid) and the roof each runtime profile "
                        "achieves (dotted)",
                    ),
                )
            _cache_set(key, (roofs, roof_chart))
    return render(
        request,
        "frontend/catalog/device_detail.html",
        {
            "device": device,
            "rows": rows,
            "tiers": tiers,
            "other_sources": other_sources,
            "runtimes": runtimes,
            "roofs": roofs,
            "roof_chart": roof_chart,
            "notes": device.notes,
            "cloud_offers": [o for o in builtin_cloud_offers().values() if o.device == device.slug],
        },
    )


def model_list(request: HttpRequest) -> HttpResponse:
    """Models with their sizes, and the Hugging Face import form."""
    models = list(selectors.model_list())
    rows = [{"model": m, "facts": analysis.model_facts(model_spec(m))} for m in models]
    return render(
        request,
        "frontend/catalog/model_list.html",
        {"rows": rows, "form": HfImportForm(), "can_edit_catalog": can_edit_catalog(request.user)},
    )


def model_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """A model's shapes, parameter count and KV-cache bytes per token."""
    model = get_object_or_404(LLMModel, slug=slug)
    facts = analysis.model_facts(model_spec(model))
    fields = [
        (f, cast("Field[Any, Any]", LLMModel._meta.get_field(f)))
        for f in (
            "n_layers",
            "hidden_size",
            "n_heads",
            "n_kv_heads",
            "head_dim",
            "ffn_size",
            "ffn_kind",
            "vocab_size",
            "tied_embeddings",
            "max_context",
        )
    ]
    rows = [
        {
            "field": name,
            "label": f.verbose_name,
            "value": getattr(model, f"get_{name}_display")() if f.choices else getattr(model, name),
            "help": f.help_text,
            "source": (model.sources or {}).get(name, ""),
        }
        for name, f in fields
    ]
    return render(
        request,
        "frontend/catalog/model_detail.html",
        {"model": model, "facts": facts, "rows": rows},
    )


@catalog_editor_required
@require_POST
def model_import(request: HttpRequest) -> HttpResponse:
    """Create or replace a model from a Hugging Face ``config.json`` (pasted or uploaded).

    Catalog editors only (the API's rule): a model is shared by every user, so adding or
    replacing one changes what everyone can simulate."""
    form = HfImportForm(request.POST, request.FILES)
    if form.is_valid():
        slug = form.cleaned_data["slug"]
        try:
            model = services.hf_model_import(
                config=form.config_text(),
                slug=slug,
                name=form.cleaned_data["name"] or slug,
                origin=form.cleaned_data["origin"] or "Hugging Face config.json",
            )
        except ValidationError as exc:
            for key, msgs in validation_messages(exc).items():
                target = (
                    key if key in form.fields else ("config" if key in ("text", "config") else None)
                )
                for m in msgs:
                    form.add_error(target, m if target else f"{key}: {m}")
        else:
            messages.success(request, f"Imported {model.slug}.")
            return redirect("frontend:model_detail", slug=model.slug)
    models = list(selectors.model_list())
    rows = [{"model": m, "facts": analysis.model_facts(model_spec(m))} for m in models]
    return render(
        request,
        "frontend/catalog/model_list.html",
        {"rows": rows, "form": form, "can_edit_catalog": True},
        status=400,
    )
