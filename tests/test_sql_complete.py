"""SQL:2016 MATCH_RECOGNIZE, the complete clause (issue 3): anchors, empty patterns and
matches, exclusion, PERMUTE, quantifiers, SUBSET, every AFTER MATCH SKIP form, the ALL ROWS
options, nested navigation, aggregates, functions, and (through Spark) several clauses
per statement and pattern views.

Expected rows are derived by hand from the standard (Trino's documented behaviour where
the standard leaves room); each derivation is in the comments.
"""
from __future__ import annotations

import pandas as pd
import pytest

from cepsql.errors import CepRuntimeError
from support.sqlhelp import run, run_sorted, srt

ID5 = pd.DataFrame({"id": [1, 2, 3, 4, 5], "v": [1, 2, 3, 4, 5]})


def q1(body: str, table: str = "t") -> str:
    return f"SELECT * FROM {table} MATCH_RECOGNIZE (ORDER BY id {body})"


# --- anchors ------------------------------------------------------------------------------

PARTS = pd.DataFrame({"sym": ["a", "a", "a", "b", "b"], "id": [1, 2, 3, 4, 5]})


def test_start_anchor_matches_only_at_partition_start():
    cols, rows = run_sorted("""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY id
        MEASURES A.id AS a PATTERN (^A))""", t=PARTS)
    assert (cols, rows) == (["sym", "a"], [("a", 1), ("b", 4)])


def test_end_anchor_matches_only_at_partition_end():
    cols, rows = run_sorted("""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY id
        MEASURES A.id AS a PATTERN (A$))""", t=PARTS)
    assert rows == [("a", 3), ("b", 5)]


def test_both_anchors_and_anchor_inside_alternation():
    # ^A+$ = the whole partition. (^A | B$) with SKIP TO NEXT ROW: row 1 matches ^A,
    # the last row matches B$, the middle rows match neither.
    cols, rows = run_sorted("""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY id
        MEASURES count(*) AS n PATTERN (^A+$))""", t=PARTS)
    assert rows == [("a", 3), ("b", 2)]
    cols, rows = run_sorted("""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY id
        MEASURES FIRST(id) AS f, CLASSIFIER() AS c AFTER MATCH SKIP TO NEXT ROW
        PATTERN (^A | B$))""", t=PARTS)
    assert rows == [("a", 1, "A"), ("a", 3, "B"), ("b", 4, "A"), ("b", 5, "B")]


# --- empty pattern, empty matches, ALL ROWS options -----------------------------------------

def test_empty_pattern_gives_an_empty_match_at_every_row():
    # PATTERN (()) matches the empty sequence at each row; an empty match resumes at the
    # next row. ONE ROW PER MATCH outputs a row per empty match: MATCH_NUMBER 1..3,
    # count(*) 0, CLASSIFIER() NULL.
    t = ID5[ID5.id <= 3]
    cols, rows = run(q1("MEASURES MATCH_NUMBER() AS mn, count(*) AS n, CLASSIFIER() AS c "
                        "PATTERN (())"), t=t)
    assert (cols, rows) == (["mn", "n", "c"], [(1, 0, None), (2, 0, None), (3, 0, None)])


EMPTY_T = pd.DataFrame({"id": [1, 2, 3], "v": [1, 5, 6]})
EMPTY_Q = q1("MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS c, count(*) AS n {opt} "
             "PATTERN (A*) DEFINE A AS v > 4")


def test_empty_match_one_row_per_match():
    # start 1: A fails (1 > 4 false) -> A* matches empty: match 1, count 0.
    # empty match -> resume at row 2: A=2,3 -> match 2, count 2.
    cols, rows = run(EMPTY_Q.format(opt="ONE ROW PER MATCH"), t=EMPTY_T)
    assert rows == [(1, None, 0), (2, "A", 2)]


def test_all_rows_show_empty_matches_is_the_default():
    # the empty match outputs one row: its starting row, CLASSIFIER NULL, count 0
    expected = [(1, 1, None, 0, 1), (2, 2, "A", 1, 5), (3, 2, "A", 2, 6)]
    for opt in ("ALL ROWS PER MATCH", "ALL ROWS PER MATCH SHOW EMPTY MATCHES"):
        cols, rows = run_sorted(EMPTY_Q.format(opt=opt), t=EMPTY_T)
        assert cols == ["id", "mn", "c", "n", "v"]
        assert rows == expected


def test_all_rows_omit_empty_matches():
    cols, rows = run_sorted(EMPTY_Q.format(opt="ALL ROWS PER MATCH OMIT EMPTY MATCHES"),
                            t=EMPTY_T)
    # match numbers still count the omitted empty match
    assert rows == [(2, 2, "A", 1, 5), (3, 2, "A", 2, 6)]


def test_all_rows_with_unmatched_rows():
    # A+ on v 1 5 6 2: row 1 unmatched, rows 2..3 match 1, row 4 unmatched.
    # Unmatched rows are output with NULL measures.
    t = pd.DataFrame({"id": [1, 2, 3, 4], "v": [1, 5, 6, 2]})
    cols, rows = run_sorted(q1("MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS c "
                               "ALL ROWS PER MATCH WITH UNMATCHED ROWS "
                               "PATTERN (A+) DEFINE A AS v > 4"), t=t)
    assert cols == ["id", "mn", "c", "v"]
    assert rows == [(1, None, None, 1), (2, 1, "A", 5), (3, 1, "A", 6), (4, None, None, 2)]


def test_with_unmatched_rows_keeps_empty_matches():
    # A* on v 1 5 6 2: row 1 empty match (mn 1), rows 2-3 match 2, row 4 empty match (mn 3).
    # Every row is the start of a match, so none is unmatched.
    t = pd.DataFrame({"id": [1, 2, 3, 4], "v": [1, 5, 6, 2]})
    cols, rows = run_sorted(q1("MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS c "
                               "ALL ROWS PER MATCH WITH UNMATCHED ROWS "
                               "PATTERN (A*) DEFINE A AS v > 4"), t=t)
    assert rows == [(1, 1, None, 1), (2, 2, "A", 5), (3, 2, "A", 6), (4, 3, None, 2)]


# --- exclusion ------------------------------------------------------------------------------

EXCL = pd.DataFrame({"id": [1, 2, 3, 4], "v": [1, 7, 8, 2]})


def test_exclusion_hides_rows_from_all_rows_output():
    # A=1, B=2,3 (excluded), C=4. Excluded rows are still part of the match: running
    # count(*) at row 4 is 4 and FINAL LAST(B.v) = 8.
    cols, rows = run(q1("MEASURES CLASSIFIER() AS c, count(*) AS n, FINAL LAST(B.v) AS lb "
                        "ALL ROWS PER MATCH PATTERN (A {- B+ -} C) "
                        "DEFINE A AS v < 5, B AS v > 5, C AS v < 5"), t=EXCL)
    assert cols == ["id", "c", "n", "lb", "v"]
    assert rows == [(1, "A", 1, 8, 1), (4, "C", 4, 8, 2)]


def test_nested_exclusion():
    # A {- B {- C -} -} D over 4 rows: B and C are both excluded.
    cols, rows = run(q1("MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH "
                        "PATTERN (A {- B {- C -} -} D)"), t=EXCL)
    assert rows == [(1, "A", 1), (4, "D", 2)]


def test_exclusion_does_not_change_one_row_per_match():
    cols, rows = run(q1("MEASURES count(*) AS n, LAST(B.v) AS lb "
                        "PATTERN (A {- B+ -} C) DEFINE A AS v < 5, B AS v > 5, C AS v < 5"),
                     t=EXCL)
    assert rows == [(4, 8)]


# --- PERMUTE --------------------------------------------------------------------------------

def test_permute_prefers_lexicographic_order():
    # PERMUTE(A, B, C) = ABC | ACB | BAC | BCA | CAB | CBA, tried in that order.
    # v 5 1 5, A AS v = 1: ABC, ACB fail (A on row 1); BAC: B=1, A=2, C=3 ok -> chosen
    # (CAB would also match but comes later).
    t = pd.DataFrame({"id": [1, 2, 3], "v": [5, 1, 5]})
    cols, rows = run(q1("MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH "
                        "PATTERN (PERMUTE(A, B, C)) DEFINE A AS v = 1"), t=t)
    assert [r[1] for r in rows] == ["B", "A", "C"]


def test_permute_all_true_takes_written_order_and_combines():
    t = pd.DataFrame({"id": [1, 2, 3, 4], "v": [1, 2, 3, 4]})
    cols, rows = run(q1("MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH "
                        "PATTERN (PERMUTE(X, Y) Z)"), t=t)
    assert [r[1] for r in rows] == ["X", "Y", "Z"]
    # PERMUTE(X, Y+) with Y AS v > 2, X AS v < 3 on v 1 2 3 4: X Y+ tried first:
    # X=1, Y at 2: 2 > 2 no -> fail. then Y+ X: Y at 1 fails -> no match at row 1.
    # row 2: X=2, Y=3,4 -> match (X, Y, Y).
    cols, rows = run(q1("MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH "
                        "PATTERN (PERMUTE(X, Y+)) DEFINE X AS v < 3, Y AS v > 2"), t=t)
    assert [(r[0], r[1]) for r in rows] == [(2, "X"), (3, "Y"), (4, "Y")]


# --- quantifiers ------------------------------------------------------------------------------

# Over 5 rows where A is always true, with SKIP PAST LAST ROW (empty match -> next row):
QUANTIFIERS = [
    ("A{2}", [2, 2]),          # rows 1-2, 3-4; row 5 cannot make 2
    ("A{2}?", [2, 2]),         # exact count: reluctance changes nothing
    ("A{2,}", [5]),            # greedy: everything
    ("A{2,}?", [2, 2]),        # reluctant: as few as allowed
    ("A{,3}", [3, 2]),         # greedy up to 3
    ("A{,3}?", [0, 0, 0, 0, 0]),  # reluctant: prefers zero -> empty match at every row
    ("A{2,3}", [3, 2]),
    ("A{2,3}?", [2, 2]),
    ("A*", [5]),
    ("A*?", [0, 0, 0, 0, 0]),
    ("A+", [5]),
    ("A+?", [1, 1, 1, 1, 1]),
    ("A?", [1, 1, 1, 1, 1]),
    ("A??", [0, 0, 0, 0, 0]),
    ("A{0,1}", [1, 1, 1, 1, 1]),
    ("A{1}", [1, 1, 1, 1, 1]),
]


@pytest.mark.parametrize("pattern,lengths", QUANTIFIERS, ids=[p for p, _ in QUANTIFIERS])
def test_quantifier_forms(pattern, lengths):
    cols, rows = run(q1(f"MEASURES MATCH_NUMBER() AS mn, count(*) AS n PATTERN ({pattern})"),
                     t=ID5)
    assert rows == [(i + 1, n) for i, n in enumerate(lengths)]


def test_reluctant_followed_by_variable():
    # A+? B with both true: A takes one row, B the next: (1,2), (3,4); row 5 alone fails.
    # A+ B greedy: A = 1..4, B = 5.
    q = q1("MEASURES count(A.*) AS na, B.id AS b PATTERN ({p})")
    assert run(q.format(p="A+? B"), t=ID5)[1] == [(1, 2), (1, 4)]
    assert run(q.format(p="A+ B"), t=ID5)[1] == [(4, 5)]
    # reluctant extends only as far as needed: B AS v = 4 -> A{1,3}? B: A=1..3, B=4
    q = q1("MEASURES count(A.*) AS na, B.id AS b PATTERN (A{1,3}? B) DEFINE B AS v = 4")
    assert run(q, t=ID5)[1] == [(3, 4)]


def test_quantified_groups():
    q = q1("MEASURES count(*) AS n, CLASSIFIER() AS c PATTERN ({p})")
    assert run(q.format(p="(A B){2}"), t=ID5)[1] == [(4, "B")]
    assert run(q.format(p="(A B)+"), t=ID5)[1] == [(4, "B")]
    assert run(q.format(p="(A B)+?"), t=ID5)[1] == [(2, "B"), (2, "B")]
    assert run(q.format(p="(A B?)+"), t=ID5)[1] == [(5, "A")]
    assert run(q.format(p="(A B?)+?"), t=ID5)[1] == [(2, "B"), (2, "B"), (1, "A")]
    # group with alternation inside a quantifier: leftmost branch preferred
    t = pd.DataFrame({"id": [1, 2, 3, 4], "v": [1, 2, 1, 3]})
    cols, rows = run(q1("MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH "
                        "PATTERN ((A | B)+ C) DEFINE A AS v = 1, B AS v = 2, C AS v = 3"), t=t)
    assert [r[1] for r in rows] == ["A", "B", "A", "C"]


def test_alternation_prefers_leftmost_branch():
    # both branches true: (A | B) picks A; (B | A) picks B
    t = ID5[ID5.id <= 1]
    assert run(q1("MEASURES CLASSIFIER() AS c PATTERN (A | B)"), t=t)[1] == [("A",)]
    assert run(q1("MEASURES CLASSIFIER() AS c PATTERN (B | A)"), t=t)[1] == [("B",)]


def test_greedy_backtracks_for_the_rest_of_the_pattern():
    # A* greedy with B needing v >= 4: A* would take all 5 rows; backtracking gives
    # A=1..3, B=4 (the first successful alternative in preference order, not A=1..4, B=5
    # because B on row 5 would need A=1..4: longer A is preferred -> A=1..4, B=5!).
    # Preference: more A iterations first: A=1..5 (B missing) fail, A=1..4 B=5 (5>=4) ok.
    cols, rows = run(q1("MEASURES count(A.*) AS na, B.id AS b PATTERN (A* B) "
                        "DEFINE B AS v >= 4"), t=ID5)
    assert rows == [(4, 5)]


# --- SUBSET ---------------------------------------------------------------------------------

VSHAPE = pd.DataFrame({"id": [1, 2, 3, 4, 5], "p": [10, 8, 6, 9, 11]})
VQ = ("MEASURES {m} {rows} PATTERN (S D+ R+) SUBSET U = (D, R) "
      "DEFINE D AS p < PREV(p), R AS p > PREV(p)")


def test_subset_in_navigation_aggregates_and_classifier():
    # S=1, D=2,3, R=4,5; U = rows 2..5 (p 8 6 9 11)
    cols, rows = run(q1(VQ.format(
        m="FIRST(U.p) AS fu, LAST(U.p) AS lu, U.p AS up, sum(U.p) AS su, count(U.*) AS cu, "
          "avg(U.p) AS au, min(U.p) AS mi, max(U.p) AS ma, CLASSIFIER(U) AS cl, "
          "FIRST(U.p, 1) AS fu1", rows="")), t=VSHAPE)
    assert cols == ["fu", "lu", "up", "su", "cu", "au", "mi", "ma", "cl", "fu1"]
    assert rows == [(8, 11, 11, 34, 4, 8.5, 6, 11, "R", 6)]


def test_subset_running_in_all_rows():
    # running CLASSIFIER(U): S row -> NULL; then the variable of the last U row so far
    cols, rows = run(q1(VQ.format(m="CLASSIFIER(U) AS cu, count(U.*) AS nu, LAST(U.p) AS lu",
                                  rows="ALL ROWS PER MATCH")), t=VSHAPE)
    assert rows == [(1, None, 0, None, 10), (2, "D", 1, 8, 8), (3, "D", 2, 6, 6),
                    (4, "R", 3, 9, 9), (5, "R", 4, 11, 11)]


def test_subset_in_define():
    # C AS C.p > max(U.p) with U = (A, B): A=1 (1), B=2,3 (2,3 rising), C must exceed
    # the max of A and B rows so far: row 4 (v 4) > 3 -> match A B B C.
    t = pd.DataFrame({"id": [1, 2, 3, 4], "p": [1, 2, 3, 4]})
    cols, rows = run(q1("MEASURES count(B.*) AS nb, C.id AS c PATTERN (A B+? C) "
                        "SUBSET U = (A, B) DEFINE B AS p > PREV(p), C AS C.p > max(U.p) + 1"),
                     t=t)
    # B+? reluctant: B=2, C=3: 3 > max(1,2)+1 = 3? no. B=2,3, C=4: 4 > 3+1? no -> no match
    # at row 1. row 2: A=2, B=3, C=4: 4 > 3+1 no. -> no matches at all.
    assert rows == []
    cols, rows = run(q1("MEASURES count(B.*) AS nb, C.id AS c PATTERN (A B+? C) "
                        "SUBSET U = (A, B) DEFINE B AS p > PREV(p), C AS C.p > max(U.p)"), t=t)
    # B=2, C=3: 3 > max(1, 2) = 2 -> yes (reluctant stops at one B)
    assert rows == [(1, 3)]


def test_skip_to_subset_variable():
    # SKIP TO LAST U (U = (D, R)): resume at the last row of U = the match's last row.
    # p 10 8 6 9 11 7 5 8: match 1: S=1, D=2,3, R=4,5 -> resume at row 5:
    # S=5(11), D=6(7), D=7(5), R=8(8) -> match 2. With SKIP TO FIRST U: resume at row 2:
    # S=2(8), D=3(6), R=4,5 -> match 2; resume at 3: S=3(6), D? 9<6 no -> none; row 4:
    # S=4(9), D? 11 < 9 no; row 5: S=5, D=6,7, R=8 -> match 3; resume at 6: S=6(7), D=7(5),
    # R=8 -> match 4; resume at 7: S=7, D? 8<5 no; row 8 none.
    t = pd.DataFrame({"id": range(1, 9), "p": [10, 8, 6, 9, 11, 7, 5, 8]})
    body = ("MEASURES S.id AS s, LAST(R.id) AS r AFTER MATCH SKIP TO {to} U "
            "PATTERN (S D+ R+) SUBSET U = (D, R) DEFINE D AS p < PREV(p), R AS p > PREV(p)")
    assert run(q1(body.format(to="LAST")), t=t)[1] == [(1, 5), (5, 8)]
    assert run(q1(body.format(to="")), t=t)[1] == [(1, 5), (5, 8)]
    assert srt(run(q1(body.format(to="FIRST")), t=t)[1]) == [(1, 5), (2, 5), (5, 8), (6, 8)]


# --- AFTER MATCH SKIP TO FIRST / LAST / variable ------------------------------------------

PEAKS = pd.DataFrame({"id": [1, 2, 3, 4, 5, 6, 7], "p": [1, 2, 3, 2, 3, 4, 1]})
PEAK_Q = q1("MEASURES A.id AS a, LAST(B.id) AS b, C.id AS c AFTER MATCH SKIP {skip} "
            "PATTERN (A B+ C) DEFINE B AS p > PREV(p), C AS p < PREV(p)")


@pytest.mark.parametrize("skip,expected", [
    # start 1: A=1, B=2,3, C=4 (2<3). Past last row -> 5: A=5(3), B=6(4), C=7(1).
    ("PAST LAST ROW", [(1, 3, 4), (5, 6, 7)]),
    # to last B (=3): A=3, B=4? 2>3 no. row 4: A=4(2), B=5,6, C=7 -> (4,6,7);
    # resume at 6: A=6, B=7? no; row 7 none.
    ("TO LAST B", [(1, 3, 4), (4, 6, 7)]),
    ("TO B", [(1, 3, 4), (4, 6, 7)]),  # TO B = TO LAST B
    # to first B (=2): A=2, B=3, C=4 -> (2,3,4); resume at 3: none; 4: (4,6,7);
    # resume at 5: A=5, B=6, C=7 -> (5,6,7); resume at 6: none.
    ("TO FIRST B", [(1, 3, 4), (2, 3, 4), (4, 6, 7), (5, 6, 7)]),
    # to C (=4): A=4, B=5,6, C=7 -> (4,6,7); resume at 7: none
    ("TO C", [(1, 3, 4), (4, 6, 7)]),
    ("TO NEXT ROW", [(1, 3, 4), (2, 3, 4), (4, 6, 7), (5, 6, 7)]),
])
def test_after_match_skip_forms(skip, expected):
    cols, rows = run(PEAK_Q.format(skip=skip), t=PEAKS)
    assert srt(rows) == expected


def test_skip_to_first_row_of_match_is_a_runtime_error():
    # SKIP TO A: A is the match's first row -> would loop forever -> exception
    with pytest.raises(CepRuntimeError):
        run(PEAK_Q.format(skip="TO A"), t=PEAKS)
    with pytest.raises(CepRuntimeError):
        run(PEAK_Q.format(skip="TO FIRST A"), t=PEAKS)


def test_skip_to_absent_variable_is_a_runtime_error():
    # (A | B) C with A AS p = 100: the match maps row 1 to B, nothing to A -> SKIP TO A
    # has no row to skip to -> exception
    t = pd.DataFrame({"id": [1, 2, 3], "p": [2, 5, 6]})
    with pytest.raises(CepRuntimeError):
        run(q1("MEASURES C.id AS c AFTER MATCH SKIP TO A PATTERN ((A | B) C) "
               "DEFINE A AS p = 100"), t=t)


def test_skip_to_variable_without_error_when_no_match():
    # no match at all -> nothing to skip -> no error, no rows
    t = pd.DataFrame({"id": [1, 2], "p": [2, 1]})
    assert run(PEAK_Q.format(skip="TO A"), t=t)[1] == []


# --- nested navigation, RUNNING/FINAL inside, physical nav outside the match ---------------

NAV = pd.DataFrame({"id": [1, 2, 3, 4, 5, 6], "p": [10, 20, 30, 40, 50, 60]})
NAV_BODY = "PATTERN (A B+ C) DEFINE B AS p < 45"  # A=1, B=2,3,4, C=5; row 6 outside


def test_nested_navigation_one_row():
    cols, rows = run(q1(
        "MEASURES PREV(FIRST(B.p, 1), 2) AS a, NEXT(LAST(B.p)) AS b, NEXT(LAST(B.p), 2) AS c, "
        "PREV(FIRST(A.p)) AS d, NEXT(LAST(C.p)) AS e, PREV(LAST(p), 3) AS f, "
        "NEXT(FIRST(B.p), 10) AS g " + NAV_BODY), t=NAV)
    # a: 2nd B = row 3, two back -> row 1 = 10. b: last B = 4 -> row 5 = 50.
    # c: row 6 = 60 (outside the match, inside the partition). d: before row 1 -> NULL.
    # e: row 6 = 60. f: last row 5 -> row 2 = 20. g: row 12 -> NULL.
    assert rows == [(10, 50, 60, None, 60, 20, None)]


def test_running_and_final_inside_navigation_all_rows():
    cols, rows = run(q1(
        "MEASURES PREV(RUNNING LAST(B.p)) AS pr, PREV(FINAL LAST(B.p)) AS pf, PREV(p) AS pp, "
        "NEXT(FINAL FIRST(B.p), 2) AS nf ALL ROWS PER MATCH " + NAV_BODY), t=NAV)
    # running last B: row1 none -> NULL; row2 -> row1 10; row3 -> 20; row4 -> 30;
    # row5 (C) -> last B is row 4 -> 30. FINAL last B = row 4 -> PREV -> 30 everywhere.
    # PREV(p): previous physical row (row 0 does not exist -> NULL).
    # NEXT(FINAL FIRST(B.p), 2): first B = row 2 -> row 4 = 40.
    assert cols == ["id", "pr", "pf", "pp", "nf", "p"]
    assert rows == [(1, None, 30, None, 40, 10), (2, 10, 30, 10, 40, 20),
                    (3, 20, 30, 20, 40, 30), (4, 30, 30, 30, 40, 40),
                    (5, 30, 30, 40, 40, 50)]


def test_physical_navigation_stops_at_partition_boundaries():
    # PREV/NEXT never cross partitions: first row of each partition has PREV NULL,
    # last row has NEXT NULL; rows outside the match but inside the partition are seen.
    t = pd.DataFrame({"sym": ["a", "a", "a", "b", "b"], "id": [1, 2, 3, 4, 5],
                      "p": [1, 2, 3, 4, 5]})
    base = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY id "
            "MEASURES A.id AS a, PREV(A.p) AS pp, NEXT(A.p) AS np "
            "AFTER MATCH SKIP TO NEXT ROW PATTERN (A) DEFINE A AS {cond})")
    assert run_sorted(base.format(cond="PREV(A.p) IS NULL"), t=t)[1] == [
        ("a", 1, None, 2), ("b", 4, None, 5)]
    assert run_sorted(base.format(cond="NEXT(A.p) IS NULL"), t=t)[1] == [
        ("a", 3, 2, None), ("b", 5, 4, None)]
    # DEFINE reading a row outside the match: B AS PREV(B.p, 2) = 1 -> row 3 (p 3) only
    # in partition a (two back = row 1); A=2, B=3.
    cols, rows = run_sorted("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY id "
                            "MEASURES A.id AS a, B.id AS b PATTERN (A B) "
                            "DEFINE B AS PREV(B.p, 2) = 1)", t=t)
    assert rows == [("a", 2, 3)]


def test_classifier_with_navigation():
    # X AS PREV(CLASSIFIER()) IS NULL OR PREV(CLASSIFIER()) = 'Y', Y AS PREV(CLASSIFIER()) = 'X'
    # In DEFINE the previous row's classifier: NULL before the match start.
    # (X | Y)+ greedily alternates X Y X Y X over 5 rows.
    cols, rows = run(q1(
        "MEASURES CLASSIFIER() AS c, PREV(CLASSIFIER()) AS pc, FIRST(CLASSIFIER()) AS fc, "
        "FINAL LAST(CLASSIFIER(), 1) AS lc1 ALL ROWS PER MATCH PATTERN ((X | Y)+) "
        "DEFINE X AS PREV(CLASSIFIER()) IS NULL OR PREV(CLASSIFIER()) = 'Y', "
        "Y AS PREV(CLASSIFIER()) = 'X'"), t=ID5)
    assert [r[1:5] for r in rows] == [("X", None, "X", "Y"), ("Y", "X", "X", "Y"),
                                      ("X", "Y", "X", "Y"), ("Y", "X", "X", "Y"),
                                      ("X", "Y", "X", "Y")]


def test_classifier_navigation_one_row():
    cols, rows = run(q1("MEASURES FIRST(CLASSIFIER()) AS f, LAST(CLASSIFIER(), 1) AS l1, "
                        "CLASSIFIER() AS c, NEXT(FIRST(CLASSIFIER())) AS n "
                        "PATTERN (A B C)"), t=ID5)
    assert rows == [("A", "B", "C", "B")]


# --- aggregates ---------------------------------------------------------------------------

AGG = pd.DataFrame({"id": [1, 2, 3, 4, 5], "p": [3, 1, 4, 1, 5]})


def test_aggregates_in_all_rows_are_running():
    # A=1, B=2..5. Running per row.
    cols, rows = run(q1("MEASURES count(*) AS n, count(B.*) AS nb, sum(B.p) AS s, "
                        "avg(p) AS a, min(B.p) AS mi, max(p) AS ma, array_agg(p) AS arr "
                        "ALL ROWS PER MATCH PATTERN (A B+)"), t=AGG)
    assert cols == ["id", "n", "nb", "s", "a", "mi", "ma", "arr", "p"]
    assert rows == [
        (1, 1, 0, None, 3.0, None, 3, [3], 3),
        (2, 2, 1, 1, 2.0, 1, 3, [3, 1], 1),
        (3, 3, 2, 5, 8 / 3, 1, 4, [3, 1, 4], 4),
        (4, 4, 3, 6, 2.25, 1, 4, [3, 1, 4, 1], 1),
        (5, 5, 4, 11, 2.8, 1, 5, [3, 1, 4, 1, 5], 5),
    ]


def test_aggregates_one_row_and_final():
    cols, rows = run(q1("MEASURES count(*) AS n, count(A.*) AS na, sum(B.p) AS s, "
                        "avg(B.p) AS a, min(p) AS mi, max(B.p) AS ma, array_agg(B.p) AS arr, "
                        "count(B.p) AS cb PATTERN (A B+)"), t=AGG)
    assert rows == [(5, 1, 11, 2.75, 1, 5, [1, 4, 1, 5], 4)]


def test_aggregates_over_no_rows():
    # count over no rows = 0; every other aggregate (array_agg included) is NULL
    t = AGG[AGG.id <= 1]
    cols, rows = run(q1("MEASURES count(B.*) AS c, sum(B.p) AS s, avg(B.p) AS a, "
                        "max(B.p) AS m, array_agg(B.p) AS arr PATTERN (A B*)"), t=t)
    assert rows == [(0, None, None, None, None)]


def test_aggregates_in_define_include_the_current_row():
    # A AS sum(A.p) <= 6 over p 3 1 4 1 5: 3, 4 ok, 8 no -> (1-2); restart: 4, 5, 10 no ->
    # (3-4); 5 -> (5).
    cols, rows = run(q1("MEASURES count(*) AS n, sum(A.p) AS s PATTERN (A+) "
                        "DEFINE A AS sum(A.p) <= 6"), t=AGG)
    assert rows == [(2, 4), (2, 5), (1, 5)]
    # count(A.*) counts the tentative row: at most 2 rows per match
    cols, rows = run(q1("MEASURES count(*) AS n PATTERN (A+) DEFINE A AS count(A.*) <= 2"),
                     t=AGG)
    assert rows == [(2,), (2,), (1,)]
    # B AS B.p > avg(A.p): compare to the average of the A rows so far
    # start 1: A+ greedy; A AS p < 5 -> A=1..4 (3 1 4 1), B=5: 5 > 2.25 -> match.
    cols, rows = run(q1("MEASURES count(A.*) AS na, avg(A.p) AS a PATTERN (A+ B) "
                        "DEFINE A AS p < 5, B AS B.p > avg(A.p)"), t=AGG)
    assert rows == [(4, 2.25)]


def test_array_agg_and_max_in_define():
    # A AS max(A.p) - min(A.p) <= 2 (spread of the rows so far, current included):
    # 3; 3,1 (2) ok; 3,1,4 (3) no -> (1-2). restart row 3: 4; 4,1 (3) no -> (3). row 4:
    # 1; 1,5 (4) no -> (4). row 5: (5).
    cols, rows = run(q1("MEASURES array_agg(A.p) AS arr PATTERN (A+) "
                        "DEFINE A AS max(A.p) - min(A.p) <= 2"), t=AGG)
    assert rows == [([3, 1],), ([4],), ([1],), ([5],)]


# --- scalar functions and CASE in DEFINE / MEASURES ---------------------------------------

def test_scalar_functions_and_case_in_define_and_measures():
    t = pd.DataFrame({"id": [1, 2, 3, 4], "name": ["apple", "Banana", "berry", "cherry"],
                      "q": pd.array([1, None, 4, 9], dtype="Int64")})
    # X: lower(substr(name,1,1)) = 'a' -> row 1. Y: coalesce(q, 0) < 5 AND length >= 5:
    # row 2 (0, 6) yes, row 3 (4, 5) yes, row 4 (9) no. CASE in DEFINE on Z is unused.
    cols, rows = run(q1(
        "MEASURES concat(upper(X.name), '-', lower(LAST(Y.name))) AS tag, "
        "sum(coalesce(Y.q, 0)) AS sq, round(avg(Y.q), 1) AS aq, "
        "CASE WHEN count(Y.*) > 1 THEN 'many' ELSE 'one' END AS howmany, "
        "sqrt(LAST(Y.q)) AS rt, X.q * 2 + 1 AS lin, X.q / 4 AS frac, "
        "abs(X.q - 10) AS ab, substr(FIRST(Y.name), 2, 3) AS sub "
        "PATTERN (X Y+) DEFINE X AS lower(substr(name, 1, 1)) = 'a', "
        "Y AS coalesce(q, 0) < 5 AND length(name) >= 5 AND "
        "CASE WHEN q IS NULL THEN true WHEN q > 3 THEN true ELSE false END"), t=t)
    assert cols == ["tag", "sq", "aq", "howmany", "rt", "lin", "frac", "ab", "sub"]
    assert rows == [("APPLE-berry", 4, 4.0, "many", 2.0, 3, 0.25, 9, "ana")]


# --- through Spark: several clauses per statement, pattern views ---------------------------

SP_TICKS = pd.DataFrame({"sym": ["a"] * 5 + ["b"] * 4, "ts": [1, 2, 3, 4, 5, 1, 2, 3, 4],
                         "price": [5, 4, 3, 4, 6, 1, 2, 1, 3]})


def test_several_clauses_in_one_statement_spark(spark):
    import cepsql  # noqa: F401
    spark.createDataFrame(SP_TICKS).createOrReplaceTempView("cep_ticks_c")
    # downs: A B+ with B falling. a: 5 4 3 -> match (a, 5, 3); b: 2 1 -> (b, 2, 1).
    # ups: A B+ with B rising. a: 3 4 6 -> start 3? from row 1: B 4>5 no; row 2: 3>4 no;
    # row 3: A=3, B=4,6 -> (a, 3, 6). b: row1 A=1, B=2 -> (b,1,2); row 3: A=1, B=3 -> (b,1,3)
    sql = """
    WITH downs AS (
      SELECT * FROM cep_ticks_c MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts
        MEASURES A.price AS d_start, LAST(B.price) AS d_low PATTERN (A B+)
        DEFINE B AS price < PREV(price))
    )
    SELECT d.sym, d.d_start, d.d_low, u.u_start, u.u_high
    FROM downs d JOIN (
      SELECT * FROM cep_ticks_c MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts
        MEASURES A.price AS u_start, LAST(B.price) AS u_high PATTERN (A B+)
        DEFINE B AS price > PREV(price))
    ) u ON d.sym = u.sym
    ORDER BY d.sym, u.u_high"""
    got = [tuple(r) for r in spark.cep.sql(sql).collect()]
    assert got == [("a", 5, 3, 3, 6), ("b", 2, 1, 1, 2), ("b", 2, 1, 1, 3)]


def test_pattern_views_spark(spark):
    import cepsql  # noqa: F401
    spark.createDataFrame(SP_TICKS).createOrReplaceTempView("cep_ticks_v")
    spark.cep.sql("""CREATE OR REPLACE TEMPORARY VIEW cep_rises AS
        SELECT * FROM cep_ticks_v MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts
          MEASURES A.ts AS start_ts, LAST(B.price) AS high, MATCH_NUMBER() AS mn
          PATTERN (A B+) DEFINE B AS price > PREV(price))""")
    got = sorted(tuple(r) for r in spark.sql("SELECT * FROM cep_rises").collect())
    assert got == [("a", 3, 6, 1), ("b", 1, 2, 1), ("b", 3, 3, 2)]
    names = [v["name"] for v in spark.cep.views()]
    assert "cep_rises" in names
    view = next(v for v in spark.cep.views() if v["name"] == "cep_rises")
    assert "A B+" in view["pattern"] and "cep_ticks_v" in view["source"]
    spark.cep.sql("""CREATE TEMPORARY VIEW cep_falls AS
        SELECT * FROM cep_ticks_v MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts
          MEASURES A.ts AS start_ts PATTERN (A B+) DEFINE B AS price < PREV(price))""")
    # views over the same source form one workload
    assert sorted(spark.cep.workloads()["cep_ticks_v"]) == ["cep_falls", "cep_rises"]
    spark.cep.sql("DROP VIEW cep_falls")
    spark.cep.sql("DROP VIEW cep_rises")
    assert "cep_rises" not in [v["name"] for v in spark.cep.views()]
    assert not spark.catalog.tableExists("cep_rises")
