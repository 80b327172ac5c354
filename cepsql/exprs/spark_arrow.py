"""The Arrow schema Spark hands to ``mapInArrow`` for a DataFrame: the one conversion of a
Spark schema to Arrow that the batch and the streaming backends both plan and bind with
(both read the session's time zone and large-type settings the same way)."""
from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema

from cepsql.exprs.spark_conf import conf_value, spark_default

__all__ = ["arrow_schema"]


def arrow_schema(df: DataFrame) -> pa.Schema:
    """The Arrow schema of the batches Spark hands to mapInArrow for df."""
    spark = df.sparkSession
    large = (conf_value(spark, "spark.sql.execution.arrow.useLargeVarTypes", "false")
             or "").lower() == "true"
    return to_arrow_schema(df.schema, timezone=spark_default(spark, "spark.sql.session.timeZone"),
                           prefers_large_types=large)
