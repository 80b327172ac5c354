"""A workload over a stream: ONE streaming query evaluates every pattern view of a source.

The batch pass's grouping is reused (runtime/one_pass.plan_pass: plans grouped by
partitioning, shared prepared columns, the tagged output layout). Each partitioning group
is one ``transformWithStateInPandas`` operator keyed by the group's PARTITION BY. Per key
its state holds what the single-pattern engine keeps, once for the key and once per
pattern:

- shared: the rows not yet behind the watermark (``pending``), the key's late boundary
  and late count -- the watermark step (``StreamEngine.release``) runs once per key;
- per pattern: the carry-over of that pattern's own streaming engine (SQL:2016 chunk
  state, or the CEP evaluator's ``export_state`` blob) and the rows it may still read,
  bounded by the pattern's window.

The patterns of the group's global plan (sharing planner, as in batch) run in the
shared DAG evaluator per key (shared_key.SharedKeyEngine: the DAG re-runs over the key's
kept rows, each matcher resumes from its carry-over); the others run their own streaming
engine. The released rows are sorted once per key and every pattern reads them
through its column projection (``PassPattern.inputs``); the output is the batch pass's
tagged layout, so ``matches()`` projects it exactly as the batch workload does -- in one
projection over the one operator (a union of per-view filters would plan the stateful
operator once per view).
"""
from __future__ import annotations

import dataclasses
import hashlib
from functools import reduce
from typing import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import (BinaryType, IntegerType, LongType, StringType, StructField,
                               StructType)

from cepsql.algebra.expressions import ColumnRef, Expr
from cepsql.errors import CepRuntimeError, error_site, transported
from cepsql.exprs.spark_sql import quote_identifier, to_spark_sql
from cepsql.analyze.measures import MATCH_NUMBER_COLUMN
from cepsql.compile.query_plan import QueryPlan
from cepsql.runtime.one_pass import (TAG, PassPattern, SharedPass, plan_pass, result_column,
                                    tag_batch)
from cepsql.exprs.spark_arrow import arrow_schema
from cepsql.backends.streaming.engine import (NO_TIMER, KeyState, StreamEngine, new_engine,
                                              state_from_values, stored_values)
from cepsql.backends.streaming.frames import check_streamable, check_streamable_worker, use_rocksdb
from cepsql.backends.streaming.ipc import STATE_LAYOUT_VERSION, from_bytes, stored_value, to_bytes
from cepsql.backends.streaming.replanning import stream_engine
from cepsql.backends.streaming.shared_key import SharedKeyEngine, shared_members
from cepsql.backends.streaming.late import late_counter, observe_late, task_counter
from cepsql.backends.streaming.packing import (BUCKET_COLUMN, KID_COLUMN, LATE_COLUMN, OUT_COLUMN, ROWS_COLUMN,
                      RowPacker, RowUnpacker)
from cepsql.backends.streaming.processor import OUTPUT_SCHEMA

__all__ = ["streaming_pass", "streaming_matches", "WorkloadEngine", "WorkloadKeyState"]

PATTERN_STATE = pa.schema([("held", pa.binary()), ("evaluator", pa.binary())]
                          + [(n, pa.int64()) for n in ("c0", "c1", "c2", "c3", "closed")])
STATE_SCHEMA = StructType([StructField("pending", BinaryType()),
                           StructField("released_us", LongType()),
                           StructField("late", LongType()),
                           StructField("patterns", BinaryType()),
                           StructField("workload", StringType())])
_SHARED_FIELDS = ("pending", "released", "late")  # the key's shared KeyState in STATE_SCHEMA


# --- the per-key engine (no Spark) -------------------------------------------------------
@dataclasses.dataclass
class WorkloadKeyState:
    """One key of a group: the shared watermark state, each pattern's carry-over and,
    when the group runs a shared DAG, its kept rows (shared_key.SharedKeyEngine)."""
    shared: KeyState
    patterns: list[KeyState]
    dag: KeyState | None = None


class WorkloadEngine:
    """Advance one key of a partitioning group: release rows once, run the shared DAG
    evaluator for the patterns of the group's global plan it can carry
    (shared_key.shared_members) and each other pattern's own streaming engine."""

    def __init__(self, patterns: list[PassPattern], event_column: str, sort_keys,
                 global_plan=None):
        self.members = shared_members(global_plan, patterns)
        self.shared = SharedKeyEngine(global_plan, patterns, self.members) \
            if self.members else None
        self.indices = [p.index for p in patterns]
        self.inputs = [p.inputs for p in patterns]
        self.releaser = new_engine(patterns[0].bound.worker, event_column, sort_keys)
        self.engines: list[StreamEngine | None] = [
            None if k in self.members else stream_engine(p.bound.worker, event_column,
                                                         sort_keys, p.plan.spec)
            for k, p in enumerate(patterns)]

    def new_state(self) -> WorkloadKeyState:
        if self.shared is None:
            return WorkloadKeyState(KeyState(), [KeyState() for _ in self.engines])
        dag, own = self.shared.new_states()
        mine = iter(own)
        return WorkloadKeyState(KeyState(), [next(mine) if e is None else KeyState()
                                             for e in self.engines], dag)

    def advance(self, state: WorkloadKeyState, rows: pa.Table | None, watermark_ms: int
                ) -> tuple[list[tuple[int, pa.RecordBatch]], int, int]:
        """(tagged outputs [(pattern index, worker rows)], next timer, late rows)."""
        released = self.releaser.release(state.shared, rows, watermark_ms)
        outputs: list[tuple[int, pa.RecordBatch]] = []
        timers = []
        if released.pending_us is not None and len(released.pending_us):
            timers.append(int(np.nanmin(released.pending_us)) // 1000 + 1)
        if self.shared is not None:
            own = [state.patterns[k] for k in self.members]
            outputs += self.shared.evaluate(state.dag, own, released.rows, released.boundary)
            timers.append(self.shared.next_timer(state.dag))
        for index, inputs, engine, own in zip(self.indices, self.inputs, self.engines,
                                              state.patterns):
            if engine is None:
                continue
            ready = None if released.rows is None else _project(released.rows, inputs)
            site = getattr(getattr(engine.worker, "config", None), "error_site", None)
            with error_site(site):  # the driver locates its errors in its view's SQL
                outputs += [(index, b) for b in engine._evaluate(own, ready, released.rows_us,
                                                                 released.boundary)]
            timers.append(engine._next_timer(own, released.pending_us))
        timers = [t for t in timers if t != NO_TIMER]
        return outputs, (min(timers) if timers else NO_TIMER), released.late


def _project(table: pa.Table, inputs: list[tuple[str, str]]) -> pa.Table:
    """The shared input rows as one pattern's worker reads them (zero-copy)."""
    return pa.Table.from_arrays([table.column(s) for s, _ in inputs],
                                names=[own for _, own in inputs])


def fingerprint(patterns: list[PassPattern], members: list[int] = ()) -> str:
    """Names the state layout, the group's patterns (their specs, in order) and which of
    them the shared DAG runs: a stored state of another workload is refused instead of
    fed to the wrong evaluators."""
    text = "\n".join(f"{p.index}:{p.plan.spec!r}" for p in patterns) + f"\n{list(members)}"
    return f"v{STATE_LAYOUT_VERSION}:" + hashlib.sha1(text.encode("utf-8")).hexdigest()


def state_to_row(state: WorkloadKeyState, workload: str) -> tuple:
    """A key's state as the one STATE_SCHEMA value stored for it (the patterns' table has
    one more row, the shared DAG's, when the group runs one)."""
    own = state.patterns + ([state.dag] if state.dag is not None else [])
    values = [stored_values(s, PATTERN_STATE.names) for s in own]
    columns = {name: [v[i] for v in values] for i, name in enumerate(PATTERN_STATE.names)}
    patterns = to_bytes(pa.table(columns, schema=PATTERN_STATE))
    return (*stored_values(state.shared, _SHARED_FIELDS), patterns, workload)


def state_from_row(row, n_patterns: int, workload: str, dag: bool = False
                   ) -> WorkloadKeyState:
    pending, released, late, patterns, stored = row
    if not str(stored or "").startswith(f"v{STATE_LAYOUT_VERSION}:"):
        raise CepRuntimeError(
            "the checkpoint's cepsql streaming state of a workload was written by another "
            f"state layout (this cepsql reads version {STATE_LAYOUT_VERSION}): start the "
            "query from a new checkpoint location")
    shared = state_from_values((pending, released, late), _SHARED_FIELDS)
    table = from_bytes(patterns)
    n = n_patterns + int(dag)
    if stored != workload or table is None or table.num_rows != n:
        raise CepRuntimeError("the stored streaming state of a workload key was written for "
                              "other pattern views (was a view of the workload added, "
                              "replaced or dropped? start the query from a new checkpoint)")
    d = table.to_pydict()
    own = [state_from_values([d[name][i] for name in table.column_names], table.column_names)
           for i in range(n)]
    return WorkloadKeyState(shared, own[:n_patterns], own[n_patterns] if dag else None)


# --- Spark's stateful operator ------------------------------------------------------------
class WorkloadProcessor(StatefulProcessor):
    """Per key of a group: one state value (see STATE_SCHEMA) and at most one event-time
    timer (the earliest time any pattern's watermark step can decide something)."""

    def __init__(self, patterns: list[PassPattern], event_column: str, sort_keys,
                 output_schema: pa.Schema, late_counter=None, global_plan=None):
        self.patterns = patterns
        self.global_plan = global_plan
        self.late_counter = late_counter
        self.event_column = event_column
        self.sort_keys = sort_keys
        self.output_schema = output_schema

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.value = handle.getValueState("cep_workload_key", STATE_SCHEMA)
        self.engine = WorkloadEngine(self.patterns, self.event_column, self.sort_keys,
                                     self.global_plan)
        self.workload = fingerprint(self.patterns, self.engine.members)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        tables = [from_bytes(blob) for frame in rows for blob in frame.iloc[:, -1]]
        tables = [t for t in tables if t is not None]
        table = pa.concat_tables(tables) if tables else None
        with transported():  # a CepError reaches the driver as itself (errors.transported)
            yield from self._step(table, timerValues.getCurrentWatermarkInMs())

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[pd.DataFrame]:
        with transported():
            yield from self._step(None, timerValues.getCurrentWatermarkInMs())

    def close(self) -> None:
        pass

    def _step(self, table, watermark_ms: int) -> Iterator[pd.DataFrame]:
        row = stored_value(self.value)
        n = len(self.patterns)
        state = self.engine.new_state() if row is None else \
            state_from_row(row, n, self.workload, self.engine.shared is not None)
        outputs, timer, late = self.engine.advance(state, table, max(int(watermark_ms), 0))
        if late and self.late_counter is not None:
            self.late_counter.add(late)
        self.value.update(state_to_row(state, self.workload))
        wanted = [] if timer == NO_TIMER else [timer]
        current = [int(t) for t in self.handle.listTimers()]
        if current != wanted:
            for t in current:
                self.handle.deleteTimer(t)
            for t in wanted:
                self.handle.registerTimer(t)
        batches = [tag_batch(i, b, self.output_schema) for i, b in outputs if b.num_rows]
        blob = to_bytes(pa.Table.from_batches(batches)) if batches else None
        if blob or late:  # the late count: where no accumulator can take it (late.py)
            yield pd.DataFrame({LATE_COLUMN: [int(late)], OUT_COLUMN: [blob or None]})


# --- wiring ---------------------------------------------------------------------------------
def streaming_pass(source: DataFrame, plans: list[QueryPlan], sharing: dict | None = None
                   ) -> tuple[SharedPass, DataFrame]:
    """The tagged rows (runtime/one_pass layout) of every plan over the streaming
    source: one stateful operator per partitioning group, unioned into one stream;
    ``sharing`` (the cepsql.sharing.* settings) plans each group's shared DAG."""
    for plan in plans:
        check_streamable(source, plan)
    use_rocksdb(source)
    name = _late_name()
    counter = late_counter(source.sparkSession, name)
    shared = plan_pass(arrow_schema(source), plans, sharing or {"algorithm": "NONE"})
    inputs = []
    for group in shared.groups:
        df = source
        if group.prepare:
            df = df.select("*", *[F.expr(to_spark_sql(e)).alias(n) for n, e in group.prepare])
        inputs.append(df)
    shared.bind([arrow_schema(df) for df in inputs])
    outputs = []
    for group, df in zip(shared.groups, inputs):
        for p in group.patterns:
            check_streamable_worker(p.bound.worker)
        keys = list(group.partition_columns)
        sort_keys = group.sort_keys[len(keys):]
        event_column = sort_keys[0].column  # a source column (check_streamable)
        packed = _packed(df, keys)
        processor = WorkloadProcessor(group.patterns, event_column, sort_keys,
                                      shared.output_schema, task_counter(counter),
                                      group.global_plan)
        outputs.append(packed.groupBy(F.col(KID_COLUMN)).transformWithStateInPandas(
            processor, OUTPUT_SCHEMA, "Append", "EventTime"))
    blobs = observe_late(reduce(DataFrame.unionByName, outputs), name, counter)
    tagged = blobs.mapInArrow(RowUnpacker(), from_arrow_schema(shared.output_schema))
    return shared, tagged


def _late_name() -> str:
    """The generated ``__cep_workload...`` name ``spark.cep.late_rows()`` lists a
    workload pass's late rows under."""
    from cepsql.parse.splice import new_view_name
    return "__cep_workload_" + new_view_name()


def _packed(df: DataFrame, keys: list[str]) -> DataFrame:
    """Rows packed per key as Arrow IPC (packing.RowPacker): one row per key and input
    batch, with the key's identity (KID_COLUMN, Spark's grouping of the key values)
    that the workload's operator is keyed by (one state per key)."""
    schema = StructType([StructField(BUCKET_COLUMN, IntegerType(), False),
                         StructField(KID_COLUMN, StringType(), False),
                         StructField(ROWS_COLUMN, BinaryType())])
    return df.mapInArrow(RowPacker(keys), schema)


# --- matches() ------------------------------------------------------------------------------
def streaming_matches(clauses, passes: dict[str, tuple[SharedPass, DataFrame]]) -> DataFrame:
    """The workload's matches (view, partition VARIANT, match_number, measures VARIANT,
    as the batch ``Workload.matches``) from each source's ONE tagged stream, by one
    projection that picks each row's view by its tag."""
    parts = []
    for source, (shared, tagged) in passes.items():
        mine = [c for c in clauses if c.source == source and c.index >= 0]
        bound = {p.index: p.bound for g in shared.groups for p in g.patterns}
        flat = [F.col(TAG)]
        for c in mine:
            for f in bound[c.index].worker_schema:
                flat.append(F.col(result_column(c.index))[f.name].alias(_flat(c.index, f.name)))
        rows = tagged.select(*flat)
        view = partition = number = measures = None
        for c in mine:
            v, p, m, ms = _clause_columns(c, bound[c.index])
            hit = F.col(TAG) == c.index
            view = F.when(hit, v) if view is None else view.when(hit, v)
            partition = F.when(hit, p) if partition is None else partition.when(hit, p)
            number = F.when(hit, m) if number is None else number.when(hit, m)
            measures = F.when(hit, ms) if measures is None else measures.when(hit, ms)
        if view is None:
            continue
        parts.append(rows.select(view.alias("view"), partition.alias("partition"),
                                 number.alias("match_number"), measures.alias("measures")))
    return reduce(DataFrame.unionByName, parts)


def _flat(index: int, name: str) -> str:
    return f"__cep_w{index}_{name}"


def _clause_columns(clause, bound):
    """The batch Workload._clause_matches columns of one clause, over its flattened
    worker columns."""
    keys = set(clause.plan.partition_columns)
    names = {f.name for f in bound.worker_schema}
    projection = [(n, _renamed(e, clause.index, names)) for n, e in bound.final_projection]
    exprs = {n: F.expr(to_spark_sql(e)) for n, e in projection}
    part = [n for n, e in bound.final_projection if getattr(e, "column", None) in keys]
    other = [n for n, _ in bound.final_projection if n not in part]

    def variant(chosen):
        if not chosen:
            return F.expr("to_variant_object(named_struct())")
        return F.to_variant_object(F.struct(*[exprs[n].alias(n) for n in chosen]))
    number = F.col(quote_identifier(_flat(clause.index, MATCH_NUMBER_COLUMN)))
    return F.lit(clause.view), variant(part), number, variant(other)


def _renamed(value, index: int, names: set[str]):
    """value (an Expr, or a tuple/list holding some, as Case.whens) with every worker
    column reference pointing at its flattened column."""
    if isinstance(value, ColumnRef):
        if value.var is None and value.column in names:
            return dataclasses.replace(value, column=_flat(index, value.column))
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_renamed(v, index, names) for v in value)
    if not isinstance(value, Expr) or not dataclasses.is_dataclass(value):
        return value
    changes = {f.name: _renamed(getattr(value, f.name), index, names)
               for f in dataclasses.fields(value)}
    return dataclasses.replace(value, **changes)
