"""The in-process plan cache (backends/local/plan_cache.py): a statement run again over
an input of the same schema, with the same options, reuses its clause plan, and gives
the rows of a fresh plan; another schema, other options (ANSI mode), a plan chosen from
the input's statistics or a clause with scalar subqueries are planned again."""
from __future__ import annotations

import gc
import weakref
from decimal import Decimal

import pyarrow as pa
import pytest

import cepsql
from cepsql.backends.local.engine import run_local
from cepsql.backends.local.plan_cache import PLANS, CachedPlan, PlanCache
from cepsql.compile.clause import plan_query
from cepsql.errors import CepRuntimeError

QUERY = """SELECT * FROM t MATCH_RECOGNIZE (
  PARTITION BY sym ORDER BY ts
  MEASURES MATCH_NUMBER() AS mn, FIRST(a.ts) AS t0, AVG(b.price) AS avg_b, LAST(c.ts) AS t1
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (a b+? c+?)
  DEFINE b AS b.price >= AVG(b.price), c AS c.price < AVG(b.price))"""

# a division by zero in DEFINE: an error under ANSI mode, NULL without (NULL OR TRUE)
DIVISION = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES B.id AS bid "
            "PATTERN (A B) DEFINE B AS B.v / A.v > 1 OR B.v > 1)")


class CountingPlanner:
    """plan_query, counting its calls (one object: the planner is part of the key)."""

    def __init__(self):
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return plan_query(*args, **kwargs)


def _ticks(n: int, price_type: pa.DataType = pa.float64(), shift: int = 0) -> pa.Table:
    prices = [100 + ((i * 7 + shift) % 11) - (i % 3) for i in range(n)]
    return pa.table({"sym": ["ab"[(i + shift) % 2] for i in range(n)],
                     "ts": pa.array(range(n), pa.int64()),
                     "price": pa.array(prices).cast(price_type)})


@pytest.fixture
def planner():
    PLANS.clear()
    yield CountingPlanner()
    PLANS.clear()


def _fresh(sql: str, table: pa.Table) -> pa.Table:
    """The result planned from scratch."""
    PLANS.clear()
    return run_local(sql, {"t": table})


def test_same_query_twice_plans_once_and_gives_the_fresh_rows(planner):
    table = _ticks(60)
    first = run_local(QUERY, {"t": table}, planner=planner)
    other_data = _ticks(80, shift=3)  # same schema, other rows
    second = run_local(QUERY, {"t": other_data}, planner=planner)
    assert planner.calls == 1
    assert first.num_rows > 3 and second.num_rows > 3
    assert first.equals(_fresh(QUERY, table))
    assert second.equals(_fresh(QUERY, other_data))


def test_another_schema_is_planned_again(planner):
    floats, ints = _ticks(60), _ticks(60, pa.int64())
    run_local(QUERY, {"t": floats}, planner=planner)
    got = run_local(QUERY, {"t": ints}, planner=planner)
    assert planner.calls == 2
    assert got.schema.field("avg_b").type == pa.float64()
    assert got.equals(_fresh(QUERY, ints))
    # a time zone is part of the type
    utc = pa.table({"ts": pa.array([1, 2], pa.timestamp("us", "UTC")), "price": [1, 2]})
    local = utc.cast(pa.schema([("ts", pa.timestamp("us", "Europe/Paris")),
                                ("price", pa.int64())]))
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES a.ts AS t0 "
           "ONE ROW PER MATCH PATTERN (a) DEFINE a AS a.price > 1)")
    assert run_local(sql, {"t": utc}, planner=planner).schema.field("t0").type.tz == "UTC"
    assert run_local(sql, {"t": local}, planner=planner).schema.field(
        "t0").type.tz == "Europe/Paris"
    assert planner.calls == 4


def test_ansi_mode_is_part_of_the_key(planner):
    table = pa.table({"id": pa.array([1, 2], pa.int64()),
                      "v": pa.array([Decimal("0.00"), Decimal("1.50")], pa.decimal128(5, 2))})
    with pytest.raises(CepRuntimeError, match="DIVIDE_BY_ZERO"):
        run_local(DIVISION, {"t": table}, planner=planner)
    with cepsql.planner_options(ansi=False):
        assert run_local(DIVISION, {"t": table}, planner=planner).column(
            "bid").to_pylist() == [2]
    with pytest.raises(CepRuntimeError, match="DIVIDE_BY_ZERO"):  # its own plan, cached
        run_local(DIVISION, {"t": table}, planner=planner)
    assert planner.calls == 2


def test_plans_chosen_from_statistics_are_not_kept(planner):
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
           "MEASURES a.ts AS ta, b.ts AS tb, c.ts AS tc ONE ROW PER MATCH "
           "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b, c)) WITHIN 4 ROWS "
           "DEFINE a AS a.price > 100, b AS b.price < a.price, c AS c.price > b.price)")
    table = _ticks(40)
    first = run_local(sql, {"t": table}, planner=planner)
    run_local(sql, {"t": table}, planner=planner)
    assert planner.calls == 2 and len(PLANS) == 0
    assert first.num_rows > 0


def test_scalar_subqueries_are_evaluated_on_every_call(planner):
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES a.ts AS t0 "
           "ONE ROW PER MATCH PATTERN (a) DEFINE a AS a.price > (SELECT avg(price) FROM t))")
    low = pa.table({"ts": [1, 2, 3], "price": [1.0, 2.0, 9.0]})
    high = pa.table({"ts": [1, 2, 3], "price": [5.0, 8.0, 7.0]})
    assert run_local(sql, {"t": low}, planner=planner).column("t0").to_pylist() == [3]
    assert run_local(sql, {"t": high}, planner=planner).column("t0").to_pylist() == [2, 3]
    assert run_local(sql, {"t": low}, planner=planner).column("t0").to_pylist() == [3]
    assert len(PLANS) == 0


def test_errors_are_raised_again_not_cached(planner):
    bad = QUERY.replace("b.price >= AVG", "b.nope >= AVG")
    for _ in range(2):
        with pytest.raises(cepsql.CepAnalysisError, match="nope"):
            run_local(bad, {"t": _ticks(10)}, planner=planner)
    assert planner.calls == 2 and len(PLANS) == 0


def test_the_cache_is_bounded_least_recently_used_first_out():
    cache = PlanCache(maxsize=2)
    entries = {k: CachedPlan(spec=None, plan=None) for k in "abc"}
    cache.put("a", entries["a"])
    cache.put("b", entries["b"])
    assert cache.get("a") is entries["a"]  # a is now the most recently used
    cache.put("c", entries["c"])
    assert len(cache) == 2
    assert cache.get("b") is None
    assert cache.get("a") is entries["a"] and cache.get("c") is entries["c"]


def test_a_kept_plan_does_not_keep_its_input_alive(planner):
    # CEP mode without a plan choice: kept, and the mode holds its statistics callable
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES a.ts AS ta ONE ROW PER "
           "MATCH STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, b)) "
           "DEFINE a AS a.price > 100, b AS b.price < 100)")
    table = _ticks(30)
    assert run_local(sql, {"t": table}, planner=planner).num_rows > 0
    assert len(PLANS) == 1
    gone = weakref.ref(table)
    del table
    gc.collect()
    assert gone() is None
