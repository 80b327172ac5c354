"""A workload pass of unpartitioned, time-windowed CEP views is cut into time slices
(backends/spark/workload_slicing.py, cepsql.workload.timeSlicing=true): every view's frame equals the view alone, and
matches() -- match numbers included -- equals the unsliced pass's
(cepsql.planner.slicing=false), with NOT (slices also read back), windows of different
sizes, ALL ROWS PER MATCH and ties in ts."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cepsql.backends.spark.slicing import SLICE_COLUMN

SOURCE = "wls_ticks"
N_ROWS = 240
VIEWS = {
    "wls_any": "SELECT * FROM wls_ticks MATCH_RECOGNIZE (ORDER BY ts "
               "MEASURES a.ts AS ta, b.ts AS tb, b.price - a.price AS gain "
               "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) WITHIN INTERVAL '6' SECOND "
               "DEFINE a AS a.vol > 70, b AS b.vol > 60 AND b.price > a.price)",
    "wls_not": "SELECT * FROM wls_ticks MATCH_RECOGNIZE (ORDER BY ts "
               "MEASURES a.ts AS ta, c.ts AS tc STRATEGY SKIP_TILL_ANY_MATCH "
               "PATTERN (SEQ(a, NOT(n), c)) WITHIN INTERVAL '4' SECOND "
               "DEFINE a AS a.vol > 60, n AS n.vol > 95, c AS c.price > a.price)",
    "wls_kl": "SELECT * FROM wls_ticks MATCH_RECOGNIZE (ORDER BY ts "
              "MEASURES a.ts AS ta, COUNT(b.ts) AS n, c.ts AS tc "
              "STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, KL(b), c)) "
              "WITHIN INTERVAL '9' SECOND DEFINE a AS a.vol > 85, "
              "b AS b.vol > 40 AND b.price > a.price, c AS c.vol > 80)",
    "wls_rows": "SELECT * FROM wls_ticks MATCH_RECOGNIZE (ORDER BY ts "
                "MEASURES CLASSIFIER() AS cls ALL ROWS PER MATCH "
                "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) WITHIN INTERVAL '3' SECOND "
                "DEFINE a AS a.vol > 90, b AS b.vol > 90)",
    "wls_around": "SELECT count(*) AS n, max(gain) AS g FROM wls_ticks MATCH_RECOGNIZE ("
                  "ORDER BY ts MEASURES b.price - a.price AS gain "
                  "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) "
                  "WITHIN INTERVAL '5' SECOND DEFINE a AS a.vol > 50, b AS b.vol > 50)",
}


@pytest.fixture(scope="module")
def views(spark):
    rng = np.random.default_rng(5)
    seconds = np.sort(rng.integers(0, N_ROWS // 2, N_ROWS))  # ties: two rows a second
    pdf = pd.DataFrame({"ts": pd.to_datetime(seconds, unit="s"),
                        "price": rng.integers(0, 10, N_ROWS).astype(np.int64),
                        "vol": rng.integers(0, 100, N_ROWS).astype(np.int64)})
    spark.createDataFrame(pdf).createOrReplaceTempView(SOURCE)
    for name, sql in VIEWS.items():
        spark.cep.sql(f"CREATE OR REPLACE TEMPORARY VIEW {name} AS {sql}")
    spark.conf.set("cepsql.slicing.gridWindows", "2")  # slices of 2 windows: many borders
    spark.conf.set("cepsql.workload.timeSlicing", "true")  # (off by default)
    yield spark
    spark.conf.unset("cepsql.workload.timeSlicing")
    spark.conf.unset("cepsql.slicing.gridWindows")
    for name in (*VIEWS, SOURCE):
        spark.cep.sql(f"DROP VIEW IF EXISTS {name}")


def _rows(rows) -> list[str]:
    return sorted(map(repr, rows))


def _matches(wl) -> list[tuple]:
    return sorted((r.view, r.match_number, json.dumps(json.loads(r.measures.toJson()),
                                                      sort_keys=True))
                  for r in wl.matches().collect())


@pytest.mark.parametrize("local_rows", ["100000", "0"])  # frames on the driver / the cache
def test_sliced_pass_equals_each_view_alone_and_the_unsliced_pass(views, local_rows):
    spark = views
    names = list(VIEWS)
    spark.conf.set("cepsql.workload.localRows", local_rows)
    try:
        wl = spark.cep.workload(names)
        frames = wl.dataframes()
        (shared, _), = wl._built.passes.values()
        assert [g.partition_columns for g in shared.groups] == [[SLICE_COLUMN]]
        assert "time-sliced" in wl.explain()
        sliced = _matches(wl)
        for name in names:
            alone = spark.table(name)
            assert frames[name].columns == alone.columns, name
            assert _rows(frames[name].collect()) == _rows(alone.collect()), name
        wl.close()
        spark.conf.set("cepsql.planner.slicing", "false")
        try:
            whole = spark.cep.workload(names)
            unsliced = _matches(whole)
            (shared, _), = whole._built.passes.values()
            assert [g.partition_columns for g in shared.groups] == [[]]
            whole.close()
        finally:
            spark.conf.unset("cepsql.planner.slicing")
        assert sliced == unsliced
        assert {v for v, _, _ in sliced} == set(names)  # every view has matches
    finally:
        spark.conf.unset("cepsql.workload.localRows")


DESCENDING = {
    "wls_down": "SELECT * FROM wls_ticks MATCH_RECOGNIZE (ORDER BY ts DESC "
                "MEASURES a.ts AS ta, c.ts AS tc STRATEGY SKIP_TILL_ANY_MATCH "
                "PATTERN (SEQ(a, NOT(n), c)) WITHIN INTERVAL '5' SECOND "
                "DEFINE a AS a.vol > 60, n AS n.vol > 95, c AS c.price > a.price)",
    "wls_down2": "SELECT * FROM wls_ticks MATCH_RECOGNIZE (ORDER BY ts DESC "
                 "MEASURES a.ts AS ta, b.ts AS tb STRATEGY SKIP_TILL_ANY_MATCH "
                 "PATTERN (SEQ(a, b)) WITHIN INTERVAL '2' SECOND "
                 "DEFINE a AS a.vol > 80, b AS b.vol > 70)",
}


def test_descending_order_slices_run_backwards_in_time(views):
    """ORDER BY ts DESC: the first rows are the latest, so the slices' match numbers
    follow the slices from the last one back (the dense rank runs DESC)."""
    spark = views
    for name, sql in DESCENDING.items():
        spark.cep.sql(f"CREATE OR REPLACE TEMPORARY VIEW {name} AS {sql}")
    try:
        wl = spark.cep.workload(list(DESCENDING))
        frames = wl.dataframes()
        assert wl._built.slicing and all(s.descending for s in wl._built.slicing.values())
        sliced = _matches(wl)
        for name in DESCENDING:
            assert _rows(frames[name].collect()) == _rows(spark.table(name).collect()), name
        wl.close()
        spark.conf.set("cepsql.planner.slicing", "false")
        try:
            whole = spark.cep.workload(list(DESCENDING))
            assert sliced == _matches(whole) and len(sliced) > 20
            assert not whole._built.slicing
            whole.close()
        finally:
            spark.conf.unset("cepsql.planner.slicing")
    finally:
        for name in DESCENDING:
            spark.cep.sql(f"DROP VIEW IF EXISTS {name}")


def test_time_slicing_conf_is_checked(views):
    from cepsql.errors import CepAnalysisError
    spark = views
    spark.conf.set("cepsql.workload.timeSlicing", "yes")
    try:
        with pytest.raises(CepAnalysisError, match="timeSlicing must be true or false"):
            spark.cep.workload(["wls_any"]).matches()
    finally:
        spark.conf.set("cepsql.workload.timeSlicing", "true")
