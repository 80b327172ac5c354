"""Hand-derived cases for the reference evaluator (the test oracle).

Specs are built directly from cepsql.algebra types so these tests do not depend on
the parser. Expected rows were worked out by hand from the standard's rules (Trino
where the standard leaves room); the comments show the derivation.
"""
from __future__ import annotations

import time

import pyarrow as pa
import pytest

from cepsql.algebra.expressions import (Aggregate, Between, BinaryOp, Case, Cast, Classifier,
                                        ColumnRef, FunctionCall, InList, IsNull, Like, Literal,
                                        MatchNumber, Navigation, UnaryOp)
from cepsql.algebra.pattern import (Alternation, Anchor, Concat, Empty, Exclusion, Permute,
                                    Quantified, Var)
from cepsql.algebra.spec import MatchRecognizeSpec, Measure, PartitionKey, SkipTo, SortKey
from cepsql.errors import CepRuntimeError, CepUnsupportedError
from cepsql.reference.sql import evaluate_reference
from cepsql.reference.expr import EvalContext, evaluate

# --- tiny builders -----------------------------------------------------------------


def col(var, name=None):
    """col('A', 'price') -> A.price; col('price') -> price."""
    return ColumnRef(None, var) if name is None else ColumnRef(var, name)


def lit(v):
    kind = {bool: "bool", int: "int", float: "double", str: "string", type(None): "null"}[type(v)]
    return Literal(v, kind)


def op(o, a, b):
    return BinaryOp(o, a, b)


def prev(e, n=1):
    return Navigation("PREV", e, n)


def nxt(e, n=1):
    return Navigation("NEXT", e, n)


def first(e, n=0, sem=None):
    return Navigation("FIRST", e, n, sem)


def last(e, n=0, sem=None):
    return Navigation("LAST", e, n, sem)


def count_star(var="", sem=None):
    return Aggregate("count", (), semantics=sem, star_var=var)


def agg(name, arg, sem=None):
    return Aggregate(name, (arg,), semantics=sem)


def seq(*items):
    return Concat(tuple(items)) if len(items) > 1 else items[0]


def alt(*items):
    return Alternation(tuple(items))


def rep(child, lo, hi, greedy=True):
    return Quantified(child, lo, hi, greedy)


def plus(child, greedy=True):
    return rep(child, 1, None, greedy)


def star(child, greedy=True):
    return rep(child, 0, None, greedy)


def opt(child, greedy=True):
    return rep(child, 0, 1, greedy)


A, B, C, D = Var("A"), Var("B"), Var("C"), Var("D")

DOWN = {"B": op("<", col("B", "price"), prev(col("B", "price")))}
UP = {"C": op(">", col("C", "price"), prev(col("C", "price")))}


def make_spec(pattern, defines=None, measures=(), rows="ONE", partition=(), order=("ts",),
              skip=None, option="SHOW_EMPTY", subsets=None, strategy=None):
    return MatchRecognizeSpec(
        partition_by=tuple(PartitionKey(col(p), p) for p in partition),
        order_by=tuple(k if isinstance(k, SortKey) else SortKey(col(k)) for k in order),
        measures=tuple(Measure(n, e) for n, e in measures),
        rows_per_match=rows,
        pattern=pattern,
        defines=dict(defines or {}),
        after_match_skip=skip or SkipTo(),
        all_rows_option=option,
        subsets=dict(subsets or {}),
        strategy=strategy,
    )


def prices_table(prices, **extra):
    return pa.table({"ts": list(range(1, len(prices) + 1)), "price": prices, **extra})


def run(spec, table):
    names, rows = evaluate_reference(spec, table)
    return names, rows


def run_sorted(spec, table):
    names, rows = evaluate_reference(spec, table)
    return names, sorted(rows, key=repr)


V_PRICES = [90, 80, 70, 80, 90, 50, 40, 60]  # two V shapes: rows 1-5 and 6-8
V_MEASURES = (("start_price", first(col("A", "price"))),
              ("bottom", last(col("B", "price"))),
              ("top", last(col("C", "price"))),
              ("mn", MatchNumber()))


# --- stock-pattern shapes ----------------------------------------------------------


def test_v_shape_one_row_per_match():
    # A=1; B+ takes 2,3 (80<90, 70<80) and stops at 4; C+ takes 4,5 and stops at 6.
    # Resume at 6: A=6, B=7, C=8.
    spec = make_spec(seq(A, plus(B), plus(C)), {**DOWN, **UP}, V_MEASURES)
    names, rows = run(spec, prices_table(V_PRICES))
    assert names == ["start_price", "bottom", "top", "mn"]
    assert rows == [(90, 70, 90, 1), (50, 40, 60, 2)]


def test_v_shape_all_rows_running_and_final():
    spec = make_spec(seq(A, plus(B), plus(C)), {**DOWN, **UP},
                     (("mn", MatchNumber()), ("cls", Classifier()),
                      ("bottom", last(col("B", "price"))),
                      ("top", last(col("C", "price"), sem="FINAL"))),
                     rows="ALL")
    names, rows = run(spec, prices_table(V_PRICES))
    assert names == ["ts", "mn", "cls", "bottom", "top", "price"]
    assert rows == [
        (1, 1, "A", None, 90, 90),
        (2, 1, "B", 80, 90, 80),
        (3, 1, "B", 70, 90, 70),
        (4, 1, "C", 70, 90, 80),
        (5, 1, "C", 70, 90, 90),
        (6, 2, "A", None, 60, 50),
        (7, 2, "B", 40, 60, 40),
        (8, 2, "C", 40, 60, 60),
    ]


def test_v_shape_skip_to_next_row():
    # starts: 1 -> rows 1-5; 2 -> A=2 B=3 C=4,5; 3, 4 fail (no descent);
    # 5 -> A=5 B=6,7 C=8; 6 -> A=6 B=7 C=8; 7, 8 fail.
    spec = make_spec(seq(A, plus(B), plus(C)), {**DOWN, **UP}, V_MEASURES,
                     skip=SkipTo("TO_NEXT_ROW"))
    _, rows = run(spec, prices_table(V_PRICES))
    assert rows == [(90, 70, 90, 1), (80, 70, 90, 2), (90, 40, 60, 3), (50, 40, 60, 4)]


def test_w_shape():
    # W: down, up, down, up.  Prices 10 8 6 9 11 7 5 8 12 | 3
    b2, c2 = Var("B2"), Var("C2")
    defines = {**DOWN, **UP,
               "B2": op("<", col("B2", "price"), prev(col("B2", "price"))),
               "C2": op(">", col("C2", "price"), prev(col("C2", "price")))}
    spec = make_spec(seq(A, plus(B), plus(C), plus(b2), plus(c2)), defines,
                     (("first_ts", first(col("A", "ts"))), ("last_ts", last(col("C2", "ts"))),
                      ("n", count_star())))
    _, rows = run(spec, prices_table([10, 8, 6, 9, 11, 7, 5, 8, 12, 3]))
    assert rows == [(1, 9, 9)]


def test_skip_to_last_variable():
    # match 1 = rows 1-5 (C = 4, 5); resume at 5: A=5 B=6,7 C=8; resume at 8: no match.
    spec = make_spec(seq(A, plus(B), plus(C)), {**DOWN, **UP}, V_MEASURES,
                     skip=SkipTo("TO_LAST", "C"))
    _, rows = run(spec, prices_table(V_PRICES))
    assert rows == [(90, 70, 90, 1), (90, 40, 60, 2)]


def test_skip_to_first_variable():
    # match 1 = rows 1-5, first C = 4; at 4 no descent (90 > 80); at 5 -> rows 5-8.
    spec = make_spec(seq(A, plus(B), plus(C)), {**DOWN, **UP}, V_MEASURES,
                     skip=SkipTo("TO_FIRST", "C"))
    _, rows = run(spec, prices_table(V_PRICES))
    assert rows == [(90, 70, 90, 1), (90, 40, 60, 2)]


def test_skip_to_first_row_of_match_is_an_error():
    spec = make_spec(seq(A, B), measures=(("n", count_star()),), skip=SkipTo("TO_FIRST", "A"))
    with pytest.raises(CepRuntimeError):
        run(spec, prices_table([1, 2, 3]))


def test_skip_to_absent_variable_is_an_error():
    spec = make_spec(seq(A, opt(C)), {"C": op(">", col("C", "price"), lit(100))},
                     (("n", count_star()),), skip=SkipTo("TO_LAST", "C"))
    with pytest.raises(CepRuntimeError):
        run(spec, prices_table([1, 2, 3]))


# --- preference ----------------------------------------------------------------------


def test_greedy_versus_reluctant():
    table = prices_table([1, 2, 5, 3, 5])
    defines = {"B": op("=", col("B", "price"), lit(5))}
    measures = (("first_ts", first(col("ts"))), ("n", count_star()))
    # greedy A+ takes every row, then gives back one so B can match row 5
    greedy = make_spec(seq(plus(A), B), defines, measures)
    assert run(greedy, table)[1] == [(1, 5)]
    # reluctant A+? stops at the first B: rows 1-3, then rows 4-5
    reluctant = make_spec(seq(plus(A, greedy=False), B), defines, measures)
    assert run(reluctant, table)[1] == [(1, 3), (4, 2)]


def test_reluctant_alone_takes_minimum():
    table = prices_table([1, 2, 3])
    measures = (("n", count_star()),)
    assert run(make_spec(plus(A, greedy=False), measures=measures), table)[1] == [(1,), (1,), (1,)]
    assert run(make_spec(star(A, greedy=False), measures=measures), table)[1] == [(0,), (0,), (0,)]
    assert run(make_spec(plus(A), measures=measures), table)[1] == [(3,)]


def test_alternation_prefers_left_branch():
    # A | B C: A is always true so the shorter left branch wins every time.
    spec = make_spec(alt(A, seq(B, C)), measures=(("cls", Classifier()),), rows="ALL")
    _, rows = run(spec, prices_table([1, 2, 3]))
    assert [r[1] for r in rows] == ["A", "A", "A"]


def test_alternation_inside_loop():
    # (A | B)+ with A: price > 1 -> row 1 is B (A false), rows 2-3 are A.
    spec = make_spec(plus(alt(A, B)), {"A": op(">", col("A", "price"), lit(1))},
                     (("cls", Classifier()),), rows="ALL")
    _, rows = run(spec, prices_table([1, 2, 3]))
    assert [r[1] for r in rows] == ["B", "A", "A"]


def test_bounded_quantifiers():
    table = prices_table(list(range(7)))
    measures = (("n", count_star()),)
    # {2,3} greedy: 1-3, 4-6, then row 7 alone is too short
    assert run(make_spec(rep(A, 2, 3), measures=measures), table)[1] == [(3,), (3,)]
    # {2,3}? reluctant: pairs, row 7 unmatched
    assert run(make_spec(rep(A, 2, 3, False), measures=measures), table)[1] == [(2,)] * 3
    # {3}: exactly three
    assert run(make_spec(rep(A, 3, 3), measures=measures), table)[1] == [(3,), (3,)]


def test_nested_quantifier_group():
    # (A B?)+ with B: price > 5: prices 1 9 2 3 9 -> A B, A, A B in one match
    spec = make_spec(plus(seq(A, opt(B))), {"B": op(">", col("B", "price"), lit(5))},
                     (("cls", Classifier()),), rows="ALL")
    _, rows = run(spec, prices_table([1, 9, 2, 3, 9]))
    assert [r[1] for r in rows] == ["A", "B", "A", "A", "B"]


def test_permute_prefers_lexicographic_order():
    # PERMUTE(A, B), A: price = 1, B: price = 2. Rows 2 1 1 2 -> (B A), (A B)
    spec = make_spec(Permute((A, B)), {"A": op("=", col("A", "price"), lit(1)),
                                       "B": op("=", col("B", "price"), lit(2))},
                     (("cls", Classifier()), ("mn", MatchNumber())), rows="ALL")
    _, rows = run(spec, prices_table([2, 1, 1, 2]))
    assert [(r[1], r[2]) for r in rows] == [("B", 1), ("A", 1), ("A", 2), ("B", 2)]


def test_permute_all_true_takes_first_order():
    spec = make_spec(Permute((A, B, C)), measures=(("cls", Classifier()),), rows="ALL")
    _, rows = run(spec, prices_table([1, 2, 3]))
    assert [r[1] for r in rows] == ["A", "B", "C"]


# --- empty matches and the loop rule -----------------------------------------------

EMPTY_TABLE = prices_table([1, 7, 8, 2])
BIG = {"A": op(">", col("A", "price"), lit(5))}
EMPTY_MEASURES = (("mn", MatchNumber()), ("cls", Classifier()), ("n", count_star()))


def test_empty_matches_shown_in_all_rows():
    # row 1: empty match; rows 2-3: A A; row 4: empty match
    spec = make_spec(star(A), BIG, EMPTY_MEASURES, rows="ALL")
    names, rows = run(spec, EMPTY_TABLE)
    assert names == ["ts", "mn", "cls", "n", "price"]
    assert rows == [(1, 1, None, 0, 1), (2, 2, "A", 1, 7), (3, 2, "A", 2, 8), (4, 3, None, 0, 2)]


def test_empty_matches_omitted():
    spec = make_spec(star(A), BIG, EMPTY_MEASURES, rows="ALL", option="OMIT_EMPTY")
    _, rows = run(spec, EMPTY_TABLE)
    assert rows == [(2, 2, "A", 1, 7), (3, 2, "A", 2, 8)]


def test_empty_matches_one_row_per_match():
    spec = make_spec(star(A), BIG, EMPTY_MEASURES)
    _, rows = run(spec, EMPTY_TABLE)
    assert rows == [(1, None, 0), (2, "A", 2), (3, None, 0)]


def test_empty_pattern():
    spec = make_spec(Empty(), measures=(("mn", MatchNumber()), ("n", count_star())))
    _, rows = run(spec, prices_table([5, 6]))
    assert rows == [(1, 0), (2, 0)]


def test_with_unmatched_rows():
    spec = make_spec(plus(A), BIG, EMPTY_MEASURES, rows="ALL", option="WITH_UNMATCHED")
    _, rows = run(spec, EMPTY_TABLE)
    assert rows == [(1, None, None, None, 1), (2, 1, "A", 1, 7), (3, 1, "A", 2, 8),
                    (4, None, None, None, 2)]


def test_with_unmatched_rows_does_not_repeat_rows_of_earlier_matches():
    # SKIP TO NEXT ROW: matches 1-2 and 2-3; row 3 starts no match but was matched.
    spec = make_spec(seq(A, B), measures=(("mn", MatchNumber()), ("cls", Classifier())),
                     rows="ALL", option="WITH_UNMATCHED", skip=SkipTo("TO_NEXT_ROW"))
    _, rows = run(spec, prices_table([1, 2, 3]))
    assert [r[:3] for r in rows] == [(1, 1, "A"), (2, 1, "B"), (2, 2, "A"), (3, 2, "B")]


def test_empty_loop_iteration_leaves_the_loop():
    # (A?)*: an iteration matching no rows may not loop again; it terminates.
    spec = make_spec(star(opt(A)), BIG, (("mn", MatchNumber()), ("n", count_star())))
    _, rows = run(spec, prices_table([1, 7]))
    assert rows == [(1, 0), (2, 1)]
    nested = make_spec(star(star(A)), BIG, (("n", count_star()),))
    assert run(nested, prices_table([7, 8, 1]))[1] == [(2,), (0,)]


def test_empty_iteration_exits_before_trying_later_alternatives():
    # (A? | B)* C, A never true.  Trino's rule: at row 1 the first iteration takes the
    # empty branch of A?, may not loop again, leaves the loop and C matches row 1; the
    # less preferred B branch is never needed.  Row 2 likewise.
    defines = {"A": op("=", col("A", "price"), lit(1)), "B": op("=", col("B", "price"), lit(2)),
               "C": op(">=", col("C", "price"), lit(2))}
    spec = make_spec(seq(star(alt(opt(A), B)), C), defines, (("cls", Classifier()),),
                     rows="ALL")
    _, rows = run(spec, prices_table([2, 3]))
    assert [r[1] for r in rows] == ["C", "C"]


def test_required_empty_iterations_are_allowed():
    # (A?){2} B: both required iterations may be empty
    spec = make_spec(seq(rep(opt(A), 2, 2), B), {"A": op(">", col("A", "price"), lit(5))},
                     (("cls", Classifier()),), rows="ALL")
    _, rows = run(spec, prices_table([1, 7, 1]))
    # start 1: A? A? empty, B=1 -> match [B]; start 2: A=2, A? empty (3 is not > 5), B=3
    assert [r[1] for r in rows] == ["B", "A", "B"]


def test_nested_unbounded_loops_stay_fast():
    # (A+)+ B with B never true: exponentially many splits, all with the same labels
    spec = make_spec(seq(plus(plus(A)), B), {"B": op("<", col("B", "price"), lit(0))},
                     (("n", count_star()),))
    t0 = time.perf_counter()
    assert run(spec, prices_table(list(range(25))))[1] == []
    assert time.perf_counter() - t0 < 20


# --- navigation and nulls -----------------------------------------------------------


def test_navigation_reaches_before_the_match_start():
    # A: price > PREV(price). Row 1 has no PREV (null -> false); row 2: 3 > 5 no;
    # row 3: 4 > 3 (PREV is row 2, outside the match) yes; row 4: 6 > 4.
    spec = make_spec(plus(A), {"A": op(">", col("A", "price"), prev(col("A", "price")))},
                     (("first", first(col("A", "price"))), ("last", last(col("A", "price"))),
                      ("before", prev(first(col("A", "price")))),
                      ("after", nxt(last(col("A", "price"))))))
    _, rows = run(spec, prices_table([5, 3, 4, 6]))
    assert rows == [(4, 6, 3, None)]


def test_logical_offsets_running_and_final():
    spec = make_spec(plus(A), measures=(
        ("f1", first(col("A", "price"), 1)), ("l1", last(col("A", "price"), 1)),
        ("l9", last(col("A", "price"), 9)), ("ff1", first(col("A", "price"), 1, "FINAL")),
        ("sum_running", agg("sum", col("A", "price"))),
        ("sum_final", agg("sum", col("A", "price"), "FINAL"))), rows="ALL")
    _, rows = run(spec, prices_table([1, 2, 3]))
    # running FIRST(A.price, 1) looks only at rows up to the current one
    assert [r[1:7] for r in rows] == [(None, None, None, 2, 1, 6), (2, 1, None, 2, 3, 6),
                                      (2, 2, None, 2, 6, 6)]


def test_classifier_navigation():
    spec = make_spec(seq(A, B), measures=(("p", prev(Classifier())), ("n", nxt(Classifier()))),
                     rows="ALL")
    _, rows = run(spec, prices_table([1, 2, 3]))
    # PREV at the match start and NEXT past the match end are outside the match
    assert [r[1:3] for r in rows] == [(None, "B"), ("A", None)]


def test_define_reads_other_variables_last_row():
    # B: B.price > LAST(A.price, 1)  -> the second-to-last A so far
    spec = make_spec(seq(plus(A), B), {
        "A": op("<", col("A", "price"), lit(10)),
        "B": op(">", col("B", "price"), last(col("A", "price"), 1))},
        (("n", count_star()), ("b", last(col("B", "price")))))
    # A takes 1 2 3 (price 4 1 5), 20 is not A; B=20 > LAST(A,1)=1 ok -> 4 rows
    _, rows = run(spec, prices_table([4, 1, 5, 20]))
    assert rows == [(4, 20)]


def test_define_looks_ahead_with_next():
    spec = make_spec(plus(A), {"A": op(">", nxt(col("A", "price")), col("A", "price"))},
                     (("n", count_star()),))
    # A holds at rows 1, 2 (next is bigger), not at 3 (9 > 2), 4 (no next -> null)
    _, rows = run(spec, prices_table([1, 5, 9, 2]))
    assert rows == [(2,)]


def test_nulls_in_conditions():
    spec = make_spec(seq(A, B), {"B": op(">", col("B", "price"), col("A", "price"))},
                     (("a_ts", col("A", "ts")), ("b_ts", col("B", "ts"))))
    # 1->2: null > 1 is null (false); 2->3: 3 > null null; 3->4: 4 > 3 true
    _, rows = run(spec, prices_table([1, None, 3, 4]))
    assert rows == [(3, 4)]
    is_null = make_spec(seq(A, B), {"A": IsNull(col("A", "price"))},
                        (("a_ts", col("A", "ts")),))
    assert run(is_null, prices_table([1, None, 3, 4]))[1] == [(2,)]


def test_aggregate_in_define_includes_current_row():
    spec = make_spec(plus(A), {"A": op("<=", agg("sum", col("A", "price")), lit(10))},
                     (("s", agg("sum", col("A", "price"))),))
    _, rows = run(spec, prices_table([3, 4, 5, 1]))
    assert rows == [(7,), (6,)]


# --- partitions, ordering, layout ----------------------------------------------------


def test_partitions_with_null_key():
    table = pa.table({"sym": ["x", "y", None, "x", "y", None], "ts": [1, 2, 3, 4, 5, 6],
                      "price": [1, 5, 1, 2, 4, 9]})
    spec = make_spec(seq(A, B), {"B": op(">", col("B", "price"), col("A", "price"))},
                     (("a_ts", col("A", "ts")), ("b_ts", col("B", "ts")), ("mn", MatchNumber())),
                     partition=("sym",))
    names, rows = run_sorted(spec, table)
    assert names == ["sym", "a_ts", "b_ts", "mn"]
    assert rows == sorted([("x", 1, 4, 1), (None, 3, 6, 1)], key=repr)


def test_match_number_is_per_partition():
    table = pa.table({"sym": ["x", "y", "x", "y"], "ts": [1, 2, 3, 4], "price": [1, 2, 3, 4]})
    spec = make_spec(A, measures=(("mn", MatchNumber()),), partition=("sym",))
    _, rows = run_sorted(spec, table)
    assert rows == [("x", 1), ("x", 2), ("y", 1), ("y", 2)]


def test_all_rows_layout():
    table = pa.table({"vol": [1.5, 2.5], "sym": ["x", "x"], "price": [3, 4], "ts": [2, 1]})
    spec = make_spec(seq(A, B), measures=(("cls", Classifier()),), rows="ALL",
                     partition=("sym",))
    names, rows = run(spec, table)
    assert names == ["sym", "ts", "cls", "vol", "price"]
    assert rows == [("x", 1, "A", 2.5, 4), ("x", 2, "B", 1.5, 3)]


def test_order_by_desc_nulls_last_by_default():
    table = pa.table({"ts": [1, None, 3], "price": [10, 20, 30]})
    spec = make_spec(seq(A, B, C), measures=(("cls", Classifier()),), rows="ALL",
                     order=(SortKey(col("ts"), ascending=False),))
    _, rows = run(spec, table)
    assert rows == [(3, "A", 30), (1, "B", 10), (None, "C", 20)]
    nulls_first = make_spec(seq(A, B, C), measures=(("cls", Classifier()),), rows="ALL",
                            order=(SortKey(col("ts"), ascending=False, nulls_first=True),))
    assert run(nulls_first, table)[1] == [(None, "A", 20), (3, "B", 30), (1, "C", 10)]


def test_order_ties_broken_by_remaining_columns():
    table = pa.table({"ts": [1, 1, 1], "price": [3, None, 2]})
    spec = make_spec(seq(A, B, C), measures=(("cls", Classifier()),), rows="ALL")
    _, rows = run(spec, table)
    assert rows == [(1, "A", None), (1, "B", 2), (1, "C", 3)]


# --- exclusion, subsets, anchors -------------------------------------------------------


def test_exclusion_hides_rows_but_counts_for_measures():
    spec = make_spec(seq(A, Exclusion(plus(B)), C), {**DOWN, **UP},
                     (("n", count_star(sem="FINAL")), ("b", last(col("B", "price"), sem="FINAL"))),
                     rows="ALL")
    _, rows = run(spec, prices_table([5, 4, 3, 6]))
    assert rows == [(1, 4, 3, 5), (4, 4, 3, 6)]


def test_subset_union_variable():
    spec = make_spec(seq(A, plus(B), C), {**DOWN, **UP}, (
        ("fu", first(col("U", "price"))), ("lu", last(col("U", "price"))),
        ("cu", Classifier("U")), ("nu", count_star("U")), ("su", agg("sum", col("U", "price")))),
        subsets={"U": ("B", "C")})
    _, rows = run(spec, prices_table([5, 4, 3, 6]))
    assert rows == [(4, 6, "C", 3, 13)]


def test_anchors():
    table = prices_table([1, 2, 3])
    measures = (("ts", col("A", "ts")),)
    assert run(make_spec(seq(Anchor("start"), A), measures=measures), table)[1] == [(1,)]
    assert run(make_spec(seq(A, Anchor("end")), measures=measures), table)[1] == [(3,)]


# --- expressions ---------------------------------------------------------------------


def ev(expr):
    return evaluate(expr, EvalContext(rows=[]))


def test_arithmetic_and_null_semantics():
    assert ev(op("/", lit(7), lit(2))) == 3.5
    assert ev(op("/", lit(1), lit(0))) is None
    assert ev(op("%", lit(7), lit(3))) == 1
    assert ev(op("%", lit(-7), lit(3))) == -1
    assert ev(op("%", lit(7), lit(0))) is None
    assert ev(op("+", lit(1), lit(None))) is None
    assert ev(op("AND", lit(None), lit(False))) is False
    assert ev(op("OR", lit(None), lit(True))) is True
    assert ev(op("AND", lit(None), lit(True))) is None
    assert ev(UnaryOp("NOT", lit(None))) is None
    assert ev(op("=", lit(2), lit(2.0))) is True
    assert ev(op("||", lit("a"), lit("b"))) == "ab"


def test_predicates():
    assert ev(InList(lit(2), (lit(1), lit(2)))) is True
    assert ev(InList(lit(3), (lit(1), lit(None)))) is None
    assert ev(InList(lit(3), (lit(1), lit(2)), negated=True)) is True
    assert ev(Between(lit(2), lit(1), lit(3))) is True
    assert ev(Between(lit(5), lit(1), lit(None))) is None
    assert ev(Between(lit(5), lit(6), lit(None))) is False
    assert ev(Like(lit("abc"), lit("a%"))) is True
    assert ev(Like(lit("abc"), lit("a_"))) is False
    assert ev(Like(lit("a.c"), lit("a_c"))) is True
    assert ev(IsNull(lit(None))) is True
    assert ev(Case(None, ((lit(None), lit(1)), (lit(True), lit(2))), lit(3))) == 2
    assert ev(Case(lit(2), ((lit(1), lit("one")), (lit(2), lit("two"))))) == "two"


def test_functions_and_casts():
    assert ev(FunctionCall("round", (lit(2.5),))) == 3.0
    assert ev(FunctionCall("round", (lit(-2.5),))) == -3.0
    assert ev(FunctionCall("round", (lit(1.2345), lit(2)))) == 1.23
    assert ev(FunctionCall("floor", (lit(-1.5),))) == -2
    assert ev(FunctionCall("ceil", (lit(1.1),))) == 2
    assert ev(FunctionCall("abs", (lit(-3),))) == 3
    assert ev(FunctionCall("sqrt", (lit(9),))) == 3.0
    assert ev(FunctionCall("power", (lit(2), lit(3)))) == 8.0
    assert ev(FunctionCall("greatest", (lit(1), lit(None), lit(3)))) == 3
    assert ev(FunctionCall("least", (lit(1), lit(None), lit(3)))) == 1
    assert ev(FunctionCall("coalesce", (lit(None), lit(4)))) == 4
    assert ev(FunctionCall("upper", (lit("ab"),))) == "AB"
    assert ev(FunctionCall("length", (lit("abc"),))) == 3
    assert ev(FunctionCall("concat", (lit("a"), lit(None)))) is None
    assert ev(Cast(lit(3.7), "int")) == 3
    assert ev(Cast(lit("12"), "bigint")) == 12
    assert ev(Cast(lit("x"), "int")) is None
    assert ev(Cast(lit(2), "double")) == 2.0
    assert ev(Cast(lit(2), "string")) == "2"


def test_cep_mode_is_unsupported():
    spec = make_spec(A, strategy="SKIP_TILL_ANY_MATCH")
    with pytest.raises(CepUnsupportedError):
        run(spec, prices_table([1]))
