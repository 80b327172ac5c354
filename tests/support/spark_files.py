"""Spark file-source settings for tests that need many small splits."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


@contextmanager
def small_file_splits(spark, max_partition_bytes: int) -> Iterator[None]:
    """Files cut into splits of a few row groups each, several files per partition (the
    settings are unset afterwards: the session is shared)."""
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(max_partition_bytes))
    spark.conf.set("spark.sql.files.openCostInBytes", "100")
    try:
        yield
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
        spark.conf.unset("spark.sql.files.openCostInBytes")
