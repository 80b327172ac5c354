"""The in-process backend with a fake finder and planner."""
import math

import pandas as pd
import pyarrow as pa
import pytest

from cepsql.errors import CepAnalysisError
from cepsql.backends.local.engine import run_local, to_pandas
from cepsql.runtime.ordering import sort_table
from cepsql.compile.query_plan import SortColumn

TICKS = pd.DataFrame({"sym": ["a", "a", "b", "b", "a"], "ts": [3, 1, 1, 2, 2],
                      "price": [1.0, 2.0, 3.0, 4.0, 5.0]})


@pytest.fixture
def run(fake_finder, fake_planner):
    return lambda sql, **tables: run_local(sql, tables, finder=fake_finder, planner=fake_planner)


def test_select_star_returns_the_clause_result(run):
    out = run("SELECT * FROM Ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts DOUBLE price) m;",
              ticks=TICKS)
    assert out.column_names == ["sym", "ts", "price", "price2", "rn"]
    assert out.to_pylist()[:3] == [
        {"sym": "a", "ts": 1, "price": 2.0, "price2": 4.0, "rn": 1},
        {"sym": "a", "ts": 2, "price": 5.0, "price2": 10.0, "rn": 2},
        {"sym": "a", "ts": 3, "price": 1.0, "price2": 2.0, "rn": 3}]


def test_outer_sql_runs_through_local_sql(run):
    out = run("SELECT sym, max(rn) AS m FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts) "
              "GROUP BY sym ORDER BY sym", ticks=pa.Table.from_pandas(TICKS))
    assert out.to_pylist() == [{"sym": "a", "m": 3}, {"sym": "b", "m": 2}]


def test_subquery_and_cte_sources(run):
    out = run("WITH t AS (SELECT * FROM ticks WHERE price > 1) SELECT sym, ts, rn FROM "
              "(SELECT sym, ts FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts) i WHERE rn = 1) "
              "MATCH_RECOGNIZE (ORDER BY ts) ORDER BY rn", ticks=TICKS)
    assert out.to_pylist() == [{"sym": "a", "ts": 1, "rn": 1}, {"sym": "b", "ts": 1, "rn": 2}]


def test_unknown_table(run):
    with pytest.raises(CepAnalysisError, match="unknown table nosuch") as info:
        run("SELECT * FROM nosuch MATCH_RECOGNIZE (ORDER BY ts)", ticks=TICKS)
    assert info.value.col == 15


def test_sort_table_per_key_null_placement():
    t = pa.table({"k": [2, None, 1, 2, None], "v": [1.0, 2.0, math.nan, None, 0.5]})
    out = sort_table(t, [SortColumn("k", True, False), SortColumn("v", False, True)])
    assert out.to_pylist()[1:] == [
        {"k": 2, "v": None}, {"k": 2, "v": 1.0}, {"k": None, "v": 2.0}, {"k": None, "v": 0.5}]
    assert out.column("k")[0].as_py() == 1 and math.isnan(out.column("v")[0].as_py())
    # NaN sorts above numbers: first in descending order (after NULLS FIRST)
    out = sort_table(pa.table({"v": [1.0, math.nan, None, 3.0]}), [SortColumn("v", False, True)])
    assert out.column("v").to_pylist()[0] is None and math.isnan(out.column("v")[1].as_py())


def test_to_pandas_keeps_nullable_ints():
    df = to_pandas(pa.table({"n": pa.array([1, None], pa.int64()), "b": [True, None]}))
    assert str(df["n"].dtype) == "Int64" and str(df["b"].dtype) == "boolean"
