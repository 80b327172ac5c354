"""Issue 24 C9 / C10: every identifier cepsql generates or copies is quoted (odd column
names in the source, odd pattern-view names), on Spark and in-process; workloads release
the pass they persist."""
from __future__ import annotations

import pandas as pd
import pytest
from pyspark.sql import functions as F

import cepsql
from cepsql.algebra.identifiers import quote_identifier, quote_name

ODD_COLUMNS = ["a`b", "t.col", "${x}"]
QUERIES = {
    "sql one row": "SELECT * FROM {src} MATCH_RECOGNIZE (PARTITION BY id ORDER BY t "
                   "MEASURES LAST(B.v) AS lv PATTERN (A B+) DEFINE B AS B.v > PREV(B.v))",
    "sql all rows": "SELECT * FROM {src} MATCH_RECOGNIZE (PARTITION BY id ORDER BY t "
                    "MEASURES LAST(B.v) AS lv ALL ROWS PER MATCH PATTERN (A B+) "
                    "DEFINE B AS B.v > PREV(B.v))",
    "cep": "SELECT * FROM {src} MATCH_RECOGNIZE (ORDER BY t MEASURES B.v AS bv "
           "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(A, B)) WITHIN 3 ROWS "
           "DEFINE B AS B.v > A.v)",
}
EVENTS = pd.DataFrame({"id": [1, 1, 1, 1], "t": [1, 2, 3, 4], "v": [1.0, 2.0, 3.0, 0.5]})


def test_one_quoting_rule():
    assert quote_identifier("a`b") == "`a``b`"
    assert quote_name(("db", "v 1")) == "`db`.`v 1`"


@pytest.fixture(scope="module")
def odd_source(spark):
    df = spark.createDataFrame(EVENTS)
    for i, name in enumerate(ODD_COLUMNS):
        df = df.withColumn(name, F.lit(10 + i))
    df.createOrReplaceTempView("id_odd")
    yield df
    spark.catalog.dropTempView("id_odd")


def _rows(df: pd.DataFrame) -> list:
    return sorted(map(tuple, df.astype(object).where(df.notna(), None).values.tolist()))


@pytest.mark.parametrize("query", list(QUERIES))
def test_odd_source_columns_on_spark_and_in_process(spark, odd_source, query):
    sql = QUERIES[query].format(src="id_odd")
    got = spark.cep.sql(sql).toPandas()
    local = cepsql.match_recognize(QUERIES[query].format(src="t"), t=odd_source.toPandas())
    assert list(got.columns) == list(local.columns)
    assert _rows(got) == _rows(local) and len(got) > 0
    if query == "sql all rows":  # the odd columns are copied through, values intact
        assert set(ODD_COLUMNS) <= set(got.columns)
        assert got["${x}"].tolist() == [12] * len(got)


@pytest.mark.parametrize("name", ["`v 1`", "`v'1`", "`ünï_view`", "`v``1`"])
def test_odd_pattern_view_names(spark, name):
    spark.createDataFrame(EVENTS).createOrReplaceTempView("id_src")
    try:
        spark.cep.sql(f"CREATE TEMPORARY VIEW {name} AS "
                      + QUERIES["sql one row"].format(src="id_src"))
        assert spark.sql(f"SELECT lv FROM {name}").collect() == [(3.0,)]
        assert len(spark.cep.views()) == 1
        literal = name[1:-1].replace("``", "`").replace("'", "\\'")
        assert spark.cep.sql(f"SELECT count(*) FROM cep_view('{literal}')").collect() == [(1,)]
        spark.cep.sql(f"DROP VIEW {name}")
        assert spark.cep.views() == []
    finally:
        spark.sql(f"DROP VIEW IF EXISTS {name}")
        spark.catalog.dropTempView("id_src")


def _persisted(spark) -> set[int]:
    return set(spark.sparkContext._jsc.getPersistentRDDs().keys())


def test_workload_releases_its_pass(spark):
    spark.createDataFrame(EVENTS).createOrReplaceTempView("id_wl")
    own = spark.table("id_wl").cache()  # the user's own cache stays as found
    own.count()
    before = _persisted(spark)
    views = ["id_wl_a", "id_wl_b"]
    try:
        for k, view in enumerate(views):
            spark.cep.sql(f"CREATE TEMPORARY VIEW {view} AS " + QUERIES["sql one row"]
                          .format(src="id_wl").replace("PREV(B.v)", f"PREV(B.v) - {k}"))
        assert spark.cep.sql("SELECT count(*) FROM cep_workload('id_wl')").collect() == [(2,)]
        assert _persisted(spark) > before  # the pass was persisted ...
        for view in views:
            spark.cep.sql(f"DROP VIEW {view}")
        assert _persisted(spark) == before  # ... and released with the views
        assert own.is_cached and spark.catalog.isCached("id_wl")
    finally:
        for view in views:
            spark.sql(f"DROP VIEW IF EXISTS {view}")
        own.unpersist()
        spark.catalog.dropTempView("id_wl")


def test_failed_workload_keeps_no_pass(spark):
    spark.createDataFrame(EVENTS).createOrReplaceTempView("id_wf")
    spark.createDataFrame([(1,)], "k int").createOrReplaceTempView("id_wf_other")
    before = _persisted(spark)
    try:
        spark.cep.sql("CREATE TEMPORARY VIEW id_wf_a AS " + QUERIES["sql one row"]
                      .format(src="id_wf"))
        spark.cep.sql("CREATE TEMPORARY VIEW id_wf_b AS SELECT m.*, o.k FROM ("
                      + QUERIES["sql one row"].format(src="id_wf") + ") m CROSS JOIN id_wf_other o")
        workload = spark.cep.workload("id_wf")
        workload.matches().count()  # the pass is materialized
        assert _persisted(spark) > before
        spark.catalog.dropTempView("id_wf_other")  # behind cepsql's back: id_wf_b fails
        with pytest.raises(Exception):
            workload.dataframes()
        assert _persisted(spark) == before
    finally:
        for view in ("id_wf_a", "id_wf_b", "id_wf_other", "id_wf"):
            spark.cep.sql(f"DROP VIEW IF EXISTS {view}")  # the session forgets them too
