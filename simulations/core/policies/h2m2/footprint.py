"""The HBM footprint of an ``h2m2`` system's mapping by sublayer (H2M2 Fig. 14): what the
run page draws for an H2M2 system (:meth:`H2M2Policy.figure_data`, figure
``hbm-footprint``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from simulations.core.devices.h2m2.board import H2M2Hardware
from simulations.core.devices.h2m2.shapes import LayerShapes, Point
from simulations.core.devices.h2m2.timing import MappingTables
from simulations.core.errors import CapacityError, SpecError
from simulations.core.spec import ScenarioSpec, SystemSpec

from .mapping import run_system

#: Sequence lengths at which the footprint is shown, at most.
POINTS = 8


def hbm_footprints(
    system: SystemSpec, spec: ScenarioSpec, options: dict[str, Any], prompt: int, output: int
) -> tuple[list[dict[str, Any]], str | None]:
    """HBM footprint by sublayer of the system's mapping (resolved ``options``) at sequence
    lengths from ``prompt`` + 1 to ``prompt`` + ``output``, for a full batch (H2M2 Fig. 14).

    Returns the rows and, when the system's mapping keeps no head-aware split (LPDDR-only,
    hierarchical, 8-HBM), a note instead of rows.
    """
    mapping = str(options["mapping"])
    batch = int(min(int(options["max_batch"]), spec.workload.requests))
    hw = H2M2Hardware.from_placements(system.devices)
    shapes = LayerShapes.of(spec.model, system.devices[0].runtime)
    seqs = np.unique(np.linspace(prompt + 1, prompt + output, POINTS).round().astype(int))
    rows: list[dict[str, Any]] = []
    for seq in seqs.tolist():
        point = Point(batch, float(seq))
        try:
            ev = run_system(shapes, hw, point, mapping)
        except (SpecError, CapacityError) as exc:
            return rows, f"S{seq}: {exc}"
        if ev.mapping is None:
            return [], (
                f"mapping {mapping!r} keeps every sublayer on one memory (no head-aware split "
                "to break down)"
            )
        tab = MappingTables(shapes, hw, point)
        idx = {"qkv": ev.mapping.n_qkv, "attn": ev.mapping.n_attn, "fc": ev.mapping.n_fc}
        hbm = {k: float(tab.cap[k][0][i]) / 1e9 for k, i in idx.items()}
        hbm["act"] = tab.act_bytes / 1e9
        rows.append(
            {
                "seq_len": seq,
                "batch": batch,
                "units": int(tab.N),
                "mapping": list(ev.mapping.as_tuple()),
                "hbm_gb": hbm,
                "hbm_total_gb": sum(hbm.values()),
                "hbm_capacity_gb": hw.hbm.capacity_bytes / 1e9,
            }
        )
    return rows, None
