"""Run a QueryPlan on a Spark DataFrame: prepare columns, co-locate and sort partitions,
stream Arrow batches through the plan's worker with mapInArrow, project the result."""
from __future__ import annotations

from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import from_arrow_schema

from cepsql.algebra.expressions import AGGREGATES
from cepsql.errors import CepUnsupportedError, transported
from cepsql.exprs.spark_arrow import arrow_schema
from cepsql.exprs.spark_relevance import RELEVANCE_CONF, where_relevant  # noqa: F401  (re-exported)
from cepsql.exprs.spark_sql import to_spark_sql
from cepsql.compile.query_plan import QueryPlan
from cepsql.backends.spark.columns import column, expression, shuffle_partitions, sort_column
from cepsql.backends.spark.strict_breaks import with_global_breaks
from cepsql.runtime.workers import bind_worker


class TaskWorker:
    """The mapInArrow function: the plan's worker, with its CepErrors made to reach the
    driver as themselves (errors.transported); ``names``, when given, are the input
    columns' own names, restored before the worker sees a batch (see map_in_arrow)."""

    def __init__(self, worker, names: list[str] | None = None):
        self.worker = worker
        self.names = names

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if self.names is not None:
            batches = (_renamed(batch, self.names) for batch in batches)
        with transported():
            yield from self.worker(batches)


def _renamed(batch: pa.RecordBatch, names: list[str]) -> pa.RecordBatch:
    schema = pa.schema([f.with_name(n) for f, n in zip(batch.schema, names)],
                       metadata=batch.schema.metadata)
    return pa.RecordBatch.from_arrays(batch.columns, schema=schema)


def map_in_arrow(df: DataFrame, worker, schema) -> DataFrame:
    """``df.mapInArrow(TaskWorker(worker), schema)`` whatever df's column names: pyspark
    looks every input column up by name, which fails for a name holding a dot or a
    backquote (``t.col``, ``a`b``) even when nothing reads it, so such inputs go over
    under positional names and each task gives the batches their names back."""
    names = df.columns
    if not any("." in n or "`" in n for n in names):
        return df.mapInArrow(TaskWorker(worker), schema)
    positional = [f"__cep_in{i}" for i in range(len(names))]
    return df.toDF(*positional).mapInArrow(TaskWorker(worker, names), schema)


def relevant_rows(df: DataFrame, plan: QueryPlan) -> DataFrame:
    """df without the rows the plan's relevance filter drops (exprs/spark_relevance.py)."""
    return where_relevant(df, plan.relevance_filter)


def prepared_input(df: DataFrame, plan: QueryPlan, relevance: bool = True) -> DataFrame:
    """df (without the rows the relevance filter drops, unless ``relevance`` is False)
    plus the plan's ``prepare_columns``: steps 1 of compile/query_plan.py."""
    if relevance:
        df = relevant_rows(df, plan)
    if plan.prepare_columns:
        try:
            df = df.select("*", *[expression(e).alias(n)
                                  for n, e in plan.prepare_columns])
        except AnalysisException as e:
            if _error_class(e) in ("MISSING_GROUP_BY", "MISSING_AGGREGATION"):
                raise _unknown_aggregate() from None
            raise
    return df


def co_located(df: DataFrame, partition_columns: Sequence[str],
               partitions: int | None = None) -> DataFrame:
    """df with the rows of each ``partition_columns`` value in one Spark partition (all
    rows in one without partition columns: one ordered stream).

    The number of partitions follows the input's size: the shuffle is left without a
    count, so adaptive query execution (on by default) coalesces Spark's
    ``spark.sql.shuffle.partitions`` hash partitions into as many as the shuffled bytes
    need (``spark.sql.adaptive.advisoryPartitionSizeInBytes``, ``...coalescePartitions.*``).
    Coalescing joins whole hash partitions, so a key's rows stay together. A fixed count
    made a 1.4k-row query run 200 tasks (20-40 s on Spark Connect); it needs no
    statistics request, so Spark Connect pays nothing for it. With AQE off the shuffle has
    ``spark.sql.shuffle.partitions`` partitions, as before. ``partitions``, when given,
    fixes the count (time slices: one task per slice, slicing.py)."""
    if not partition_columns:
        return df.repartition(1)
    if partitions:
        return df.repartition(partitions, *[column(c) for c in partition_columns])
    return df.repartition(*[column(c) for c in partition_columns])


def run_plan(df: DataFrame, plan: QueryPlan, partitions: int | None = None) -> DataFrame:
    """The plan's result over df; columns in ``final_projection`` order (``partitions``:
    see co_located)."""
    df = prepared_input(df, plan)
    if plan.break_column is not None:  # STRICT_CONTIGUITY across partitions (R5)
        df = with_global_breaks(df, plan, shuffle_partitions(df))
    bound = bind_worker(plan, arrow_schema(df))
    df = co_located(df, plan.partition_columns, partitions)
    sort = [column(c).asc_nulls_first() for c in plan.partition_columns]
    sort += [sort_column(k) for k in plan.sort_keys]
    if sort:
        df = df.sortWithinPartitions(*sort)
    out = map_in_arrow(df, bound.worker, from_arrow_schema(bound.worker_schema))
    return final_frame(out, bound)


def final_frame(out: DataFrame, bound) -> DataFrame:
    """The clause's result from its worker's output rows: ``bound.final_projection``."""
    try:
        projected = out.select(*[expression(e, strict_division=True).alias(n)
                                 for n, e in bound.final_projection])
    except AnalysisException as e:
        if _error_class(e) in ("MISSING_GROUP_BY", "MISSING_AGGREGATION"):
            raise _unknown_aggregate() from None
        raise
    if _aggregates_matches(projected):
        raise _unknown_aggregate()
    return projected


def _error_class(e: AnalysisException) -> str:
    getter = getattr(e, "getCondition", None) or getattr(e, "getErrorClass", None)
    return (getter() or "") if getter else ""


def _aggregates_matches(df: DataFrame) -> bool:
    """Whether Spark turned the measure projection into an aggregation over all matches
    (a Spark aggregate function in MEASURES that cepsql does not know)."""
    try:
        return df._jdf.queryExecution().analyzed().nodeName() == "Aggregate"
    except Exception:  # Spark Connect: no JVM plan to look at
        return False


def _unknown_aggregate() -> CepUnsupportedError:
    return CepUnsupportedError(
        "a MEASURES or DEFINE expression calls a Spark aggregate function that "
        "MATCH_RECOGNIZE does not compute; supported aggregates: "
        f"{', '.join(sorted(AGGREGATES))}")
