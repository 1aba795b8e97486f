"""The registry of policies and papers: one package per paper, looked up by name.

A policy declares the device roles and options it accepts (with defaults and help text the
API and the pages can render), runs one system of a scenario through the engine, returning
that system's entry of the result document, and tells the capacity planner how to screen its
systems. A paper (:class:`Paper`) is the package that holds its policies, its planner screen,
its reproduction and its calibration; registering it is what lists it in ``reproduce``, the
validation page and the API (see ``docs/architecture.md``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from simulations.core.engine.core import ProgressFn as ProgressFn  # re-exported
from simulations.core.errors import SpecError, UnknownPolicyError
from simulations.core.options import OptionSpec as OptionSpec  # re-exported
from simulations.core.options import resolve
from simulations.core.screening import (
    BoundContext,
    Bounds,
    FitContext,
    SharedVerdict,
    SignatureLike,
)
from simulations.core.spec import (
    DevicePlacement,
    LinkSpec,
    ModelSpec,
    SloSpec,
    SystemSpec,
    WorkloadSpec,
)


@dataclass(frozen=True)
class PolicyFigure:
    """Data of one of a policy's own figures (:meth:`Policy.figure_data`) for one system:
    the rows the pages draw under ``title``, or none and a ``note`` saying why."""

    rows: list[dict[str, Any]]
    title: str = ""
    note: str | None = None


@dataclass(frozen=True, slots=True)
class RoleSpec:
    """A device role a policy understands (``""`` is the role of a policy without roles)."""

    name: str
    help: str
    kinds: tuple[str, ...] = ()  # allowed DeviceKind values; empty = any
    required: bool = True


class Policy(ABC):
    """Base class of every scheduling policy.

    Subclasses set ``name``, ``roles``, ``options`` and a docstring that cites the paper
    section they implement and lists any deviation from it.

    They also declare how a system of theirs is laid out, which the capacity planner
    (:mod:`simulations.core.planner`) reads instead of knowing policies by name (the
    defaults describe a policy whose devices are independent replicas):

    ``tensor_parallel_role``
        The role whose devices form *one* tensor-parallel group serving the model (Neo §4):
        its count is the tensor-parallel degree of a single server, not a number of
        replicas. ``None``: no such role.
    ``host_roles``
        Roles that are the node's host rather than a device count to search (the host CPU
        of Neo-style systems): a node has one host, so such a role always has count 1,
        takes no device slot of the node, and is not left empty when a host can be chosen.
    ``single_node``
        Whether the system's devices must share one node (they exchange data through one
        host, form one tensor-parallel group, or are one board): the planner's
        ``max_devices_per_node`` then bounds the whole system.
    ``paired_roles``
        Roles whose count must equal another role's, by role name (``{"host": "gpu"}``:
        one host CPU beside every GPU): the planner tries only counts where they are equal
        (within the paired entry's own ``[min_count, max_count]``), and such a role takes no
        device slot of a node (its devices sit beside the others, not in their slots).

    :func:`register` checks that these name declared roles and that a policy with a
    tensor-parallel group or a host role is single-node (one group, one host).
    """

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    roles: ClassVar[tuple[RoleSpec, ...]] = ()
    options: ClassVar[tuple[OptionSpec, ...]] = ()
    tensor_parallel_role: ClassVar[str | None] = None
    host_roles: ClassVar[frozenset[str]] = frozenset()
    single_node: ClassVar[bool] = False
    paired_roles: ClassVar[Mapping[str, str]] = {}

    #: Options a system of this policy starts with when it is created in the builder or
    #: through the API (stored with it; the declared defaults above still apply to every
    #: stored scenario that does not name them). Empty: the declared defaults.
    new_system_options: ClassVar[dict[str, Any]] = {}

    #: Whether :meth:`run` draws from its ``rng`` (a generator per system position): a
    #: policy that does is simulated for every system, identical ones included; one that
    #: does not has identical systems of a scenario computed once.
    uses_rng: ClassVar[bool] = False

    @classmethod
    def resolve_options(cls, given: Mapping[str, Any], path: str = "options") -> dict[str, Any]:
        """Validate ``given`` against the declared options and fill in the defaults."""
        return resolve(cls.options, given, path, f"policy {cls.name!r}")

    @classmethod
    def describe(cls) -> dict[str, Any]:
        """The registry entry as the API and the pages show it."""
        return {
            "name": cls.name,
            "summary": cls.summary or (cls.__doc__ or "").strip().splitlines()[0],
            "roles": [
                {"name": r.name, "help": r.help, "kinds": list(r.kinds), "required": r.required}
                for r in cls.roles
            ],
            "options": [o.as_schema() for o in cls.options],
        }

    # --- the capacity planner's screen (simulations.core.planner.screen) ---------------------

    #: Keys of the blocks this policy adds to a system's result entry beyond the common
    #: metrics (every engine policy's entry has ``scheduler``, from
    #: :func:`~simulations.core.metrics.system_result`), in the order the pages show them: a
    #: block's ``notes`` (or ``note``) is shown with the result, and a block's ``placement``
    #: (per-kernel backend rows) is drawn as a placement figure.
    result_blocks: ClassVar[tuple[str, ...]] = ("scheduler",)
    #: Figures of its own the policy can give for a system of a scenario, by name; the data
    #: come from :meth:`figure_data`, and the pages know how to draw each name.
    figures: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def figure_data(
        cls, name: str, system: Any, scenario: Any, prompt: int, output: int
    ) -> PolicyFigure:
        """The data of figure ``name`` (one of :attr:`figures`) for ``system`` of the parsed
        ``scenario``, at a representative ``prompt`` and ``output`` length (tokens);
        KeyError for a figure the policy does not declare."""
        raise KeyError(f"{cls.name!r} has no figure {name!r}")

    #: Why the capacity planner cannot search this policy, shown at the plan's path when a
    #: policy without a screen is listed (policies with a screen leave it empty).
    unscreened_why: ClassVar[str] = "the planner has no analytic screen for it yet"

    @classmethod
    def screenable(cls) -> bool:
        """Whether the capacity planner can search this policy: it implements the screen's
        two methods (:meth:`screen_fit` and :meth:`screen_bounds`)."""
        own = cls.__mro__[: cls.__mro__.index(Policy)]
        return all(any(m in vars(k) for k in own) for m in ("screen_fit", "screen_bounds"))

    @classmethod
    def screen_fit(
        cls, ctx: FitContext, sig: SignatureLike, options: dict[str, Any], tp: int | None
    ) -> Any:
        """Raise CapacityError (or SpecError) exactly when the engine's constructors would
        reject every system of ``sig`` (one device per role, ``tp`` devices in the
        tensor-parallel role), by running them on ``ctx``'s model and request lengths with
        the resolved ``options``; return what :meth:`screen_bounds` needs from that
        construction (or None)."""
        raise SpecError("policy", f"no screen for {cls.name!r}")

    @classmethod
    def screen_bounds(
        cls,
        ctx: BoundContext,
        sig: SignatureLike,
        options: dict[str, Any],
        fitted: Any,
        cmax: int,
        tp: int | None,
    ) -> Bounds | SharedVerdict | None:
        """The bounds the engine can never beat on ``ctx``'s request set for systems of
        ``sig`` with up to ``cmax`` devices in all (one server when ``tp`` is given):
        :class:`~simulations.core.screening.Bounds` for the generic count-level verdict, a
        :class:`~simulations.core.screening.SharedVerdict` when the counts change nothing,
        or None when a request cannot run at all. ``fitted`` is :meth:`screen_fit`'s
        result. Every bound must be optimistic for feasibility."""
        raise SpecError("policy", f"no screen for {cls.name!r}")

    @classmethod
    def explain(cls, entry: Mapping[str, Any]) -> list[str]:
        """Sentences a plan's report adds when it recommends a system of this policy, read
        from the system's result entry ``entry`` (e.g. which phase binds). The default
        adds none."""
        return []

    @classmethod
    def check_system(cls, system: SystemSpec, model: ModelSpec) -> None:
        """Raise SpecError (its field relative to the system, e.g.
        ``options.tensor_parallel``) when ``system`` cannot serve ``model`` whatever the
        workload — checked when a scenario is parsed, so the API refuses it up front. The
        default checks nothing."""
        return None

    @classmethod
    def unsearchable_option(cls, name: str, value: Any) -> str | None:
        """Why a plan cannot try ``value`` for option ``name`` (None: it can); e.g. a value
        that models other hardware than the devices the plan prices."""
        return None

    #: Options that decide which of the roles a system fills and which device kinds play
    #: them (:meth:`plan_roles`); empty: every system has the declared :attr:`roles`.
    role_options: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def plan_roles(cls, options: Mapping[str, Any]) -> tuple[RoleSpec, ...]:
        """The roles a system with ``options`` (the :attr:`role_options`, defaults filled
        in) has, in the declared order: what the capacity planner fills with devices. A
        role left out is never filled; one marked required is never left empty. The
        default: the declared :attr:`roles`."""
        return cls.roles

    @classmethod
    def plan_model_error(cls, model: ModelSpec) -> str | None:
        """Why a plan for ``model`` cannot search this policy at all (None: it can); e.g. a
        policy that places experts, asked to serve a dense model."""
        return None

    @classmethod
    def plan_option_error(cls, model: ModelSpec, name: str, value: Any) -> str | None:
        """Why a plan for ``model`` cannot try ``value`` for option ``name`` (None: it can);
        e.g. more experts than the model has."""
        return None

    @classmethod
    def replica_devices(cls, options: Mapping[str, Any]) -> int:
        """Devices one engine unit spans under the resolved ``options`` (a data-parallel
        replica of a tensor/pipeline-parallel group): the planner tries only counts that
        are multiples of it and bounds the units, ``count / replica_devices``."""
        return 1

    @abstractmethod
    def run(
        self,
        system: SystemSpec,
        model: ModelSpec,
        workload: WorkloadSpec,
        slo: SloSpec,
        rng: np.random.Generator,
        progress: ProgressFn | None = None,
    ) -> dict[str, Any]:
        """Simulate ``system`` on ``workload`` and return its result-document entry."""


def resolve_link(system: SystemSpec, options: Mapping[str, Any]) -> LinkSpec | None:
    """The interconnect a system's ``link`` option names: the scenario parser's resolved
    :attr:`~simulations.core.spec.SystemSpec.interconnect`, else the shipped catalog's link
    (a system built without the parser); ``None`` when the option is empty."""
    if system.interconnect is not None or not options.get("link"):
        return system.interconnect
    from simulations.core.catalog import builtin_catalog

    try:
        return builtin_catalog().link(str(options["link"]))
    except SpecError as exc:
        raise SpecError("options.link", exc.message) from None


def group_link(
    system: SystemSpec, options: Mapping[str, Any], devices: Sequence[DevicePlacement] = ()
) -> LinkSpec | None:
    """The link a parallel group's collectives run over: the system's ``link`` option
    (:func:`resolve_link`), else the ``peer_link`` that ``devices`` (default: all of the
    system's) share in their records — a TPU's ICI; ``None`` when there is neither."""
    link = resolve_link(system, options)
    if link is not None:
        return link
    peers = [p.device.peer_link for p in (devices or system.devices)]
    if peers and all(peer is not None and peer == peers[0] for peer in peers):
        return peers[0]
    return None


_REGISTRY: dict[str, type[Policy]] = {}


def _check_layout(cls: type[Policy]) -> None:
    """ValueError unless the layout a policy declares is consistent with its roles."""
    role_names = {r.name for r in cls.roles}
    unknown = sorted(set(cls.host_roles) - role_names)
    if unknown:
        raise ValueError(f"policy {cls.name!r}: host_roles {unknown} are not among its roles")
    tp = cls.tensor_parallel_role
    if tp is not None and tp not in role_names:
        raise ValueError(f"policy {cls.name!r}: tensor_parallel_role {tp!r} is not a role")
    if tp is not None and tp in cls.host_roles:
        raise ValueError(f"policy {cls.name!r}: role {tp!r} cannot be both host and TP group")
    for role, leader in cls.paired_roles.items():
        if role not in role_names or leader not in role_names or role == leader:
            raise ValueError(
                f"policy {cls.name!r}: paired role {role!r} must follow another of its roles"
            )
        if role in cls.host_roles or role == tp or leader in cls.paired_roles:
            raise ValueError(
                f"policy {cls.name!r}: paired role {role!r} cannot be a host role, the "
                "tensor-parallel group or follow a paired role"
            )
    if (tp is not None or cls.host_roles) and not cls.single_node:
        raise ValueError(
            f"policy {cls.name!r}: a tensor-parallel group or a host role makes the system "
            "one node; declare single_node = True"
        )


def register(cls: type[Policy]) -> type[Policy]:
    """Class decorator: add a policy to the registry under ``cls.name`` (after checking the
    layout it declares, see :class:`Policy`)."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"policy {cls.name!r} registered twice")
    _check_layout(cls)
    _REGISTRY[cls.name] = cls
    return cls


def get_policy(name: str) -> type[Policy]:
    """The policy class registered as ``name``; UnknownPolicyError if there is none."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownPolicyError(name, list(_REGISTRY)) from None


def policy_names() -> list[str]:
    """Names of every registered policy, sorted."""
    return sorted(_REGISTRY)


def screened_policies() -> list[str]:
    """Names of the registered policies the capacity planner can search, sorted."""
    return sorted(name for name, cls in _REGISTRY.items() if cls.screenable())


# --- papers ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Paper:
    """A paper whose systems a policy package implements and reproduces.

    ``name`` is the paper's key (``reproduce NAME``, target ids ``NAME.<figure>.<what>``),
    ``title`` what the pages show, ``package`` the policy package. By convention the package
    holds ``targets.toml`` (the published figures, see :mod:`simulations.core.reproduce`)
    and a ``reproduction`` module (or package) whose runners model them.
    """

    name: str
    title: str
    package: str

    @property
    def reproduction(self) -> str:
        """The module that registers the paper's runners."""
        return f"{self.package}.reproduction"

    @property
    def targets_file(self) -> Path:
        """The paper's targets data file."""
        return Path(str(resources.files(self.package).joinpath("targets.toml")))


_PAPERS: dict[str, Paper] = {}


def register_paper(name: str, title: str, package: str) -> Paper:
    """Add a paper to the registry (papers are listed in registration order, which
    ``simulations.core.policies`` fixes by the order it imports its packages)."""
    paper = Paper(name, title, package)
    if _PAPERS.get(name, paper) != paper:
        raise ValueError(f"paper {name!r} registered twice")
    _PAPERS[name] = paper
    return paper


def papers() -> tuple[Paper, ...]:
    """Every registered paper, in registration order."""
    return tuple(_PAPERS.values())


def get_paper(name: str) -> Paper:
    """The paper registered as ``name``; KeyError naming the known ones otherwise."""
    try:
        return _PAPERS[name]
    except KeyError:
        raise KeyError(f"unknown paper {name!r}; choose from {', '.join(_PAPERS)}") from None
