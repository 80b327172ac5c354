"""The sharing planner's global plans run by the shared DAG evaluator: for random
workloads of overlapping views (the synthetic stock experiment: shared event types,
shared and near-identical conditions, different windows, AND and SEQ, NOT and Kleene),
every algorithm's plan gives every view exactly the rows of the view's own evaluator
(itself property-tested against reference_cep), also when the partition streams through
the evaluator in small chunks; and every plan passes the planner's validator."""
from __future__ import annotations

from collections import Counter
from functools import partial

from hypothesis import given, settings
from hypothesis import strategies as st

from cepsql.parse import find_match_recognize
from cepsql.parse.statements import parse_create_view
from cepsql.backends.local.engine import table_statistics
from support.local_run import plan_local_workload
from cepsql.runtime.one_pass import sharing_patterns
from cepsql.sharing import plan_workload
from support.sharing_validate import check_global_plan
from cepsql.sharing.planner import trivial_global_plan
from support.sharing_synthetic import stock_workload

ALGORITHMS = ("NONE", "PREFIX", "SA", "TABU", "SA:VERTEX3", None)


def _rows(tables) -> list[Counter]:
    return [Counter(tuple(r.values()) for r in t.to_pylist()) for t in tables]


def _workload(n: int, seed: int, rows: int, symbols: int):
    wl = stock_workload(n, seed=seed, symbols=symbols, sizes=(2, 4), windows=(2, 3, 4),
                        special_fraction=0.3, and_fraction=0.3, kleene_max=2)
    table = wl.stream(rows, seed=seed)
    specs = [find_match_recognize(parse_create_view(s).query_text)[0].spec
             for s in wl.statements]
    local = plan_local_workload(specs, table, batch_rows=97)
    patterns = sharing_patterns(local.queries, partial(table_statistics, table=table))
    return local, patterns


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 12), seed=st.integers(0, 10_000), rows=st.integers(20, 300),
       symbols=st.integers(5, 8), chunk=st.sampled_from([None, 16, 61]))
def test_every_algorithm_equals_each_view_alone(n, seed, rows, symbols, chunk):
    local, patterns = _workload(n, seed, rows, symbols)
    own = _rows(local.own_outputs())
    plans = [trivial_global_plan(patterns)] + [
        plan_workload(patterns, algorithm=a, seconds=0.05, seed=seed, max_iterations=40)
        for a in ALGORITHMS]
    for plan in plans:
        check_global_plan(plan, patterns)
        assert _rows(local.shared_outputs(plan, chunk_rows=chunk)) == own, plan.algorithm


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_thirty_views_share_nodes_and_equal_each_view_alone(seed):
    local, patterns = _workload(30, seed, 400, 6)
    plan = plan_workload(patterns, algorithm="TABU", seconds=0.1, seed=seed,
                         max_iterations=60)
    assert plan.shared_nodes() and plan.cost <= plan.independent_cost <= plan.trivial_cost
    assert _rows(local.shared_outputs(plan)) == _rows(local.own_outputs())


def _planned_locally(wl, rows: int, seed: int):
    """A generated workload over its own stream: (the local workload in 97-row batches,
    its sharing patterns, each view's rows alone)."""
    table = wl.stream(rows, seed=seed)
    specs = [find_match_recognize(parse_create_view(s).query_text)[0].spec
             for s in wl.statements]
    local = plan_local_workload(specs, table, batch_rows=97)
    patterns = sharing_patterns(local.queries, partial(table_statistics, table=table))
    return local, patterns, _rows(local.own_outputs())


@settings(max_examples=20, deadline=None)
@given(n=st.integers(2, 10), seed=st.integers(0, 10_000), rows=st.integers(40, 400),
       chunk=st.sampled_from([None, 16, 61]))
def test_benchmark_workload_equals_each_view_alone(n, seed, rows, chunk):
    """The benchmark's workload shape (paper selectivities, uniformly drawn types, many
    NOTs: their region scans stop at the window and remember row-local failures) under
    the trivial plan and SA, streamed in chunks."""
    wl = stock_workload(n, seed=seed, symbols=5, sizes=(2, 4), windows=(2, 3, 4),
                        special_fraction=0.6, selectivities=(0.003, 0.92),
                        uniform_types=True, kleene_max=2)
    local, patterns, own = _planned_locally(wl, rows, seed)
    for plan in (trivial_global_plan(patterns),
                 plan_workload(patterns, algorithm="SA", seconds=0.05, seed=seed,
                               max_iterations=40)):
        assert _rows(local.shared_outputs(plan, chunk_rows=chunk)) == own, plan.algorithm


@settings(max_examples=8, deadline=None)
@given(n=st.integers(10, 20), seed=st.integers(0, 10_000), rows=st.integers(60, 250),
       chunk=st.sampled_from([None, 37]))
def test_dense_workload_equals_each_view_alone(n, seed, rows, chunk):
    """A density-tuned workload (target MPG density 0.5: patterns draw symbol pairs from
    a shared pool, so shared joins have several consumers) under every algorithm."""
    wl = stock_workload(n, seed=seed, symbols=10, sizes=(2, 4), windows=(2, 3, 4),
                        special_fraction=0.3, kleene_max=2, density=0.5,
                        selectivities=(0.003, 0.92), uniform_types=True)
    local, patterns, own = _planned_locally(wl, rows, seed)
    for algorithm in ALGORITHMS:
        plan = plan_workload(patterns, algorithm=algorithm, seconds=0.05, seed=seed,
                             max_iterations=30)
        assert _rows(local.shared_outputs(plan, chunk_rows=chunk)) == own, plan.algorithm


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 10_000), density=st.sampled_from([0.1, 0.3, 0.5, 0.7]),
       rate_diff=st.sampled_from([None, 0.2, 0.5]))
def test_generator_reaches_density_and_rate_band(seed, density, rate_diff):
    """The graph's measured MPG density is near the target (30 patterns) -- unless the
    target is out of the generator's reach: even a draw without shared pool pairs is
    denser (a narrow rate band crowds the patterns on few symbols) or one taking every
    pool pair is sparser; then it returns about that least / most dense draw -- and
    every pattern's symbols lie within the normalized rate band; no parameters: the
    default generator's draws."""
    from cepsql.sharing.dag import WorkloadContext
    from cepsql.sharing.graph import build_graph, mpg_density
    from support.sharing_synthetic import signature_density
    kwargs = dict(seed=seed, selectivities=(0.003, 0.92), uniform_types=True)
    wl = stock_workload(30, density=density, rate_diff=rate_diff, **kwargs)
    got = signature_density(wl.patterns)
    # the least dense draw the generator finds (q bisected towards no pool pair) and
    # the densest (every pool pair taken)
    floor, ceiling = (signature_density(stock_workload(30, density=d, rate_diff=rate_diff,
                                                       **kwargs).patterns)
                      for d in (0.0, 1.0))
    if floor >= density + 0.1 - 1e-9:   # out of reach (a floor of exactly +0.1 too)
        assert got <= floor + 0.05
    elif ceiling <= density - 0.1 + 1e-9:
        assert got >= ceiling - 0.05
    else:
        measured = mpg_density(build_graph(WorkloadContext(wl.workload_patterns())))
        miss = abs(got - density)
        if miss >= 0.1:
            # the density can jump between neighbouring draws (seed 1824: 0.18 at a target
            # of 0.2, 0.41 at 0.3 and 0.4): then the draw must be the nearest one there is
            near = (signature_density(stock_workload(30, density=d, rate_diff=rate_diff,
                                                     **kwargs).patterns)
                    for d in (density - 0.1, density + 0.1))
            assert miss <= min(abs(d - density) for d in near) + 1e-9
            assert abs(measured - got) < 0.12   # the graph agrees with the draw
        else:
            assert abs(measured - density) < 0.12
    if rate_diff is not None:
        spread = max(wl.rates.values()) - min(wl.rates.values())
        assert all(max(wl.rates[s] for s in p.symbols) - min(wl.rates[s] for s in p.symbols)
                   <= rate_diff * spread + 1e-9 for p in wl.patterns)
    assert stock_workload(12, seed=seed).statements == \
        stock_workload(12, seed=seed, density=None, rate_diff=None).statements
