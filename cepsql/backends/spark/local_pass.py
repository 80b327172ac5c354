"""A small workload pass's tagged rows on the driver, cut into each view's frame.

``Workload.dataframes()`` of a pass of at most ``cepsql.workload.localRows`` rows brings
the tagged rows to the driver once (one Arrow table). Each clause's frame is then its own
slice of that table: the rows of its tag (one stable sort of the tags for all clauses,
then a contiguous range per clause), its struct column's fields as columns, handed to
Spark as a local relation of exactly the clause's rows. A frame built by Spark instead (a
filter by tag and projections over one shared relation) costs ~100 JVM round trips per
view and a filter over every view's rows at each collect; a slice costs one
``createDataFrame`` (~38 round trips; 30 views: 3,550 -> 1,550 round trips for building
and collecting every frame, bench_workload_spark.py --kind stock), of which 31 fetch the
conf it reads: the pass reads it once for all its frames and hands it to pyspark's
Arrow-table step (6 round trips a frame; 30 views: 1,140 -> ~210).

A final projection that only renames worker columns (the usual MEASURES) is applied to
the slice itself; any other is one ``selectExpr`` over it (Columns instead when its text
holds ``${``: Spark would substitute it, see backends/spark/columns.py).
"""
from __future__ import annotations

import inspect

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructField, StructType

from cepsql.algebra.expressions import ColumnRef, Expr
from cepsql.exprs.spark_sql import quote_identifier, to_spark_sql
from cepsql.backends.spark.columns import expression
from cepsql.backends.spark.task_errors import note_expression

__all__ = ["LocalPass"]


class LocalPass:
    """The tagged rows of one pass (Arrow) under the pass frame's Spark schema; ``frame``
    gives one clause's result from them."""

    def __init__(self, spark: SparkSession, table: pa.Table, schema: StructType, tag: str):
        self.spark = spark
        self.table = table
        self.schema = schema
        tags = np.asarray(table.column(tag).to_numpy(zero_copy_only=False))
        self._order = np.argsort(tags, kind="stable")  # each tag's rows in pass order
        self._tags = tags[self._order]
        self._arrow_conf: tuple | None = None  # _arrow_conf(spark), on the first frame

    def rows(self, index: int) -> np.ndarray:
        """Positions of pattern ``index``'s rows in the table, in the pass's order."""
        lo, hi = np.searchsorted(self._tags, [index, index + 1])
        return self._order[lo:hi]

    def frame(self, index: int, column: str, projection: list[tuple[str, Expr]],
              drop: str | None = None) -> DataFrame:
        """Pattern ``index``'s result: the fields of its struct ``column`` on its rows,
        under ``projection`` (output name -> expression over those fields); ``drop``: a
        boolean field whose TRUE rows are left out (a time-sliced pass's copies)."""
        struct_field = self.schema[column]
        fields: StructType = struct_field.dataType
        taken = self.table.column(column).take(pa.array(self.rows(index), pa.int64()))
        values = taken.combine_chunks() if taken.num_chunks else pa.array([], taken.type)
        if drop is not None:
            values = values.filter(pc.invert(pc.fill_null(values.field(drop), False)))
        arrays = dict(zip([values.type.field(k).name for k in range(values.type.num_fields)],
                          values.flatten()))

        def spark_field(name: str, source: str) -> StructField:
            f = fields[source]
            return StructField(name, f.dataType, struct_field.nullable or f.nullable)
        if all(_renamed(e) for _, e in projection):
            return self._relation(
                pa.Table.from_arrays([arrays[e.column] for _, e in projection],
                                     names=[n for n, _ in projection]),
                StructType([spark_field(n, e.column) for n, e in projection]))
        rows = self._relation(
            pa.Table.from_arrays(list(arrays.values()), names=list(arrays)),
            StructType([spark_field(f.name, f.name) for f in fields.fields]))
        return projected(rows, projection)

    def _relation(self, table: pa.Table, schema: StructType) -> DataFrame:
        """``spark.createDataFrame(table, schema)``: with the conf it reads fetched once
        for all the pass's frames (pyspark fetches 8 keys per call: 31 of its 38 JVM
        round trips), where this pyspark's Arrow-table step takes them as arguments."""
        if self._arrow_conf is None:
            self._arrow_conf = _arrow_conf(self.spark)
        if not self._arrow_conf:
            return self.spark.createDataFrame(table, schema)
        return self.spark._create_from_arrow_table(table, schema, *self._arrow_conf)


#: the parameters of pyspark's SparkConversionMixin._create_from_arrow_table (4.x) after
#: table and schema: the session conf createDataFrame reads for an Arrow table
_ARROW_STEP = ("timezone", "prefer_timestamp_ntz", "prefers_large_var_types",
               "arrow_batch_size")


def _arrow_conf(spark: SparkSession) -> tuple:
    """The arguments createDataFrame hands its Arrow-table step after table and schema,
    from one read of the conf; () when this pyspark's step takes others (then frames
    call createDataFrame itself)."""
    step = getattr(spark, "_create_from_arrow_table", None)
    try:
        names = tuple(inspect.signature(step).parameters)[2:]
    except (TypeError, ValueError):  # no such step
        return ()
    if names != _ARROW_STEP:
        return ()
    get = spark.conf.get
    return (get("spark.sql.session.timeZone"),
            get("spark.sql.timestampType") == "TIMESTAMP_NTZ",
            get("spark.sql.execution.arrow.useLargeVarTypes") == "true",
            int(get("spark.sql.execution.arrow.maxRecordsPerBatch")))


def projected(rows: DataFrame, projection: list[tuple[str, Expr]]) -> DataFrame:
    """rows under projection: one ``selectExpr`` (a few JVM round trips; a Column per
    item costs ~10 each), Columns when some text holds ``${``."""
    texts = []
    for name, expr in projection:
        text = to_spark_sql(expr)
        if not _renamed(expr):
            note_expression(text, expr)
        texts.append(f"{text} AS {quote_identifier(name)}")
    if any("${" in t for t in texts):
        return rows.select(*[expression(e).alias(n) for n, e in projection])
    return rows.selectExpr(*texts)


def _renamed(expr: Expr) -> bool:
    """expr is a worker column as it is (the projection only names it)."""
    return isinstance(expr, ColumnRef) and expr.var is None
