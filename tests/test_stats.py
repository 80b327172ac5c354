"""Statistics stage: estimates on generated data with known rates and selectivities,
the Spark sampling path, the time budget and the cache."""
from __future__ import annotations

import time

from functools import partial

import numpy as np
import pyarrow as pa
import pytest

from cepsql.parse import find_match_recognize
from cepsql.backends.local.engine import table_statistics
from cepsql.compile.clause import plan_query
from cepsql.stats import (
    CACHE,
    PatternStatistics,
    StatisticsCache,
    estimate_from_spark,
    estimate_from_table,
)
from cepsql.stats import cache as cache_module
from cepsql.analyze.conjuncts import analyze_defines
from cepsql.explain.clause import explain_clause

SYMBOL_P = {"X": 0.5, "Y": 0.3, "Z": 0.2}
ROWS_PER_SECOND = 10.0


def spec_of(body: str, source: str = "ticks"):
    return find_match_recognize(f"SELECT * FROM {source} MATCH_RECOGNIZE ({body})")[0].spec


def ticks(n_groups: int = 4, per_group: int = 25_000, seed: int = 1, k_values: int = 5,
          bucket_s: float | None = None) -> pa.Table:
    """Poisson arrivals at ROWS_PER_SECOND per group, symbols with SYMBOL_P, uniform
    prices in [0, 100), key k uniform over k_values (or the ts bucket of bucket_s)."""
    rng = np.random.default_rng(seed)
    n = n_groups * per_group
    ts = np.concatenate([np.cumsum(rng.exponential(1 / ROWS_PER_SECOND, per_group))
                         for _ in range(n_groups)])
    k = (ts // bucket_s).astype(np.int64) if bucket_s else rng.integers(0, k_values, n)
    return pa.table({
        "grp": np.repeat(np.arange(n_groups), per_group),
        "ts": pa.array((ts * 1e6).astype(np.int64)).cast(pa.timestamp("us")),
        "symbol": rng.choice(list(SYMBOL_P), size=n, p=list(SYMBOL_P.values())),
        "price": rng.uniform(0, 100, n),
        "k": k,
    })


def near(value: float, expected: float, rel: float = 0.06) -> bool:
    return abs(value - expected) <= rel * expected


# -- table path: rates ---------------------------------------------------------------

def test_rates_follow_symbol_frequencies():
    spec = spec_of("PARTITION BY grp ORDER BY ts PATTERN (a b c) DEFINE "
                   "a AS a.symbol = 'X', b AS symbol = 'Y', c AS c.symbol = 'Z' AND c.price < 50")
    stats = estimate_from_table(spec, ticks())
    assert isinstance(stats, PatternStatistics) and stats.rate_unit == "second"
    assert not stats.truncated and stats.sample_rows == 50_000 and stats.input_rows == 100_000
    expected = {"A": 0.5, "B": 0.3, "C": 0.1}
    for var, p in expected.items():
        assert near(stats.unary_selectivity[var], p), (var, stats.unary_selectivity)
        assert near(stats.rates[var], p * ROWS_PER_SECOND), (var, stats.rates)
    assert stats.selectivities == {} and stats.window_units is None


def test_variable_without_define_is_every_row_and_window_gives_cardinality():
    spec = spec_of("PARTITION BY grp ORDER BY ts STRATEGY SKIP_TILL_ANY_MATCH "
                   "PATTERN (SEQ(a, b)) WITHIN INTERVAL '30' SECOND DEFINE a AS a.symbol = 'Y'")
    stats = estimate_from_table(spec, ticks())
    assert stats.unary_selectivity["B"] == 1.0
    assert near(stats.rates["B"], ROWS_PER_SECOND)
    assert stats.window_units == 30.0
    assert near(stats.cardinality("A"), 30 * 0.3 * ROWS_PER_SECOND)


def test_row_window_is_converted_to_seconds():
    spec = spec_of("PARTITION BY grp ORDER BY ts STRATEGY SKIP_TILL_ANY_MATCH "
                   "PATTERN (SEQ(a, b)) WITHIN 100 ROWS DEFINE a AS a.symbol = 'X'")
    stats = estimate_from_table(spec, ticks())
    assert near(stats.window_units, 100 / ROWS_PER_SECOND)
    assert near(stats.cardinality("A"), 100 * 0.5)


def test_no_order_by_gives_per_row_rates():
    spec = spec_of("PATTERN (a b) DEFINE a AS a.symbol = 'X'")
    stats = estimate_from_table(spec, ticks(n_groups=1, per_group=20_000))
    assert stats.rate_unit == "row"
    assert near(stats.rates["A"], 0.5) and stats.rates["B"] == 1.0


def test_numeric_order_key_rates_are_per_step_of_that_column_in_explain():
    table = pa.table({"seq": np.arange(2000, dtype=np.int64) * 2,
                      "symbol": np.tile(["X", "Y"], 1000)})
    spec = spec_of("ORDER BY seq STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) "
                   "WITHIN INTERVAL '10' SECOND DEFINE a AS a.symbol = 'X', b AS b.symbol = 'Y'")
    stats = estimate_from_table(spec, table)
    assert stats.rate_unit == "unit of seq"
    assert near(stats.rates["A"], 0.25)   # one row every 2 steps of seq, half of them X
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY seq MEASURES a.seq AS s "
           "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) WITHIN INTERVAL '10' SECOND "
           "DEFINE a AS a.symbol = 'X', b AS b.symbol = 'Y')")
    text = explain_clause(plan_query(find_match_recognize(sql)[0].spec, table.schema, sql,
                                     statistics=partial(table_statistics, table=table)))
    assert "rates (rows per unit of seq)" in text and "units of seq" in text
    assert "per second" not in text


def test_date_order_key_and_two_partition_keys():
    days = np.arange(400)
    table = pa.table({"d": pa.array(np.tile(days, 6).astype("datetime64[D]")),
                      "g1": np.repeat([0, 1], 1200), "g2": np.tile(np.repeat([0, 1, 2], 400), 2)})
    spec = spec_of("PARTITION BY g1, g2 ORDER BY d PATTERN (a)")
    stats = estimate_from_table(spec, table)
    # one row per day in each of the 6 (g1, g2) groups
    assert stats.rates["A"] == pytest.approx(1 / 86400, rel=1e-9)


def test_sampling_fraction_is_scaled_back():
    full = estimate_from_table(spec_of("PARTITION BY grp ORDER BY ts PATTERN (a) "
                                       "DEFINE a AS a.symbol = 'X'"), ticks(), max_rows=5_000)
    assert full.sample_rows == 5_000
    assert near(full.rates["A"], 0.5 * ROWS_PER_SECOND, rel=0.1)


# -- table path: selectivities -------------------------------------------------------

def test_uniform_price_comparison_is_one_half():
    spec = spec_of("PARTITION BY grp ORDER BY ts PATTERN (a b) "
                   "DEFINE a AS a.symbol = 'X', b AS b.symbol = 'Y' AND a.price < b.price")
    stats = estimate_from_table(spec, ticks())
    assert set(stats.selectivities) == {("A", "B")}
    assert 0.48 <= stats.selectivities[("A", "B")] <= 0.52
    assert stats.pairs_evaluated[("A", "B")] > 40_000


@pytest.mark.parametrize("k", [2, 5, 20])
def test_key_equality_is_one_over_k(k):
    spec = spec_of("PARTITION BY grp ORDER BY ts PATTERN (a b c) "
                   "DEFINE a AS a.symbol = 'X', c AS c.k = a.k AND c.price > 10")
    stats = estimate_from_table(spec, ticks(k_values=k))
    assert set(stats.selectivities) == {("A", "C")}
    assert near(stats.selectivities[("A", "C")], 1 / k, rel=0.08)
    assert near(stats.unary_selectivity["C"], 0.9, rel=0.03)


def test_conjuncts_of_both_defines_combine_and_pair_keys_follow_pattern_order():
    spec = spec_of("PARTITION BY grp ORDER BY ts PATTERN (a b) "
                   "DEFINE a AS b.k = a.k, b AS a.price < price")
    split = analyze_defines(spec)
    assert list(split.pairs) == [("A", "B")] and len(split.pairs[("A", "B")]) == 2
    stats = estimate_from_table(spec, ticks(k_values=4))
    assert near(stats.selectivities[("A", "B")], 0.5 / 4, rel=0.1)


def test_pairs_stay_inside_partitions():
    spec = spec_of("PARTITION BY grp ORDER BY ts PATTERN (a b) DEFINE b AS b.grp = a.grp")
    stats = estimate_from_table(spec, ticks())
    assert stats.selectivities[("A", "B")] == 1.0


def test_window_restricts_the_pairs():
    """k is the 100 s bucket of ts: pairs within 10 s mostly share it, random pairs don't."""
    table = ticks(bucket_s=100.0)
    body = "PARTITION BY grp ORDER BY ts STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) {w} " \
           "DEFINE b AS b.k = a.k"
    windowed = estimate_from_table(spec_of(body.format(w="WITHIN INTERVAL '10' SECOND")), table)
    unbounded = estimate_from_table(spec_of(body.format(w="")), table)
    # |dt| <= 10 s, uniform positions in 100 s buckets: P(same bucket) = 1 - 5/100
    assert 0.93 <= windowed.selectivities[("A", "B")] <= 0.97
    # 25 000 rows at 10/s span 2 500 s = 25 buckets
    assert 0.03 <= unbounded.selectivities[("A", "B")] <= 0.05
    rows = estimate_from_table(spec_of(body.format(w="WITHIN 100 ROWS")), table)
    assert 0.93 <= rows.selectivities[("A", "B")] <= 0.97


def test_navigation_and_three_variable_conjuncts_are_reported_not_used():
    spec = spec_of("PARTITION BY grp ORDER BY ts PATTERN (a b c) DEFINE "
                   "b AS PREV(b.price) < b.price AND b.symbol = 'Y', "
                   "c AS c.price > a.price + b.price")
    stats = estimate_from_table(spec, ticks())
    assert near(stats.unary_selectivity["B"], 0.3)
    assert stats.selectivities == {}
    assert any("PREV" in n for n in stats.notes)
    assert any("more than two variables" in n for n in stats.notes)


def test_seeded_estimates_are_reproducible():
    spec = spec_of("PARTITION BY grp ORDER BY ts PATTERN (a b) DEFINE b AS a.price < b.price")
    one = estimate_from_table(spec, ticks(), max_rows=10_000, max_pairs=5_000, seed=7)
    two = estimate_from_table(spec, ticks(), max_rows=10_000, max_pairs=5_000, seed=7)
    assert one.selectivities == two.selectivities and one.rates == two.rates


def test_empty_table_gives_defaults():
    spec = spec_of("PARTITION BY grp ORDER BY ts PATTERN (a b) DEFINE b AS a.price < b.price")
    stats = estimate_from_table(spec, ticks().slice(0, 0))
    assert stats.sample_rows == 0 and stats.selectivities == {("A", "B"): 1.0}
    assert stats.notes


# -- Spark path ----------------------------------------------------------------------

PAIR_BODY = ("PARTITION BY grp ORDER BY ts STRATEGY SKIP_TILL_ANY_MATCH "
             "PATTERN (SEQ(a, b, c)) WITHIN INTERVAL '60' SECOND DEFINE "
             "a AS a.symbol = 'X', b AS b.symbol = 'Y' AND a.price < b.price, "
             "c AS c.k = a.k")


@pytest.fixture(scope="module")
def small_ticks() -> pa.Table:
    return ticks(n_groups=2, per_group=10_000, k_values=4)


@pytest.fixture(scope="module")
def ticks_df(spark, small_ticks):
    df = spark.createDataFrame(small_ticks)
    df.createOrReplaceTempView("stats_ticks")
    return spark.table("stats_ticks")


def test_spark_path_matches_table_path(ticks_df, small_ticks):
    spec = spec_of(PAIR_BODY)
    local = estimate_from_table(spec, small_ticks)
    remote = estimate_from_spark(spec, ticks_df, sample_rows=8_000, time_budget_s=120)
    assert not remote.truncated and remote.input_rows == 20_000
    assert 6_000 <= remote.sample_rows <= 8_000
    assert remote.rate_unit == local.rate_unit == "second"
    for var in ("A", "B", "C"):
        assert near(remote.rates[var], local.rates[var], rel=0.1), (var, remote.rates, local.rates)
    for pair in (("A", "B"), ("A", "C")):
        assert abs(remote.selectivities[pair] - local.selectivities[pair]) < 0.03
    assert near(remote.selectivities[("A", "C")], 0.25, rel=0.1)


def test_spark_time_budget_is_respected(ticks_df):
    spec = spec_of(PAIR_BODY)
    started = time.monotonic()
    stats = estimate_from_spark(spec, ticks_df, time_budget_s=1e-4)
    assert time.monotonic() - started < 5
    assert stats.truncated and stats.sample_rows == 0
    assert any("time budget" in n for n in stats.notes)
    assert stats.selectivities == {("A", "B"): 1.0, ("A", "C"): 1.0}


# -- cache ---------------------------------------------------------------------------

def test_cache_hit_does_not_resample(monkeypatch, small_ticks):
    calls = []
    real = cache_module.estimate_from_table
    monkeypatch.setattr(cache_module, "estimate_from_table",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    cache = StatisticsCache()
    spec = spec_of(PAIR_BODY)
    first = cache.get_or_estimate(spec, small_ticks, sample_rows=5_000)
    again = cache.get_or_estimate(spec_of(PAIR_BODY), small_ticks, sample_rows=5_000)
    assert again is first and len(calls) == 1 and (cache.hits, cache.misses) == (1, 1)
    cache.get_or_estimate(spec, small_ticks, sample_rows=6_000)  # other sample size
    cache.get_or_estimate(spec_of(PAIR_BODY.replace("'X'", "'Z'")), small_ticks,
                          sample_rows=5_000)  # other DEFINE
    assert len(calls) == 3
    named = cache.get_or_estimate(spec, small_ticks, source="ticks", sample_rows=5_000)
    assert cache.get_or_estimate(spec, small_ticks.slice(0, 10), source="ticks",
                                 sample_rows=5_000) is named
    assert cache.invalidate("ticks") == 1


def test_session_cache_with_spark_plans(monkeypatch, spark, ticks_df):
    calls = []
    real = cache_module.estimate_from_spark
    monkeypatch.setattr(cache_module, "estimate_from_spark",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    CACHE.clear()
    spec = spec_of(PAIR_BODY)
    first = CACHE.get_or_estimate(spec, ticks_df, sample_rows=2_000, time_budget_s=120)
    same_view = CACHE.get_or_estimate(spec, spark.table("stats_ticks"), sample_rows=2_000)
    assert same_view is first and len(calls) == 1
    CACHE.get_or_estimate(spec, ticks_df.where("price > 50"), sample_rows=2_000,
                          time_budget_s=120)
    assert len(calls) == 2
    truncated = CACHE.get_or_estimate(spec, ticks_df.where("price > 1"), time_budget_s=1e-4)
    assert truncated.truncated
    CACHE.get_or_estimate(spec, ticks_df.where("price > 1"), time_budget_s=1e-4)
    assert len(calls) == 4  # truncated results are not cached
    CACHE.clear()


def test_conditions_outside_the_local_evaluator(spark, small_ticks):
    """Arrow leaves such a conjunct out (noted); Spark computes it in the sampled query."""
    spec = spec_of("PARTITION BY grp ORDER BY ts PATTERN (a b) DEFINE "
                   "a AS sha2(a.symbol, 256) = sha2('X', 256) AND a.price < 50, "
                   "b AS b.symbol = 'Y'")
    local = estimate_from_table(spec, small_ticks)
    assert near(local.unary_selectivity["A"], 0.5) and any("sha2" in n for n in local.notes)
    df = spark.createDataFrame(small_ticks.slice(0, 4_000))
    remote = estimate_from_spark(spec, df, time_budget_s=120)
    assert near(remote.unary_selectivity["A"], 0.25, rel=0.15), remote.unary_selectivity
    assert remote.sample_rows == 4_000 and remote.input_rows == 4_000
