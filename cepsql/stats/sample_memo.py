"""What the estimates of many clauses over ONE sample have in common, computed once.

A workload's views read one source, and the sharing planner estimates each view's
statistics from one sample of it (backends/spark/workload.py). Views written against one
stream repeat their event types and predicates, so most of the work of one estimate is
the work of another: the partition ids and time axis (same PARTITION BY / ORDER BY), a
variable's single-row flags (same single-row conjuncts) and a pair's selectivity (same
conjuncts over the same flags, partitioning and window). ``estimate_from_table(...,
memo=SampleMemo())`` keys each of them by the expressions that determine it.

A memo belongs to one sample table: pass a new one for another sample.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

__all__ = ["SampleMemo"]

T = TypeVar("T")


class SampleMemo:
    """Values computed over one sample, by a key of the expressions they depend on."""

    def __init__(self) -> None:
        self._values: dict[Hashable, object] = {}
        self.hits = 0

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The value under key, computed on its first request."""
        if key in self._values:
            self.hits += 1
        else:
            self._values[key] = compute()
        return self._values[key]  # type: ignore[return-value]
