"""The ordered scan's overlap rows read on the driver (cepsql/backends/spark/parquet_rows.py):
the rows, values and input partitions the overlap job collects, without a Spark job; None
wherever that cannot be promised; and the first query over new time-ordered Parquet
files runs one Spark job (the query's own), with the in-process backend's rows."""
from __future__ import annotations

import decimal
import math
import os
import uuid
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

import cepsql
from cepsql.backends.spark import ordered_scan, parquet_rows
from cepsql.backends.spark.parquet_rows import driver_rows
from test_spark_ordered_scan import ARROW_SCHEMA, SQL, _rows, _ticks
from test_spark_slicing import _null_normal
from support.spark_files import small_file_splits

N = 2000
SPANS = [(-5, 40), (700, 760), (1490, 1530)]  # (the key as integers: ts micros, t)
CHAIN = ("SELECT * FROM ev MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(A.ts) AS ta, "
         "LAST(C.ts) AS tc, C.price AS p ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
         "PATTERN (A B C) DEFINE A AS tag = 'x', B AS tag = 'y', C AS tag = 'z' AND "
         "C.price >= A.price)")


def _table() -> pa.Table:
    """Columns of the types Spark and pyarrow read alike, with their hard values."""
    i = np.arange(N, dtype=np.int64)
    rnd = np.random.default_rng(11)
    v = rnd.random(N)
    v[[3, 710, 1500]] = [math.nan, -0.0, math.inf]
    return pa.table({
        "t": pa.array(i),
        "ts": pa.array(i + 1_700_000_000_000_000, pa.timestamp("us", tz="UTC")),
        "ntz": pa.array(i * 1000, pa.timestamp("ms")),
        "day": pa.array((i // 50 + 19_000).astype(np.int32)).view(pa.date32()),
        "dec": pa.array([None if k % 11 == 0 else
                         decimal.Decimal(f"{k * 7919 - 5_000_000}.0123456789")
                         for k in range(N)], pa.decimal128(38, 10)),
        "big": pa.array((i - N // 2) * 4_611_686_018_427_387 + 9_223_372_036_854_775_000 // 2),
        "v": pa.array(v, mask=(i % 13 == 1)),
        "s": pa.array([None if k % 17 == 0 else "ü€x"[k % 3] * (k % 4) for k in range(N)]),
        "flag": pa.array(i % 3 == 0),
    })


@pytest.fixture
def small_splits(spark):
    with small_file_splits(spark, 9000):
        yield


def _write(where: str, table: pa.Table) -> str:
    os.makedirs(where, exist_ok=True)
    pq.write_table(table.slice(0, 900), os.path.join(where, "a.parquet"), row_group_size=120)
    pq.write_table(table.slice(900), os.path.join(where, "b.parquet"), row_group_size=200)
    return where


def _prepared(frame):
    """A projection like the overlap job's: file columns, computed ones, a flag."""
    return frame.select(
        "*", F.lit(0).cast("long").alias("pos"), (F.col("s") == "üü").alias("is_u"),
        (F.col("dec") * 3).alias("dec3"), F.expr("date_add(day, 1)").alias("next_day"),
        F.expr("v > 0.5 OR flag").alias("vf"), F.expr("timestamp_seconds(t)").alias("tsec"),
        F.coalesce(F.expr("s IS NOT NULL AND t % 2 = 0"), F.lit(False)).alias("__keep"))


class _Group:
    """Counts the Spark jobs started inside, in a job group of their own (thread-local;
    cleared after: a group "" would hide later jobs from group None)."""

    def __init__(self, spark):
        self.sc = spark.sparkContext
        self.name = f"cepsql-parquet-rows-{uuid.uuid4().hex}"

    def __enter__(self):
        self.sc.setJobGroup(self.name, "jobs counted by test_spark_parquet_rows")
        return self

    def __exit__(self, *exc):
        for key in ("spark.jobGroup.id", "spark.job.description",
                    "spark.job.interruptOnCancel"):
            self.sc.setLocalProperty(key, None)

    def jobs(self) -> int:
        """Jobs of the group so far (the listener bus drained first: it runs behind)."""
        self.sc._jsc.sc().listenerBus().waitUntilEmpty(60_000)
        return len(self.sc.statusTracker().getJobIdsForGroup(self.name))


def _normal(table: pa.Table) -> list[tuple]:
    """Rows in (partition, key) order; NaN equal to NaN."""
    rows = [tuple("NaN" if isinstance(v, float) and v != v else v for v in r.values())
            for r in table.to_pylist()]
    at = table.column_names.index("__pid"), table.column_names.index("t")
    return sorted(rows, key=lambda r: (r[at[0]], r[at[1]]))


@pytest.mark.parametrize("key", ["t", "ts"])
def test_driver_rows_equal_the_overlap_job(spark, tmp_path, small_splits, key):
    """Over two files cut into many splits (partitions of several row groups and files),
    the rows in three time ranges as the job reads them -- each column's values and
    type (decimals, NaN, -0.0, NULLs, dates, UTC and NTZ timestamps, strings), the
    computed columns, each row's input partition -- and no Spark job runs."""
    frame = _prepared(spark.read.parquet(_write(str(tmp_path / "f"), _table())))
    assert frame.rdd.getNumPartitions() > 3
    spans = SPANS if key == "t" else [(lo + 1_700_000_000_000_000, hi + 1_700_000_000_000_000)
                                      for lo, hi in SPANS]
    with _Group(spark) as group:
        got = driver_rows(frame, key, spans, "__pid")
        assert group.jobs() == 0
    column = F.col(key) if key == "t" else F.expr("unix_micros(ts)")
    inside = None
    for lo, hi in spans:
        c = column.between(lo, hi)
        inside = c if inside is None else inside | c
    want = frame.where(inside).select("*", F.spark_partition_id().alias("__pid")).toArrow()
    assert got is not None and got.schema == want.schema
    assert got.num_rows == 41 + 61 + 41
    assert _normal(got) == _normal(want)
    assert len(set(got.column("__pid").to_pylist())) > 2


def test_driver_rows_decline(spark, tmp_path, monkeypatch):
    """None (the job runs) for what the driver cannot read as Spark does: an unsigned
    column, a file without a column, directory partitions, a filtered or
    nondeterministic frame, a source that is not files, more than MAX_ROWS rows."""
    table = _table().select(["t", "v", "s"])
    frame = spark.read.parquet(_write(str(tmp_path / "ok"), table))
    assert driver_rows(frame.select("*", F.lit(1).alias("one")), "t", SPANS, "p") is not None
    unsigned = table.append_column("u", pa.array(np.arange(N, dtype=np.uint32)))
    frame = spark.read.parquet(_write(str(tmp_path / "u"), unsigned))
    assert driver_rows(frame.select("*", F.lit(1).alias("one")), "t", SPANS, "p") is None
    assert driver_rows(frame.select("t", "v", F.lit(1).alias("one")), "t", SPANS,
                       "p") is not None  # (the unsigned column not read)
    where = str(tmp_path / "m")
    os.makedirs(where)
    pq.write_table(table.slice(0, 1000), os.path.join(where, "a.parquet"))
    pq.write_table(table.slice(1000).drop_columns(["s"]), os.path.join(where, "b.parquet"))
    merged = spark.read.option("mergeSchema", "true").parquet(where)
    assert driver_rows(merged.select("*", F.lit(1).alias("one")), "t", SPANS, "p") is None
    parted = str(tmp_path / "d")
    for day in (1, 2):
        _write(os.path.join(parted, f"day={day}"), table.slice((day - 1) * 1000, 1000))
    frame = spark.read.parquet(parted)
    assert driver_rows(frame.select("*", F.lit(1).alias("one")), "t", SPANS, "p") is None
    frame = spark.read.parquet(str(tmp_path / "ok"))
    assert driver_rows(frame.where("v > 0.1").select("*", F.lit(1).alias("one")), "t",
                       SPANS, "p") is None
    assert driver_rows(frame.select("*", F.rand().alias("r")), "t", SPANS, "p") is None
    listed = spark.createDataFrame(table.to_pandas())
    assert driver_rows(listed.select("*", F.lit(1).alias("one")), "t", SPANS, "p") is None
    monkeypatch.setattr(parquet_rows, "MAX_ROWS", 100)
    assert driver_rows(frame.select("*", F.lit(1).alias("one")), "t", SPANS, "p") is None


@pytest.mark.parametrize("sql", [SQL, CHAIN], ids=["cep a b c", "sql2016 chain"])
def test_cold_query_over_new_files_runs_one_job(spark, tmp_path, monkeypatch, sql):
    """The first query over new time-ordered Parquet files (several input partitions,
    gap pushdown, the session's memo empty) runs its own job alone: the profiles from
    the footers, the overlap rows from the files on the driver (formerly a second job);
    the rows equal the in-process backend's."""
    monkeypatch.setattr(ordered_scan, "OVERLAP_SHARE", 1e9)  # (tiny data: the chain's
    path = str(tmp_path / "ev.parquet")                    # rows are a large share)
    rows = _ticks(900)
    for i, r in enumerate(rows):
        r["price"] = (i * 7) % 10
    pq.write_table(pa.Table.from_pylist(rows, ARROW_SCHEMA), path, row_group_size=100)
    spark.conf.set("spark.sql.files.maxPartitionBytes", "3000")
    spark.conf.set("cepsql.slicing.bounds", "scan")
    spark.cep.clear_cache()
    try:
        spark.read.parquet(path).createOrReplaceTempView("ev")
        with _Group(spark) as group:
            got = _rows(spark.cep.sql(sql))
            assert group.jobs() == 1  # (the query's own: formerly the overlap job too)
        explained = spark.cep.explain(sql)
        assert "Time slicing: an ordered scan" in explained and "gap pushdown" in explained
        assert ("SKIP PAST LAST ROW chains across slices" in explained) == (sql == CHAIN)
        want = cepsql.match_recognize(sql, ev=pa.Table.from_pylist(rows, ARROW_SCHEMA))
        assert got == Counter(tuple(_null_normal(v) for v in r)
                              for r in want.itertuples(index=False))
        assert len(got) > 20
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
        spark.conf.unset("cepsql.slicing.bounds")
        spark.cep.clear_cache()
