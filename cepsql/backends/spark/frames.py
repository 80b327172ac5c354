"""Bind cepsql's generated names to DataFrames instead of catalog entries.

A rewritten statement refers to each MATCH_RECOGNIZE result (and each cep_match call)
by a generated name. Registering those as session temp views would leave them behind
while a returned lazy DataFrame may still need them; instead the text goes to
``spark.sql(text, **frames)``, pyspark's own DataFrame formatter: classic pyspark
registers each frame only for the duration of that call and drops it again (the
analysed plan keeps the data), Spark Connect sends the plans along with the text.
Either way nothing generated stays in the session's catalog.
"""
from __future__ import annotations

import re
from typing import Mapping

from pyspark.sql import DataFrame, SparkSession

GENERATED_NAME = re.compile(r"__cep_(?:mr|tf)_[0-9a-f]{8}_\d+")


def sql_with_frames(spark: SparkSession, text: str, frames: Mapping[str, DataFrame]) -> DataFrame:
    """spark.sql(text) where the generated names in text that ``frames`` binds read those
    DataFrames."""
    used = {name: frames[name] for name in set(GENERATED_NAME.findall(text)) if name in frames}
    if not used:
        return spark.sql(text)
    template = GENERATED_NAME.sub(
        lambda m: "{" + m.group(0) + "}" if m.group(0) in used else m.group(0),
        text.replace("{", "{{").replace("}", "}}"))
    return spark.sql(template, **used)


def table_or_frame(spark: SparkSession, name: str, frames: Mapping[str, DataFrame]) -> DataFrame:
    """spark.table(name), or the frame a generated name stands for."""
    key = name.strip().strip("`")
    if key in frames:
        return frames[key]
    return spark.table(name)
