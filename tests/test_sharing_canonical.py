"""Canonical keys and what may be shared: merge / no-merge cases, renaming, flipped
comparisons, window mark-points, strategies and modes that never share."""
from __future__ import annotations

import pyarrow as pa
import pytest

from cepsql.parse import find_match_recognize
from cepsql.sharing.patterns import workload_pattern
from cepsql.sharing.planner import plan_workload
from support.sharing_validate import check_global_plan

SCHEMA = pa.schema([("ts", pa.timestamp("us")), ("symbol", pa.string()),
                    ("price", pa.float64()), ("diff", pa.float64()), ("peak", pa.float64()),
                    ("open", pa.float64())])


def view(pattern: str, defines: str, *, strategy: str = "STRATEGY SKIP_TILL_ANY_MATCH",
         within: str = "WITHIN INTERVAL '10' SECOND", name: str = ""):
    sql = (f"SELECT * FROM ticks MATCH_RECOGNIZE (ORDER BY ts MEASURES count(*) AS n "
           f"{strategy} PATTERN ({pattern}) {within} DEFINE {defines})")
    return workload_pattern(find_match_recognize(sql)[0].spec, SCHEMA, name=name)


def join_key(p, term: int = 0):
    """Canonical key of the conjunct between the first two components (slots 0, 1)."""
    pt = p.terms[term]
    (k, _), = [(k, need) for k, need in pt.joins]
    return p.conjunct_key(k, {pt.vars[0]: 0, pt.vars[1]: 1})


def test_renamed_and_flipped_comparisons_have_one_key():
    a = view("SEQ(a, b)", "a AS a.symbol = 'A', b AS b.symbol = 'B' AND b.diff < a.diff")
    b = view("SEQ(x, y)", "x AS x.symbol = 'A', y AS y.symbol = 'B' AND x.diff > y.diff")
    c = view("SEQ(p, q)", "p AS 'A' = p.symbol AND p.diff > q.diff, q AS q.symbol = 'B'")
    assert join_key(a) == join_key(b) == join_key(c)
    assert a.terms[0].leaf_keys == b.terms[0].leaf_keys == c.terms[0].leaf_keys


def test_commutative_operands_and_chains_are_sorted():
    a = view("AND(a, b)", "a AS a.symbol = 'A', b AS b.symbol = 'B' AND "
             "(a.diff + b.diff < 3 OR b.price * a.price = 1)")
    b = view("AND(a, b)", "a AS a.symbol = 'A', b AS b.symbol = 'B' AND "
             "(1 = a.price * b.price OR b.diff + a.diff < 3)")
    assert join_key(a) == join_key(b)


def test_different_columns_or_grouping_never_merge():
    peak = view("SEQ(a, b)", "a AS a.symbol = 'A', b AS b.symbol = 'B' AND a.peak < b.peak")
    open_ = view("SEQ(a, b)", "a AS a.symbol = 'A', b AS b.symbol = 'B' AND a.open < b.open")
    assert join_key(peak) != join_key(open_)
    left = view("AND(a, b)", "a AS a.symbol = 'A', b AS b.symbol = 'B' AND "
                "(a.diff + b.diff) + 1 < 0")
    right = view("AND(a, b)", "a AS a.symbol = 'A', b AS b.symbol = 'B' AND "
                 "a.diff + (b.diff + 1) < 0")
    assert join_key(left) != join_key(right)   # decimal precision depends on grouping
    plan = plan_workload([peak, open_], algorithm="SA", max_iterations=200)
    check_global_plan(plan, [peak, open_])
    assert plan.bindings[0].root != plan.bindings[1].root
    joins = [i for i in plan.shared_nodes() if not plan.nodes[i].is_leaf]
    assert joins == []


def test_event_types_and_kleene_bounds_are_part_of_leaf_keys():
    plain = view("SEQ(a, b)", "a AS a.symbol = 'A', b AS b.symbol = 'B'")
    kleene = view("SEQ(a, KL(b))", "a AS a.symbol = 'A', b AS b.symbol = 'B'")
    other = view("SEQ(a, b)", "a AS a.symbol = 'A', b AS b.symbol = 'C'")
    assert plain.terms[0].leaf_keys[0] == kleene.terms[0].leaf_keys[0]
    assert plain.terms[0].leaf_keys[1] != kleene.terms[0].leaf_keys[1]
    assert plain.terms[0].leaf_keys[1] != other.terms[0].leaf_keys[1]


def test_identical_patterns_merge_and_windows_share_through_a_mark_point():
    short = view("SEQ(a, b, c)", "a AS a.symbol = 'A', b AS b.symbol = 'B' AND b.diff < "
                 "a.diff, c AS c.symbol = 'C'", within="WITHIN INTERVAL '10' SECOND")
    long = view("SEQ(x, y, z)", "x AS x.symbol = 'A', y AS y.symbol = 'B' AND x.diff > "
                "y.diff, z AS z.symbol = 'C'", within="WITHIN INTERVAL '20' SECOND")
    patterns = [short, long]
    plan = plan_workload(patterns, algorithm="SA", max_iterations=50)
    check_global_plan(plan, patterns)
    b_short, b_long = plan.bindings
    assert b_short.root == b_long.root          # merge sharing of the whole pattern
    root = plan.nodes[b_short.root]
    assert root.window == 20e6 and root.window_kind == 2
    assert ("window", None) in b_short.extra_checks
    assert ("window", None) not in b_long.extra_checks
    assert plan.cost < plan.independent_cost
    from cepsql.explain.workload import describe_workload
    assert "window mark-points: 1 roots" in describe_workload(plan, patterns)


def test_row_and_time_windows_never_share_a_node():
    rows = view("SEQ(a, b)", "a AS a.symbol = 'A', b AS b.symbol = 'B'",
                within="WITHIN 10 ROWS")
    time_ = view("SEQ(a, b)", "a AS a.symbol = 'A', b AS b.symbol = 'B'")
    plan = plan_workload([rows, time_], algorithm="TABU", max_iterations=50)
    check_global_plan(plan, [rows, time_])
    assert plan.shared_nodes() == []


@pytest.mark.parametrize("strategy, why", [
    ("STRATEGY SKIP_TILL_NEXT_MATCH", "in-order"),
    ("STRATEGY STRICT_CONTIGUITY", "in-order"),
    ("", "SQL:2016 mode"),
])
def test_other_strategies_and_sql_mode_are_unshared(strategy, why):
    within = "" if not strategy else "WITHIN INTERVAL '10' SECOND"
    p = view("SEQ(a, b)" if strategy else "a b", "a AS a.symbol = 'A', b AS b.symbol = 'B'",
             strategy=strategy, within=within)
    same = view("SEQ(a, b)", "a AS a.symbol = 'A', b AS b.symbol = 'B'")
    assert not p.shareable and why in p.reason
    plan = plan_workload([p, same], algorithm="SA", max_iterations=20)
    check_global_plan(plan, [p, same])
    assert plan.unshared == [0] and [b.pattern for b in plan.bindings] == [1]


def test_composite_kleene_is_unshared_with_the_reason():
    p = view("SEQ(a, KL(SEQ(b, c)))", "a AS a.symbol = 'A', b AS b.symbol = 'B', "
             "c AS c.symbol = 'C'")
    assert not p.shareable and "KL over a composite" in p.reason


def test_operator_transformation_shares_an_and_node_with_a_seq():
    seq = view("SEQ(a, b, c)", "a AS a.symbol = 'A', b AS b.symbol = 'B' AND b.diff < "
               "a.diff, c AS c.symbol = 'C' AND c.diff < b.diff")
    and_ = view("AND(a, b, c)", "a AS a.symbol = 'A', b AS b.symbol = 'B' AND b.diff < "
                "a.diff, c AS c.symbol = 'C' AND c.diff < b.diff")
    patterns = [seq, and_]
    plan = plan_workload(patterns, algorithm="SA", max_iterations=300)
    check_global_plan(plan, patterns)
    b_seq, b_and = plan.bindings
    assert b_seq.root == b_and.root
    orders = {x for k, x in b_seq.extra_checks if k == "order"}
    assert {("A", "B"), ("B", "C")} <= orders
    assert not any(k == "order" for k, _ in b_and.extra_checks)
    from cepsql.explain.workload import describe_workload
    assert "operator transformation: 1 SEQ roots" in describe_workload(plan, patterns)


def test_negation_pattern_shares_its_positive_node_and_checks_not_at_the_root():
    plain = view("SEQ(a, b)", "a AS a.symbol = 'A', b AS b.symbol = 'B' AND b.diff < a.diff")
    negated = view("SEQ(a, NOT(n), b)", "a AS a.symbol = 'A', n AS n.symbol = 'N', "
                   "b AS b.symbol = 'B' AND b.diff < a.diff")
    patterns = [plain, negated]
    plan = plan_workload(patterns, algorithm="TABU", max_iterations=100)
    check_global_plan(plan, patterns)
    assert plan.bindings[0].root == plan.bindings[1].root
    assert ("not", 0) in plan.bindings[1].extra_checks


def test_conjuncts_are_numbered_like_plan_cep():
    p = view("SEQ(a, b)", "a AS a.symbol = 'A' AND a.price > 1, b AS b.symbol = 'B' AND "
             "b.diff < a.diff AND b.price > a.price AND b.open < 3")
    assert [(c.var, sorted(c.refs)) for c in p.conjuncts] == [
        ("A", []), ("A", []), ("B", []), ("B", ["A"]), ("B", ["A"]), ("B", [])]
    pt = p.terms[0]
    assert pt.leaf_conjuncts == ((0, 1), (2, 5))
    assert sorted(k for k, _ in pt.joins) == [3, 4]


def test_disjuncts_of_an_or_pattern_get_their_own_roots():
    alt = view("OR(SEQ(a, b), SEQ(a, c))", "a AS a.symbol = 'A', b AS b.symbol = 'B' AND "
               "b.diff < a.diff, c AS c.symbol = 'C'")
    one = view("SEQ(x, y)", "x AS x.symbol = 'A', y AS y.symbol = 'B' AND y.diff < x.diff")
    assert [t.vars for t in alt.terms] == [("A", "B"), ("A", "C")]
    patterns = [alt, one]
    plan = plan_workload(patterns, algorithm="SA", max_iterations=50)
    check_global_plan(plan, patterns)
    assert [(b.pattern, b.term) for b in plan.bindings] == [(0, 0), (0, 1), (1, 0)]
    assert plan.bindings[0].root == plan.bindings[2].root


def test_subset_references_never_match_another_views_subset():
    def subset_view(members: str):
        sql = ("SELECT * FROM ticks MATCH_RECOGNIZE (ORDER BY ts MEASURES count(*) AS n "
               "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b, c)) WITHIN INTERVAL '9' "
               f"SECOND SUBSET u = ({members}) DEFINE a AS a.symbol = 'A', b AS b.symbol = "
               "'B' AND b.diff < u.diff, c AS c.symbol = 'C')")
        return workload_pattern(find_match_recognize(sql)[0].spec, SCHEMA)
    first, last = subset_view("a"), subset_view("c")
    slot = {"A": 0, "B": 1, "C": 2}
    # the same text, different rows: the keys must differ ...
    assert first.conjunct_key(2, slot) != last.conjunct_key(2, slot)
    # ... and stay stable within one view
    assert first.conjunct_key(2, slot) == first.conjunct_key(2, dict(slot))
    patterns = [first, last]
    plan = plan_workload(patterns, algorithm="TABU", max_iterations=100)
    check_global_plan(plan, patterns)
    assert plan.bindings[0].root != plan.bindings[1].root


def test_kleene_closures_are_never_joined_directly():
    two = view("AND(KL(a), KL(b), c)", "a AS a.symbol = 'A', b AS b.symbol = 'B', "
               "c AS c.symbol = 'C'")
    also = view("SEQ(KL(a), c, KL(b))", "a AS a.symbol = 'A', b AS b.symbol = 'B', "
                "c AS c.symbol = 'C'")
    only = view("SEQ(KL(a), KL(b))", "a AS a.symbol = 'A', b AS b.symbol = 'B'")
    assert not only.shareable and "Kleene closure" in only.reason
    patterns = [two, also, only]
    for algorithm in ("NONE", "PREFIX", "SA", "TABU"):
        plan = plan_workload(patterns, algorithm=algorithm, max_iterations=100)
        check_global_plan(plan, patterns)      # reports a join of two Kleene leaves
        assert plan.unshared == [2]


def test_rare_closures_are_still_joined_through_a_single_row_instance():
    from cepsql.sharing.dag import WorkloadContext
    from cepsql.sharing.search import best_local_plan
    from cepsql.stats.model import PatternStatistics

    def stats(spec):
        return PatternStatistics(rates={"A": 0.01, "B": 0.01, "C": 100.0},
                                 selectivities={}, unary_selectivity={}, sample_rows=0,
                                 seconds=0.0, truncated=False, window_units=10.0)
    sql = ("SELECT * FROM ticks MATCH_RECOGNIZE (ORDER BY ts MEASURES count(*) AS n "
           "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (AND(KL(a), KL(b), c)) WITHIN INTERVAL "
           "'10' SECOND DEFINE a AS a.symbol = 'A', b AS b.symbol = 'B', c AS c.symbol = 'C')")
    p = workload_pattern(find_match_recognize(sql)[0].spec, SCHEMA, stats)
    ctx = WorkloadContext([p])
    for order_only in (False, True):
        tree = best_local_plan(ctx, 0, [], order_only).tree
        joins = [n for n in tree.nodes() if not n.is_leaf]
        assert all(not (n.left.is_leaf and n.right.is_leaf and {n.left.leaf, n.right.leaf}
                        == {0, 1}) for n in joins)
    # without the rule the cheapest tree would join the two rare closures first
    assert ctx.pm(0, 0b011) < ctx.pm(0, 0b101)
