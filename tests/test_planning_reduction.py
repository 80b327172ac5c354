"""The CPG -> JQPG reduction rules (VLDB 2018 Sections 3-4): relations, SEQ order
predicates, Kleene cardinality, negation placement, DNF of nested patterns."""
from __future__ import annotations

import math

import pytest

from cepsql.algebra.pattern import Concat, Var, pattern_to_text
from cepsql.parse.pattern_parser import parse_pattern
from cepsql.errors import CepUnsupportedError
from cepsql.planning import (
    ALGORITHMS,
    PatternStats,
    VarKind,
    dnf_terms,
    plan_pattern,
    plan_set_latency,
    reduce_pattern,
)
from cepsql.planning.jqpg import KLEENE_LOG2_CAP, kleene_cardinality
from cepsql.planning.plans import order_negation_steps, tree_negation_nodes
from cepsql.planning.trees import join, leaf


def stats(**rates) -> PatternStats:
    return PatternStats(rates=rates, window=2.0)


def one(text: str, st: PatternStats):
    queries = reduce_pattern(parse_pattern(text), st)
    assert len(queries) == 1
    return queries[0]


def test_relations_have_cardinality_w_times_r_and_predicates_their_selectivity():
    st = PatternStats(rates={"A": 3, "B": 5, "C": 7}, window=2.0,
                      selectivities={("A", "C"): 0.1, ("B", "B"): 0.5})
    q = one("AND(A, B, C)", st)
    assert q.names == ("A", "B", "C")
    assert q.kinds == (VarKind.PLAIN,) * 3
    assert q.cardinalities == (6.0, 10.0, 14.0)
    assert q.selectivity[0][2] == q.selectivity[2][0] == 0.1
    assert q.selectivity[1][1] == 0.5 and q.selectivity[0][1] == 1.0
    assert q.precedes == frozenset()
    assert q.last_candidates == frozenset({0, 1, 2})  # conjunction: any may come last


def test_seq_adds_timestamp_predicates_between_neighbours():
    st = PatternStats(rates={"A": 1, "B": 1, "C": 1}, window=1.0,
                      selectivities={("A", "B"): 0.2})
    q = one("SEQ(A, B, C)", st)
    assert q.precedes == frozenset({(0, 1), (1, 2)})
    assert q.selectivity[0][1] == pytest.approx(0.2 * 0.5)
    assert q.selectivity[1][2] == pytest.approx(0.5)
    assert q.selectivity[0][2] == 1.0  # implied by transitivity, not a separate predicate
    assert q.last_candidates == frozenset({2})
    # nested: SEQ(AND(A, B), C) -> both of the AND's members precede C
    q2 = one("SEQ(AND(A, B), C)", st)
    assert q2.precedes == frozenset({(0, 2), (1, 2)})
    # regex concatenation is SEQ too
    assert one("A B C", st).precedes == q.precedes


def test_order_selectivity_is_configurable():
    st = PatternStats(rates={"A": 1, "B": 1}, window=1.0, order_selectivity=1.0)
    assert one("SEQ(A, B)", st).selectivity[0][1] == 1.0


def test_kleene_cardinality_is_two_to_the_rw():
    st = stats(A=1, B=3, C=1)
    q = one("SEQ(A, KL(B), C)", st)
    assert q.kinds[1] is VarKind.KLEENE
    assert q.cardinalities[1] == pytest.approx(2.0 ** (3 * 2.0))  # W r' = 2^(rW)
    assert q.labels == ("A", "KL(B)", "C")
    # B+ is the same closure
    assert one("A B+ C", st).cardinalities == q.cardinalities
    # the paper's example: r = 5/s, W = 10 s -> r' = 2^50 / 10
    assert kleene_cardinality(5, 10) / 10 == pytest.approx(2.0 ** 50 / 10)


def test_kleene_cardinality_is_capped_and_bounded_closures_count_subsets():
    assert kleene_cardinality(45, 1200) == 2.0 ** KLEENE_LOG2_CAP
    assert math.isfinite(kleene_cardinality(1e9, 1e9))
    # KL(B, 1, 2) over rW = 10 events: C(10,1) + C(10,2) = 55 subsets
    assert kleene_cardinality(5, 2, 1, 2) == pytest.approx(55.0)
    q = one("SEQ(A, KL(B, 1, 2))", PatternStats(rates={"A": 1, "B": 5}, window=2.0))
    assert q.cardinalities[1] == pytest.approx(55.0) and q.kleene_bounds[1] == (1, 2)


def test_negation_between_neighbours_is_checked_when_both_are_bound():
    """Section 4: SEQ(A, NOT(B), C, D): B's absence is tested right after the later of A
    and C is accepted."""
    q = one("SEQ(A, NOT(B), C, D)", stats(A=1, B=1, C=1, D=1))
    assert q.names == ("A", "C", "D")
    (neg,) = q.negations
    assert neg.variables == ("B",) and neg.required == frozenset({0, 1})
    assert neg.cardinality == pytest.approx(2.0)
    assert order_negation_steps(q, (2, 0, 1)) == (3,)
    assert order_negation_steps(q, (0, 1, 2)) == (2,)
    assert order_negation_steps(q, (1, 0, 2)) == (2,)
    # tree: the lowest node holding both A and C
    t = join(join(leaf(0), leaf(1)), leaf(2))
    assert tree_negation_nodes(q, t) == (0b011,)
    t2 = join(leaf(0), join(leaf(1), leaf(2)))
    assert tree_negation_nodes(q, t2) == (0b111,)
    # every algorithm places it
    for fn in ALGORITHMS.values():
        plan = fn(q)
        if hasattr(plan, "order"):
            pos = plan.order.index
            assert plan.negation_steps == (max(pos(0), pos(1)) + 1,)
            assert "check NOT(B)" in plan.describe()
        else:
            (m,) = plan.negation_nodes
            assert m & 0b011 == 0b011
            assert "check NOT(B)" in plan.describe()


def test_negation_depends_on_variables_its_define_mentions():
    st = PatternStats(rates={"A": 1, "B": 1, "C": 1, "D": 1}, window=1.0,
                      selectivities={("B", "D"): 0.3})
    (neg,) = one("SEQ(A, NOT(B), C, D)", st).negations
    assert neg.required == frozenset({0, 1, 2})


def test_leading_and_trailing_negation_need_the_window_anchor():
    st = stats(A=1, B=1, C=1, N=1)
    (neg,) = one("SEQ(A, B, NOT(N))", st).negations
    assert neg.required == frozenset({1, 0})  # left neighbour B + the match's first event A
    (neg,) = one("SEQ(NOT(N), A, B, C)", st).negations
    assert neg.required == frozenset({0, 2})  # right neighbour A + the match's last event C


def test_negation_in_and_covers_the_and_span():
    st = stats(A=1, B=1, C=1, N=1)
    (neg,) = one("AND(A, NOT(N), B)", st).negations
    assert neg.required == frozenset({0, 1})
    (neg,) = one("SEQ(C, AND(A, NOT(N), B))", st).negations
    assert neg.required == frozenset({1, 2})
    # a trailing NOT of an inner SEQ is bounded by the whole match's window: all
    (neg,) = one("AND(C, SEQ(A, NOT(N)))", st).negations
    assert neg.required == frozenset({0, 1})


def test_negated_or_is_one_check():
    q = one("SEQ(A, NOT(OR(B, C)), D)", stats(A=1, B=1, C=2, D=1))
    (neg,) = q.negations
    assert neg.variables == ("B", "C") and neg.cardinality == pytest.approx(6.0)


def texts(pattern: str) -> list[str]:
    return [pattern_to_text(t) for t in dnf_terms(parse_pattern(pattern))]


def test_dnf_of_nested_patterns():
    # the paper's example: AND(A, B, OR(C, D)) -> AND(A,B,C) | AND(A,B,D)
    assert texts("AND(A, B, OR(C, D))") == ["PERMUTE(A, B, C)", "PERMUTE(A, B, D)"]
    assert texts("SEQ(OR(A, B), OR(C, D))") == ["A C", "A D", "B C", "B D"]
    assert texts("OR(SEQ(A, B), AND(C, OR(D, E)))") == ["A B", "PERMUTE(C, D)",
                                                        "PERMUTE(C, E)"]
    # optional items: present or absent; nested SEQs are flattened
    assert texts("A B? C") == ["A C", "A B C"]
    assert texts("SEQ(A, SEQ(B, C))") == ["A B C"]
    assert texts("A B* C") == ["A C", "A B+ C"]
    assert texts("A | A") == ["A"]
    assert texts("A?") == ["A"]  # the empty disjunct needs no plan


def test_nested_pattern_is_planned_per_disjunct():
    st = PatternStats(rates={v: r for v, r in zip("ABCD", (1, 2, 30, 40))}, window=1.0)
    queries = reduce_pattern(parse_pattern("AND(A, B, OR(C, D))"), st)
    assert [q.names for q in queries] == [("A", "B", "C"), ("A", "B", "D")]
    plans = plan_pattern(parse_pattern("AND(A, B, OR(C, D))"), st)
    assert len(plans) == 2 and all(p.algorithm == "DP_LD" for p in plans)
    assert plan_set_latency(plans) >= 0.0


def test_negation_in_optional_branch_and_repeated_variables():
    q = one("SEQ(A, B, A)", stats(A=1, B=1))
    assert q.names == ("A", "B", "A") and q.labels == ("A", "B", "A#2")
    assert q.selectivity[0][2] == 1.0
    terms = texts("A (NOT(B) C)? D")
    assert terms == ["A D", "A NOT(B) C D"]


def test_declared_kinds_are_checked_and_missing_rates_reported():
    with pytest.raises(ValueError, match="declared"):
        reduce_pattern(parse_pattern("SEQ(A, B)"),
                       PatternStats(rates={"A": 1, "B": 1}, window=1.0,
                                    kinds={"B": VarKind.KLEENE}))
    ok = PatternStats(rates={"A": 1, "B": 1, "N": 1}, window=1.0,
                      kinds={"B": VarKind.KLEENE, "N": VarKind.NEGATED})
    assert reduce_pattern(parse_pattern("SEQ(A, NOT(N), KL(B))"), ok)
    with pytest.raises(ValueError, match="no arrival rate"):
        reduce_pattern(Concat((Var("A"), Var("Z"))), stats(A=1))
    with pytest.raises(ValueError):
        PatternStats(rates={"A": 1}, window=0)
    with pytest.raises(ValueError):
        PatternStats(rates={"A": 1}, window=1, selectivities={("A", "B"): 1.5})


def test_unsupported_constructs_raise_cep_errors():
    with pytest.raises(CepUnsupportedError):
        reduce_pattern(parse_pattern("(A B)+"), stats(A=1, B=1))
    with pytest.raises(CepUnsupportedError):
        reduce_pattern(parse_pattern("^ A"), stats(A=1))
