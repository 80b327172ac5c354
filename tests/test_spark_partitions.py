"""The defaults on Spark: the PARTITION BY shuffle gets as many partitions as the input's
size needs (adaptive query execution coalesces it), not spark.sql.shuffle.partitions
(Spark's default 200 made a 1.4k-row query run 200 tasks), with the same rows; and a
statement reads the session's conf once (exprs/spark_conf.py)."""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from types import SimpleNamespace

import pandas as pd
import pytest
from pyspark.sql.conf import RuntimeConfig

import cepsql
from cepsql.backends.spark.columns import shuffle_partitions
from cepsql.exprs.spark_conf import conf_reader, conf_snapshot, conf_value, spark_default

CEPSQL_DIR = os.path.dirname(cepsql.__file__)
QUERY = """SELECT * FROM {view} MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts
    MEASURES FIRST(A.price) AS low, LAST(B.price) AS high, pad AS pad
    ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS B.price > PREV(B.price))"""

# AQE as on a cluster, scaled down: a partition per ~4 KB of shuffled rows
SMALL_TARGET = {"spark.sql.shuffle.partitions": "200",
                "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
                "spark.sql.adaptive.advisoryPartitionSizeInBytes": "4096",
                "spark.sql.adaptive.coalescePartitions.minPartitionSize": "1024"}


@contextmanager
def confs(spark, settings: dict):
    old = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)


def ticks(spark, view: str, symbols: int, per_symbol: int) -> list[tuple]:
    rows = [(f"s{s}", t, (t * 7 + s) % 11, "x" * 40)
            for s in range(symbols) for t in range(per_symbol)]
    spark.createDataFrame(rows, "sym string, ts int, price int, pad string") \
        .createOrReplaceTempView(view)
    return rows


def test_pattern_partitions_follow_the_input_size(spark):
    ticks(spark, "part_small", symbols=3, per_symbol=10)
    ticks(spark, "part_large", symbols=60, per_symbol=50)  # ~200 KB shuffled
    with confs(spark, SMALL_TARGET):
        small = spark.cep.sql(QUERY.format(view="part_small")).rdd.getNumPartitions()
        large = spark.cep.sql(QUERY.format(view="part_large")).rdd.getNumPartitions()
    assert small == 1
    assert 4 < large < 200


def test_results_do_not_depend_on_the_partition_count(spark):
    rows = ticks(spark, "part_rows", symbols=40, per_symbol=30)
    sql = QUERY.format(view="part_rows")
    with confs(spark, SMALL_TARGET):
        coalesced = sorted(map(tuple, spark.cep.sql(sql).collect()))
    with confs(spark, {"spark.sql.adaptive.enabled": "false",
                       "spark.sql.shuffle.partitions": "7"}):
        fixed = spark.cep.sql(sql)
        assert fixed.rdd.getNumPartitions() == 7  # AQE off: Spark's setting, as before
        fixed = sorted(map(tuple, fixed.collect()))
    local = cepsql.match_recognize(
        sql.replace("part_rows", "t"),
        t=pd.DataFrame(rows, columns=["sym", "ts", "price", "pad"]))
    assert coalesced == fixed == sorted(map(tuple, local.itertuples(index=False)))
    assert len(coalesced) > 40


def test_a_statement_reads_the_conf_once(spark, monkeypatch):
    """(pyspark's own reads, e.g. on every F.col of a classic session, are not counted)"""
    ticks(spark, "part_conf", symbols=2, per_symbol=6)
    calls = {"get": 0, "getAll": 0}
    get, get_all = RuntimeConfig.get, RuntimeConfig.getAll

    def by_cepsql() -> bool:
        return CEPSQL_DIR in sys._getframe(2).f_code.co_filename

    def counted_get(self, *args, **kwargs):
        calls["get"] += by_cepsql()
        return get(self, *args, **kwargs)

    def counted_get_all(self):
        calls["getAll"] += by_cepsql()
        return get_all.fget(self)
    monkeypatch.setattr(RuntimeConfig, "get", counted_get)
    monkeypatch.setattr(RuntimeConfig, "getAll", property(counted_get_all))
    spark.cep.sql(QUERY.format(view="part_conf"))  # the statement only: no job
    assert calls == {"get": 0, "getAll": 1}  # the test session sets its time zone


def test_snapshot_answers_as_spark_conf_get(spark):
    keys = ["cepsql.planner.algorithm", "cepsql.test.unset", "spark.sql.session.timeZone",
            "spark.sql.ansi.enabled", "spark.sql.shuffle.partitions"]
    with confs(spark, {"cepsql.planner.algorithm": "GREEDY"}):
        # (a default is given for cepsql's keys only: Spark checks it against a key's type)
        direct = [spark.conf.get(k, None) for k in keys] + \
            [spark.conf.get(k, "d") for k in keys[:2]]
        defaults = [spark.conf.get(k) for k in keys[2:]]
        with conf_snapshot():
            read = conf_reader(spark)
            assert [read(k) for k in keys] + \
                [conf_value(spark, k, "d") for k in keys[:2]] == direct
            assert [spark_default(spark, k) for k in keys[2:]] == defaults
        assert direct[0] == "GREEDY" and direct[1] is None


def test_a_nested_snapshot_shares_the_outer_read(spark):
    with confs(spark, {"cepsql.test.key": "1"}):
        with conf_snapshot():
            assert conf_value(spark, "cepsql.test.key") == "1"
            spark.conf.set("cepsql.test.key", "2")  # after the statement's read
            with conf_snapshot():
                assert conf_value(spark, "cepsql.test.key") == "1"
        assert conf_value(spark, "cepsql.test.key") == "2"  # outside: Spark's value


class _Conf:
    def __init__(self, value):
        self.value = value

    def get(self, key, default=None):
        return self.value if key == "spark.sql.shuffle.partitions" else default


@pytest.mark.parametrize("value, expected", [("12", 12), ("auto", 200), ("0", 200), (None, 200)])
def test_shuffle_width_is_spark_setting_or_its_default(value, expected):
    """Databricks accepts spark.sql.shuffle.partitions=auto (open-source Spark refuses it)."""
    df = SimpleNamespace(sparkSession=SimpleNamespace(conf=_Conf(value)))
    assert shuffle_partitions(df) == expected
