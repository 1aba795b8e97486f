"""Reproductions of the four papers' figures (see :mod:`.base`)."""

import importlib
import pkgutil

from .base import PAPERS, Check, reproduce, runner

__all__ = ["PAPERS", "Check", "load_all", "reproduce", "runner"]


def load_all() -> None:
    """Import every runner module in this package so their runners are registered."""
    for info in pkgutil.iter_modules(__path__):
        if info.name not in ("base", "targets"):
            importlib.import_module(f"{__name__}.{info.name}")
