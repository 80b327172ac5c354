"""Planned evaluation (SKIP_TILL_ANY_MATCH): every plan gives exactly the oracle's rows.

The planned evaluator runs a join tree per disjunct (order plans as left-deep trees,
the lazy chain). Whatever the plan, the matches must be those of the reference:
checked for each of the nine algorithms (statistics estimated from the generated
table) and for arbitrary trees drawn from all binary trees over the components.
"""
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cepsql
from cepsql.planning import ALGORITHMS
from support.planning_exhaustive import all_trees
from cepsql.planning.plans import TreePlan
from cepsql.compile import cep as cep_plan_module
from cepsql.backends.local import engine as engine_module
from cepsql.backends.local.engine import run_local, to_pandas
from cepsql.backends.local.plan_cache import PlanCache
from cepsql.runtime.run_stats import RunStatistics
from cepsql.planning.evaluator_choice import EVALUATOR_TREE, CepPlanChoice

try:
    from .support.strategies_cep import cep_queries, cep_streams
    from .test_cep_streaming import _chunked
    from .test_property_cep import assert_cep_matches
    from .test_property_sql import SETTINGS
except ImportError:
    from support.strategies_cep import cep_queries, cep_streams
    from test_cep_streaming import _chunked
    from test_property_cep import assert_cep_matches
    from test_property_sql import SETTINGS

ANY = "SKIP_TILL_ANY_MATCH"
# conjuncts only the complete match decides (unqualified navigation / aggregates)
_LATE = ["count(*) <= 4", "FIRST(price) <= {v}.price", "LAST(vol, 1) IS NULL OR vol >= 0"]


@st.composite
def planned_queries(draw) -> str:
    sql = draw(cep_queries(ANY))
    if " DEFINE " in sql and draw(st.booleans()):
        head, defines = sql.rsplit(" DEFINE ", 1)
        var = defines.split(" AS ", 1)[0].strip()
        late = draw(st.sampled_from(_LATE)).format(v=var)
        sql = f"{head} DEFINE {var} AS ({late}) AND " + defines.split(" AS ", 1)[1]
    return sql


def _counting():
    seen = {"planned": 0}

    def check(sql, table):
        stats = RunStatistics()
        assert_cep_matches(sql, table, stats)
        seen["planned"] += int(stats.last.get("planned", 0))
    return seen, check


@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_every_algorithm_matches_reference(algorithm):
    seen, run = _counting()

    # 40 per algorithm (it was 60: 540 planned runs, ~9 s CPU); the planned evaluator
    # also runs random trees, streamed plans and test_property_nonoverlap.py's cases
    @settings(max_examples=40, **SETTINGS)
    @given(sql=planned_queries(), table=cep_streams())
    def check(sql, table):
        with cepsql.planner_options(algorithm=algorithm):
            run(sql, table)
    check()
    assert seen["planned"] > 0  # the planned evaluator really ran


@pytest.fixture()
def random_trees(monkeypatch):
    """Replace the planner's choice by a random binary tree per disjunct."""
    state = {"rng": random.Random(0)}
    original = cep_plan_module.choose_cep_plan

    def choose(spec, terms, options, statistics):
        base = original(spec, terms, options, statistics)
        plans = []
        for plan in base.plans:
            n = plan.query.size
            trees = list(all_trees(list(range(n)))) if n <= 5 else None
            root = state["rng"].choice(trees) if trees else (
                plan.root if isinstance(plan, TreePlan) else None)
            if root is None:
                plans.append(plan)
            else:
                plans.append(TreePlan(root=root, cost=0.0, algorithm="RANDOM", query=plan.query))
        return CepPlanChoice(EVALUATOR_TREE, "random tree (test)", "RANDOM", plans)

    monkeypatch.setattr(cep_plan_module, "choose_cep_plan", choose)
    # a new random tree for every example: no plan kept from an earlier one
    monkeypatch.setattr(engine_module, "PLANS", PlanCache(maxsize=0))
    return state


def test_random_trees_match_reference(random_trees):
    # 150 random trees (it was 300, ~5 s CPU); the algorithms' own plans run 60 examples
    # each in test_every_algorithm_matches_reference
    @settings(max_examples=150, **{**SETTINGS, "suppress_health_check": [
        *SETTINGS["suppress_health_check"], HealthCheck.function_scoped_fixture]})
    @given(sql=planned_queries(), table=cep_streams(), seed=st.integers(0, 10**6))
    def check(sql, table, seed):
        random_trees["rng"].seed(seed)
        assert_cep_matches(sql, table)
    check()


@pytest.mark.parametrize("algorithm", ["GREEDY", "DP_B"])
def test_planned_streaming_matches_reference(monkeypatch, algorithm):
    _chunked(monkeypatch, 3)

    @settings(max_examples=60, **{**SETTINGS, "suppress_health_check": [
        *SETTINGS["suppress_health_check"], HealthCheck.function_scoped_fixture]})
    @given(sql=planned_queries(), table=cep_streams())
    def check(sql, table):
        with cepsql.planner_options(algorithm=algorithm):
            assert_cep_matches(sql, table)
    check()


def test_planned_evaluator_reports_partial_matches():
    import pyarrow as pa
    table = pa.table({"ts": list(range(8)), "tag": list("abcabcab"),
                      "price": [1.0, 2, 3, 4, 5, 6, 7, 8]})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES a.ts AS ta, c.ts AS tc "
           "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b, c)) WITHIN 5 ROWS "
           "DEFINE a AS a.tag = 'a', b AS b.tag = 'b', c AS c.tag = 'c')")
    run = RunStatistics()
    with cepsql.planner_options(algorithm="DP_B"):
        df = to_pandas(run_local(sql, {"t": table}, stats=run))
    stats = run.last
    assert stats["planned"] == 1
    assert stats["partial_matches"] > 0
    # a in {0,3,6}, b in {1,4,7}, c in {2,5}; a span of 5 rows or more is too wide
    assert sorted(map(tuple, df[["ta", "tc"]].itertuples(index=False))) == [(0, 2), (3, 5)]
