"""Session hygiene (issue 12, item 6): cepsql leaves nothing of its own in the session's
catalog — generated names are bound to DataFrames (cepsql/backends/spark/frames.py), cep_match is
applied without registering a function — while the user's own views stay, and lazy
DataFrames returned earlier keep working."""
from __future__ import annotations

import pytest

from cepsql.backends.spark.frames import GENERATED_NAME, sql_with_frames

RISE = ("MEASURES FIRST(A.price) AS low, LAST(B.price) AS high ONE ROW PER MATCH "
        "PATTERN (A B+) DEFINE B AS B.price > PREV(B.price)")
QUERIES = [  # every way a statement makes cepsql generate a name
    f"SELECT * FROM hyg_ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts {RISE})",
    f"SELECT * FROM cep_match(TABLE(hyg_ticks) PARTITION BY sym ORDER BY ts, '{RISE}')",
    f"WITH s AS (SELECT * FROM hyg_ticks) SELECT high FROM (SELECT * FROM s MATCH_RECOGNIZE "
    f"(PARTITION BY sym ORDER BY ts {RISE})) x WHERE low > 0",
    f"SELECT * FROM (SELECT * FROM hyg_ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
    f"MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH PATTERN (A+) DEFINE A AS A.price > 0)) "
    f"MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts {RISE})",
    "SELECT * FROM cep_match(TABLE(SELECT * FROM cep_match(TABLE(hyg_ticks) PARTITION BY sym "
    "ORDER BY ts, 'MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH PATTERN (A) "
    f"DEFINE A AS A.price > 0')) PARTITION BY sym ORDER BY ts ASC NULLS LAST, '{RISE}')",
]
#: the catalog is compared exactly: one leaked name from any query fails it, so each shape
#: runs three times (first, then ROUNDS more) and the cheap one twice, with the user's view
#: (it was 40, the last 24 the cheap query again: 11 s CPU, 7.5 s now, warm session)
N_QUERIES = 18
ROUNDS = 2  # every shape this many times over before the cheap query fills up to N_QUERIES
CHEAP = f"SELECT * FROM hyg_ticks MATCH_RECOGNIZE (ORDER BY ts {RISE})"


@pytest.fixture(scope="module")
def hygiene(spark):
    spark.createDataFrame([("a", t, p) for t, p in enumerate([5, 3, 4, 6, 2, 7])] +
                          [("b", t, p) for t, p in enumerate([1, 2, 3, 2])],
                          "sym string, ts int, price int").createOrReplaceTempView("hyg_ticks")
    spark.cep  # noqa: B018  (attaches cepsql: cep_match / cep_view are registered once)
    yield spark
    for view in ("hyg_ticks", "hyg_user_rises"):
        spark.catalog.dropTempView(view)


def _catalog(spark) -> tuple[set, set]:
    tables = {t.name for t in spark.catalog.listTables()}
    functions = {f.name for f in spark.catalog.listFunctions() if f.isTemporary}
    return tables, functions


def test_many_queries_leave_the_catalog_as_it_was(hygiene):
    spark = hygiene
    tables, functions = _catalog(spark)
    assert not {n for n in tables | functions if GENERATED_NAME.search(n)}
    first = [spark.cep.sql(q) for q in QUERIES]  # lazy: run only after everything else
    for i in range(N_QUERIES - len(QUERIES) - 1):  # every kind again, then the cheapest
        spark.cep.sql(QUERIES[i % len(QUERIES)] if i < ROUNDS * len(QUERIES) else CHEAP)
    spark.cep.sql("CREATE OR REPLACE TEMPORARY VIEW hyg_user_rises AS SELECT * FROM "
                  f"hyg_ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts {RISE})")
    assert _catalog(spark) == (tables | {"hyg_user_rises"}, functions)
    # a few jobs: the early lazy results and the user's view still read their data
    expected = sorted(spark.table("hyg_user_rises").collect())
    assert expected == [("a", 2, 7), ("a", 3, 6), ("b", 1, 3)]
    assert sorted(first[0].collect()) == expected
    assert sorted(first[1].collect()) == sorted((r.sym, r.low, r.high) for r in expected)
    assert first[2].count() == len(expected)
    assert sorted(first[3].collect()) == expected and sorted(first[4].collect()) == expected
    assert sorted(spark.cep.sql("SELECT * FROM cep_view('hyg_user_rises')").collect()) == expected
    assert _catalog(spark) == (tables | {"hyg_user_rises"}, functions)


def test_frames_bind_only_generated_names_and_keep_user_braces(hygiene):
    spark = hygiene
    name = "__cep_mr_0123abcd_7"
    frame = spark.createDataFrame([(1,)], "x int")
    df = sql_with_frames(spark, f"SELECT x, '{{not a field}}' AS s FROM `{name}`", {name: frame})
    assert [tuple(r) for r in df.collect()] == [(1, "{not a field}")]
    assert name not in {t.name for t in spark.catalog.listTables()}
