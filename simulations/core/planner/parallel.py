"""Confirm a round of configurations in several processes of this machine.

The Celery job spreads rounds over workers; this is the in-process equivalent for the CLI
and the benchmarks: a pool of forked processes that each hold the plan, evaluating one
round's configurations in parallel and returning them in order (so results do not depend
on which process finished first).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from types import TracebackType

from .document import PlanSpec
from .evaluate import Evaluation, evaluate_config
from .space import Config

_PLAN: PlanSpec | None = None


def _init(plan: PlanSpec) -> None:
    global _PLAN
    _PLAN = plan


def _evaluate(config: Config) -> Evaluation:
    assert _PLAN is not None, "worker process without a plan"
    return evaluate_config(_PLAN, config)


class ProcessPoolEvaluator:
    """``evaluate_many`` for :meth:`~.search.Search.run` backed by ``processes`` processes.

    Use as a context manager so the processes are shut down.
    """

    def __init__(self, plan: PlanSpec, processes: int) -> None:
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        self._pool = ProcessPoolExecutor(
            max_workers=processes, mp_context=ctx, initializer=_init, initargs=(plan,)
        )

    def __call__(self, configs: Sequence[Config]) -> Iterable[Evaluation]:
        """Evaluate ``configs`` in parallel; results in the order given."""
        return list(self._pool.map(_evaluate, configs))

    def close(self) -> None:
        """Stop the processes."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ProcessPoolEvaluator:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


__all__ = ["ProcessPoolEvaluator"]
