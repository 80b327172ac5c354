"""Spark's ``spark.sql.ansi.enabled`` for in-process evaluation.

Where a caller passes no setting, the Arrow evaluator follows this context; the planner
options' ``ansi`` (``cepsql.planner_options(ansi=False)``) is read and set here, so the
expression evaluators need not know the planner.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["ansi_enabled", "ansi_mode"]

_ANSI: ContextVar[bool] = ContextVar("cepsql_ansi", default=True)


def ansi_enabled() -> bool:
    """The in-process setting (True unless a ``with ansi_mode(False)`` block says otherwise)."""
    return _ANSI.get()


@contextmanager
def ansi_mode(enabled: bool) -> Iterator[None]:
    """Set the in-process setting inside the ``with`` block."""
    token = _ANSI.set(enabled)
    try:
        yield
    finally:
        _ANSI.reset(token)
