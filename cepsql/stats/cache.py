"""Session-level cache of estimated statistics.

Sampling a large input costs a Spark job or two, while a workload re-plans the same
patterns over the same sources again and again (every query, every registered view).
Entries are keyed by the input's identity, the parts of the spec that change the
numbers (pattern, DEFINE, PARTITION BY, first ORDER BY key, window) and the sample
size. Identity of a DataFrame is a hash of its analyzed plan text: a re-registered
temp view gets new attribute ids and so a new key, but a catalog table whose files
change in place keeps its key — call ``invalidate``/``clear`` after such loads.
Results cut short by the time budget are returned but not stored, so a later call with
more time can do better.
"""
from __future__ import annotations

import hashlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.stats.estimate import DEFAULT_SAMPLE_ROWS, estimate_from_spark, estimate_from_table
from cepsql.stats.model import PatternStatistics


@dataclass
class _Entry:
    stats: PatternStatistics
    guard: Callable[[], Any] | None  # weakref to an unnamed Arrow input (id reuse guard)
    source: Hashable


def spec_key(spec: MatchRecognizeSpec) -> Hashable:
    """The spec parts statistics depend on; expressions compare without positions."""
    return (spec.pattern_text, spec.pattern,
            tuple((v, spec.defines[v]) for v in sorted(spec.defines)),
            spec.partition_by, spec.order_by[:1], spec.window,
            tuple(sorted(spec.subsets.items())))


def input_identity(data: Any, source: str | None = None) -> Hashable:
    """Name given by the caller, else the Arrow table object, else the plan hash."""
    if source is not None:
        return ("name", source)
    if isinstance(data, pa.Table):
        return ("arrow", id(data))
    return ("plan", hashlib.sha256(_plan_text(data).encode()).hexdigest())


def _plan_text(df: Any) -> str:
    try:
        return str(df._jdf.queryExecution().analyzed().toString())
    except Exception:  # noqa: BLE001  (Spark Connect: no JVM handle)
        return f"semantic:{df.semanticHash()}"


class StatisticsCache:
    """LRU cache of PatternStatistics; thread-safe; ``hits``/``misses`` for EXPLAIN."""

    def __init__(self, max_entries: int = 256):
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def key(self, spec: MatchRecognizeSpec, data: Any, *, source: str | None = None,
            sample_rows: int = DEFAULT_SAMPLE_ROWS, seed: int = 0) -> Hashable:
        return (input_identity(data, source), spec_key(spec), sample_rows, seed)

    def get_or_estimate(self, spec: MatchRecognizeSpec, data: Any, *,
                        source: str | None = None, sample_rows: int = DEFAULT_SAMPLE_ROWS,
                        time_budget_s: float = 5.0, seed: int = 0) -> PatternStatistics:
        """Cached statistics of spec over data (an Arrow table or a Spark DataFrame),
        estimating them on a miss. source names the input (a table or view name)."""
        key = self.key(spec, data, source=source, sample_rows=sample_rows, seed=seed)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and (entry.guard is None or entry.guard() is data):
                self._entries.move_to_end(key)
                self.hits += 1
                return entry.stats
            self.misses += 1
        if isinstance(data, pa.Table):
            stats = estimate_from_table(spec, data, max_rows=sample_rows, seed=seed)
        else:
            stats = estimate_from_spark(spec, data, sample_rows=sample_rows,
                                        time_budget_s=time_budget_s, seed=seed)
        if not stats.truncated:
            guard = weakref.ref(data) if isinstance(data, pa.Table) and source is None else None
            self._put(key, _Entry(stats, guard, key[0]))
        return stats

    def _put(self, key: Hashable, entry: _Entry) -> None:
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def invalidate(self, source: str) -> int:
        """Drop every entry of the named input; returns how many were dropped."""
        with self._lock:
            doomed = [k for k, e in self._entries.items() if e.source == ("name", source)]
            for k in doomed:
                del self._entries[k]
            return len(doomed)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)


CACHE = StatisticsCache()
"""The session-level cache the planner consults."""
