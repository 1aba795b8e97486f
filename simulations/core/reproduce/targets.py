"""A paper's published figures (targets) and the prose of its checks, read from its data file.

Each paper package holds one ``targets.toml`` (see ``docs/architecture.md``)::

    [fragments]                      # prose shared by several notes (templates)
    cal_gpu = "calibration target: ..."

    [[target]]
    id = "glitches.table1.a100.prefill_ms"   # <paper>.<figure>.<what>
    quantity = "a100 prefill latency"
    unit = "ms"
    value = 175.85
    tolerance = 0.05                 # relative, unless abs_tolerance = true (in unit)
    source = "GLITCHES Table I"
    bound = "upper"                  # optional: the paper gives a bound, not a value
    note = "{per}; {frag[cal_gpu]}"  # the check's note, a template
    basis = "calibration"            # optional, see below
    basis_why = "..."                # one sentence: which fit, which catalog value
    catalog = ["device:a100-80gb:fp16_tflops"]   # "input" targets only: what is echoed

Ids follow one scheme: ``<paper>.<figure>.<what>`` with ``<figure>`` one of ``fig<N>``
(optionally a panel letter), ``table<N>`` or ``text`` (a figure printed in the prose). A
note is a :meth:`str.format` template: the runner supplies the modelled values it names
(``{gib:.2f}``), and ``{frag[name]}`` inserts a fragment rendered with the same values.

Targets are *targets*: runners compare simulated values against them and calibration scripts
fit runtime profiles to measured ones (a fitted figure is labelled a calibration target in
its note); no cost model reads them.

Every check says what kind of evidence it is (:mod:`.basis`): a *prediction* (the default:
nothing was fitted to the figure), *calibration* (a parameter was fitted to it, or it is
arithmetic on fitted figures and catalog inputs only) or an *input* (a catalog value
compared with itself; ``catalog`` names the values whose product the check prints, each
``device:<slug>:<field>`` or ``runtime:<slug>:<field>``, ``params.<name>`` for a param). A
target that a calibration script fits (its ``FITS``) is calibration whatever the file says.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from simulations.core.policies import get_paper

#: ``<figure>`` of a target id.
FIGURE = r"(fig[0-9]+[a-z]?|table[0-9]+|text)"
#: ``<what>`` of a target id (dots allowed: ``a100.prefill_ms``, ``llama3.1-70b_ac``).
WHAT = r"[a-z0-9][a-z0-9_.+-]*"


@dataclass(frozen=True, slots=True)
class Target:
    """One published figure: value, unit, tolerance, where it is printed, and the template
    of the note a check of it carries."""

    id: str
    quantity: str
    unit: str
    value: float
    tolerance: float
    source: str
    abs_tolerance: bool = False
    note: str = ""
    #: ``"upper"``/``"lower"`` when the paper gives a bound ("less than 60 %"): the check
    #: passes at or below (above) the value, whatever the tolerance.
    bound: str = ""
    #: ``"prediction"``, ``"calibration"`` or ``"input"`` as the file declares it; empty
    #: leaves it to :func:`.basis.basis_of` (calibration when a script fits it, else
    #: prediction).
    basis: str = ""
    #: One sentence: which fit or which catalog value the basis rests on.
    basis_why: str = ""
    #: For an ``"input"`` target: the catalog values (``device:<slug>:<field>``,
    #: ``runtime:<slug>:<field>``) whose product the check prints.
    catalog: tuple[str, ...] = ()

    @property
    def paper(self) -> str:
        """The paper the figure belongs to (the id's first component)."""
        return self.id.split(".", 1)[0]


class _Fragments(Mapping[str, str]):
    """The paper's fragments, each rendered with the same values on access."""

    def __init__(self, targets: PaperTargets, values: Mapping[str, Any]) -> None:
        self._t = targets
        self._values = values

    def __getitem__(self, name: str) -> str:
        return self._t.render(self._t.fragment_template(name), **self._values)

    def __iter__(self) -> Iterator[str]:
        return iter(self._t.fragments)

    def __len__(self) -> int:
        return len(self._t.fragments)


@dataclass(frozen=True)
class PaperTargets:
    """The targets and note fragments of one paper's data file."""

    paper: str
    targets: Mapping[str, Target]
    fragments: Mapping[str, str]

    def __getitem__(self, tid: str) -> Target:
        """The target ``tid``; KeyError naming it when unknown."""
        try:
            return self.targets[tid]
        except KeyError:
            raise KeyError(f"unknown target {tid!r} of {self.paper}") from None

    def value(self, tid: str) -> float:
        """The published value of ``tid``."""
        return self[tid].value

    def fragment_template(self, name: str) -> str:
        """The template of fragment ``name``."""
        try:
            return self.fragments[name]
        except KeyError:
            raise KeyError(f"unknown note fragment {name!r} of {self.paper}") from None

    def fragment(self, name: str, /, **values: Any) -> str:
        """Fragment ``name`` rendered with ``values``."""
        return self.render(self.fragment_template(name), **values)

    def note(self, tid: str, /, **values: Any) -> str:
        """The note of a check of ``tid``: its template rendered with ``values`` (and the
        target itself as ``{target.source}``, ``{target.value}`` …)."""
        t = self[tid]
        return self.render(t.note, target=t, **values)

    def render(self, template: str, /, **values: Any) -> str:
        """``template`` with ``values`` and ``{frag[name]}`` fragments filled in."""
        return template.format_map({**values, "frag": _Fragments(self, values)})


def parse_targets(paper: str, text: str, origin: str = "targets.toml") -> PaperTargets:
    """The targets of ``paper`` in the TOML ``text``; ValueError naming the entry at fault
    (an id outside the scheme or of another paper, a duplicate, a missing field)."""
    data = tomllib.loads(text)
    unknown = set(data) - {"fragments", "target"}
    if unknown:
        raise ValueError(f"{origin}: unknown tables {sorted(unknown)}")
    pattern = re.compile(rf"^{re.escape(paper)}\.{FIGURE}\.{WHAT}$")
    targets: dict[str, Target] = {}
    for i, entry in enumerate(data.get("target", [])):
        where = f"{origin}: target[{i}]"
        try:
            if "catalog" in entry:
                entry = {**entry, "catalog": tuple(entry["catalog"])}
            t = Target(**entry)
        except TypeError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if not pattern.match(t.id):
            raise ValueError(f"{where}: id {t.id!r} is not {paper}.<figure>.<what>")
        if t.id in targets:
            raise ValueError(f"{where}: duplicate id {t.id!r}")
        if not (t.tolerance >= 0 and isinstance(t.value, int | float)):
            raise ValueError(f"{where}: value and a tolerance >= 0 are required")
        if t.bound not in ("", "upper", "lower"):
            raise ValueError(f"{where}: bound must be 'upper' or 'lower'")
        if t.basis not in ("", "prediction", "calibration", "input"):
            raise ValueError(f"{where}: basis must be 'prediction', 'calibration' or 'input'")
        if t.basis in ("calibration", "input") and not t.basis_why:
            raise ValueError(f"{where}: a {t.basis} target needs basis_why (which fit/value)")
        if (t.basis == "input") != bool(t.catalog):
            raise ValueError(f"{where}: catalog names the values of an 'input' target only")
        targets[t.id] = t
    fragments = dict(data.get("fragments", {}))
    return PaperTargets(paper, targets, fragments)


@cache
def load_targets(paper: str) -> PaperTargets:
    """The targets of the registered paper ``paper`` (read once per process)."""
    path: Path = get_paper(paper).targets_file
    return parse_targets(paper, path.read_text(encoding="utf-8"), str(path))
