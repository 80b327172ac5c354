"""Workloads on Spark (spark.cep.workload / EXPLAIN WORKLOAD / cep_workload): every view
from the one shared pass equals the view queried alone; the source is scanned once per
partitioning group however many views there are; matches() keeps exact values in VARIANT;
the workload follows view changes and leaves nothing in the catalog."""
from __future__ import annotations

import datetime
import decimal
import math

import numpy as np
import pandas as pd
import pytest

from cepsql.api import cli
from cepsql.errors import CepAnalysisError, CepSyntaxError
from cepsql.backends.spark.frames import GENERATED_NAME

SOURCE = "wl_ticks"
VIEWS = {
    "wl_rise": "SELECT * FROM wl_ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
               "MEASURES FIRST(A.price) AS low, LAST(B.price) AS high ONE ROW PER MATCH "
               "PATTERN (A B+) DEFINE B AS B.price > PREV(B.price))",
    "wl_rows": "SELECT * FROM wl_ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
               "MEASURES CLASSIFIER() AS cls ALL ROWS PER MATCH AFTER MATCH SKIP TO NEXT ROW "
               "PATTERN (A B) DEFINE A AS A.price > 5, B AS B.price < A.price)",
    "wl_any": "SELECT * FROM wl_ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
              "MEASURES a.ts AS ta, c.ts AS tc STRATEGY SKIP_TILL_ANY_MATCH "
              "PATTERN (SEQ(a, KL(b), c)) WITHIN 4 ROWS "
              "DEFINE a AS a.price > 6, b AS b.price > a.price, c AS c.price < 3)",
    "wl_next": "SELECT * FROM wl_ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
               "MEASURES a.ts AS ta, b.ts AS tb STRATEGY SKIP_TILL_NEXT_MATCH "
               "PATTERN (SEQ(a, b)) WITHIN INTERVAL '5' SECOND "
               "DEFINE a AS a.price > 7, b AS b.price < 2)",
    "wl_around": "SELECT sym, count(*) AS n FROM (SELECT * FROM wl_ticks MATCH_RECOGNIZE ("
                 "PARTITION BY sym ORDER BY ts MEASURES LAST(B.price) AS high "
                 "PATTERN (A B+) DEFINE B AS B.price > PREV(B.price))) WHERE high > 4 "
                 "GROUP BY sym",
}
GLOBAL_VIEW = ("SELECT * FROM wl_ticks MATCH_RECOGNIZE (ORDER BY ts MEASURES A.sym AS s1, "
               "B.sym AS s2 PATTERN (A B) DEFINE A AS A.price = 9, B AS B.price = 0)")
STRICT_VIEW = ("SELECT * FROM wl_ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
               "MEASURES a.ts AS ta, b.ts AS tb STRATEGY STRICT_CONTIGUITY "
               "PATTERN (SEQ(a, b)) DEFINE a AS a.price > 4, b AS b.price > a.price)")
N_ROWS = 400


@pytest.fixture(scope="module")
def workload_views(spark):
    rng = np.random.default_rng(7)
    pdf = pd.DataFrame({"sym": rng.choice(list("abcd"), N_ROWS),
                        "ts": pd.to_datetime(np.arange(N_ROWS), unit="s"),
                        "price": rng.integers(0, 10, N_ROWS).astype(np.int64)})
    base = spark.createDataFrame(pdf)
    scanned = spark.sparkContext.accumulator(0)

    def counting(batches):  # counts every row Spark reads from the source
        for batch in batches:
            scanned.add(batch.num_rows)
            yield batch

    base.mapInArrow(counting, base.schema).createOrReplaceTempView(SOURCE)
    for name, query in VIEWS.items():
        spark.cep.sql(f"CREATE OR REPLACE TEMPORARY VIEW {name} AS {query}")
    yield spark, scanned
    for name in [*VIEWS, "wl_global", SOURCE]:
        spark.cep.sql(f"DROP VIEW IF EXISTS {name}")


def rows(df):
    return sorted(map(repr, df.collect()))


def test_every_view_from_one_scan_equals_the_view_alone(workload_views):
    spark, scanned = workload_views
    wl = spark.cep.workload(SOURCE)
    assert wl.names == list(VIEWS)
    wl.explain()  # builds the workload (the sharing planner may sample the source)
    before = scanned.value
    frames = wl.dataframes()  # a small pass runs here, once; the views read its rows
    assert list(frames) == list(VIEWS)
    shared = {name: rows(df) for name, df in frames.items()}
    assert scanned.value - before == N_ROWS  # one group (PARTITION BY sym): one scan
    before = scanned.value
    for name, df in frames.items():  # the views queried one by one: a scan each
        alone = spark.table(name)
        assert df.schema == alone.schema, name
        assert shared[name] == rows(alone), name
    assert scanned.value - before == len(VIEWS) * N_ROWS
    assert sum(map(len, shared.values())) > 50
    wl.close()


def test_views_with_another_partitioning_form_a_second_group(workload_views):
    spark, scanned = workload_views
    spark.cep.sql(f"CREATE OR REPLACE TEMPORARY VIEW wl_global AS {GLOBAL_VIEW}")
    try:
        wl = spark.cep.workload(SOURCE)
        assert "wl_global" in wl.names
        wl.explain()  # builds the workload (the sharing planner may sample the source)
        before = scanned.value
        frames = wl.dataframes()
        collected = {name: rows(df) for name, df in frames.items()}
        assert scanned.value - before == 2 * N_ROWS  # one scan per partitioning group
        for name in wl.names:
            assert collected[name] == rows(spark.table(name)), name
        text = wl.explain()
        assert "2 partitioning group(s)" in text and "wl_global: unshared" in text
        # STRICT_CONTIGUITY with PARTITION BY: a group of its own (global break column)
        spark.cep.sql(f"CREATE OR REPLACE TEMPORARY VIEW wl_strict AS {STRICT_VIEW}")
        frames = wl.dataframes()
        assert rows(frames["wl_strict"]) == rows(spark.table("wl_strict"))
        assert rows(frames["wl_global"]) == collected["wl_global"]
        assert "3 partitioning group(s)" in wl.explain()
        wl.close()
    finally:
        spark.cep.sql("DROP VIEW IF EXISTS wl_global")
        spark.cep.sql("DROP VIEW IF EXISTS wl_strict")


def test_matches_and_cep_workload_sql(workload_views):
    spark, _ = workload_views
    wl = spark.cep.workload([*VIEWS][:2])
    m = wl.matches()
    assert [f.name for f in m.schema] == ["view", "partition", "match_number", "measures"]
    assert m.schema["partition"].dataType.typeName() == "variant"
    by_view = {r.view: r.n for r in m.groupBy("view").count().withColumnRenamed("count", "n")
               .collect()}
    assert by_view == {"wl_rise": spark.table("wl_rise").count(),
                       "wl_rows": spark.table("wl_rows").count()}
    highs = spark.table("wl_rise").selectExpr("sym", "high").collect()
    got = m.where("view = 'wl_rise'").selectExpr(
        "variant_get(partition, '$.sym', 'string') AS sym",
        "variant_get(measures, '$.high', 'bigint') AS high").collect()
    assert sorted(highs) == sorted(got)
    via_sql = spark.cep.sql(f"SELECT view, match_number FROM cep_workload('{SOURCE}')")
    full = spark.cep.workload(SOURCE).matches()
    assert rows(via_sql) == rows(full.select("view", "match_number"))


def test_variant_measures_keep_exact_values(spark):
    big = 2 ** 63 - 4
    pdf = pd.DataFrame({"k": ["x", "x", "x"], "i": [1, 2, 3]})
    spark.createDataFrame(pdf).createOrReplaceTempView("wl_exact_raw")
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW wl_exact AS SELECT k, i, "
              "CASE WHEN i = 2 THEN -CAST('1234567890123456789012345678.0123456789' AS "
              "DECIMAL(38,10)) ELSE CAST('1234567890123456789012345678.0123456789' AS "
              "DECIMAL(38,10)) END AS d, "
              f"CAST({big} AS BIGINT) + i AS b, "
              "TIMESTAMP'2024-02-29 23:59:59.999999' + make_interval(0,0,0,0,0,0,i) AS t, "
              "CASE WHEN i = 2 THEN CAST('NaN' AS DOUBLE) ELSE i / 3 END AS x "
              "FROM wl_exact_raw")
    spark.cep.sql("CREATE OR REPLACE TEMPORARY VIEW wl_exact_v AS SELECT * FROM wl_exact "
                  "MATCH_RECOGNIZE (PARTITION BY k ORDER BY i MEASURES A.i AS mi, A.d AS md, "
                  "A.b AS mb, A.t AS mt, A.x AS mx PATTERN (A) DEFINE A AS true)")
    try:
        m = spark.cep.workload("wl_exact").matches()
        got = sorted(m.selectExpr(
            "variant_get(measures, '$.mi', 'int') AS i",
            "variant_get(measures, '$.md', 'decimal(38,10)') AS d",
            "variant_get(measures, '$.mb', 'bigint') AS b",
            "variant_get(measures, '$.mt', 'timestamp') AS t",
            "variant_get(measures, '$.mx', 'double') AS x").collect())
        want = sorted(spark.table("wl_exact_v").select("mi", "md", "mb", "mt", "mx").collect())
        assert spark.table("wl_exact_v").schema["md"].dataType.simpleString() == \
            "decimal(38,10)"
        assert [r[:4] for r in got] == [r[:4] for r in want]
        assert got[0].d == decimal.Decimal("1234567890123456789012345678.0123456789")
        assert got[2].b == 2 ** 63 - 1
        assert got[0].t == datetime.datetime(2024, 3, 1, 0, 0, 0, 999999)
        assert math.isnan(got[1].x) and got[2].x == want[2][4] == 1.0
    finally:
        for v in ("wl_exact_v", "wl_exact", "wl_exact_raw"):
            spark.cep.sql(f"DROP VIEW IF EXISTS {v}")


def _jobs(spark) -> int:
    """Spark jobs started so far (no test sets a job group). The status tracker learns of
    a job from the listener bus, which runs behind: it is drained first (a CI run under
    load read the count before a collect's job had been posted)."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(60_000)
    ids = spark.sparkContext.statusTracker().getJobIdsForGroup(None)
    return max(ids) + 1 if ids else 0


def test_small_pass_frames_are_local_and_equal_the_frames_over_the_cache(spark):
    """dataframes() of a small pass collects its rows once: collecting a view runs no
    Spark job, with the rows and schema of the frames over the persisted pass
    (cepsql.workload.localRows=0) and of the view alone -- exact DECIMAL(38,10), BIGINT
    near 2^63, TIMESTAMP, TIMESTAMP_NTZ, NaN, NULL, an array and SQL around a clause."""
    pdf = pd.DataFrame({"k": ["x", "x", "x", "y"], "i": [1, 2, 3, 4]})
    spark.createDataFrame(pdf).createOrReplaceTempView("wl_loc_raw")
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW wl_loc AS SELECT k, i, "
              "CASE WHEN i = 2 THEN -CAST('1234567890123456789012345678.0123456789' AS "
              "DECIMAL(38,10)) ELSE CAST('1234567890123456789012345678.0123456789' AS "
              "DECIMAL(38,10)) END AS d, CAST(9223372036854775803 AS BIGINT) + i AS b, "
              "TIMESTAMP'2024-02-29 23:59:59.999999' + make_interval(0,0,0,0,0,0,i) AS t, "
              "TIMESTAMP_NTZ'1900-01-01 00:00:00' + make_interval(0,0,0,i) AS n, "
              "CASE WHEN i = 2 THEN CAST('NaN' AS DOUBLE) WHEN i = 3 THEN NULL "
              "ELSE i / 3 END AS x FROM wl_loc_raw")
    views = {
        "wl_loc_one": "SELECT * FROM wl_loc MATCH_RECOGNIZE (PARTITION BY k ORDER BY i "
                      "MEASURES A.d AS md, A.b AS mb, A.t AS mt, A.n AS mn, A.x AS mx, "
                      "array(A.i, A.i * 2) AS ma PATTERN (A) DEFINE A AS true)",
        "wl_loc_sum": "SELECT k, sum(mi) AS s FROM wl_loc MATCH_RECOGNIZE (PARTITION BY k "
                      "ORDER BY i MEASURES LAST(B.i) AS mi PATTERN (A B) DEFINE B AS true) "
                      "GROUP BY k",
    }
    for name, query in views.items():
        spark.cep.sql(f"CREATE OR REPLACE TEMPORARY VIEW {name} AS {query}")
    try:
        wl = spark.cep.workload("wl_loc")
        local = wl.dataframes()
        jobs = _jobs(spark)
        got = {"wl_loc_one": local["wl_loc_one"].collect()}
        assert _jobs(spark) == jobs  # a local relation: no job for a clause's rows
        got["wl_loc_sum"] = local["wl_loc_sum"].collect()
        wl.close()  # the next call builds anew (same selector, same object)
        spark.conf.set("cepsql.workload.localRows", "0")
        try:
            cached = wl.dataframes()
            jobs = _jobs(spark)
            over_cache = {"wl_loc_one": cached["wl_loc_one"].collect()}
            assert _jobs(spark) > jobs  # a job over the persisted pass
            over_cache["wl_loc_sum"] = cached["wl_loc_sum"].collect()
        finally:
            spark.conf.unset("cepsql.workload.localRows")
            wl.close()
        for name in views:
            alone = spark.table(name)
            assert local[name].schema == cached[name].schema == alone.schema, name
            assert rows_of(got[name]) == rows_of(over_cache[name]) == rows(alone), name
        one = sorted(got["wl_loc_one"], key=lambda r: r.mb)
        assert one[0].md == decimal.Decimal("1234567890123456789012345678.0123456789")
        assert one[3].mb == 2 ** 63 - 1 and one[2].mx is None and math.isnan(one[1].mx)
        assert one[0].mt == datetime.datetime(2024, 3, 1, 0, 0, 0, 999999)
        assert one[1].mn == datetime.datetime(1900, 1, 3) and one[1].ma == [2, 4]
    finally:
        for v in (*views, "wl_loc", "wl_loc_raw"):
            spark.cep.sql(f"DROP VIEW IF EXISTS {v}")


def test_local_rows_conf_is_checked(workload_views):
    spark, _ = workload_views
    wl = spark.cep.workload(["wl_rise"])
    spark.conf.set("cepsql.workload.localRows", "lots")
    try:
        with pytest.raises(CepAnalysisError, match="cepsql.workload.localRows must be a whole"):
            wl.dataframes()
    finally:
        spark.conf.unset("cepsql.workload.localRows")
        wl.close()


@pytest.mark.parametrize("key, value, words", [
    ("cepsql.planner.accessCost", "-1", "cepsql.planner.accessCost"),
    ("cepsql.sharing.seconds", "soon", "cepsql.sharing.seconds must be a number"),
])
def test_sharing_conf_is_checked(workload_views, key, value, words):
    """The pass's sharing planner reads cepsql.sharing.* and the planner's pairs weight
    through one checked reader (a bad seconds value leaked a ValueError before)."""
    spark, _ = workload_views
    wl = spark.cep.workload(["wl_any", "wl_next"])
    spark.conf.set(key, value)
    try:
        with pytest.raises(CepAnalysisError, match=words):
            wl.dataframes()
    finally:
        spark.conf.unset(key)
        wl.close()


def rows_of(collected) -> list[str]:
    return sorted(map(repr, collected))


def test_explain_workload_statement_and_cli(workload_views, capsys, monkeypatch):
    from cepsql.runtime import one_pass
    spark, _ = workload_views
    seen = []
    original = one_pass.global_plan_for
    monkeypatch.setattr(one_pass, "global_plan_for",
                        lambda plans, **kw: seen.append(kw) or original(plans, **kw))
    spark.conf.set("cepsql.sharing.algorithm", "tabu")
    spark.conf.set("cepsql.sharing.seconds", "0.5")
    try:
        text = spark.cep.sql(f"EXPLAIN WORKLOAD {SOURCE}").collect()[0].plan
    finally:
        spark.conf.unset("cepsql.sharing.algorithm")
        spark.conf.unset("cepsql.sharing.seconds")
    # the planner seam's settings
    assert [{k: kw[k] for k in ("algorithm", "seconds")} for kw in seen] == \
        [{"algorithm": "TABU", "seconds": 0.5}]
    assert "cepsql.sharing.algorithm=TABU" in text
    assert text.startswith("== Workload: wl_rise, wl_rows")
    assert "1 partitioning group(s)" in text
    assert "wl_rise: unshared -- SQL:2016 mode" in text
    assert "STRATEGY SKIP_TILL_NEXT_MATCH" in text  # wl_next's reason
    assert "-- view wl_any (in the shared pass) --" in text
    listed = spark.cep.sql("EXPLAIN WORKLOAD (wl_rise, wl_any)").collect()[0].plan
    assert listed.startswith("== Workload: wl_rise, wl_any ==")
    assert cli.main(["sql", "-e", f"EXPLAIN WORKLOAD {SOURCE};\n"
                     f"SELECT view, count(*) AS n FROM cep_workload('{SOURCE}') "
                     "GROUP BY view ORDER BY view;\n"
                     f"SELECT measures FROM cep_workload('{SOURCE}') WHERE view = 'wl_rise' "
                     "LIMIT 1"]) == 0
    out = capsys.readouterr().out
    assert "== Workload: wl_rise" in out and "wl_around" in out
    assert '"high":' in out and '"low":' in out  # VARIANT printed as JSON


def test_unknown_workload_and_view_are_analysis_errors(workload_views):
    spark, _ = workload_views
    with pytest.raises(CepAnalysisError, match="unknown workload nope_src"):
        spark.cep.workload("nope_src")
    with pytest.raises(CepAnalysisError, match="unknown pattern view wl_nope"):
        spark.cep.workload(["wl_rise", "wl_nope"])
    stmt = "EXPLAIN WORKLOAD nope_src"
    with pytest.raises(CepAnalysisError, match="unknown workload nope_src") as err:
        spark.cep.sql(stmt)
    assert err.value.pos == stmt.index("nope_src")
    stmt = "SELECT * FROM cep_workload('nope_src')"
    with pytest.raises(CepAnalysisError, match="unknown workload nope_src") as err:
        spark.cep.sql(stmt)
    assert err.value.pos == stmt.index("'nope_src'")
    with pytest.raises(CepSyntaxError, match="cep_workload takes one string"):
        spark.cep.sql("SELECT * FROM cep_workload(wl_ticks)")


def test_workload_follows_view_changes_and_leaves_no_catalog_entries(workload_views):
    spark, _ = workload_views
    tables = {t.name for t in spark.catalog.listTables()}
    wl = spark.cep.workload(SOURCE)
    first = wl.dataframes()
    persisted = [tagged for _, tagged in wl._built.passes.values()]
    assert all(t.is_cached for t in persisted)
    spark.cep.sql("CREATE OR REPLACE TEMPORARY VIEW wl_tmp AS SELECT * FROM wl_ticks "
                  "MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS p "
                  "PATTERN (A) DEFINE A AS A.price = 9)")
    try:
        second = wl.dataframes()
        assert "wl_tmp" in second and "wl_tmp" not in first
        assert not any(t.is_cached for t in persisted)  # the old pass was unpersisted
        assert rows(second["wl_tmp"]) == rows(spark.table("wl_tmp"))
    finally:
        spark.cep.sql("DROP VIEW wl_tmp")
    assert "wl_tmp" not in wl.dataframes()
    wl.close()
    assert not any(t.is_cached for _, t in [])  # nothing left to check once closed
    after = {t.name for t in spark.catalog.listTables()}
    assert after == tables
    assert not {n for n in after if GENERATED_NAME.search(n)}



def test_build_reuses_create_view_parse_and_a_replaced_view_is_parsed_anew(workload_views,
                                                                           monkeypatch):
    """A workload build tokenizes none of its views (CREATE VIEW's parse is kept with the
    view); CREATE OR REPLACE gives the view a new parse, so the pass follows the new text."""
    import cepsql.parse as dialect
    spark, _ = workload_views
    make = ("CREATE OR REPLACE TEMPORARY VIEW wl_re AS SELECT * FROM wl_ticks MATCH_RECOGNIZE "
            "(PARTITION BY sym ORDER BY ts MEASURES A.price AS p PATTERN (A) "
            "DEFINE A AS A.price = {})")
    spark.cep.sql(make.format(9))
    calls = []
    for name in ("find_match_recognize", "parse_create_view"):
        original = getattr(dialect, name)
        monkeypatch.setattr(dialect, name, lambda *a, _f=original, _n=name, **k:
                            calls.append(_n) or _f(*a, **k))
    try:
        wl = spark.cep.workload(["wl_re", "wl_rise"])
        assert rows(wl.dataframes()["wl_re"]) == rows(spark.table("wl_re"))
        assert calls == []  # nothing parsed again
        spark.cep.sql(make.format(0))  # replaced: another pattern
        replaced = wl.dataframes()["wl_re"]
        assert rows(replaced) == rows(spark.table("wl_re"))
        assert {r.p for r in replaced.collect()} == {0}
        wl.close()
    finally:
        spark.cep.sql("DROP VIEW wl_re")

SHARING_VIEWS = {
    "wl_s1": "SELECT * FROM wl_share MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
             "MEASURES a.ts AS ta, c.ts AS tc STRATEGY SKIP_TILL_ANY_MATCH "
             "PATTERN (SEQ(a, b, c)) WITHIN 6 ROWS "
             "DEFINE a AS a.price > 6, b AS b.price < a.price, c AS c.price < 3)",
    # the same a-b sub-pattern under other names and a flipped comparison, larger window
    "wl_s2": "SELECT * FROM wl_share MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
             "MEASURES x.ts AS tx, z.ts AS tz STRATEGY SKIP_TILL_ANY_MATCH "
             "PATTERN (SEQ(x, y, z)) WITHIN 8 ROWS "
             "DEFINE x AS x.price > 6, y AS x.price > y.price, z AS z.price > 7)",
    # AND over the same types: may read the shared node without its order
    "wl_s3": "SELECT * FROM wl_share MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
             "MEASURES count(*) AS n STRATEGY SKIP_TILL_ANY_MATCH "
             "PATTERN (SEQ(p, q, NOT(r), s)) WITHIN 6 ROWS "
             "DEFINE p AS p.price > 6, q AS q.price < p.price, r AS r.price = 5, "
             "s AS s.price < 3)",
}


def test_cep_views_share_sub_patterns_and_equal_each_view_alone(workload_views, tmp_path):
    spark, _ = workload_views
    spark.table(SOURCE).createOrReplaceTempView("wl_share")
    try:
        for name, query in SHARING_VIEWS.items():
            spark.cep.sql(f"CREATE OR REPLACE TEMPORARY VIEW {name} AS {query}")
        wl = spark.cep.workload("wl_share")
        frames = wl.dataframes()
        for name in SHARING_VIEWS:
            assert rows(frames[name]) == rows(spark.table(name)), name
        svg = tmp_path / "dag.svg"
        text = wl.explain(file=str(svg))
        assert "3 planned together" in text and "global plan (DAG" in text
        shared = text.split("shared sub-patterns: ", 1)[1].split(" joins", 1)[0]
        assert int(shared) >= 1, text  # the a-b join is one node for all three views
        assert svg.read_text().startswith("<svg")
        wl.close()
    finally:
        for name in [*SHARING_VIEWS, "wl_share"]:
            spark.cep.sql(f"DROP VIEW IF EXISTS {name}")


def test_views_over_a_replaced_source_leave_its_workload(spark):
    """A pattern view keeps the source it was created over; once that source is replaced
    the view must not join a pass over the new one (it would change the view's rows)."""
    rows = lambda prices: spark.createDataFrame(  # noqa: E731
        pd.DataFrame({"sym": ["a"] * len(prices),
                      "ts": pd.to_datetime(np.arange(len(prices)), unit="s"),
                      "price": np.asarray(prices, dtype=np.int64)}))
    query = ("SELECT * FROM st_ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
             "MEASURES A.price AS p PATTERN (A) DEFINE A AS A.price > 5)")
    rows([9, 1, 7]).createOrReplaceTempView("st_ticks")
    try:
        spark.cep.sql(f"CREATE OR REPLACE TEMPORARY VIEW st_old AS {query}")
        assert spark.cep.workloads()["st_ticks"] == ["st_old"]
        rows([6, 8, 2, 9]).createOrReplaceTempView("st_ticks")
        spark.cep.sql(f"CREATE OR REPLACE TEMPORARY VIEW st_new AS {query}")
        assert spark.cep.workloads()["st_ticks"] == ["st_new"]
        stale = spark.cep.stale_views()   # (views other tests left may be stale too)
        assert stale.get("st_old") == "st_ticks" and "st_new" not in stale
        assert sorted(r.p for r in spark.table("st_old").collect()) == [7, 9]
        frames = spark.cep.workload("st_ticks").dataframes()
        assert sorted(frames) == ["st_new"]
        assert sorted(r.p for r in frames["st_new"].collect()) == [6, 8, 9]
        with pytest.raises(CepAnalysisError, match="st_old reads st_ticks as it was"):
            spark.cep.workload(["st_old", "st_new"])
    finally:
        for view in ("st_old", "st_new"):
            spark.cep.sql(f"DROP VIEW IF EXISTS {view}")
        spark.catalog.dropTempView("st_ticks")


def test_statistics_sample_taken_ahead_is_the_one_taken_on_demand(workload_views):
    """The sample started while views are recorded (a thread) is the source's first rows,
    as _driver_statistics takes them; a source with one clause starts none."""
    from cepsql.backends.spark.workload import _Clause, _SamplesAhead, _first_rows
    spark, _ = workload_views
    frame, other = spark.table(SOURCE), spark.table(SOURCE)
    ahead = _SamplesAhead()
    clauses = [_Clause("v1", "wl_ticks", frame, None)]
    ahead.clause_recorded(clauses, "wl_ticks", spark)
    assert ahead.taken(frame) is None  # one clause: nothing to share, no job
    clauses.append(_Clause("v2", "wl_ticks", other, None))
    ahead.clause_recorded(clauses, "wl_ticks", spark)
    ahead.close()
    assert ahead.taken(other) is None  # only the pass's source frame (the first clause's)
    assert ahead.taken(frame).result().equals(_first_rows(spark, frame))
