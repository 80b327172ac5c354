"""Spark Column helpers every Spark module builds its DataFrames with: a column by its
(quoted) name, a sort key as an ordering Column, and the session's shuffle width."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cepsql.compile.query_plan import SortColumn
from cepsql.exprs.spark_conf import conf_value
from cepsql.exprs.spark_sql import quote_identifier

__all__ = ["column", "sort_column", "shuffle_partitions"]


def column(name: str) -> Column:
    """The column named ``name`` exactly (quoted: dots and odd characters are literal)."""
    return F.col(quote_identifier(name))


def sort_column(key: SortColumn) -> Column:
    """key as an ordering Column (direction and NULL placement as written)."""
    col = column(key.column)
    if key.ascending:
        return col.asc_nulls_first() if key.nulls_first else col.asc_nulls_last()
    return col.desc_nulls_first() if key.nulls_first else col.desc_nulls_last()


def shuffle_partitions(df: DataFrame) -> int:
    """spark.sql.shuffle.partitions of df's session (the width every repartition uses);
    200, Spark's default, when unset or not a number (Databricks accepts ``auto``)."""
    value = (conf_value(df.sparkSession, "spark.sql.shuffle.partitions") or "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else 200
