"""EXPLAIN ANALYZE on Spark: run a statement's clauses with their figures collected.

Each clause runs as ``run_plan`` does (not time-sliced), with three side channels that
work on classic sessions and on Spark Connect alike (no accumulators; ``DataFrame.observe``
metrics, delivered with the action's result):

* the clause's input observed: rows read;
* the prepared input (after the relevance filter) observed: rows kept;
* every task's worker is wrapped (``AnalyzedWorker``): it counts the rows and
  PARTITION BY groups it is fed, per variable the rows where its DEFINE's conjuncts on
  the current row and PREV/NEXT of it hold (run_stats.PositionalCounts: the task sees
  its groups sorted, as the evaluator does) and times the task's stages (waiting for its
  sorted input, evaluation, handing the output on), and after its stream one extra row
  carries that and the evaluator's counters as JSON in ``STATS_COLUMN``; the rows are
  collected by an observed ``collect_list`` and filtered out before the final projection.

The ordinary path (``run_plan``) is untouched: the evaluators' counters are always on."""
from __future__ import annotations

import json
import time
from typing import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from cepsql.errors import CepUnsupportedError
from cepsql.exprs.spark_arrow import arrow_schema
from cepsql.compile.query_plan import QueryPlan
from cepsql.planning.options import options_from_conf
from cepsql.runtime.run_stats import ClauseStatistics, GroupSizes, PositionalCounts, \
    RunStatistics
from cepsql.runtime.workers import bind_worker
from cepsql.backends.spark.columns import column, shuffle_partitions, sort_column
from cepsql.backends.spark.execute import final_frame, map_in_arrow, prepared_input, \
    co_located, relevant_rows
from cepsql.backends.spark.strict_breaks import with_global_breaks

__all__ = ["AnalyzedWorker", "SparkAnalysis", "STATS_COLUMN", "analyzed_schema", "session_ansi"]

STATS_COLUMN = "__cep_task_stats"


class AnalyzedWorker:
    """A plan's worker that also reports, per task, what it was fed and counted (one
    extra output row, STATS_COLUMN set, every other column NULL)."""

    def __init__(self, worker, schema: pa.Schema, partition_columns: list[str], spec,
                 ansi: bool):
        self.worker = worker
        self.schema = schema  # the analyzed output schema (analyzed_schema)
        self.partition_columns = partition_columns
        self.spec = spec  # the clause (its DEFINE conjuncts are counted; None: none)
        self.ansi = ansi  # the session's spark.sql.ansi.enabled

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        sizes = GroupSizes(self.partition_columns)
        held = None if self.spec is None else \
            PositionalCounts(self.spec, self.partition_columns, self.ansi)
        seconds = {"input": 0.0, "output": 0.0}
        rows = 0

        def fed() -> Iterator[pa.RecordBatch]:
            nonlocal rows
            source = iter(batches)
            while True:
                started = time.perf_counter()
                batch = next(source, None)
                seconds["input"] += time.perf_counter() - started
                if batch is None:
                    return
                sizes.add(batch)
                if held is not None:
                    held.add(batch)
                rows += batch.num_rows
                yield batch

        started = time.perf_counter()
        for out in self.worker(fed()):
            handed = time.perf_counter()
            yield pa.RecordBatch.from_arrays(
                [*out.columns, pa.nulls(out.num_rows, pa.string())], schema=self.schema)
            seconds["output"] += time.perf_counter() - handed
        total = time.perf_counter() - started
        seconds["evaluation"] = total - seconds["input"] - seconds["output"]
        report = {"rows": rows, "groups": sizes.sizes(), "seconds": seconds,
                  "variables": {} if held is None else held.counts(),
                  "counters": _plain(getattr(self.worker, "last_stats", None) or {})}
        yield pa.RecordBatch.from_arrays(
            [pa.nulls(1, f.type) for f in self.schema][:-1] + [pa.array([json.dumps(report)])],
            schema=self.schema)


def session_ansi(spark) -> bool:
    """The session's spark.sql.ansi.enabled, which the task's Arrow columns follow."""
    return options_from_conf(lambda k: spark.conf.get(k, None)).ansi


def analyzed_schema(worker_schema: pa.Schema) -> pa.Schema:
    """The worker's schema, every column nullable (the stats row), plus STATS_COLUMN."""
    return pa.schema([f.with_nullable(True) for f in worker_schema]
                     + [pa.field(STATS_COLUMN, pa.string())])


class SparkAnalysis:
    """The observations of one EXPLAIN ANALYZE statement: ``run_clause`` is rewrite()'s
    clause_runner, ``finish`` (after the action) fills ``stats``, one entry per clause."""

    def __init__(self) -> None:
        self.stats = RunStatistics()
        # per clause run: its figures, plan, observations, whether rows were filtered
        self._pending: list[tuple[ClauseStatistics, QueryPlan, dict[str, Observation],
                                  bool]] = []

    def run_clause(self, df: DataFrame, plan: QueryPlan, source=None) -> DataFrame:
        if df.isStreaming:
            raise CepUnsupportedError("EXPLAIN ANALYZE runs batch queries only (the input "
                                      "is a stream)")
        record = self.stats.clause(None)
        seen = {"input": Observation(), "kept": Observation(), "tasks": Observation()}
        df = df.observe(seen["input"], F.count(F.lit(1)).alias("rows"))
        relevance = plan.relevance_filter is not None and relevant_rows(df, plan) is not df
        df = prepared_input(df, plan)
        df = df.observe(seen["kept"], F.count(F.lit(1)).alias("rows"))
        if plan.break_column is not None:
            df = with_global_breaks(df, plan, shuffle_partitions(df))
        bound = bind_worker(plan, arrow_schema(df))
        df = co_located(df, plan.partition_columns)
        sort = [column(c).asc_nulls_first() for c in plan.partition_columns]
        sort += [sort_column(k) for k in plan.sort_keys]
        if sort:
            df = df.sortWithinPartitions(*sort)
        schema = analyzed_schema(bound.worker_schema)
        worker = AnalyzedWorker(bound.worker, schema, plan.partition_columns, plan.spec,
                                session_ansi(df.sparkSession))
        out = map_in_arrow(df, worker, from_arrow_schema(schema))
        out = out.observe(seen["tasks"], F.collect_list(column(STATS_COLUMN)).alias("tasks"),
                          F.count_if(column(STATS_COLUMN).isNull()).alias("rows"))
        out = out.where(column(STATS_COLUMN).isNull()).drop(STATS_COLUMN)
        self._pending.append((record, plan, seen, relevance))
        record.notes.append("on Spark the clause runs unsliced; shuffle+sort is the time its "
                            "tasks waited for their sorted input (scan, shuffle read, sort), "
                            "evaluation and output the time in the evaluator and handing its "
                            "rows on, each summed over the tasks")
        return final_frame(out, bound)

    def for_plans(self, plans: list[QueryPlan]) -> list[ClauseStatistics | None]:
        """The figures of each of plans (None for a plan this analysis did not run, e.g.
        a cep_match table function's)."""
        by_plan = {id(plan): record for record, plan, _, _ in self._pending}
        return [by_plan.get(id(plan)) for plan in plans]

    def finish(self) -> RunStatistics:
        """Fill each clause's figures from its observations (after the action ran)."""
        for record, plan, seen, relevance in self._pending:
            record.rows_read = int(seen["input"].get["rows"])
            kept = seen["kept"].get
            if relevance:
                record.rows_relevant = int(kept["rows"])
            tasks = seen["tasks"].get
            reports = [json.loads(t) for t in tasks["tasks"] or []]
            record.variable_rows = _summed([r["variables"] for r in reports], plan)
            record.record([r["counters"] for r in reports])
            record.partition_rows = [g for r in reports for g in r["groups"]]
            for r in reports:
                for stage, value in r["seconds"].items():
                    record.add_seconds("shuffle+sort" if stage == "input" else stage, value)
            record.output_rows = int(tasks["rows"])
        return self.stats


def _summed(per_task: list[dict], plan: QueryPlan) -> dict[str, int | None]:
    """The tasks' per-variable counts added up (None where a task could not count; a
    clause no task ran, as over an empty input, counts 0 where a conjunct exists)."""
    total = PositionalCounts(plan.spec, plan.partition_columns).counts()
    for counts in per_task:
        for var, held in counts.items():
            total[var] = None if held is None or total[var] is None else total[var] + held
    return total


def _plain(counters: dict) -> dict:
    """The counters as JSON values (numpy integers as ints)."""
    return {k: (v if isinstance(v, (str, bool)) else int(v)) for k, v in counters.items()}
