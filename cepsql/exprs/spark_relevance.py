"""The CEP relevance pushdown as a Spark WHERE (analyze/relevance.py decides which rows
can matter): one home for the batch and the streaming backend, which never import each
other."""
from __future__ import annotations

from pyspark.sql import DataFrame

from cepsql.algebra.expressions import Expr
from cepsql.errors import CepError
from cepsql.exprs.spark_conf import conf_value
from cepsql.exprs.spark_sql import to_spark_sql

RELEVANCE_CONF = "cepsql.pushdown.relevanceFilter"  # "false" keeps every row


def where_relevant(df: DataFrame, condition: Expr | None) -> DataFrame:
    """df without the rows ``condition`` (a plan's relevance_filter) drops: a plain WHERE
    on the source, which Spark pushes below the shuffle and, where it can, into the scan.
    df itself when there is no condition, RELEVANCE_CONF is "false", or Spark SQL text
    cannot express the condition (dropping rows is only ever an optimisation)."""
    if condition is None:
        return df
    if (conf_value(df.sparkSession, RELEVANCE_CONF, "true") or "").strip().lower() == "false":
        return df
    try:
        text = to_spark_sql(condition)
    except CepError:  # a function Spark SQL text cannot express: keep every row
        return df
    return df.where(text)
