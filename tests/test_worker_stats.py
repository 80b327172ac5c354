"""Statistics without a separate job (stats/worker.py, runtime/task_planning.py): each
task estimates from its own first rows and plans with them. Every plan gives the same
matches, so results equal driver-side planning (and the reference) on random patterns,
whatever the sample size; on Spark the sampling job disappears."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cepsql
from cepsql.errors import CepAnalysisError, CepUnsupportedError
from cepsql.backends.local.engine import run_local
from cepsql.runtime.run_stats import RunStatistics
from cepsql.compile.clause import plan_query
from cepsql.stats import CACHE
from cepsql.stats.worker import InWorkerStatistics, stats_mode, worker_sample_rows
from cepsql.explain.clause import explain_clause

try:
    from .support.strategies_cep import cep_streams
    from .test_property_cep import assert_cep_matches
    from .test_property_planned import planned_queries
    from .test_property_sql import SETTINGS, row_multiset
except ImportError:
    from support.strategies_cep import cep_streams
    from test_property_cep import assert_cep_matches
    from test_property_planned import planned_queries
    from test_property_sql import SETTINGS, row_multiset


def _in_worker(rows: int):
    def planner(spec, schema, sql, **kw):
        kw["statistics"] = InWorkerStatistics(rows)
        return plan_query(spec, schema, sql, **kw)
    return planner


def _rows(table: pa.Table):
    return row_multiset(tuple(r.values()) for r in table.to_pylist())


@pytest.mark.parametrize("algorithm", [None, "GREEDY", "DP_B", "ZSTREAM"])
def test_worker_plans_equal_driver_plans(algorithm):
    seen = {"planned": 0}

    @settings(max_examples=40, derandomize=True, **SETTINGS)
    @given(sql=planned_queries(), table=cep_streams(), rows=st.integers(1, 16))
    def check(sql, table, rows):
        with cepsql.planner_options(algorithm=algorithm):
            try:
                driver = run_local(sql, {"t": table})
            except CepUnsupportedError:
                return
            stats = RunStatistics()
            worker = run_local(sql, {"t": table}, planner=_in_worker(rows), stats=stats)
        assert _rows(worker) == _rows(driver), sql
        seen["planned"] += stats.last.get("worker_planned", 0)
    check()
    assert seen["planned"] > 0  # some tasks really planned from their rows


def test_worker_plans_match_the_reference():
    @settings(max_examples=30, derandomize=True, **SETTINGS)
    @given(sql=planned_queries(), table=cep_streams(unique_ts=False, with_nulls=True),
           rows=st.integers(1, 16))
    def check(sql, table, rows):
        import cepsql.backends.local.engine as local
        original = local.run_local

        def patched(sql_, tables, **kw):
            return original(sql_, tables, planner=_in_worker(rows))
        local.run_local = patched
        try:
            assert_cep_matches(sql, table)
        finally:
            local.run_local = original
    check()


def _skewed(n: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"part": rng.integers(0, 4, n), "ts": np.arange(n),
                     "sym": rng.choice(list("ABCX"), n, p=[0.05, 0.5, 0.05, 0.4]),
                     "price": rng.integers(0, 50, n)})


SKEWED_SQL = ("SELECT * FROM {src} MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts "
              "MEASURES a.ts AS ta, b.ts AS tb, c.ts AS tc STRATEGY SKIP_TILL_ANY_MATCH "
              "PATTERN (SEQ(a, b, c)) WITHIN INTERVAL '30' SECOND DEFINE a AS sym = 'A', "
              "b AS sym = 'B' AND b.price > a.price, c AS sym = 'C' AND c.price < b.price)")


def test_a_task_plans_from_its_rows():
    # B is ten times as frequent as A and C: the estimated plan does not take B first
    table = _skewed(4000)
    sql = SKEWED_SQL.format(src="t")
    run = RunStatistics()
    worker = run_local(sql, {"t": table}, planner=_in_worker(1000), stats=run)
    stats = run.last
    assert stats["worker_planned"] == 1 and stats["worker_sample_rows"] == 1000
    # uniform estimates give C -> B -> A; the task's estimate puts frequent B last
    assert "A -> C -> B" in stats["worker_plan"], stats["worker_plan"]
    assert _rows(worker) == _rows(run_local(sql, {"t": table}))
    assert worker.num_rows > 0


def test_explain_says_where_statistics_come_from():
    table = _skewed(10)
    from cepsql.parse import find_match_recognize
    sql = SKEWED_SQL.format(src="t")
    plan = plan_query(find_match_recognize(sql)[0].spec, table.schema, sql,
                      statistics=InWorkerStatistics(777))
    assert "inside each Spark task from its first 777 rows" in explain_clause(plan)


def test_conf_values():
    assert stats_mode(lambda k: None) == "worker"
    assert stats_mode(lambda k: " Driver ") == "driver"
    with pytest.raises(CepAnalysisError, match="cepsql.stats.mode"):
        stats_mode(lambda k: "sometimes")
    assert worker_sample_rows(lambda k: "5000") == 5000
    with pytest.raises(CepAnalysisError, match="workerSampleRows"):
        worker_sample_rows(lambda k: "0")


# --- Spark -----------------------------------------------------------------------------

def _jobs_run(spark, action) -> tuple[int, object]:
    """(Spark jobs started while action ran, its result)."""
    scheduler = spark.sparkContext._jsc.sc().dagScheduler()

    def next_id() -> int:  # the scheduler's job counter (py4j hands it over as an int)
        value = scheduler.nextJobId()
        return value if isinstance(value, int) else value.get()
    before = next_id()
    result = action()
    return next_id() - before, result


def test_no_sampling_job_in_worker_mode(spark):
    CACHE.clear()
    spark.createDataFrame(_skewed(3000, seed=1).to_pandas()).createOrReplaceTempView("ws_a")
    spark.createDataFrame(_skewed(3000, seed=1).to_pandas()).createOrReplaceTempView("ws_b")
    try:
        spark.conf.set("cepsql.stats.mode", "driver")
        driver_jobs, driver_df = _jobs_run(spark, lambda: spark.cep.sql(
            SKEWED_SQL.format(src="ws_a")))
        driver = sorted(driver_df.collect())
        spark.conf.set("cepsql.stats.mode", "worker")
        worker_jobs, worker_df = _jobs_run(spark, lambda: spark.cep.sql(
            SKEWED_SQL.format(src="ws_b")))
        worker = sorted(worker_df.collect())
    finally:
        spark.conf.unset("cepsql.stats.mode")
    assert worker == driver and len(worker) > 0
    # planning the query: a sampling job (a count too when Spark cannot tell the size)
    # on the driver, none at all in worker mode
    assert driver_jobs >= 1 and worker_jobs == 0, (driver_jobs, worker_jobs)
    # EXPLAIN still shows estimates from a driver-side sample
    text = spark.cep.explain(SKEWED_SQL.format(src="ws_b"))
    assert "sampled rows" in text
    assert "each Spark task re-plans from its own first 10000 rows" in text


@pytest.mark.parametrize("algorithm", ["AUTO", "ZSTREAM"])
def test_spark_worker_mode_equals_driver_mode(spark, algorithm):
    @settings(max_examples=3, **SETTINGS)
    @given(sql=planned_queries(), table=cep_streams())
    def check(sql, table):
        spark.createDataFrame(table.to_pandas(), schema="part string, ts long, price long, "
                              "vol double, tag string").createOrReplaceTempView("t")
        out = {}
        try:
            spark.conf.set("cepsql.planner.algorithm", algorithm)
            spark.conf.set("cepsql.stats.workerSampleRows", "3")
            for mode in ("worker", "driver"):
                spark.conf.set("cepsql.stats.mode", mode)
                out[mode] = row_multiset(tuple(r) for r in spark.cep.sql(sql).collect())
        except CepUnsupportedError:
            return
        finally:
            for key in ("cepsql.stats.mode", "cepsql.planner.algorithm",
                        "cepsql.stats.workerSampleRows"):
                spark.conf.unset(key)
        assert out["worker"] == out["driver"], sql
    check()
