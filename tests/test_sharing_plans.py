"""Global plans of generated workloads: every algorithm's plan is valid, sharing never
costs more than the independent plans, searches never end worse than they start, PREFIX
shares only prefixes, and tiny workloads reach the exhaustive optimum."""
from __future__ import annotations

from functools import lru_cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cepsql.errors import CepAnalysisError
from cepsql.planning import CostModel
from cepsql.planning.options import PlannerOptions
from cepsql.sharing.dag import WorkloadContext
from support.sharing_exhaustive import all_trees, exhaustive_cost
from cepsql.sharing.graph import build_graph
from cepsql.sharing.planner import parse_algorithm, plan_workload
from cepsql.sharing.search import Search, best_local_plan, independent_plans
from support.sharing_synthetic import stock_workload
from support.sharing_validate import check_global_plan, global_plan_problems

TOL = 1 + 1e-9


@lru_cache(maxsize=64)
def workload(n: int, seed: int, symbols: int = 8, sizes: tuple[int, int] = (2, 5)):
    """Overlapping patterns: few symbols, so many pairs share sub-patterns."""
    wl = stock_workload(n, seed=seed, symbols=symbols, sizes=sizes, windows=(5, 10))
    return tuple(wl.workload_patterns())


def _subtree_left_deep(plan, i: int) -> bool:
    n = plan.nodes[i]
    if n.is_leaf:
        return True
    l, r = plan.nodes[n.left], plan.nodes[n.right]
    return (l.is_leaf or r.is_leaf) and _subtree_left_deep(plan, n.left) and \
        _subtree_left_deep(plan, n.right)


@settings(max_examples=20, deadline=None)
@given(n=st.integers(2, 30), seed=st.integers(0, 10_000))
def test_every_algorithm_gives_a_valid_plan_no_dearer_than_independent(n, seed):
    patterns = list(workload(n, seed))
    assert all(p.shareable for p in patterns)
    for algorithm in ("NONE", "PREFIX", "SA", "TABU", "SA:VERTEX4", None):
        plan = plan_workload(patterns, algorithm=algorithm, seed=seed, max_iterations=60)
        check_global_plan(plan, patterns)
        assert len(plan.bindings) == sum(len(p.terms) for p in patterns)
        assert plan.independent_cost <= plan.trivial_cost * TOL
        if algorithm == "NONE":
            assert plan.shared_nodes() == []
            assert plan.cost == pytest.approx(plan.independent_cost)
        elif algorithm == "PREFIX":
            assert all(_subtree_left_deep(plan, b.root) for b in plan.bindings)
        else:
            assert plan.cost <= plan.independent_cost * TOL


@settings(max_examples=15, deadline=None)
@given(n=st.integers(2, 20), seed=st.integers(0, 10_000), tabu=st.booleans(),
       k=st.sampled_from([0, 3, 5]))
def test_searches_never_end_worse_than_their_start(n, seed, tabu, k):
    ctx = WorkloadContext(list(workload(n, seed)))
    graph = build_graph(ctx)
    search = Search(ctx, graph, independent_plans(ctx), vertex_k=k, seed=seed)
    start = search.cost
    result = search.tabu(1.0, 80) if tabu else search.annealing(1.0, 80)
    assert result.start_cost == pytest.approx(start)
    assert result.cost <= start * TOL
    assert search.cost == pytest.approx(result.cost)   # the search holds the best state


def test_same_seed_and_iterations_give_the_same_plan():
    patterns = list(workload(12, 5))
    a = plan_workload(patterns, algorithm="SA", seed=3, max_iterations=150)
    b = plan_workload(patterns, algorithm="SA", seed=3, max_iterations=150)
    assert (a.nodes, a.bindings, a.cost) == (b.nodes, b.bindings, b.cost)


def test_prefix_sharing_shares_common_prefixes():
    import pyarrow as pa

    from cepsql.parse import find_match_recognize
    from cepsql.sharing.patterns import workload_pattern
    schema = pa.schema([("ts", pa.timestamp("us")), ("symbol", pa.string()),
                        ("diff", pa.float64())])

    def view(pattern: str, last: str):
        sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES count(*) AS n "
               f"STRATEGY SKIP_TILL_ANY_MATCH PATTERN ({pattern}) WITHIN INTERVAL '5' "
               "SECOND DEFINE a AS a.symbol = 'A', b AS b.symbol = 'B' AND b.diff < "
               f"a.diff, {last} AS {last}.symbol = '{last.upper()}')")
        return workload_pattern(find_match_recognize(sql)[0].spec, schema)
    patterns = [view("SEQ(a, b, c)", "c"), view("SEQ(a, b, d)", "d"),
                view("SEQ(a, b, e)", "e")]
    plan = plan_workload(patterns, algorithm="PREFIX", seed=1, max_iterations=200)
    check_global_plan(plan, patterns)
    joins = [i for i in plan.shared_nodes() if not plan.nodes[i].is_leaf]
    assert [sorted(plan.nodes[i].owner_vars) for i in joins] == [["A", "B"]]
    assert all(_subtree_left_deep(plan, b.root) for b in plan.bindings)
    assert plan.cost < plan.independent_cost


@pytest.mark.parametrize("seed", range(8))
def test_tiny_workloads_reach_the_exhaustive_optimum(seed):
    patterns = list(workload(3 if seed % 2 else 2, seed, symbols=5,
                             sizes=(2, 3) if seed % 2 else (3, 4)))
    best, _ = exhaustive_cost(WorkloadContext(patterns))
    for algorithm in ("SA", "TABU", None):
        plan = plan_workload(patterns, algorithm=algorithm, seed=seed, max_iterations=400)
        assert plan.cost >= best / TOL                       # the space is the same
        assert plan.cost <= best * TOL, algorithm            # and the search finds it
    prefix = plan_workload(patterns, algorithm="PREFIX", seed=seed, max_iterations=400)
    assert prefix.cost >= best / TOL


@pytest.mark.parametrize("seed", [1, 4])
def test_without_the_pairs_term_tiny_workloads_reach_the_exhaustive_optimum_too(seed):
    patterns = list(workload(3 if seed % 2 else 2, seed, symbols=5,
                             sizes=(2, 3) if seed % 2 else (3, 4)))
    best, _ = exhaustive_cost(WorkloadContext(patterns, CostModel()))
    plan = plan_workload(patterns, seed=seed, max_iterations=400, access=0.0)
    assert best / TOL <= plan.cost <= best * TOL


def test_join_nodes_also_cost_the_pairs_they_try():
    """Priced as single patterns are (cost.py join_extra, the planner's access weight
    by default): each join node adds access * PM(left) * PM(right), its sides' partial
    matches with the SEQ orders they apply; access 0 gives the partial matches alone."""
    patterns = list(workload(3, 1, symbols=5, sizes=(3, 4)))
    access = PlannerOptions().access
    ctx, plain = WorkloadContext(patterns), WorkloadContext(patterns, CostModel())
    assert ctx.model.access == access > 0
    for t, plan in enumerate(independent_plans(plain)):
        pairs = sum(plain.pm(t, n.left.mask, plan.node_relaxed(n.left.mask))
                    * plain.pm(t, n.right.mask, plan.node_relaxed(n.right.mask))
                    for n in plan.tree.nodes() if not n.is_leaf)
        assert pairs > 0
        assert ctx.local_cost(t, plan) == pytest.approx(plain.local_cost(t, plan)
                                                        + access * pairs)
    heavy = plan_workload(patterns, seed=1, max_iterations=100, access=10.0)
    light = plan_workload(patterns, seed=1, max_iterations=100, access=0.0)
    assert heavy.cost > light.cost


def test_all_trees_counts_unordered_bushy_shapes():
    assert [len(list(all_trees(list(range(n))))) for n in range(1, 6)] == [1, 1, 3, 15, 105]


def test_validator_reports_missing_and_foreign_checks():
    patterns = list(workload(6, 2))
    plan = plan_workload(patterns, algorithm="TABU", seed=0, max_iterations=100)
    check_global_plan(plan, patterns)
    b = plan.bindings[0]
    from dataclasses import replace
    broken = replace(plan, bindings=[replace(b, slot_vars=b.slot_vars[::-1])]
                     + plan.bindings[1:])
    if b.slot_vars != b.slot_vars[::-1]:
        assert global_plan_problems(broken, patterns)
    dropped = replace(plan, bindings=plan.bindings[1:])
    assert any("roots, want 1" in p for p in global_plan_problems(dropped, patterns))
    unwindowed = [replace(p, window=None) for p in patterns]
    assert any("without a window" in p for p in global_plan_problems(plan, unwindowed))


def test_algorithm_names_and_budget_are_checked():
    assert parse_algorithm(None) == (None, 0)
    assert parse_algorithm("tabu:vertex4") == ("TABU", 4)
    assert parse_algorithm("SA:EDGE") == ("SA", 0)
    assert parse_algorithm("PREFIX:VERTEX2") == ("PREFIX", 0)
    for bad in ("GREEDY", "SA:VERTEX1", "SA:NODE"):
        with pytest.raises(CepAnalysisError, match="cepsql.sharing.algorithm"):
            parse_algorithm(bad)
    with pytest.raises(CepAnalysisError, match="seconds"):
        plan_workload([], seconds=0)


def test_time_budget_is_respected_and_recorded():
    patterns = list(workload(25, 9))
    plan = plan_workload(patterns, algorithm=None, seconds=0.4)
    check_global_plan(plan, patterns)
    assert plan.iterations > 0
    assert set(plan.alternatives) == {"SA:EDGE", "TABU:EDGE"}
    assert plan.cost == min(plan.alternatives.values())
    assert plan.seconds > 0


def test_a_time_budgeted_search_stops_once_converged_with_the_long_run_plan():
    """The benchmark's 30 small views (bench_workload_spark --kind stock): a search with
    a long budget stops by itself within a few hundred iterations per meta-heuristic,
    with the plan a long fixed-iteration run finds."""
    patterns = stock_workload(30, seed=1, selectivities=(0.003, 0.5),
                              windows=(1, 2, 3)).workload_patterns()
    timed = plan_workload(patterns, seconds=600)
    fixed = plan_workload(patterns, max_iterations=1500)
    assert timed.graph_edges > 100
    assert timed.iterations < 1200
    assert timed.cost <= fixed.cost * TOL


def test_the_local_plan_generator_answers_a_repeated_sub_problem_from_its_memo():
    """best_local_plan is a pure function of the context and its arguments: asked again,
    it returns the plan it found (the search asks the same sub-problems many times)."""
    patterns = list(workload(6, 0))
    ctx = WorkloadContext(patterns)
    first = best_local_plan(ctx, 0, [], comps=0b11)
    unit = best_local_plan(ctx, 1, [], relaxed=True, comps=0b11)
    assert best_local_plan(ctx, 0, [], comps=0b11) is first
    assert best_local_plan(ctx, 1, [unit]) is best_local_plan(ctx, 1, [unit])
    fresh = WorkloadContext(patterns)
    assert best_local_plan(fresh, 0, [], comps=0b11) == first
