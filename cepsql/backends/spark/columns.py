"""Spark Column helpers every Spark module builds its DataFrames with: a column by its
(quoted) name, an IR expression as a Column, a sort key as an ordering Column, and the
session's shuffle width."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cepsql.algebra.expressions import ColumnRef, Expr
from cepsql.compile.query_plan import SortColumn
from cepsql.backends.spark.task_errors import note_expression
from cepsql.exprs.spark_conf import conf_value
from cepsql.exprs.spark_sql import quote_identifier, to_spark_sql

__all__ = ["column", "expression", "sort_column", "shuffle_partitions"]


def column(name: str) -> Column:
    """The column named ``name`` exactly (quoted: dots and odd characters are literal)."""
    return F.col(quote_identifier(name))


def expression(expr: Expr, *, strict_division: bool = False) -> Column:
    """expr as a Column. A plain column reference (an input column copied to the output,
    say) is a Column by name, never SQL text: Spark substitutes ``${...}`` in the text it
    parses (spark.sql.variable.substitute), which would change a column named ``${x}``.
    strict_division: see ``to_spark_sql``."""
    if isinstance(expr, ColumnRef) and expr.var is None:
        return column(expr.column)
    text = to_spark_sql(expr, strict_division=strict_division)
    note_expression(text, expr)
    return F.expr(text)


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
