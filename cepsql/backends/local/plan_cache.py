"""Clause plans of in-process queries, reused across calls.

A small query (thousands of rows) spends a good part of its time planning (3,000 ticks,
reluctant quantifiers and AVG in DEFINE: about 1 of 3.6 ms of CPU): analysis, compiling
DEFINE and MEASURES, binding the worker. A query run again and again (every
minute, over each new frame) gets the same plan as long as what planning reads is the
same, so the plan is kept under a key of exactly that: the statement text and the
clause's position in it, the input schema (column names, types with their time zones,
nullability), the planner options (which carry the ANSI mode) and the planner. Plans
that read more than that are not kept: a CEP-mode plan chosen from the input's
statistics (cost-based: another input may get another plan), and a clause whose scalar
subqueries were evaluated into constants. Every plan gives the same rows, so a cached
plan changes nothing but the time.

The cache is bounded (least recently used first out) and safe to share between threads:
one lock guards the table, planning runs outside it (two threads missing together both
plan and the later store wins; their plans are equal). An entry changes only by
replacing its binding tuple at once (``CachedPlan.bind``), and every run copies the
worker before it runs it (threads.py), so a hit carries no state of an earlier run. Like
the statistics cache (``cepsql.stats.CACHE``) it is one object per process: the
in-process entry points are functions, with no session object to hang it on.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import pyarrow as pa

from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.compile.query_plan import QueryPlan
from cepsql.runtime.workers import BoundWorker, bind_worker

__all__ = ["CachedPlan", "PlanCache", "PLANS", "SchemaKey", "StatisticsProbe"]


class SchemaKey:
    """An input schema as a part of a cache key: equal as pyarrow schemas are equal
    (names, types with their time zones, nullability), hashed by the column names only.
    pyarrow hashes a schema field by field in Python (12 us for four columns, paid by
    every call); the names are a list of str, and what they leave equal the C++
    ``equals`` tells apart."""

    __slots__ = ("schema", "_hash")

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self._hash = hash(tuple(schema.names))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SchemaKey) and self.schema.equals(other.schema)


@dataclass
class CachedPlan:
    """A clause's spec (its scalar subqueries bound), its plan and the plan's last binding
    (the prepared input's schema and the worker built for it: a plan sees one prepared
    schema per input schema)."""
    spec: MatchRecognizeSpec
    plan: QueryPlan
    binding: tuple[pa.Schema, BoundWorker] | None = field(default=None)

    def bind(self, plan: QueryPlan, prepared: pa.Schema) -> BoundWorker:
        """bind_worker(plan, prepared), built once per prepared schema (execute_plan's
        binder)."""
        binding = self.binding
        if binding is not None and binding[0].equals(prepared):
            return binding[1]
        bound = bind_worker(plan, prepared)
        self.binding = (prepared, bound)
        return bound


class StatisticsProbe:
    """The statistics callable handed to the planner: ``estimate(spec)`` while planning,
    noting that the planner asked (a plan chosen from the input's statistics is not
    kept); ``release()`` after planning drops the estimator, so a kept plan (a CEP mode
    holds its statistics callable) does not keep its first input alive."""

    def __init__(self, estimate: Callable[[MatchRecognizeSpec], object]):
        self.estimate: Callable[[MatchRecognizeSpec], object] | None = estimate
        self.asked = False

    def __call__(self, spec: MatchRecognizeSpec) -> object:
        if self.estimate is None:
            raise RuntimeError("statistics asked for after planning")
        self.asked = True
        return self.estimate(spec)

    def release(self) -> None:
        self.estimate = None


class PlanCache:
    """A bounded least-recently-used table key -> CachedPlan, thread-safe."""

    def __init__(self, maxsize: int = 64):
        self.maxsize = maxsize
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, CachedPlan] = OrderedDict()

    def get(self, key: Hashable) -> CachedPlan | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, key: Hashable, entry: CachedPlan) -> None:
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


#: the in-process path's plans (bounded: at most 64 clauses, the least recently used go)
PLANS = PlanCache()
