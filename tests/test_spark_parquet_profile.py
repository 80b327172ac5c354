"""The ordered scan's partition profiles from Parquet footers
(cepsql/backends/spark/parquet_profile.py): the same profiles as the profile job on
small files cut into several splits, None wherever the footers cannot say, and a cold
query over new time-ordered Parquet files that runs no planning job (with gap pushdown
not even the overlap job: parquet_rows.py)."""
from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cepsql
from cepsql.backends.spark import parquet_profile, profile_cache
from cepsql.backends.spark.gap_scan import profile_input, profile_rows
from cepsql.backends.spark.parquet_profile import RowGroup, footer_profiles, split_row_groups
from test_spark_ordered_scan import ARROW_SCHEMA, SQL, _jobs, _rows, _ticks
from test_spark_slicing import _null_normal
from support.spark_files import small_file_splits

N = 3000


def _columns() -> dict[str, pa.Array]:
    """ORDER BY columns of the types the footers answer for, and their hard cases."""
    rnd = np.random.default_rng(7)
    steps = np.arange(N, dtype=np.int64)
    return {
        "ntz_micros": pa.array(steps * 1000 + 1_700_000_000_000_000, pa.timestamp("us")),
        "utc_millis": pa.array(steps * 7 + 1_700_000_000_000, pa.timestamp("ms", tz="UTC")),
        "ties": pa.array(steps // 3, pa.int64()),
        "nulls": pa.array([None if i % 97 == 5 else i for i in range(N)], pa.int64()),
        "shuffled": pa.array(rnd.permutation(N).astype(np.int32)),
        "date": pa.array((steps // 10 + 19_000).astype(np.int32)).view(pa.date32()),
    }


@pytest.fixture
def small_splits(spark):
    with small_file_splits(spark, 5000):
        yield


def _write(where: str, key: pa.Array) -> None:
    os.makedirs(where, exist_ok=True)
    rnd = np.random.default_rng(3)
    table = pa.table({"ts": key, "v": pa.array(rnd.random(len(key))),
                      "s": pa.array([str(i % 7) for i in range(len(key))])})
    pq.write_table(table.slice(0, 1800), os.path.join(where, "a.parquet"), row_group_size=170)
    pq.write_table(table.slice(1800), os.path.join(where, "b.parquet"), row_group_size=250)


@pytest.mark.parametrize("name", list(_columns()))
def test_footer_profiles_equal_the_profile_job(spark, tmp_path, small_splits, name):
    """Per input partition, count, NULLs, range and strict order as the job finds them
    (row groups assigned to splits by their midpoints); without ``strict`` the same with
    strict False (no data read)."""
    _write(str(tmp_path), _columns()[name])
    frame = profile_input(spark.read.parquet(str(tmp_path)), "ts")
    assert frame.rdd.getNumPartitions() > 4
    job = sorted(profile_rows(frame), key=lambda p: p.pid)
    assert footer_profiles(frame, strict=True) == job
    assert [p.strict for p in footer_profiles(frame, strict=False)] == [False] * len(job)
    assert [(p.count, p.lo, p.hi) for p in footer_profiles(frame, strict=False)] == \
        [(p.count, p.lo, p.hi) for p in job]


def test_footer_profiles_of_spark_written_files(spark, tmp_path):
    """Spark's own TIMESTAMP_MICROS and TIMESTAMP_NTZ files give the job's profiles;
    INT96 (Spark's default for TIMESTAMP, no usable statistics) gives None."""
    base = spark.range(600).selectExpr("timestamp_micros(id * 1000 + 1700000000000000) AS ts",
                                       "cast(id % 5 AS string) AS s").repartition(3)
    written = {}
    for kind, conf in (("int96", "INT96"), ("micros", "TIMESTAMP_MICROS")):
        spark.conf.set("spark.sql.parquet.outputTimestampType", conf)
        written[kind] = str(tmp_path / kind)
        base.sortWithinPartitions("ts").write.parquet(written[kind])
    spark.conf.unset("spark.sql.parquet.outputTimestampType")
    written["ntz"] = str(tmp_path / "ntz")
    base.selectExpr("cast(ts AS timestamp_ntz) AS ts", "s").sortWithinPartitions("ts") \
        .write.parquet(written["ntz"])
    for kind, path in written.items():
        frame = profile_input(spark.read.parquet(path), "ts")
        found = footer_profiles(frame, strict=True)
        if kind == "int96":
            assert found is None
        else:
            assert found == sorted(profile_rows(frame), key=lambda p: p.pid)


def test_footer_profiles_decline(spark, tmp_path):
    """Whatever the footers cannot answer exactly is None (the profile job runs): a
    filter above the scan, a cached frame, a directory partition column as the key,
    a key stored as another type than Spark reads (a cast), a non-Parquet source, too
    much key data to read for the strict order."""
    path = str(tmp_path / "ev")
    _write(path, _columns()["ntz_micros"])
    df = spark.read.parquet(path)
    assert footer_profiles(profile_input(df, "ts"), strict=True) is not None
    assert footer_profiles(profile_input(df.where("s = '1'"), "ts"), strict=True) is None
    assert footer_profiles(profile_input(df.selectExpr("cast(ts AS timestamp) AS ts"), "ts"),
                           strict=True) is None
    cached = spark.read.parquet(path).where("v >= 0").cache()
    try:
        assert footer_profiles(profile_input(cached, "ts"), strict=False) is None
    finally:
        cached.unpersist()
    parted = str(tmp_path / "parted")
    spark.range(20).selectExpr("id % 2 AS ts", "id AS v").write.partitionBy("ts").parquet(parted)
    assert footer_profiles(profile_input(spark.read.parquet(parted), "ts"), False) is None
    json_path = str(tmp_path / "j")
    spark.range(20).selectExpr("id AS ts").write.json(json_path)
    assert footer_profiles(profile_input(spark.read.json(json_path), "ts"), False) is None
    small = parquet_profile.MAX_READ_BYTES
    try:
        parquet_profile.MAX_READ_BYTES = 10
        assert footer_profiles(profile_input(df, "ts"), strict=True) is None
        assert footer_profiles(profile_input(df, "ts"), strict=False) is not None
    finally:
        parquet_profile.MAX_READ_BYTES = small


def test_split_row_groups_by_midpoint():
    """A split reads the row groups whose midpoint (first chunk's start + half the row
    group's compressed bytes) lies in [start, start + length)."""
    groups = [RowGroup(i, 10, 0, i, i, offset, size, 1)
              for i, (offset, size) in enumerate([(4, 100), (104, 50), (154, 300)])]
    assert [g.index for g in split_row_groups(groups, 0, 54)] == []
    assert [g.index for g in split_row_groups(groups, 0, 55)] == [0]
    assert [g.index for g in split_row_groups(groups, 55, 100)] == [1]
    assert [g.index for g in split_row_groups(groups, 155, 200)] == [2]
    assert [g.index for g in split_row_groups(groups, 0, 10_000)] == [0, 1, 2]


@pytest.mark.parametrize("gaps", [True, False])
def test_cold_query_over_new_files_runs_no_profile_job(spark, tmp_path, monkeypatch, gaps):
    """The first query over new time-ordered Parquet files plans from the footers: no
    profile job and no overlap job (gap pushdown), no range job (without it); EXPLAIN says where the
    profiles came from, and the rows equal the in-process backend's."""
    calls = []
    job = profile_cache.profile_rows
    monkeypatch.setattr(profile_cache, "profile_rows", lambda f: calls.append(f) or job(f))
    path = str(tmp_path / "ev.parquet")
    rows = _ticks(600)
    pq.write_table(pa.Table.from_pylist(rows, ARROW_SCHEMA), path, row_group_size=100)
    spark.conf.set("spark.sql.files.maxPartitionBytes", "3000")
    spark.conf.set("cepsql.slicing.bounds", "scan")
    if not gaps:
        spark.conf.set("cepsql.pushdown.relevanceFilter", "false")
    spark.cep.clear_cache()
    try:
        frame = spark.read.parquet(path)
        assert frame.rdd.getNumPartitions() > 1
        frame.createOrReplaceTempView("ev")
        before = _jobs(spark)
        explained = spark.cep.explain(SQL)
        assert "Time slicing: an ordered scan" in explained
        assert ("gap pushdown" in explained) == gaps
        # with gap pushdown the overlap rows are read on the driver (parquet_rows.py): no
        # job; without it (no task checks them) the overlap job collects them
        assert _jobs(spark) - before == (0 if gaps else 1)
        assert ("partition profiles from the Parquet footers" in explained) == gaps
        assert not calls
        got = cepsql.match_recognize(SQL, ev=pa.Table.from_pylist(rows, ARROW_SCHEMA))
        want = Counter(tuple(_null_normal(v) for v in r) for r in got.itertuples(index=False))
        assert _rows(spark.cep.sql(SQL)) == want and len(want) == 200 and not calls
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
        spark.conf.unset("cepsql.slicing.bounds")
        spark.conf.unset("cepsql.pushdown.relevanceFilter")
        spark.cep.clear_cache()
