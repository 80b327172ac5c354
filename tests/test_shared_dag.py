"""The shared DAG evaluator: every pattern's rows from one shared pass over a workload
equal its own CepWorker's rows (with match numbers) and the reference oracle's.

Workloads are drawn to overlap: 2-8 patterns mutated from one base pattern (same event
types under other variable names, shared and near-identical cross conditions, other
windows, NOT, OR, Kleene closures), streamed in small batches with PARTITION BY groups
spanning batches and chunks. Patterns the DAG does not run (other strategies, SQL:2016
mode) run unshared in the same pass and must match too.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cepsql
from cepsql import CepRuntimeError
from cepsql.datagen import generate_shipments
from cepsql.reference.cep import evaluate_reference_cep
from cepsql.runtime.cep_worker import STATE_LIMIT_KEY
from cepsql.runtime.shared_evaluator import SharedEvaluator, SharedPass
from cepsql.sharing.merge_plan import merge_plan
from cepsql.sharing.support import dag_unsupported
from cepsql.sharing.global_plan import Binding, DagNode, GlobalPlan
from support.local_run import plan_local_workload

try:
    from .support.strategies_cep import cep_streams
    from .test_property_sql import SETTINGS, row_multiset, spec_of
except ImportError:
    from support.strategies_cep import cep_streams
    from test_property_sql import SETTINGS, row_multiset, spec_of

TYPES = ["tag = 'x'", "tag = 'y'", "tag <> 'z'", "price > 3", "price <= 6",
         "PREV({v}.price) < {v}.price"]
CROSS = ["{v}.price > {o}.price", "{v}.price >= {o}.price", "{v}.vol <= {o}.vol",
         "{v}.tag = {o}.tag"]
KLEENE = ["(count({v}.*) = 1 OR {v}.price >= LAST({v}.price, 1))",
          "{v}.price >= avg({v}.price)", "count({v}.*) <= 2"]
WINDOWS = {"rows": ["WITHIN 3 ROWS", "WITHIN 4 ROWS", "WITHIN 6 ROWS"],
           "time": ["WITHIN INTERVAL '3' SECOND", "WITHIN INTERVAL '5' SECOND"],
           "none": [""]}


@st.composite
def base_patterns(draw, windowed: bool = False) -> dict:
    n = draw(st.integers(2, 4))
    types = [draw(st.sampled_from(TYPES)) for _ in range(n)]
    cross = {}
    for i in range(1, n):
        if draw(st.integers(0, 2)) == 0:
            cross[i] = (draw(st.integers(0, i - 1)), draw(st.sampled_from(CROSS)))
    return {"op": draw(st.sampled_from(["SEQ", "SEQ", "AND"])), "types": types,
            "cross": cross,
            "window_kind": draw(st.sampled_from(["rows", "time"] if windowed else list(WINDOWS)))}


@st.composite
def mutations(draw, base: dict, index: int) -> str:
    """A pattern near the base one: renamed variables, maybe one variable fewer or one
    more, a changed cross condition, its own window, a NOT, an OR, an output mode."""
    types = list(base["types"])
    cross = dict(base["cross"])
    op = base["op"]
    what = draw(st.sampled_from(["same", "same", "drop", "add", "cross", "op"]))
    if what == "drop" and len(types) > 2:
        types.pop()
        cross.pop(len(types), None)
    elif what == "add" and len(types) < 5:
        types.append(draw(st.sampled_from(TYPES)))
    elif what == "cross" and cross:
        k = draw(st.sampled_from(sorted(cross)))
        cross[k] = (cross[k][0], draw(st.sampled_from(CROSS)))
    elif what == "op":
        op = "AND" if op == "SEQ" else "SEQ"
    names = [f"V{index}_{k}" for k in range(len(types))]
    defines = []
    for k, (name, t) in enumerate(zip(names, types)):
        cond = t.format(v=name)
        if k in cross:
            cond += " AND " + cross[k][1].format(v=name, o=names[cross[k][0]])
        defines.append(f"{name} AS {cond}")
    items = list(names)
    extra = draw(st.sampled_from(["", "", "", "not", "or", "kleene"]))
    if extra == "kleene" and base["window_kind"] != "none":
        k = draw(st.integers(1, len(items) - 1))
        items[k] = f"KL({names[k]})" if draw(st.booleans()) else f"KL({names[k]}, 1, 2)"
        if draw(st.integers(0, 2)) == 0:   # a second closure, maybe next to the first
            items[k - 1] = f"KL({names[k - 1]}, 1, 2)"
        if draw(st.booleans()):
            defines[k] += " AND " + draw(st.sampled_from(KLEENE)).format(v=names[k])
    if extra == "not" and op == "SEQ":
        neg = f"N{index}"
        items.insert(draw(st.integers(1, len(items) - 1)), f"NOT({neg})")
        defines.append(f"{neg} AS {neg}.price > 7")
    pattern = f"{op}({', '.join(items)})"
    if extra == "or":
        alt = f"Z{index}"
        pattern = f"OR({pattern}, SEQ({names[0]}, {alt}))"
        defines.append(f"{alt} AS {alt}.tag = 'z'")
    window = draw(st.sampled_from(WINDOWS[base["window_kind"]]))
    rows = draw(st.sampled_from(["ONE ROW PER MATCH", "ALL ROWS PER MATCH",
                                 "ALL ROWS PER MATCH WITH UNMATCHED ROWS"]))
    measures = [f"FIRST({names[0]}.ts) AS t0", "count(*) AS n", "MATCH_NUMBER() AS mn"]
    if rows.startswith("ALL"):
        measures.append("CLASSIFIER() AS cls")
    skip = draw(st.sampled_from(["", "", "AFTER MATCH SKIP PAST LAST ROW"]))
    return (f"SELECT * FROM t MATCH_RECOGNIZE ({base['partition']} ORDER BY ts "
            f"MEASURES {', '.join(measures)} {rows} {skip} STRATEGY SKIP_TILL_ANY_MATCH "
            f"PATTERN ({pattern}) {window} DEFINE {', '.join(defines)})")


@st.composite
def workloads(draw, max_patterns: int = 8, min_patterns: int = 2,
              windowed: bool = False) -> list[str]:
    base = draw(base_patterns(windowed))
    base["partition"] = draw(st.sampled_from(["PARTITION BY part", "PARTITION BY part", ""]))
    n = draw(st.integers(min_patterns, max_patterns))
    return [draw(mutations(base, i)) for i in range(n)]


@st.composite
def longer_streams(draw) -> pa.Table:
    n = draw(st.integers(20, 80))
    rows = draw(st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 9),
                                   st.sampled_from([0.5, 1.0, 2.25, 4.75]),
                                   st.sampled_from("xyz")), min_size=n, max_size=n))
    return pa.table({"part": [r[0] for r in rows], "ts": list(range(1, n + 1)),
                     "price": [r[1] for r in rows], "vol": [r[2] for r in rows],
                     "tag": [r[3] for r in rows]})


def _rows(table: pa.Table) -> Counter:
    return Counter(tuple(map(repr, r.values())) for r in table.to_pylist())


def assert_shared_equals_own(sqls: list[str], table: pa.Table, batch_rows: int,
                             chunk_rows: int, oracle: bool = True) -> dict:
    specs = [spec_of(s) for s in sqls]
    wl = plan_local_workload(specs, table, batch_rows=batch_rows)
    plan = merge_plan(wl.queries)
    own = wl.own_outputs()
    shared = wl.shared_outputs(plan, chunk_rows=chunk_rows)
    for i, sql in enumerate(sqls):
        assert shared[i].schema == wl.bounds[i].worker_schema
        assert _rows(shared[i]) == _rows(own[i]), (
            f"pattern {i}: {sql}\nshared: {shared[i].to_pylist()}\nown: {own[i].to_pylist()}"
            f"\ninput: {table.to_pylist()}")
        if oracle:
            names, want = evaluate_reference_cep(specs[i], table)
            got = wl.projected(i, shared[i])
            assert got.column_names == names
            assert row_multiset(tuple(r.values()) for r in got.to_pylist()) == \
                row_multiset(want), f"pattern {i}: {sql}\ninput: {table.to_pylist()}"
    return {"plan": plan, "stats": wl.last_stats}


def test_shared_workloads_match_own_workers_and_oracle():
    seen = {"shared_nodes": 0, "candidates": 0, "pointers": 0, "matrices": 0,
            "prefilters": 0, "skipped": 0, "runs_skipped": 0}

    # 100 examples: with 60, a run without any DEFINE aggregate (only Kleene conditions
    # draw them) happened once in CI, and the coverage assertions below failed
    @settings(max_examples=100, **SETTINGS)
    @given(sqls=workloads(), table=cep_streams(), batch_rows=st.integers(1, 6),
           chunk_rows=st.integers(1, 8))
    def check(sqls, table, batch_rows, chunk_rows):
        out = assert_shared_equals_own(sqls, table, batch_rows, chunk_rows)
        seen["shared_nodes"] += len(out["plan"].shared_nodes())
        seen["candidates"] += out["stats"]["candidates"]
        # patterns reading the shared column set through pointers, and the others
        # (DEFINE aggregates) through their own matrices, both against the oracle
        seen["pointers"] += out["stats"]["column_pointers"]
        seen["matrices"] += len(sqls) - out["stats"]["column_pointers"]
        # leaf tests read from per-chunk masks (plain condition columns, dag_arrays.
        # leaf_prefilters) instead of the VM
        seen["prefilters"] += out["stats"]["leaf_prefilters"]
        # sibling scans skipped because the order check fails for every stored instance
        seen["skipped"] += out["stats"]["scans_skipped"]
        # shared patterns without a candidate in a chunk of whole groups: no run
        seen["runs_skipped"] += out["stats"]["runs_skipped"]
    check()
    assert seen["shared_nodes"] > 0 and seen["candidates"] > 0
    assert seen["pointers"] > 0 and seen["matrices"] > 0 and seen["prefilters"] > 0
    assert seen["skipped"] > 0 and seen["runs_skipped"] > 0


def test_larger_workloads_match_own_workers():
    """10-30 windowed patterns over longer streams (own workers as the reference: the
    oracle's any-match enumeration would be slow)."""
    @settings(max_examples=10, **SETTINGS)
    @given(sqls=workloads(max_patterns=30, min_patterns=10, windowed=True),
           table=longer_streams(),
           batch_rows=st.integers(3, 20), chunk_rows=st.integers(4, 40))
    def check(sqls, table, batch_rows, chunk_rows):
        assert_shared_equals_own(sqls, table, batch_rows, chunk_rows, oracle=False)
    check()


def test_shared_workloads_with_ties_and_nulls():
    @settings(max_examples=30, **SETTINGS)
    @given(sqls=workloads(max_patterns=4),
           table=cep_streams(unique_ts=False, with_nulls=True), batch_rows=st.integers(1, 6))
    def check(sqls, table, batch_rows):
        assert_shared_equals_own(sqls, table, batch_rows, chunk_rows=5)
    check()


HEAD = "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES "


def _ticks() -> pa.Table:
    return pa.table({
        "part": ["x"] * 10 + ["y"] * 6,
        "ts": list(range(10)) + list(range(6)),
        "price": [5, 6, 4, 7, 8, 3, 9, 9, 2, 10, 1, 2, 3, 1, 4, 0],
        "vol": [1.0, 2, 1, 3, 2, 1, 2, 2, 1, 4, 1, 1, 2, 1, 3, 1],
        "tag": list("xyxyzxyzxyxyyxzx")})


def test_identical_subpatterns_are_one_node_with_the_largest_window():
    sqls = [HEAD + "FIRST(a.ts) AS t0, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
            "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) WITHIN 3 ROWS "
            "DEFINE a AS a.tag = 'x', b AS b.tag = 'y' AND b.price > a.price)",
            HEAD + "FIRST(p.ts) AS t0, count(*) AS n ALL ROWS PER MATCH "
            "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(p, q)) WITHIN 6 ROWS "
            "DEFINE p AS p.tag = 'x', q AS q.tag = 'y' AND q.price > p.price)",
            # near-identical: >= instead of >, must not merge with the two above
            HEAD + "FIRST(u.ts) AS t0 ONE ROW PER MATCH "
            "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(u, v)) WITHIN 6 ROWS "
            "DEFINE u AS u.tag = 'x', v AS v.tag = 'y' AND v.price >= u.price)"]
    out = assert_shared_equals_own(sqls, _ticks(), batch_rows=4, chunk_rows=3)
    plan = out["plan"]
    roots = [b.root for b in plan.bindings]
    assert roots[0] == roots[1] != roots[2]
    assert plan.nodes[roots[0]].window == 6
    # the leaves (event types) are shared by all three
    assert len([n for n in plan.nodes if n.is_leaf]) == 2


def test_not_or_and_unshared_patterns_in_one_pass():
    sqls = [HEAD + "FIRST(a.ts) AS t0, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
            "AFTER MATCH SKIP PAST LAST ROW STRATEGY SKIP_TILL_ANY_MATCH "
            "PATTERN (SEQ(a, NOT(n), b)) WITHIN INTERVAL '4' SECOND "
            "DEFINE a AS a.tag = 'x', b AS b.tag = 'y', n AS n.price > 7)",
            HEAD + "FIRST(a.ts) AS t0, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
            "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (OR(SEQ(a, b), SEQ(a, c))) "
            "WITHIN INTERVAL '5' SECOND "
            "DEFINE a AS a.tag = 'x', b AS b.tag = 'y', c AS c.tag = 'z')",
            # a Kleene leaf, shared; its conditions on the sibling prune the closures
            HEAD + "count(*) AS n, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
            "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, KL(k))) WITHIN 4 ROWS "
            "DEFINE a AS a.tag = 'x', k AS k.price > a.price AND "
            "(count(k.*) = 1 OR k.price >= LAST(k.price, 1)))",
            # two Kleene leaves joined directly (one condition links them)
            HEAD + "count(*) AS n, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
            "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(KL(p), KL(q))) WITHIN 4 ROWS "
            "DEFINE p AS p.tag = 'x', q AS q.tag = 'y' AND q.price > FIRST(p.price))",
            # another strategy: unshared
            HEAD + "count(*) AS n, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
            "STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, b)) WITHIN 4 ROWS "
            "DEFINE a AS a.tag = 'x', b AS b.tag = 'y')",
            HEAD + "count(*) AS n, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
            "STRATEGY STRICT_CONTIGUITY PATTERN (SEQ(a, b)) WITHIN 4 ROWS "
            "DEFINE a AS a.tag = 'x', b AS b.tag = 'y')",
            # SQL:2016 mode: its own MatchWorker in the same pass
            HEAD + "count(*) AS n, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
            "PATTERN (a b+) DEFINE a AS a.tag = 'x', b AS b.price > PREV(b.price))"]
    out = assert_shared_equals_own(sqls, _ticks(), batch_rows=3, chunk_rows=4)
    assert out["plan"].unshared == [4, 5, 6]
    assert [b.pattern for b in out["plan"].bindings] == [0, 1, 1, 2, 3]
    assert any(n.kleene == (1, -1) for n in out["plan"].nodes)


def test_dag_unsupported_reasons():
    def reason(pattern, strategy="SKIP_TILL_ANY_MATCH"):
        return dag_unsupported(spec_of(
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES count(*) AS n "
            f"STRATEGY {strategy} PATTERN ({pattern}) WITHIN 4 ROWS "
            "DEFINE a AS a.price > 1)"))
    assert reason("SEQ(a, b)") is None
    assert reason("SEQ(a, NOT(c), b)") is None
    assert reason("OR(SEQ(a, b), SEQ(a, c))") is None
    assert reason("SEQ(a, KL(b))") is None
    assert "KL over a composite" in reason("SEQ(a, KL(SEQ(b, c)))")
    assert "SKIP_TILL_NEXT_MATCH" in reason("SEQ(a, b)", "SKIP_TILL_NEXT_MATCH")
    assert "SQL:2016" in dag_unsupported(spec_of(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES count(*) AS n "
        "PATTERN (a b) DEFINE a AS a.price > 1)"))


def test_root_on_an_unplanned_pattern_is_refused():
    sqls = [HEAD + "count(*) AS n ONE ROW PER MATCH STRATEGY SKIP_TILL_NEXT_MATCH "
            "PATTERN (SEQ(a, b)) WITHIN 4 ROWS DEFINE a AS a.tag = 'x', b AS b.tag = 'y')",
            HEAD + "count(*) AS n ONE ROW PER MATCH STRATEGY SKIP_TILL_ANY_MATCH "
            "PATTERN (SEQ(a, b)) WITHIN 4 ROWS DEFINE a AS a.tag = 'x', b AS b.tag = 'y')"]
    wl = plan_local_workload([spec_of(s) for s in sqls], _ticks())
    plan = merge_plan(wl.queries[1:])
    plan.bindings = [type(b)(pattern=0, root=b.root, slot_vars=b.slot_vars)
                     for b in plan.bindings]
    with pytest.raises(ValueError, match="not a planned clause"):
        SharedEvaluator(plan, wl.bounds)


def test_stats_count_instances_once_per_shared_node():
    sqls = [HEAD + f"count(*) AS n ONE ROW PER MATCH STRATEGY SKIP_TILL_ANY_MATCH "
            f"PATTERN (SEQ({a}, {b})) WITHIN {w} ROWS "
            f"DEFINE {a} AS {a}.tag = 'x', {b} AS {b}.tag = 'y')"
            for a, b, w in [("a", "b", 3), ("c", "d", 5), ("e", "f", 4)]]
    out = assert_shared_equals_own(sqls, _ticks(), batch_rows=16, chunk_rows=100)
    plan, stats = out["plan"], out["stats"]
    assert len(plan.nodes) == 3 and len(plan.shared_nodes()) == 1
    tags = _ticks().column("tag").to_pylist()
    leaves = [i for i, n in enumerate(plan.nodes) if n.is_leaf]
    assert sorted(stats["node_instances"][i] for i in leaves) == \
        sorted([tags.count("x"), tags.count("y")])
    assert stats["matches"] == [t.num_rows for t in wl_outputs(sqls)]


def test_memory_follows_the_window_not_the_partition():
    """One 3000-row group (no PARTITION BY), batches of 50: the shared pass streams it,
    holding about a chunk plus the window, and still equals the own workers."""
    n = 3000
    table = pa.table({"part": ["p"] * n, "ts": list(range(n)),
                      "price": [(7 * i) % 10 for i in range(n)],
                      "vol": [float(i % 4) for i in range(n)],
                      "tag": [("x", "y", "z", "x", "y")[i % 5] for i in range(n)]})
    head = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES "
    sqls = [head + "FIRST(a.ts) AS t0, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
            "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) WITHIN 5 ROWS "
            "DEFINE a AS a.tag = 'x', b AS b.tag = 'y' AND b.price > a.price)",
            head + "FIRST(c.ts) AS t0, count(*) AS n ALL ROWS PER MATCH "
            "AFTER MATCH SKIP PAST LAST ROW STRATEGY SKIP_TILL_ANY_MATCH "
            "PATTERN (SEQ(c, d, NOT(m), e)) WITHIN 8 ROWS "
            "DEFINE c AS c.tag = 'x', d AS d.tag = 'y' AND d.price > c.price, "
            "e AS e.tag = 'z', m AS m.price = 9)",
            head + "FIRST(f.ts) AS t0 ONE ROW PER MATCH STRATEGY SKIP_TILL_ANY_MATCH "
            "PATTERN (AND(f, g)) WITHIN INTERVAL '3' SECOND "
            "DEFINE f AS f.tag = 'x', g AS g.tag = 'y' AND g.price > f.price)"]
    wl = plan_local_workload([spec_of(s) for s in sqls], table, batch_rows=50)
    plan = merge_plan(wl.queries)
    assert plan.shared_nodes()
    own = wl.own_outputs()
    shared = wl.shared_outputs(plan, chunk_rows=64)
    for a, b in zip(own, shared):
        assert a.num_rows > 0 and _rows(a) == _rows(b)
    assert wl.last_stats["peak_rows"] <= 3 * 64


def test_evaluators_run_in_threads():
    """Re-entrant: two shared passes at once (the DAG and the matchers release the GIL)
    give what one gives alone."""
    from concurrent.futures import ThreadPoolExecutor
    sqls = [HEAD + f"FIRST({a}.ts) AS t0, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
            f"STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ({a}, KL({b}), {c})) WITHIN {w} ROWS "
            f"DEFINE {a} AS {a}.tag = 'x', {b} AS {b}.price > {a}.price, {c} AS {c}.tag = 'z')"
            for a, b, c, w in [("a", "b", "c", 5), ("d", "e", "f", 6)]]
    big = pa.concat_tables([_ticks()] * 40)
    wl = plan_local_workload([spec_of(s) for s in sqls], big, batch_rows=64)
    plan = merge_plan(wl.queries)
    alone = [_rows(t) for t in wl.shared_outputs(plan, chunk_rows=100)]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: wl.evaluator(plan, chunk_rows=100).run(wl.batches),
                                range(2)))
    for out in results:
        got = [Counter() for _ in sqls]
        for p, batch in out:
            got[p] += _rows(pa.Table.from_batches([batch]))
        assert got == alone and all(alone)


def test_column_pointers_only_without_aggregates():
    """Patterns share the chunk's converted columns (pointers, exact lanes too); a
    DEFINE aggregate reads the run's matrices, so its pattern keeps its own matrix and
    the matcher refuses pointers."""
    from cepsql.runtime.shared_columns import pointer_ready
    sqls, wl = _hand_plan_workload()
    workers = [b.worker for b in wl.bounds]
    assert [pointer_ready(w) for w in workers] == [True, False]
    matcher = workers[1]._new_matcher()
    n = len(workers[1].config.code.columns)
    with pytest.raises(ValueError, match="aggregates"):
        matcher.use_column_pointers([np.zeros(3)] * n, [np.zeros(3, np.uint8)] * n)
    own = workers[0]._new_matcher()
    with pytest.raises(ValueError, match="one length"):
        own.use_column_pointers([np.zeros(3)], [np.zeros(2, np.uint8)])
    assert "column_pointers" in SharedEvaluator(merge_plan(wl.queries),
                                                wl.bounds).stats


def test_leaf_prefilters_only_for_plain_column_tests():
    """A leaf whose row conditions are precomputed row-local columns (tag = 'x') is
    tested from a per-chunk mask; one reading another row (PREV) stays in the VM. NULL
    tags fail the test in both (the stream has some) and the rows equal the own
    workers' and the oracle's."""
    from cepsql.compile.dag_arrays import dag_arrays, leaf_prefilters
    sqls = [HEAD + f"FIRST({a}.ts) AS t0, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
            f"STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ({a}, {b})) WITHIN 4 ROWS "
            f"DEFINE {a} AS {a}.tag = 'x', {b} AS {cond})"
            for a, b, cond in [("a", "b", "PREV(b.price) < b.price"),
                               ("c", "d", "d.tag = 'y' AND d.price > 2")]]
    table = _ticks()
    table = table.set_column(4, "tag", pa.array([None if i % 5 == 0 else t for i, t in
                                                 enumerate(table.column("tag").to_pylist())]))
    out = assert_shared_equals_own(sqls, table, batch_rows=4, chunk_rows=6)
    plan = out["plan"]
    wl = plan_local_workload([spec_of(s) for s in sqls], table, batch_rows=4)
    configs = [b.worker.config for b in wl.bounds]
    arrays = dag_arrays(plan, configs)
    pre, tests = leaf_prefilters(plan, configs, arrays)
    masked = {plan.nodes[i].owner_vars[0] for i in range(len(plan.nodes)) if pre[i] >= 0}
    assert masked & {"A", "C"} and "D" in masked and "B" not in masked
    assert all(len(cols) >= 1 for cols in tests)
    assert out["stats"]["leaf_prefilters"] == len(tests)


def test_many_matches_few_candidate_rows_and_plain_not_columns():
    """Finishing paths of the shared pass: more than 64 matches of one pattern sorted
    at once (match_order.pyx buckets them by first / last row before merge-sorting),
    patterns whose candidates are a few rows of a longer chunk (cep.pyx _ext_rows jumps
    between them), a NOT whose condition is a precomputed column (_neg_fill reads it
    directly, NULL tags failing it) and one reading PREV (the VM tests it); rows and
    match numbers equal the own workers' and the oracle's, one chunk and carried
    chunks alike."""
    n = 36
    table = pa.table({"part": ["x"] * n, "ts": list(range(n)),
                      "price": [(7 * i) % 11 for i in range(n)],
                      "vol": [1.0] * n,
                      "tag": [None if i % 13 == 5 else "xyzw"[i % 4] for i in range(n)]})
    tail = "MATCH_NUMBER() AS mn ONE ROW PER MATCH STRATEGY SKIP_TILL_ANY_MATCH "
    sqls = [HEAD + "FIRST(a.ts) AS t0, LAST(c.ts) AS t1, " + tail +
            "PATTERN (SEQ(a, b, c)) WITHIN 20 ROWS "
            "DEFINE a AS a.tag = 'x', b AS b.tag = 'y', c AS c.tag = 'z')",
            HEAD + "FIRST(a.ts) AS t0, LAST(c.ts) AS t1, " + tail.replace(
                "ONE ROW PER MATCH", "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW") +
            "PATTERN (SEQ(a, b, c)) WITHIN 20 ROWS "
            "DEFINE a AS a.tag = 'x', b AS b.tag = 'y', c AS c.tag = 'z')",
            HEAD + "FIRST(a.ts) AS t0, LAST(c.ts) AS t1, " + tail +
            "PATTERN (AND(a, KL(b, 1, 2), c)) WITHIN 9 ROWS "
            "DEFINE a AS a.tag = 'x', b AS b.tag <> 'x', c AS c.tag = 'z')",
            HEAD + "FIRST(d.ts) AS t0, LAST(e.ts) AS t1, " + tail +
            "PATTERN (SEQ(d, NOT(m), e)) WITHIN 8 ROWS "
            "DEFINE d AS d.tag = 'z', m AS m.tag = 'w', e AS e.tag = 'x')",
            HEAD + "FIRST(d.ts) AS t0, LAST(e.ts) AS t1, " + tail +
            "PATTERN (SEQ(d, NOT(m), e)) WITHIN 8 ROWS "
            "DEFINE d AS d.tag = 'z', m AS m.price > PREV(m.price) + 6, e AS e.tag = 'x')"]
    for chunk_rows in (n, 10):
        out = assert_shared_equals_own(sqls, table, batch_rows=8, chunk_rows=chunk_rows)
        matches = out["stats"]["matches"]
        assert matches[0] > 64 and matches[2] > 64 and min(matches) > 0


def _hand_plan_workload():
    sqls = [HEAD + "FIRST(a.ts) AS t0, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
            "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (AND(a, b)) WITHIN 6 ROWS "
            "DEFINE a AS a.tag = 'x', b AS b.tag = 'y' AND b.price > a.price)",
            HEAD + "FIRST(c.ts) AS t0, MATCH_NUMBER() AS mn ALL ROWS PER MATCH "
            "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(d, NOT(n), c)) WITHIN 4 ROWS "
            "DEFINE c AS c.tag = 'x', d AS d.tag = 'y' AND d.price > c.price AND count(*) < 3, "
            "n AS n.price > 8)"]
    return sqls, plan_local_workload([spec_of(s) for s in sqls], _ticks(), batch_rows=5)


def test_hand_built_plan_operator_transformation_and_mark_points():
    """MOTTO's operator transformation by hand: pattern 1's SEQ(d, NOT(n), c) is read
    from pattern 0's AND(a, b) node (kept for the larger window 6) plus an order check,
    the late conjunct and the NOT on its root; same rows as the own workers."""
    sqls, wl = _hand_plan_workload()
    conj = {lab: [k for k, x in enumerate(wl.bounds[0].worker.config.conj_label) if x == lab]
            for lab in (0, 1)}
    c1 = wl.bounds[1].worker.config
    late = [k for k, x in enumerate(c1.conj_late) if x]
    assert len(late) == 1
    plan = GlobalPlan(nodes=[
        DagNode(key="x", arity=1, window=6, window_kind=1, owner=0, owner_vars=("A",),
                checks=tuple(("conjunct", k) for k in conj[0])),
        DagNode(key="y", arity=1, window=6, window_kind=1, owner=0, owner_vars=("B",),
                checks=(("conjunct", conj[1][0]),)),
        DagNode(key="and", arity=2, left=0, right=1, window=6, window_kind=1, owner=0,
                owner_vars=("A", "B"), checks=(("conjunct", conj[1][1]),))],
        bindings=[Binding(pattern=0, root=2, slot_vars=("A", "B")),
                  Binding(pattern=1, root=2, slot_vars=("C", "D"),
                          extra_checks=(("order", ("D", "C")), ("conjunct", late[0]),
                                        ("not", 0), ("window", None)))])
    own = wl.own_outputs()
    shared = wl.shared_outputs(plan, chunk_rows=4)
    assert own[1].num_rows > 0
    for a, b in zip(own, shared):
        assert _rows(a) == _rows(b)
    for i, spec in enumerate(wl.queries):
        names, want = evaluate_reference_cep(spec.spec, _ticks())
        got = wl.projected(i, shared[i])
        assert row_multiset(tuple(r.values()) for r in got.to_pylist()) == row_multiset(want)


def test_plans_checking_a_late_conjunct_below_the_root_are_refused():
    sqls, wl = _hand_plan_workload()
    late = [k for k, x in enumerate(wl.bounds[1].worker.config.conj_late) if x][0]
    plan = GlobalPlan(nodes=[DagNode(key="d", arity=1, owner=1, owner_vars=("D",),
                                     checks=(("conjunct", late),))],
                      bindings=[], unshared=[0, 1])
    with pytest.raises(ValueError, match="late"):
        SharedEvaluator(plan, wl.bounds)


def test_shared_pass_is_picklable_and_equals_the_evaluator():
    import pickle
    sqls, wl = _hand_plan_workload()
    plan = merge_plan(wl.queries)
    worker = pickle.loads(pickle.dumps(SharedPass(plan, wl.bounds, wl.inputs)))
    got = [Counter() for _ in sqls]
    for p, batch in worker(iter(wl.batches)):
        got[p] += _rows(pa.Table.from_batches([batch]))
    assert got == [_rows(t) for t in wl.own_outputs()]


def test_plans_missing_a_conjunct_are_refused():
    """The pattern's matcher re-checks only late conjuncts: a plan that drops one of
    the others would add matches, so it is refused."""
    sqls, wl = _hand_plan_workload()
    plan = merge_plan(wl.queries)
    root = plan.bindings[0].root
    node = plan.nodes[root]
    plan.nodes[root] = DagNode(**{**node.__dict__, "checks": tuple(
        c for c in node.checks if c[0] != "conjunct")})
    with pytest.raises(ValueError, match="conjunct checks"):
        SharedEvaluator(plan, wl.bounds)


def wl_outputs(sqls: list[str]) -> list[pa.Table]:
    """Every pattern's own worker output over _ticks()."""
    return plan_local_workload([spec_of(s) for s in sqls], _ticks()).own_outputs()


def test_column_conversion_fast_paths_equal_the_arrow_casts():
    """DOUBLE / BOOLEAN columns without NULLs skip the Arrow cast (zero-copy / bit
    unpacking, sliced chunks included); the values equal worker._as_float's."""
    from cepsql.compile.conditions import NUM
    from cepsql.runtime.shared_columns import _convert
    from cepsql.runtime.worker import _as_float
    flags = pa.array([True, False, True, True, False, False, True, False, True, False, True])
    doubles = pa.array([0.5, -0.0, float("nan"), float("inf"), 1e300, 2.0, 3.0, 4.0, 5.0,
                        6.0, 7.0])
    no_nulls = np.zeros(8, dtype=np.uint8)
    for col in (flags, doubles):
        for part in (col.slice(3, 8), pa.chunked_array([col.slice(0, 5), col.slice(5, 3)])):
            values, nulls, words = _convert(pa.chunked_array(part) if isinstance(
                part, pa.Array) else part, NUM, False, pa.array([], pa.string()), no_nulls)
            want = _as_float(pa.concat_arrays(part.chunks) if isinstance(
                part, pa.ChunkedArray) else part).to_numpy(zero_copy_only=False)
            assert words is None and not nulls.any()
            np.testing.assert_array_equal(values, want)


def _cut_stream() -> pa.Table:
    """Two groups of 36 rows, tags x/y/z and prices drawn with a fixed seed; times
    (seconds) with ties."""
    rng = np.random.default_rng(7)
    n = 72
    return pa.table({"part": ["p"] * 36 + ["q"] * 36,
                     "ts": [i // 2 for i in range(36)] * 2,
                     "price": rng.integers(0, 10, n).tolist(),
                     "vol": [1.0] * n,
                     "tag": rng.choice(list("xyz"), n).tolist()})


@pytest.mark.parametrize("window", ["WITHIN 6 ROWS", "WITHIN INTERVAL '3' SECOND"])
def test_scan_cuts_skip_only_failing_pairs(window, monkeypatch):
    """Bushy hand-built plans where the scan cuts apply (shared_dag.pyx _scan_range):
    SEQ(a, b, c, d) as ((a, b), (c, d)) with b < c at the root (the stored (a, b)
    instances from the first whose newest row b is not before the new c on fail), and
    SEQ(e, f, g) as (f, (e, g)) with f < g (the stored (e, g) up to the last whose
    newest row g is not after the new f fail); the leaves are kept for a larger window
    than the joins read (the front of their stores is out of the joins' window). The
    rows equal the own workers' and the oracle's, with fewer join attempts than with
    the cuts off (nd_newest -1: every stored instance tried)."""
    import cepsql.runtime.shared_evaluator as evaluator_module
    from cepsql.compile.dag_arrays import dag_arrays
    sqls = [HEAD + "FIRST(a.ts) AS t0, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
            f"STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b, c, d)) {window} "
            "DEFINE a AS a.tag = 'x', b AS b.tag = 'y', c AS c.tag = 'z', "
            "d AS d.tag = 'y' AND d.price > a.price)",
            HEAD + "FIRST(e.ts) AS t0, count(*) AS n ALL ROWS PER MATCH "
            f"STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(e, f, g)) {window} "
            "DEFINE e AS e.tag = 'x', f AS f.tag = 'y' AND f.price > e.price, "
            "g AS g.tag = 'z')"]
    table = _cut_stream()
    wl = plan_local_workload([spec_of(s) for s in sqls], table, batch_rows=10)
    kind, size, wide = (1, 6.0, 9.0) if "ROWS" in window else (2, 3e6, 5e6)
    conj = [{lab: [k for k, x in enumerate(b.worker.config.conj_label) if x == lab]
             for lab in range(len(b.worker.config.labels))} for b in wl.bounds]
    lab = [{v: b.worker.config.labels.index(v) for v in b.worker.config.labels}
           for b in wl.bounds]

    def leaf(p, var, key):
        return DagNode(key=key, arity=1, window=wide, window_kind=kind, owner=p,
                       owner_vars=(var,), checks=(("conjunct", conj[p][lab[p][var]][0]),))

    def join(p, left, right, vars_, checks):
        return DagNode(key=vars_, arity=len(vars_), left=left, right=right, window=size,
                       window_kind=kind, owner=p, owner_vars=vars_, checks=checks)
    nodes = [leaf(0, "A", "x"), leaf(0, "B", "y"), leaf(0, "C", "z"), leaf(0, "D", "y"),
             join(0, 0, 1, ("A", "B"), (("order", ("A", "B")),)),
             join(0, 2, 3, ("C", "D"), (("order", ("C", "D")),)),
             join(0, 4, 5, ("A", "B", "C", "D"),
                  (("order", ("B", "C")), ("conjunct", conj[0][lab[0]["D"]][1]))),
             leaf(1, "E", "x"), leaf(1, "F", "y"), leaf(1, "G", "z"),
             join(1, 7, 9, ("E", "G"), (("order", ("E", "G")),)),
             join(1, 8, 10, ("F", "E", "G"),
                  (("order", ("E", "F")), ("order", ("F", "G")),
                   ("conjunct", conj[1][lab[1]["F"]][1])))]
    plan = GlobalPlan(nodes=nodes, bindings=[
        Binding(pattern=0, root=6, slot_vars=("A", "B", "C", "D")),
        Binding(pattern=1, root=11, slot_vars=("F", "E", "G"))])
    arrays = dag_arrays(plan, [b.worker.config for b in wl.bounds])
    # newest slots: a plain leaf's one slot, (a, b): b, (c, d): d, (e, g): g
    assert list(arrays["nd_newest"][[0, 4, 5, 6, 10, 11]]) == [0, 1, 1, 3, 1, 2]
    cuts = arrays["nd_cut_start"]
    assert cuts[2 * 6 + 1] - cuts[2 * 6] == 1       # (a, b) stored: b before new c
    assert cuts[2 * 11 + 2] - cuts[2 * 11 + 1] == 1  # (e, g) stored: g after new f
    own = wl.own_outputs()
    shared = wl.shared_outputs(plan, chunk_rows=12)
    with_cuts = wl.last_stats
    assert all(t.num_rows > 0 for t in own)
    for i, spec in enumerate(wl.queries):
        assert _rows(shared[i]) == _rows(own[i])
        names, want = evaluate_reference_cep(spec.spec, table)
        got = wl.projected(i, shared[i])
        assert row_multiset(tuple(r.values()) for r in got.to_pylist()) == row_multiset(want)

    def no_cuts(*args):
        out = dag_arrays(*args)
        out["nd_newest"] = np.full_like(out["nd_newest"], -1)
        return out
    monkeypatch.setattr(evaluator_module, "dag_arrays", no_cuts)
    uncut = wl.shared_outputs(plan, chunk_rows=12)
    assert [_rows(t) for t in uncut] == [_rows(t) for t in shared]
    assert wl.last_stats["node_instances"] == with_cuts["node_instances"]
    assert with_cuts["join_attempts"] < wl.last_stats["join_attempts"]


def test_unbounded_shared_patterns_stop_at_the_state_bound():
    """Issue 24 A1 in a shared pass: patterns with no window stop at
    cepsql.cep.maxPartialMatches with the CepRuntimeError naming it, not a MemoryError."""
    n = 300
    table = pa.table({"part": ["p"] * n, "ts": list(range(n)),
                      "x": [(7 * i) % 3 for i in range(n)]})
    head = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(a.ts) AS t0 "
            "ONE ROW PER MATCH STRATEGY SKIP_TILL_ANY_MATCH ")
    sqls = [head + "PATTERN (SEQ(a, KL(b), c)) DEFINE a AS a.x = 0, b AS b.x = 1, c AS c.x = 2)",
            head + "PATTERN (SEQ(a, KL(b), d)) DEFINE a AS a.x = 0, b AS b.x = 1, d AS d.x = 1)"]
    with cepsql.planner_options(max_partial_matches=500):
        wl = plan_local_workload([spec_of(s) for s in sqls], table, batch_rows=64)
        plan = merge_plan(wl.queries)
        with pytest.raises(CepRuntimeError, match=STATE_LIMIT_KEY):
            wl.shared_outputs(plan, chunk_rows=64)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("order", ["a{2}, KL(b)", "KL(b), a{2}"])
def test_repetition_beside_a_navigating_closure_shared(order):
    # issue 24 A2 in the shared DAG: each alert enumerated every closure of b alone (b's
    # DEFINE needs a to prune), > 180 s at 40 rows; now b's rows, which follow the
    # alerts', are not walked at an alert, and a closure whose parent conditions read
    # the sibling walks alone first (as cep_tree.pyx _kleene_arrival)
    rows = generate_shipments(400).slice(200, 40)
    sql = ("SELECT * FROM s MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(a.ts) AS t0, "
           "LAST(b.ts) AS t1, count(WHAT) AS nb ONE ROW PER MATCH "
           "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(" + order + ")) "
           "WITHIN INTERVAL '3' HOUR DEFINE a AS a.kind = 'alert', "
           "b AS b.kind = 'shipment' AND b.from_site = COALESCE(LAST(b.to_site, 1), a.site))")
    assert_shared_equals_own([sql.replace("WHAT", "b.*"), sql.replace("WHAT", "*")], rows,
                             batch_rows=16, chunk_rows=1 << 16, oracle=False)
