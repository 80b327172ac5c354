"""STRICT_CONTIGUITY with PARTITION BY on Spark: the break column of QueryPlan.

Under STRICT_CONTIGUITY a run may take a row only when it directly follows the run's last
row in the ORDER BY order of the *whole input* (docs/cep_mode.md, R5). The worker sees
one partition at a time, so each row gets a flag beforehand: 1 when its predecessor in
``plan.global_order`` has other partition keys (NULL keys compared as values), 0 for the
globally first row.

The predecessor is found without moving every row into one task: rows go to buckets
that are contiguous ranges of the global order (equal-width ranges of the first order
key, between its finite min and max), a window per bucket gives each row its
predecessor inside the bucket and the bucket's last row, and a bucket's first row takes
the last row of the nearest non-empty bucket before it (a small table, broadcast).
Bucket numbers are a pure function of the row and of the exact min/max, so evaluating
the input more than once (Spark may) gives the same flags. A first key that is not a
number, date or timestamp puts every row into one bucket (one task sorts all rows).
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cepsql.errors import CepUnsupportedError
from cepsql.compile.query_plan import QueryPlan, SortColumn
from cepsql.backends.spark.columns import column, sort_column

_BUCKET, _PREV, _TAIL, _PREV_TAIL = "__cep_gb_bucket", "__cep_gb_prev", "__cep_gb_tail", \
    "__cep_gb_ptail"
_LO, _HI = "__cep_gb_lo", "__cep_gb_hi"
_NUMERIC = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
            T.DecimalType)


def with_global_breaks(df: DataFrame, plan: QueryPlan, buckets: int) -> DataFrame:
    """df plus ``plan.break_column`` (boolean) computed over all its rows."""
    order = plan.global_order or []
    if not order:
        raise CepUnsupportedError("STRATEGY STRICT_CONTIGUITY with PARTITION BY needs an "
                                  "ORDER BY (the order of the whole input)")
    columns = df.columns
    keyed = _with_bucket(df, order[0], max(1, buckets))
    window = Window.partitionBy(column(_BUCKET)).orderBy(*[sort_column(k) for k in order])
    keys = F.struct(*[column(c).alias(f"k{i}") for i, c in enumerate(plan.partition_columns)])
    ranked = keyed.select(
        *[column(c) for c in columns], column(_BUCKET),
        F.lag(keys).over(window).alias(_PREV),
        F.last(keys).over(window.rowsBetween(Window.unboundedPreceding,
                                             Window.unboundedFollowing)).alias(_TAIL))
    tails = ranked.groupBy(_BUCKET).agg(F.first(column(_TAIL)).alias(_TAIL))
    # few rows (one per bucket): a window without PARTITION BY is cheap here
    tails = tails.select(column(_BUCKET), F.lag(column(_TAIL)).over(
        Window.orderBy(column(_BUCKET))).alias(_PREV_TAIL))
    joined = ranked.join(F.broadcast(tails), on=_BUCKET, how="left")
    pred = F.coalesce(column(_PREV), column(_PREV_TAIL))
    same = F.lit(True)
    for i, c in enumerate(plan.partition_columns):
        same = same & column(c).eqNullSafe(pred.getField(f"k{i}"))
    flag = F.when(pred.isNull(), F.lit(False)).otherwise(~same)
    return joined.select(*[column(c) for c in columns], flag.alias(plan.break_column))


def _with_bucket(df: DataFrame, key: SortColumn, buckets: int) -> DataFrame:
    """df plus the bucket number of each row: non-decreasing along the global order
    (NULL keys first or last as the key says; NaN above every number, as Spark sorts)."""
    dtype = df.schema[key.column].dataType
    col = column(key.column)
    if isinstance(dtype, _NUMERIC):
        x = col.cast("double")
    elif isinstance(dtype, T.DateType):
        x = F.unix_date(col).cast("double")
    elif isinstance(dtype, T.TimestampType):
        x = F.unix_micros(col).cast("double")
    else:  # strings, booleans, TIMESTAMP_NTZ (no zone-free monotone number): one bucket
        return df.withColumn(_BUCKET, F.lit(0))
    inf = float("inf")
    finite = F.when(~F.isnan(x) & (x != inf) & (x != -inf), x)
    bounds = df.agg(F.min(finite).alias(_LO), F.max(finite).alias(_HI))
    lo, hi = column(_LO), column(_HI)
    # halves: the difference of two finite doubles may overflow, that of their halves not
    scaled = F.floor((x / 2 - lo / 2) / (hi / 2 - lo / 2) * F.lit(buckets))
    pos = (F.when(hi.isNull() | (hi <= lo), F.lit(0))
           .when(F.isnan(x) | (x == inf), F.lit(buckets - 1))
           .when(x == -inf, F.lit(0))
           .otherwise(F.least(F.lit(buckets - 1.0), F.greatest(F.lit(0.0), scaled))
                      .cast("int")))
    if not key.ascending:
        pos = F.lit(buckets - 1) - pos
    bucket = F.when(col.isNull(), F.lit(-1 if key.nulls_first else buckets)).otherwise(pos)
    return df.crossJoin(F.broadcast(bounds)).withColumn(_BUCKET, bucket).drop(_LO, _HI)
