"""EXPLAIN WORKLOAD text and SVG, the conf keys, and the synthetic stock workload."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pytest

import cepsql
from cepsql.errors import CepAnalysisError
from cepsql.explain.workload import describe_workload, workload_svg
from cepsql.sharing import options_from_conf, plan_workload
from support.sharing_validate import check_global_plan
from support.sharing_synthetic import TICKS_SCHEMA, stock_workload


@pytest.fixture(scope="module")
def small():
    wl = stock_workload(12, seed=4, symbols=6, sizes=(3, 5), windows=(5, 10))
    return wl, wl.workload_patterns()


def test_explain_workload_lists_graph_dag_costs_and_search(small):
    _, patterns = small
    plan = plan_workload(patterns, algorithm="TABU", seed=0, max_iterations=200)
    check_global_plan(plan, patterns)
    text = describe_workload(plan, patterns)
    assert text.startswith("workload: 12 pattern views, 12 planned together")
    assert f"multi-pattern graph: {plan.graph_edges} edges" in text
    assert "shared sub-patterns:" in text
    assert f"global plan (DAG, children first, * = shared, {len(plan.nodes)} nodes)" in text
    marked = [line for line in text.splitlines() if line.startswith("  *#")]
    assert len(marked) == len(plan.shared_nodes()) > 0
    assert "independent plans" in text and "trivial plans" in text
    assert f"search: TABU:EDGE, {plan.iterations} iterations" in text
    for p in patterns:
        assert f"  {p.name}: {p.spec.pattern_text}  [shared]" in text


def test_workload_svg_draws_every_node_and_root_with_shared_ones_highlighted(small):
    _, patterns = small
    plan = plan_workload(patterns, algorithm="SA", seed=0, max_iterations=200)
    svg = workload_svg(plan, patterns)
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    boxes = root.findall(f"{ns}rect")[1:]          # the first rect is the background
    assert len(boxes) == len(plan.nodes) + len(plan.bindings)
    highlighted = [b for b in boxes if b.get("fill") == "#ffe9b3"]
    assert len(highlighted) == len(plan.shared_nodes())
    assert "independent" in root.find(f"{ns}text").text


def test_unshared_views_are_listed_with_their_reason():
    from cepsql.parse import find_match_recognize
    from cepsql.sharing import workload_pattern
    sql = ("SELECT * FROM ticks MATCH_RECOGNIZE (ORDER BY ts MEASURES count(*) AS n "
           "STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, b)) WITHIN INTERVAL '5' SECOND "
           "DEFINE a AS a.symbol = 'A', b AS b.symbol = 'B')")
    p = workload_pattern(find_match_recognize(sql)[0].spec, TICKS_SCHEMA, name="nxt")
    plan = plan_workload([p], seconds=0.05)
    text = describe_workload(plan, [p])
    assert "0 planned together" in text and "1 run on their own" in text
    assert "nxt: SEQ(a, b)  [unshared: STRATEGY SKIP_TILL_NEXT_MATCH" in text
    assert plan.bindings == [] and plan.nodes == []


def test_conf_keys_are_read_and_checked():
    conf = {"cepsql.sharing.algorithm": "sa:vertex4", "cepsql.sharing.seconds": "0.5"}
    assert options_from_conf(conf.get) == {"algorithm": "sa:vertex4", "seconds": 0.5}
    assert options_from_conf({}.get) == {}
    with pytest.raises(CepAnalysisError, match="number of seconds"):
        options_from_conf({"cepsql.sharing.seconds": "soon"}.get)
    with pytest.raises(CepAnalysisError, match="positive"):
        options_from_conf({"cepsql.sharing.seconds": "-1"}.get)
    with pytest.raises(CepAnalysisError, match="cepsql.sharing.algorithm"):
        options_from_conf({"cepsql.sharing.algorithm": "GREEDY"}.get)
    # global plans are priced with the single-pattern planner's pairs weight
    assert options_from_conf({"cepsql.planner.accessCost": "0.5"}.get) == {"access": 0.5}
    with pytest.raises(CepAnalysisError, match="cepsql.planner.accessCost"):
        options_from_conf({"cepsql.planner.accessCost": "-1"}.get)


def test_synthetic_workload_has_the_papers_shape():
    wl = stock_workload(200, seed=1)
    ops = [p.operator for p in wl.patterns]
    sizes = [len(p.symbols) for p in wl.patterns]
    special = [p.special for p in wl.patterns if p.special]
    assert min(sizes) >= 3 and max(sizes) <= 7
    assert set(ops) == {"SEQ", "AND"}
    assert 0.1 < len(special) / 200 < 0.3
    assert {kind for kind, _ in special} == {"NOT", "KL"}
    for p in wl.patterns:
        positive = [i for i in range(len(p.symbols)) if p.special != ("NOT", i)]
        n_pairs = len(positive) * (len(positive) - 1) // 2
        assert len(p.predicates) == max(1, n_pairs // 2)
        assert len(set(p.symbols)) == len(p.symbols)
    rates = sorted(wl.rates.values(), reverse=True)
    assert rates[0] > 5 * rates[-1]                       # skewed
    # the same symbol pair gets the same predicate everywhere (so patterns overlap)
    seen = {}
    for p in wl.patterns:
        for x, y, k in p.predicates:
            pair = (p.symbols[x], p.symbols[y])
            assert seen.setdefault(pair, k) == k
            assert (p.symbols[y], p.symbols[x]) not in seen


def test_synthetic_views_parse_share_and_run_in_process():
    wl = stock_workload(6, seed=2, symbols=4, sizes=(2, 3), windows=(8,),
                        events_per_second=4.0)
    patterns = wl.workload_patterns()
    assert all(p.shareable for p in patterns)
    assert all(stmt.startswith(f"CREATE OR REPLACE TEMPORARY VIEW w{i} AS SELECT")
               for i, stmt in enumerate(wl.statements))
    table = wl.stream(200, seed=3)
    assert table.schema == TICKS_SCHEMA and table.num_rows == 200
    ts = table.column("ts").cast("int64").to_numpy()
    assert np.all(np.diff(ts) >= 0)
    counts = {s: 0 for s in wl.symbols}
    for s in table.column("symbol").to_pylist():
        counts[s] += 1
    assert counts[wl.symbols[0]] > counts[wl.symbols[-1]]
    from cepsql.parse import find_match_recognize
    from cepsql.reference.cep import evaluate_reference_cep
    total = 0
    for stmt in wl.statements[:3]:
        query = stmt.split(" AS ", 1)[1]
        out = cepsql.match_recognize(query, ticks=table)
        assert list(out.columns) == ["first_ts", "last_ts"]
        _, want = evaluate_reference_cep(find_match_recognize(query)[0].spec, table)
        got = sorted(tuple(int(v.value // 1000) for v in r) for r in out.itertuples(False))
        ref = sorted(tuple(int(v.timestamp() * 1e6) for v in r) for r in want)
        assert got == ref
        total += len(got)
    assert total > 0


def test_synthetic_statistics_feed_the_planner():
    wl = stock_workload(3, seed=5)
    patterns = wl.workload_patterns()
    for sp, wp in zip(wl.patterns, patterns):
        assert wp.stats_note == ""
        assert wp.window_units == sp.window
        assert wp.stats.rates["A"] == pytest.approx(wl.rates[sp.symbols[0]])


def test_compiled_clauses_feed_the_planner_like_their_specs():
    """The workload runtime holds QueryPlans: their specs give the same patterns."""
    from cepsql.parse import find_match_recognize
    from cepsql.compile.clause import plan_query
    from cepsql.sharing import patterns_from_plans
    wl = stock_workload(4, seed=8, symbols=5, sizes=(3, 4))
    queries = [s.split(" AS ", 1)[1] for s in wl.statements]
    plans = [plan_query(find_match_recognize(q)[0].spec, TICKS_SCHEMA, q) for q in queries]
    from_plans = patterns_from_plans(plans, names=[p.name for p in wl.patterns])
    from_specs = wl.workload_patterns()
    for a, b in zip(from_plans, from_specs):
        assert a.shareable and [t.vars for t in a.terms] == [t.vars for t in b.terms]
        assert [c.var for c in a.conjuncts] == [c.var for c in b.conjuncts]
        assert [t.leaf_keys for t in a.terms] == [t.leaf_keys for t in b.terms]
    plan = plan_workload(from_plans, algorithm="BEST", seconds=None, max_iterations=50)
    check_global_plan(plan, from_plans)
    assert len(plan.bindings) == 4


def test_benchmark_workload_draws_the_papers_selectivities_and_uniform_types():
    """selectivities=(lo, hi): each symbol pair's predicate selectivity log-uniform in
    [lo, hi] (the planner statistics say so, and the stream agrees); uniform_types: every
    symbol as likely in a pattern, whatever its rate."""
    from support.sharing_synthetic import _phi
    wl = stock_workload(300, seed=3, selectivities=(0.003, 0.92), uniform_types=True)
    first = wl.patterns[0]
    from cepsql.parse import find_match_recognize
    from cepsql.parse.statements import parse_create_view
    spec = find_match_recognize(parse_create_view(first.sql()).query_text)[0].spec
    planner = wl.statistics_of(first)(spec).selectivities
    assert sorted(planner.values()) == sorted(_phi(-k / np.sqrt(2.0))
                                              for _, _, k in first.predicates)
    ks = np.array(list(wl.offsets.values()))
    sel = np.array([_phi(-k / np.sqrt(2.0)) for k in ks])
    assert sel.min() >= 0.003 * 0.97 and sel.max() <= 0.92 * 1.03
    # log-uniform: about half of the pairs below the geometric middle (0.0525)
    assert 0.4 < np.mean(sel < np.sqrt(0.003 * 0.92)) < 0.6
    assert any(k < 0 for k in ks) and any(" - " in s for s in wl.statements)
    counts = np.zeros(len(wl.symbols))
    for p in wl.patterns:
        for s in p.symbols:
            counts[wl.symbols.index(s)] += 1
    assert counts.min() > 0.5 * counts.mean()   # rate-weighted: the rarest appear ~never
    # the predicates hold as often as the statistics say (diff ~ N(0, 1))
    table = wl.stream(20000, seed=1)
    diff = {s: table.filter(pa.compute.equal(table["symbol"], s))["diff"].to_numpy()
            for s in wl.symbols[:2]}
    (a, b), k = next(((a, b), k) for (a, b), k in wl.offsets.items()
                     if {a, b} == set(wl.symbols[:2]))
    got = np.mean(diff[a][:, None] + k < diff[b][None, :])
    assert got == pytest.approx(_phi(-k / np.sqrt(2.0)), abs=0.03)


def test_rate_weighted_types_crowd_on_the_busiest_symbols():
    wl = stock_workload(300, seed=3)
    counts = {s: 0 for s in wl.symbols}
    for p in wl.patterns:
        for s in p.symbols:
            counts[s] += 1
    assert counts[wl.symbols[0]] > 5 * counts[wl.symbols[-1]]
