"""The Spark side of ``spark.cep.trace`` / ``near_misses``: select the slice's rows in
Spark (PARTITION BY filter, the row range after ORDER BY), collect at most the cap, and
hand them to the one engine (run.py); the result comes back as a Spark DataFrame. Near
misses over every partition run that engine in Spark tasks instead, one group per
partition."""
from __future__ import annotations

from typing import Any, Callable, Mapping

import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StringType, StructField, StructType

from cepsql.algebra.identifiers import quote_identifier
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.debugging.slice import MAX_ROWS, partition_filter, partition_names, row_range
from cepsql.debugging.near_misses import MISS_COLUMNS
from cepsql.debugging.run import near_misses_frame
from cepsql.errors import CepRuntimeError
from cepsql.exprs.spark_sql import to_spark_sql
from cepsql.parse.splice import strip_parens

ROW_COLUMN = "__cep_trace_row"
_SPARK_TYPES = {"int64": LongType(), "string": StringType()}


def clause_source(spark: SparkSession, site, run_query: Callable[[str], DataFrame]) -> DataFrame:
    """The clause's input: its source query (run through ``spark.cep``) or table."""
    if site.source_is_query:
        inner, _ = strip_parens(site.source_text)
        return run_query(inner)
    return spark.table(site.source_text.strip())


def collect_slice(source: DataFrame, spec: MatchRecognizeSpec,
                  partition: Mapping[str, Any] | None, rows: tuple[int, int] | None,
                  max_rows: int = MAX_ROWS) -> pa.Table:
    """The rows of the partitions ``partition`` selects, up to position ``rows[1]`` of each
    (the engine cuts ``rows[0]``), at most ``max_rows`` past the start."""
    df = source
    for index, value in partition_filter(partition_names(spec), partition).items():
        key = spec.partition_by[index]
        df = df.filter(F.expr(to_spark_sql(key.expr)) == F.lit(value))
    first = row_range(rows)[0]
    if rows is not None:
        window = Window.partitionBy(*[F.expr(to_spark_sql(k.expr)) for k in spec.partition_by])
        window = window.orderBy(*_order(spec, df.columns))
        df = df.withColumn(ROW_COLUMN, F.row_number().over(window) - 1)
        df = df.filter(F.col(ROW_COLUMN) < rows[1]).drop(ROW_COLUMN)
    cap = max_rows + first
    collected = df.limit(cap + 1).toArrow()
    if collected.num_rows > cap:
        raise CepRuntimeError(
            f"the slice has more than {max_rows} rows: choose a partition "
            "(partition={...}) or a row range (rows=(first, stop)), or raise max_rows")
    return collected


def _order(spec: MatchRecognizeSpec, columns: list[str]) -> list:
    """ORDER BY, ties broken by every column ascending, nulls first (as the engine)."""
    out = []
    for key in spec.order_by:
        e = F.expr(to_spark_sql(key.expr))
        if key.ascending:
            out.append(e.asc_nulls_first() if key.effective_nulls_first else e.asc_nulls_last())
        else:
            out.append(e.desc_nulls_first() if key.effective_nulls_first else e.desc_nulls_last())
    return out + [F.col(quote_identifier(c)).asc_nulls_first() for c in columns]


def to_spark(spark: SparkSession, frame: pd.DataFrame) -> DataFrame:
    """A trace or near-miss frame as a Spark DataFrame (text columns typed as strings even
    when every value is NULL)."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    fields = [pa.field(f.name, pa.string()) if pa.types.is_null(f.type) else f
              for f in table.schema]
    return spark.createDataFrame(table.cast(pa.schema(fields)))


def spread_near_misses(source: DataFrame, sql: str, spec: MatchRecognizeSpec, k: int,
                       per_partition: bool, max_steps: int, max_rows: int
                       ) -> DataFrame | None:
    """Near misses over every partition, each traced in a Spark task by the same engine
    (``max_rows`` and ``max_steps`` bound each partition), ranked in Spark as the
    in-process ranking does. None when a PARTITION BY key is not a plain input column
    (the caller then collects a slice)."""
    names = partition_names(spec)
    fields = {f.name.lower(): f for f in source.schema.fields}
    if not names or any(getattr(k.expr, "var", None) is not None
                        or getattr(k.expr, "column", "").lower() not in fields
                        for k in spec.partition_by):
        return None
    keys = [fields[k.expr.column.lower()] for k in spec.partition_by]
    out = StructType([StructField(n, f.dataType, True) for n, f in zip(names, keys)]
                     + [StructField(c, _SPARK_TYPES[t], True) for c, t in MISS_COLUMNS.items()])
    arrow_out = to_arrow_schema(out)
    task = _NearMissTask(sql, spec, k, max_steps, max_rows, arrow_out)

    def near_misses_of(table: pa.Table) -> pa.Table:  # typed: Spark infers the UDF kind
        return task(table)
    found = source.groupBy(*[F.col(quote_identifier(f.name)) for f in keys]) \
        .applyInArrow(near_misses_of, out)
    ranks = [F.col(quote_identifier(n)).asc_nulls_first() for n in names]
    if per_partition:
        return found.orderBy(*ranks, F.col("length").desc(), F.col("attempt"))
    return found.orderBy(F.col("length").desc(), *ranks, F.col("attempt")).limit(k)


class _NearMissTask:
    """One partition's near misses (a picklable callable for applyInArrow)."""

    def __init__(self, sql: str, spec: MatchRecognizeSpec, k: int, max_steps: int,
                 max_rows: int, schema: pa.Schema):
        self.sql, self.spec, self.k = sql, spec, k
        self.max_steps, self.max_rows, self.schema = max_steps, max_rows, schema

    def __call__(self, table: pa.Table) -> pa.Table:
        frame = near_misses_frame(self.sql, self.spec, table, self.k, per_partition=True,
                                  max_steps=self.max_steps, max_rows=self.max_rows)
        return pa.Table.from_pandas(frame, schema=self.schema, preserve_index=False)
