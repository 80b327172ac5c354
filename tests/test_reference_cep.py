"""Hand-derived cases for the CEP-mode reference evaluator (rules in reference_cep.RULES).

Stream S (one partition, ORDER BY ts; positions 0..5):

    pos  ts  price tag        a = tag 'a' -> {0, 4}
    0    1   10    a          b = tag 'b' -> {1, 3, 5}
    1    2   20    b          c = tag 'c' -> {2}
    2    3   15    c
    3    4   30    b
    4    5   25    a
    5    6   22    b
"""
from __future__ import annotations

import datetime as dt
import re

import pyarrow as pa
import pytest

import cepsql
from cepsql.parse import find_match_recognize
from cepsql.errors import CepUnsupportedError
from cepsql.reference.cep import evaluate_reference_cep

S = pa.table({"part": ["p"] * 6, "ts": [1, 2, 3, 4, 5, 6], "price": [10, 20, 15, 30, 25, 22],
              "vol": [1.0] * 6, "tag": ["a", "b", "c", "b", "a", "b"]})
TAGS = "DEFINE a AS tag = 'a', b AS tag = 'b', c AS tag = 'c'"
ANY, NEXT = "SKIP_TILL_ANY_MATCH", "SKIP_TILL_NEXT_MATCH"
PART, STRICT = "PARTITION_CONTIGUITY", "STRICT_CONTIGUITY"


def _prune_tags(body: str) -> str:
    """Drop the TAGS definitions of variables the pattern does not use (DEFINE of an
    absent variable is an error)."""
    pattern = body[body.index("PATTERN"):body.index("DEFINE")]
    used = set(re.findall(r"\b([abc])\b", pattern))
    head, defs = body.split("DEFINE ", 1)
    items = [d for d in defs.split(", ") if not re.fullmatch(r"[abc] AS tag = '[abc]'", d)
             or d[0] in used]
    return head + "DEFINE " + ", ".join(items)


def run(body, table=S, order="ORDER BY ts"):
    body = _prune_tags(body) if "DEFINE" in body else body
    sql = f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part {order} {body})"
    spec = find_match_recognize(sql)[0].spec
    return evaluate_reference_cep(spec, table)


def rows(body, table=S):
    """Output rows without the partition column."""
    return [r[1:] for r in run(body, table)[1]]


# --- SEQ / AND / OR x strategies --------------------------------------------------------

SEQ_AB = "MEASURES a.ts AS at, b.ts AS bt STRATEGY {} PATTERN (SEQ(a, b)) " + TAGS


@pytest.mark.parametrize("strategy,expected", [
    (ANY, [(1, 2), (1, 4), (1, 6), (5, 6)]),        # every a before every b
    (NEXT, [(1, 2), (5, 6)]),                         # each a takes the first b after it
    (PART, [(1, 2), (5, 6)]),                         # b must be the next row
    (STRICT, [(1, 2), (5, 6)])])                      # one partition: same as PART
def test_seq_by_strategy(strategy, expected):
    assert rows(SEQ_AB.format(strategy)) == expected


def test_seq_row_and_time_windows():
    assert rows(SEQ_AB.format(ANY) + "") == [(1, 2), (1, 4), (1, 6), (5, 6)]
    body = "MEASURES a.ts AS at, b.ts AS bt STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) "
    assert rows(body + "WITHIN 2 ROWS " + TAGS) == [(1, 2), (5, 6)]           # pos span < 2
    assert rows(body + "WITHIN INTERVAL '3' SECOND " + TAGS) == [(1, 2), (1, 4), (5, 6)]  # <= 3


def test_time_window_on_timestamps():
    base = dt.datetime(2024, 1, 1)
    table = S.set_column(1, "ts", pa.array([base + dt.timedelta(minutes=10 * i) for i in range(6)]))
    body = ("MEASURES a.price AS ap, b.price AS bp STRATEGY SKIP_TILL_ANY_MATCH "
            "PATTERN (SEQ(a, b)) WITHIN INTERVAL '30' MINUTE " + TAGS)
    assert rows(body, table) == [(10, 20), (10, 30), (25, 22)]  # 0->5 spans 50 minutes


def test_and_any_order():
    body = "MEASURES a.ts AS at, c.ts AS ct STRATEGY {} PATTERN (AND(a, c)) " + TAGS
    assert rows(body.format(ANY)) == [(1, 3), (5, 3)]
    assert rows(body.format(NEXT)) == [(1, 3), (5, 3)]   # a..c (0,2) and c..a (2,4)
    assert rows(body.format(PART)) == []                 # a and c are never adjacent


def test_or_and_classifier():
    body = ("MEASURES CLASSIFIER() AS cls, MATCH_NUMBER() AS mn STRATEGY SKIP_TILL_ANY_MATCH "
            "PATTERN (OR(a, c)) " + TAGS)
    assert rows(body) == [("A", 1), ("C", 2), ("A", 3)]


def test_nested_seq_in_and_interleaves_under_any():
    # AND(SEQ(a, b), c): c may lie between a and b (R4)
    body = ("MEASURES a.ts AS at, b.ts AS bt, c.ts AS ct STRATEGY {} "
            "PATTERN (AND(SEQ(a, b), c)) " + TAGS)
    assert rows(body.format(ANY)) == [(1, 2, 3), (1, 4, 3), (1, 6, 3), (5, 6, 3)]
    # permutations without interleaving: a b c -> (0,1,2); c a b -> (2,4,5)
    assert rows(body.format(NEXT)) == [(1, 2, 3), (5, 6, 3)]


def test_distinct_matches_once():
    body = "MEASURES a.ts AS at STRATEGY SKIP_TILL_ANY_MATCH PATTERN (OR(a, a)) " + TAGS
    assert rows(body) == [(1,), (5,)]


# --- Kleene closure ---------------------------------------------------------------------

KL_INC = ("MEASURES a.ts AS at, count(b.*) AS n, LAST(b.ts) AS lb, MATCH_NUMBER() AS mn "
          "STRATEGY {} PATTERN (SEQ(a, KL(b))) DEFINE a AS tag = 'a', "
          "b AS tag = 'b' AND (count(b.*) = 1 OR b.price > LAST(b.price, 1))")


def test_kleene_previous_element_any():
    # b prices 20 (1), 30 (3), 22 (5); increasing subsets after a=0: {1} {3} {5} {1,3} {1,5}
    assert rows(KL_INC.format(ANY)) == [
        (1, 1, 2, 1), (1, 2, 4, 2), (1, 1, 4, 3), (1, 2, 6, 4), (1, 1, 6, 5), (5, 1, 6, 6)]


def test_kleene_previous_element_next_match():
    # a=0: takes b=1, then b=3 (30 > 20); 22 < 30 so the closure stops. a=4: b=5.
    assert rows(KL_INC.format(NEXT)) == [(1, 1, 2, 1), (1, 2, 4, 2), (5, 1, 6, 3)]


def test_kleene_bounds():
    body = ("MEASURES a.ts AS at, count(b.*) AS n STRATEGY SKIP_TILL_ANY_MATCH "
            "PATTERN (SEQ(a, KL(b, 2, 2))) " + TAGS)
    assert rows(body) == [(1, 2), (1, 2), (1, 2)]   # pairs of {1, 3, 5}
    body = body.replace("KL(b, 2, 2)", "b?")
    assert rows(body) == [(1, 0), (1, 1), (1, 1), (1, 1), (5, 0), (5, 1)]


def test_kleene_avg_so_far():
    # x: price above the average of the elements so far (including itself)
    table = pa.table({"part": ["p"] * 4, "ts": [1, 2, 3, 4], "price": [10, 14, 11, 13],
                      "vol": [1.0] * 4, "tag": ["x"] * 4})
    body = ("MEASURES count(x.*) AS n, LAST(x.price) AS lp STRATEGY SKIP_TILL_NEXT_MATCH "
            "PATTERN (KL(x)) DEFINE x AS count(x.*) = 1 OR x.price > avg(x.price)")
    # from 0: 10 | 14 > 12 | 11 > 11.67? no, 13 > 12.33 yes: {0}, {0,1}, {0,1,3}
    # from 1: 14 | 11 no, 13 > 13.5 no -> {1}; from 2: 11 | 13 > 12 -> {2}, {2,3}; from 3
    assert rows(body, table) == [(1, 10), (2, 14), (3, 13), (1, 14), (1, 11), (2, 13), (1, 13)]


# --- negation ---------------------------------------------------------------------------

def test_not_between_seq_neighbours():
    body = "MEASURES a.ts AS at, b.ts AS bt STRATEGY {} PATTERN (SEQ(a, NOT(c), b)) " + TAGS
    assert rows(body.format(ANY)) == [(1, 2), (5, 6)]     # c at 2 blocks (0,3) and (0,5)
    assert rows(body.format(NEXT)) == [(1, 2), (5, 6)]


def test_not_references_bound_variable():
    # n = a row priced above a's price, strictly between a and b
    body = ("MEASURES a.ts AS at, b.ts AS bt STRATEGY SKIP_TILL_ANY_MATCH "
            "PATTERN (SEQ(a, NOT(n), b)) DEFINE a AS tag = 'a', b AS tag = 'b', "
            "n AS n.price > a.price + 10")
    # (0,3): row 1 (20) and 2 (15) not > 20; (0,5): row 3 (30) > 20 blocks; row 1 is not in it
    assert rows(body) == [(1, 2), (1, 4), (5, 6)]


def test_leading_not_uses_window():
    body = ("MEASURES b.ts AS bt STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(NOT(c), b)) "
            "WITHIN 2 ROWS " + TAGS)
    assert rows(body) == [(2,), (6,)]        # b=3 has c at 2 within 2 rows before it
    body = body.replace("WITHIN 2 ROWS ", "")
    assert rows(body) == [(2,)]              # no window: all earlier rows count


def test_trailing_not_uses_window():
    body = ("MEASURES a.ts AS at STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, NOT(c))) "
            "WITHIN 3 ROWS " + TAGS)
    assert rows(body) == [(5,)]              # a=0 has c at 2 < 0 + 3
    assert rows(body.replace("3 ROWS", "2 ROWS")) == [(1,), (5,)]


def test_not_inside_top_level_and_is_open_on_both_sides():
    # R6: no enclosing SEQ, so the region is every row that fits the window with the match
    body = ("MEASURES a.ts AS at, b.ts AS bt STRATEGY SKIP_TILL_ANY_MATCH "
            "PATTERN (AND(a, b, NOT(c))) WITHIN 3 ROWS " + TAGS)
    # candidates (0,1) (4,3) (4,5); c at 2 fits with the first two
    assert rows(body) == [(5, 6)]
    assert rows(body.replace("WITHIN 3 ROWS ", "")) == []   # whole partition: c at 2


T_ALIAS = "DEFINE a AS tag = 'a', b AS tag = 'b', c AS tag = 'c', e AS tag = 'a'"


@pytest.mark.parametrize("strategy", [ANY, NEXT])
def test_not_in_and_is_absence_in_the_and_slot(strategy):
    # the case: the AND has one positive item; its NOT still covers the rows
    # between the previous SEQ item and the next one
    body = ("MEASURES a.ts AS at, b.ts AS bt, e.ts AS et STRATEGY {} "
            "PATTERN (SEQ(a, AND(NOT(c), b), e)) " + T_ALIAS)
    assert rows(body.format(strategy)) == []          # c at 2 lies between a=0 and e=4
    body = ("MEASURES a.ts AS at, b.ts AS bt, e.ts AS et STRATEGY {} "
            "PATTERN (SEQ(a, b, AND(NOT(c), e))) " + T_ALIAS)
    # slot between b and the end of the SEQ? no: between b (previous item) and nothing
    # after it in the SEQ -> open right side; e=4 itself is a match row
    expected = [(1, 4, 5)] if strategy == ANY else []   # NEXT: b=1 is taken, c at 2
    assert rows(body.format(strategy)) == expected


def test_not_in_and_open_side_uses_window():
    body = ("MEASURES a.ts AS at, b.ts AS bt STRATEGY SKIP_TILL_ANY_MATCH "
            "PATTERN (SEQ(a, AND(NOT(c), b))) {}" + TAGS)
    assert rows(body.format("")) == [(5, 6)]           # open right side: c at 2 after a=0
    assert rows(body.format("WITHIN 2 ROWS ")) == [(1, 2), (5, 6)]


def test_not_of_seq_needs_the_whole_subsequence():
    body = ("MEASURES a.ts AS at, b.ts AS bt STRATEGY {} PATTERN (SEQ(a, NOT({}), b)) "
            "DEFINE a AS tag = 'a', b AS tag = 'b', c AS tag = 'c', x AS tag = 'b'")
    # (0,5): c at 2 then x (a b) at 3 in between; (0,3): only b at 1 before c
    assert rows(body.format(ANY, "SEQ(c, x)")) == [(1, 2), (1, 4), (5, 6)]
    assert rows(body.format(ANY, "SEQ(x, c)")) == [(1, 2), (5, 6)]
    assert rows(body.format(ANY, "AND(c, x)")) == [(1, 2), (5, 6)]
    assert rows(body.format(ANY, "OR(c, x)")) == [(1, 2), (5, 6)]
    assert rows(body.format(NEXT, "SEQ(c, x)")) == [(1, 2), (5, 6)]   # NEXT takes b=1


def test_not_of_kleene_searches_closures():
    # NOT(two rising non-'a' rows) between a and b
    body = ("MEASURES a.ts AS at, b.ts AS bt STRATEGY SKIP_TILL_ANY_MATCH "
            "PATTERN (SEQ(a, NOT(KL(n, 2, 2)), b)) DEFINE a AS tag = 'a', b AS tag = 'b', "
            "n AS n.tag <> 'a' AND n.price > COALESCE(LAST(n.price, 1), 0)")
    # (0,3): rows 1, 2 priced 20, 15 do not rise; (0,5): 20 -> 30 (rows 1, 3) rises
    assert rows(body) == [(1, 2), (1, 4), (5, 6)]
    assert rows(body.replace("KL(n, 2, 2)", "KL(n)")) == [(1, 2), (5, 6)]


@pytest.mark.parametrize("strategy,expected", [
    (ANY, [(1, 2, 2), (1, 4, 2), (1, 6, 4), (1, 6, 4), (1, 6, 2), (5, 6, 2)]),
    (NEXT, [(1, 2, 2), (1, 6, 4), (5, 6, 2)]),
    (PART, [(1, 2, 2), (5, 6, 2)]),
])
def test_kleene_of_seq_iterates(strategy, expected):
    body = ("MEASURES FIRST(a.ts) AS at, LAST(b.ts) AS bt, count(*) AS n STRATEGY {} "
            "PATTERN (KL(SEQ(a, b))) " + TAGS)
    # ANY: one iteration (0,1) (0,3) (0,5) (4,5); two: (0,1)(4,5) and (0,3)(4,5)
    assert rows(body.format(strategy)) == expected


def test_kleene_of_or_takes_either_branch_per_iteration():
    body = ("MEASURES count(a.*) AS na, count(c.*) AS nc STRATEGY SKIP_TILL_ANY_MATCH "
            "PATTERN (KL(OR(a, c))) " + TAGS)
    # every non-empty ordered subset of the rows {0, 4} (a) and {2} (c)
    assert sorted(rows(body)) == [(0, 1), (1, 0), (1, 0), (1, 1), (1, 1), (2, 0), (2, 1)]


def test_kleene_of_seq_previous_iteration():
    # LAST(a.price, 1) inside a's DEFINE is a's row of the previous iteration (R6b)
    body = ("MEASURES FIRST(a.ts) AS at, LAST(a.ts) AS lt STRATEGY SKIP_TILL_ANY_MATCH "
            "PATTERN (KL(SEQ(a, b), 2, 2)) DEFINE a AS tag = 'a' AND "
            "(LAST(a.price, 1) IS NULL OR a.price > LAST(a.price, 1)), b AS tag = 'b'")
    assert rows(body) == [(1, 5), (1, 5)]   # a=0 (10) then a=4 (25); b=1 or b=3 first
    assert rows(body.replace("a.price >", "a.price <")) == []


def _labelled_matches(names: list[str], out: list[tuple]) -> list[str]:
    """Each match as 'C1 C2 B3' (CLASSIFIER and ts of its rows) from ALL ROWS output."""
    i_m, i_c, i_ts = names.index("mn"), names.index("cls"), names.index("ts")
    by_match: dict = {}
    for r in out:
        by_match.setdefault(r[i_m], []).append(f"{r[i_c]}{r[i_ts]}")
    return sorted(" ".join(v) for v in by_match.values())


def _next_match_on_xxyx(pattern: str, define: str) -> list[str]:
    """Labelled SKIP_TILL_NEXT_MATCH matches on ts 1..4 tagged x x y x, reference and
    in-process engine (which must agree)."""
    table = pa.table({"part": ["p"] * 4, "ts": [1, 2, 3, 4], "tag": ["x", "x", "y", "x"]})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES "
           "MATCH_NUMBER() AS mn, CLASSIFIER() AS cls ALL ROWS PER MATCH "
           f"STRATEGY SKIP_TILL_NEXT_MATCH PATTERN ({pattern}) DEFINE {define})")
    names, out = evaluate_reference_cep(find_match_recognize(sql)[0].spec, table)
    engine = cepsql.match_recognize(sql, t=table)
    assert _labelled_matches(list(engine.columns), list(engine.itertuples(index=False, name=None))) \
        == _labelled_matches(names, out)
    return _labelled_matches(names, out)


# R5 on x x y x (A, B always true, C on x): a run is in SASE+'s a[i] state only inside
# one closure; each iteration of the outer KL has its own KL(C, 1, 2). After C1 C2 fill
# iteration 1's closure, row 3 is the first row a state can take (B of iteration 2):
# C1 C2 B3 only, never C1 C2 B4 (row 3 skipped). C2 B4 is right: iteration 1's C2 may
# still take more (row 4), so its proceed edge branches at rows 3 and 4 (ignore-proceed).
NESTED_KL_NEXT = [
    "A1 A2 B3 B4", "A1 A2 B3 C4", "A1 B2 B3", "A1 C2 B3", "A1 C2 B4", "A1 C2 C4",
    "A2 B3 B4", "A2 B3 C4", "B1 B2", "B1 C2", "B1 C2 C4", "B2 B3", "B3 B4", "B3 C4",
    "C1 B2", "C1 C2", "C1 C2 B3", "C1 C2 C4", "C2 B3", "C2 B4", "C2 C4"]
# (1, 2) adds the one-iteration matches (every run's first iteration; C1 C2, C2 C4 and
# A1 C2 C4 are already listed: matches are distinct (row, variable) sets)
ONE_ITERATION = ["B1", "B2", "B3", "B4", "C1", "C2", "C4", "A1 B2", "A1 C2", "A1 A2 B3",
                 "A2 B3", "A1 A2 A3 B4", "A2 A3 B4", "A3 B4", "A1 A2 A3 C4", "A2 A3 C4", "A3 C4"]
# (0, 2) also the zero-iteration matches: A runs alone
NO_ITERATION = ["A1", "A1 A2", "A1 A2 A3", "A1 A2 A3 A4", "A2", "A2 A3", "A2 A3 A4", "A3",
                "A3 A4", "A4"]


@pytest.mark.parametrize("outer,extra", [("2, 2", []), ("1, 2", ONE_ITERATION),
                                         ("0, 2", ONE_ITERATION + NO_ITERATION)])
def test_next_match_kleene_state_is_one_closure_instance(outer, extra):
    got = _next_match_on_xxyx(f"SEQ(KL(A, 0), KL(OR(B, KL(C, 1, 2)), {outer}))",
                              "C AS tag = 'x'")
    assert got == sorted(NESTED_KL_NEXT + extra)


def test_next_match_unbounded_kl_reentering_a_closure_starts_a_new_one():
    # KL(..., 0) loops back to the same KL(B, 2, 2) states: after B1 B2 fill it, the
    # next iteration's B is a new closure, so row 3 (C) is taken, never skipped for D4
    got = _next_match_on_xxyx("SEQ(KL(OR(KL(B, 2, 2), C), 0), D)",
                              "B AS tag = 'x', D AS tag = 'x'")
    assert got == ["B1 B2 C3 D4", "C1 C2 C3 D4", "C1 D2", "C2 C3 D4", "C3 D4",
                   "D1", "D2", "D4"]


def test_not_under_contiguity_is_vacuous_between_neighbours():
    body = "MEASURES a.ts AS at, b.ts AS bt STRATEGY {} PATTERN (SEQ(a, NOT(b), b)) " + TAGS
    assert rows(body.format(PART)) == [(1, 2), (5, 6)]


# --- output selection and layout ------------------------------------------------------

def test_skip_past_last_row_selects_non_overlapping():
    body = ("MEASURES a.ts AS at, b.ts AS bt, MATCH_NUMBER() AS mn AFTER MATCH SKIP PAST LAST ROW "
            "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) " + TAGS)
    # by (last, first): (0,1) kept; (0,3) (0,5) reuse row 0; (4,5) kept
    assert rows(body) == [(1, 2, 1), (5, 6, 2)]


def _unpartitioned(body, table):
    sql = f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts {body})"
    return evaluate_reference_cep(find_match_recognize(sql)[0].spec, table)[1]


# two symbols interleaved, no PARTITION BY:  pos  0   1   2   3   4   5   6   7   8
SYMBOLS = pa.table({"sym": list("XYXYXYXXX"),  # sym  X   Y   X   Y   X   Y   X   X   X
                    "ts": list(range(1, 10)),    # tag  a   a   b   b   c   c   a   b   c
                    "tag": list("aabbccabc")})
SEQ_ABC = ("MEASURES a.sym AS s, a.ts AS ta, c.ts AS tc {skip} STRATEGY {s} "
           "PATTERN (SEQ(a, b, c)) DEFINE a AS a.tag = 'a', "
           "b AS b.tag = 'b' AND b.sym = a.sym, c AS c.tag = 'c' AND c.sym = a.sym")


@pytest.mark.parametrize("strategy", [ANY, NEXT])
def test_non_overlap_across_symbols_without_partition_by(strategy):
    # X(0,2,4) Y(1,3,5) X(6,7,8) share no row (the rule before kept all three), but Y's
    # starts (row 1) before X's first match completes (row 4): SASE+ outputs only
    # X(0,2,4) and X(6,7,8). ANY_MATCH also finds X(0,2,8) and X(0,7,8).
    every = _unpartitioned(SEQ_ABC.format(skip="", s=strategy), SYMBOLS)
    assert [r for r in every if r in (("X", 1, 5), ("Y", 2, 6), ("X", 7, 9))] == [
        ("X", 1, 5), ("Y", 2, 6), ("X", 7, 9)]
    assert len(every) == (5 if strategy == ANY else 3)
    past = _unpartitioned(SEQ_ABC.format(skip="AFTER MATCH SKIP PAST LAST ROW", s=strategy),
                          SYMBOLS)
    assert past == [("X", 1, 5), ("X", 7, 9)]


def test_non_overlap_drops_a_match_overlapping_in_time_without_shared_rows():
    table = pa.table({"part": ["p"] * 4, "ts": [1, 2, 3, 4], "price": [1, 2, 3, 4],
                      "vol": [1.0] * 4, "tag": ["a", "a", "b", "b"]})
    body = ("MEASURES a.ts AS at, b.ts AS bt {} STRATEGY SKIP_TILL_ANY_MATCH "
            "PATTERN (SEQ(a, b)) " + TAGS)
    assert rows(body.format(""), table) == [(1, 3), (1, 4), (2, 3), (2, 4)]
    # (0,2) completes first; (1,3) shares no row with it but starts before it completes
    assert rows(body.format("AFTER MATCH SKIP PAST LAST ROW"), table) == [(1, 3)]


def test_non_overlap_ties():
    table = pa.table({"part": ["p"] * 5, "ts": [1, 2, 3, 4, 5], "price": [1, 2, 3, 4, 5],
                      "vol": [1.0] * 5, "tag": ["a", "b", "b", "c", "a"]})
    # (0,1,3) and (0,2,3): same start and end, the smaller position tuple wins
    body = ("MEASURES a.ts AS at, b.ts AS bt, c.ts AS ct AFTER MATCH SKIP PAST LAST ROW "
            "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b, c)) " + TAGS)
    assert rows(body, table) == [(1, 2, 4)]
    # same rows, different labels: the smaller label tuple wins ((A, B) before (B, A));
    # rows 0,1 as a,b; then rows 2,4 as a,b (row 3 fits neither)
    body = ("MEASURES a.ts AS at, b.ts AS bt AFTER MATCH SKIP PAST LAST ROW "
            "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (AND(a, b)) "
            "DEFINE a AS tag IN ('a', 'b'), b AS tag IN ('a', 'b'))")
    assert rows(body, table) == [(1, 2), (3, 5)]


def test_non_overlap_same_end_earlier_start():
    table = pa.table({"part": ["p"] * 4, "ts": [1, 2, 3, 4], "price": [1, 2, 3, 4],
                      "vol": [1.0] * 4, "tag": ["a", "c", "a", "b"]})
    # SEQ(a, b): (0,3) and (2,3) both complete at row 3; the earlier start (0,3) wins
    body = ("MEASURES a.ts AS at, b.ts AS bt AFTER MATCH SKIP PAST LAST ROW "
            "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) " + TAGS)
    assert rows(body, table) == [(1, 4)]


def test_all_rows_per_match_layout():
    names, out = run("MEASURES CLASSIFIER() AS cls, MATCH_NUMBER() AS mn ALL ROWS PER MATCH "
                     "STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, b)) " + TAGS)
    assert names == ["part", "ts", "cls", "mn", "price", "vol", "tag"]
    assert [(r[1], r[2], r[3]) for r in out] == [(1, "A", 1), (2, "B", 1), (5, "A", 2), (6, "B", 2)]


def test_all_rows_running_measures_skip_gaps():
    names, out = run("MEASURES count(*) AS n, sum(price) AS s ALL ROWS PER MATCH "
                     "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, c, a)) " + TAGS)
    # the only match: rows 0, 2, 4; skipped rows 1 and 3 are not counted
    assert [(r[1], r[2], r[3]) for r in out] == [(1, 1, 10), (3, 2, 25), (5, 3, 50)]


def test_strict_vs_partition_contiguity():
    table = pa.table({"part": ["p", "q", "p", "p", "p"], "ts": [1, 2, 3, 4, 5],
                      "price": [1, 2, 3, 4, 5], "vol": [1.0] * 5, "tag": ["a", "x", "b", "a", "b"]})
    body = "MEASURES a.ts AS at, b.ts AS bt STRATEGY {} PATTERN (SEQ(a, b)) " + TAGS
    assert rows(body.format(PART), table) == [(1, 3), (4, 5)]
    assert rows(body.format(STRICT), table) == [(4, 5)]   # row ts=2 of q lies between 1 and 3


def test_sql_mode_with_window():
    body = "MEASURES count(*) AS n PATTERN (a b+) WITHIN {} DEFINE b AS true"
    assert rows(body.format("3 ROWS")) == [(3,), (3,)]
    assert rows(body.format("INTERVAL '1' SECOND")) == [(2,), (2,), (2,)]
    names, out = run("MEASURES count(*) AS n PATTERN (a b+) DEFINE b AS true")
    assert [r[1:] for r in out] == [(6,)]


def test_skip_to_variable_unsupported():
    with pytest.raises(CepUnsupportedError):
        run("AFTER MATCH SKIP TO LAST b STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) " + TAGS)


# --- SASE+ Figure 1 ------------------------------------------------------------------------

H = dt.datetime(2008, 2, 1)


def hours(*hs):
    return [H + dt.timedelta(hours=h) for h in hs]


def test_sase_query1_shoplifting():
    table = pa.table({"tag_id": [1, 1, 2, 2, 2, 3, 3],
                      "ts": hours(0, 1, 0, 2, 3, 0, 13),
                      "kind": ["shelf", "exit", "shelf", "register", "exit", "shelf", "exit"]})
    sql = ("SELECT * FROM r MATCH_RECOGNIZE (PARTITION BY tag_id ORDER BY ts "
           "MEASURES a.ts AS shelf_ts, c.ts AS exit_ts STRATEGY SKIP_TILL_NEXT_MATCH "
           "PATTERN (SEQ(a, NOT(b), c)) WITHIN INTERVAL '12' HOUR "
           "DEFINE a AS kind = 'shelf', b AS kind = 'register', c AS kind = 'exit')")
    _, out = evaluate_reference_cep(find_match_recognize(sql)[0].spec, table)
    assert out == [(1, H, H + dt.timedelta(hours=1))]   # tag 2 paid, tag 3 out of window


def test_sase_query2_contamination():
    table = pa.table({"kind": ["alert", "ship", "ship", "ship", "ship"],
                      "ts": hours(0, 1, 2, 2.5, 4),
                      "status": ["contaminated", None, None, None, None],
                      "site": ["X", None, None, None, None],
                      "src": [None, "X", "Y", "X", "Y"],
                      "dst": [None, "Y", "Z", "W", "V"]})
    sql = ("SELECT * FROM r MATCH_RECOGNIZE (ORDER BY ts "
           "MEASURES count(b.*) AS n, FIRST(b.dst) AS d1, LAST(b.dst) AS dn "
           "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, KL(b))) WITHIN INTERVAL '3' HOUR "
           "DEFINE a AS kind = 'alert' AND status = 'contaminated', "
           "b AS kind = 'ship' AND ((count(b.*) = 1 AND b.src = a.site) "
           "OR (count(b.*) > 1 AND b.src = LAST(b.dst, 1))))")
    _, out = evaluate_reference_cep(find_match_recognize(sql)[0].spec, table)
    # chains X->Y, X->Y->Z, X->W; X->Y->V is at hour 4, outside the window
    assert out == [(1, "Y", "Y"), (2, "Y", "Z"), (1, "W", "W")]


def test_sase_query3_stock_trend():
    table = pa.table({"symbol": ["S"] * 5, "ts": hours(0, 0.1, 0.2, 0.3, 0.4),
                      "price": [10, 12, 9, 14, 13], "volume": [1500, 1200, 1100, 900, 500]})
    sql = ("SELECT * FROM r MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
           "MEASURES FIRST(a.price) AS fp, count(a.*) AS n, b.price AS bp "
           "STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(KL(a), b)) WITHIN INTERVAL '1' HOUR "
           "DEFINE a AS (count(a.*) = 1 AND a.volume > 1000) "
           "OR (count(a.*) > 1 AND a.price > avg(a.price)), "
           "b AS b.volume < 0.8 * LAST(a.volume))")
    _, out = evaluate_reference_cep(find_match_recognize(sql)[0].spec, table)
    # runs start at rows 0, 1, 2 (volume > 1000). A run waits in a (stay) and b (proceed)
    # at once and ignores a row only when neither takes it (R5): run 0 takes row 1 as a
    # (so a={0} never meets b), ignores row 2, then takes row 3 both ways (b: match
    # 10,2,14) and row 4 both ways (match 10,3,13); run 1 ignores row 2, takes row 3 both
    # ways (12,1,14), then row 4 only as b (13 is not above avg 13: 12,2,13); run 2 takes
    # row 3 as a (900 is not below 0.8 * 1100) and row 4 both ways (9,2,13)
    assert [r[1:] for r in out] == [(10, 2, 14), (10, 3, 13), (12, 1, 14), (12, 2, 13),
                                    (9, 2, 13)]


# --- generated queries (strategies_cep) ---------------------------------------------------

def _match_summary(sql: str, strategy: str, table) -> list[tuple]:
    """Per-match (partition, n, first ts, last ts, sum ts) for sql run with ``strategy``."""
    import re as _re
    sql = _re.sub(r"STRATEGY \w+", f"STRATEGY {strategy}", sql)
    sql = _re.sub(r"MEASURES .*? (ONE|ALL) ROWS? PER MATCH",
                  "MEASURES count(*) AS n, FIRST(ts) AS f, LAST(ts) AS l, sum(ts) AS s "
                  "ONE ROW PER MATCH", sql)
    sql = sql.replace("AFTER MATCH SKIP PAST LAST ROW", "")
    _, out = evaluate_reference_cep(find_match_recognize(sql)[0].spec, table)
    return sorted(out, key=repr)


def _sub_multiset(small: list, big: list) -> bool:
    from collections import Counter
    return not (Counter(map(repr, small)) - Counter(map(repr, big)))


def test_generated_queries_nest_strategies():
    """Every contiguity match is a next-match match, and every next-match match an
    any-match match (R4/R5): a strong sanity check of both matchers."""
    import sys
    from hypothesis import HealthCheck, given, settings
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from support.strategies_cep import cep_queries, cep_streams

    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cep_queries(), cep_streams())
    def check(sql, table):
        part = _match_summary(sql, "PARTITION_CONTIGUITY", table)
        strict = _match_summary(sql, "STRICT_CONTIGUITY", table)
        nxt = _match_summary(sql, "SKIP_TILL_NEXT_MATCH", table)
        anym = _match_summary(sql, "SKIP_TILL_ANY_MATCH", table)
        assert _sub_multiset(strict, part)
        assert _sub_multiset(part, nxt)
        assert _sub_multiset(nxt, anym)
    check()
