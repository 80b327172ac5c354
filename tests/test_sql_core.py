"""SQL:2016 MATCH_RECOGNIZE core constructs (issue 2), through cepsql.match_recognize.

Every expected row below is derived by hand from the standard's rules (Trino's documented
behaviour where the standard leaves room); the derivation is written next to each case.
Output order between partitions/matches is not specified by the standard, so multi-match
results are compared sorted unless the order itself is what is being tested.
"""
from __future__ import annotations

import pandas as pd
import pyarrow as pa

from cepsql.planning.options import planner_options
from support.sqlhelp import run, run_sorted, srt

# ids 1..5, p = 5 3 4 2 6
T5 = pd.DataFrame({"id": [1, 2, 3, 4, 5], "p": [5, 3, 4, 2, 6]})
# ids 1..6, p rising by 10
T6 = pd.DataFrame({"id": [1, 2, 3, 4, 5, 6], "p": [10, 20, 30, 40, 50, 60]})


# --- DEFINE ---------------------------------------------------------------------------

def test_undefined_variable_is_always_true():
    # A has no DEFINE (true). Start 1: A=1(5), B=2: 3 > 5 false -> no match at 1.
    # Start 2: A=2(3), B=3: 4 > 3 -> match (2,3). Skip past last row -> start 4:
    # A=4(2), B=5: 6 > 2 -> match (4,5).
    cols, rows = run("""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id
        MEASURES A.id AS a, B.id AS b PATTERN (A B) DEFINE B AS B.p > A.p)""", t=T5)
    assert cols == ["a", "b"]
    assert rows == [(2, 3), (4, 5)]


def test_define_sees_other_variables_and_unqualified_current_row():
    # B AS p > A.p: unqualified p = current row; A.p = the row mapped to A.
    # start 1: A=1(5), B=2: 3>5 no. start 2: A=2(3), B=3: 4>3, C (undefined) = 4 -> (2,3,4).
    # start 5: A=5, no more rows -> done.
    q = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id
        MEASURES A.id AS a, B.id AS b, C.id AS c PATTERN (A B C)
        DEFINE B AS p > A.p)"""
    assert run(q, t=T5) == (["a", "b", "c"], [(2, 3, 4)])


def test_define_variable_without_rows_yet_is_null():
    # A AS B.p IS NULL: while A rows are matched B has no rows -> B.p is NULL -> true.
    # B AS B.p > A.p, A.p = last A row. Greedy A+ takes rows 1..5, B needs a row ->
    # backtrack to A = 1..4, B = 5: 6 > 2 -> match.
    q = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id
        MEASURES count(A.*) AS na, B.id AS b PATTERN (A+ B)
        DEFINE A AS B.p IS NULL, B AS B.p > A.p)"""
    assert run(q, t=T5) == (["na", "b"], [(4, 5)])


def test_define_null_condition_is_false():
    # B AS B.p > PREV(B.p): at a NULL p the comparison is NULL -> not B.
    t = pd.DataFrame({"id": [1, 2, 3, 4], "p": [1, None, 3, 4]}, dtype="Int64")
    # start 1: A=1, B=2: NULL > 1 -> NULL -> no. start 2: A=2, B=3: 3 > NULL -> NULL no.
    # start 3: A=3, B=4: 4 > 3 -> match (3, 4).
    cols, rows = run("""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id
        MEASURES A.id AS a, LAST(B.id) AS b PATTERN (A B+) DEFINE B AS B.p > PREV(B.p))""", t=t)
    assert rows == [(3, 4)]


# --- navigation -----------------------------------------------------------------------

def test_prev_next_with_offsets_in_define_and_measures():
    # A AS PREV(A.p, 2) IS NOT NULL AND NEXT(A.p, 2) IS NOT NULL: rows 3 and 4 only
    # (rows 1,2 have no row two back; rows 5,6 none two ahead). Each is a 1-row match.
    # MEASURES PREV(A.p) = p one row back; PREV(A.p, 2); NEXT(A.p, 2).
    cols, rows = run("""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id
        MEASURES A.id AS a, PREV(A.p) AS p1, PREV(A.p, 2) AS p2, NEXT(A.p, 2) AS n2,
                 NEXT(A.p) AS n1
        PATTERN (A)
        DEFINE A AS PREV(A.p, 2) IS NOT NULL AND NEXT(A.p, 2) IS NOT NULL)""", t=T6)
    assert cols == ["a", "p1", "p2", "n2", "n1"]
    assert rows == [(3, 20, 10, 50, 40), (4, 30, 20, 60, 50)]


def test_first_last_with_offsets():
    # PATTERN (A B+), B AS B.p > PREV(B.p) on rising T6 rows 1..5 only (filter id <= 5):
    # A=1, B=2,3,4,5 (p 20 30 40 50).
    # FIRST(B.p)=20, FIRST(B.p,1)=30, LAST(B.p)=50, LAST(B.p,1)=40, LAST(B.p,3)=20,
    # LAST(B.p,4)=NULL (only 4 B rows), FIRST(B.p,5)=NULL, FIRST(p)=10 (all rows),
    # LAST(p, 1)=40.
    t = T6[T6.id <= 5]
    cols, rows = run("""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id
        MEASURES FIRST(B.p) AS f0, FIRST(B.p, 1) AS f1, LAST(B.p) AS l0, LAST(B.p, 1) AS l1,
                 LAST(B.p, 3) AS l3, LAST(B.p, 4) AS l4, FIRST(B.p, 5) AS f5,
                 FIRST(p) AS fp, LAST(p, 1) AS lp1
        PATTERN (A B+) DEFINE B AS B.p > PREV(B.p))""", t=t)
    assert cols == ["f0", "f1", "l0", "l1", "l3", "l4", "f5", "fp", "lp1"]
    assert rows == [(20, 30, 50, 40, 20, None, None, 10, 40)]


def test_first_last_in_define_use_running_rows():
    # B AS B.p > FIRST(B.p): tentatively the current row is B; for the first B,
    # FIRST(B.p) is the current row itself -> p > p false, so B can never be mapped.
    # C AS LAST(C.p, 1) IS NULL: true only for the first C row -> C matches once.
    cols, rows = run("""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id
        MEASURES count(*) AS n, LAST(C.id) AS c PATTERN (A C+)
        DEFINE C AS LAST(C.p, 1) IS NULL)""", t=T6)
    # start 1: A=1, C=2, C at 3: LAST(C.p,1) = row 2 -> not null -> stop. match (1,2).
    # start 3: (3,4); start 5: (5,6)
    assert rows == [(2, 2), (2, 4), (2, 6)]
    assert run("""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES count(*) AS n
        PATTERN (A B) DEFINE B AS B.p > FIRST(B.p))""", t=T6)[1] == []


def test_running_vs_final_in_all_rows():
    # A=1, B=2..5 (p 20..50). Per output row (RUNNING = rows up to the current row):
    # id1 (A): RUNNING LAST(B.p) NULL, FINAL 50, default (running) NULL, FIRST(B.p,1) NULL
    # id2 (B): 20, 50, 20, NULL (one B so far)
    # id3: 30, 50, 30, 30 ; id4: 40, 50, 40, 30 ; id5: 50, 50, 50, 30
    # FINAL LAST(B.p, 1) = 40 everywhere; FINAL count(*) = 5; running count(*) = 1..5
    t = T6[T6.id <= 5]
    cols, rows = run("""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id
        MEASURES RUNNING LAST(B.p) AS rl, FINAL LAST(B.p) AS fl, LAST(B.p) AS l,
                 FIRST(B.p, 1) AS f1, FINAL LAST(B.p, 1) AS fl1,
                 count(*) AS rc, FINAL count(*) AS fc
        ALL ROWS PER MATCH
        PATTERN (A B+) DEFINE B AS B.p > PREV(B.p))""", t=t)
    assert cols == ["id", "rl", "fl", "l", "f1", "fl1", "rc", "fc", "p"]
    assert rows == [
        (1, None, 50, None, None, 40, 1, 5, 10),
        (2, 20, 50, 20, None, 40, 2, 5, 20),
        (3, 30, 50, 30, 30, 40, 3, 5, 30),
        (4, 40, 50, 40, 30, 40, 4, 5, 40),
        (5, 50, 50, 50, 30, 40, 5, 5, 50),
    ]


def test_one_row_per_match_is_final_semantics():
    # In ONE ROW PER MATCH running = final: both read the whole match.
    t = T6[T6.id <= 5]
    cols, rows = run("""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id
        MEASURES RUNNING LAST(B.p) AS rl, FINAL LAST(B.p) AS fl, B.p AS bp
        PATTERN (A B+) DEFINE B AS B.p > PREV(B.p))""", t=t)
    assert rows == [(50, 50, 50)]


# --- CLASSIFIER / MATCH_NUMBER ----------------------------------------------------------

def test_classifier_and_match_number_per_partition():
    # sym a: p 3 2 1 5 4 6. Row1: DOWN needs p < PREV(p), PREV is NULL -> unmatched.
    # Row2..4: DOWN DOWN UP (match 1); rows 5..6: DOWN (4<5) UP (6>4) (match 2).
    # sym b: p 1 0 2: row1 unmatched; rows 2..3: DOWN UP (match 1 of partition b).
    t = pd.DataFrame({"sym": ["a"] * 6 + ["b"] * 3, "ts": [1, 2, 3, 4, 5, 6, 1, 2, 3],
                      "p": [3, 2, 1, 5, 4, 6, 1, 0, 2]})
    cols, rows = run_sorted("""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts
        MEASURES CLASSIFIER() AS cls, MATCH_NUMBER() AS mn
        ALL ROWS PER MATCH
        PATTERN (DOWN+ UP) DEFINE DOWN AS p < PREV(p), UP AS p > PREV(p))""", t=t)
    assert cols == ["sym", "ts", "cls", "mn", "p"]
    assert rows == [
        ("a", 2, "DOWN", 1, 2), ("a", 3, "DOWN", 1, 1), ("a", 4, "UP", 1, 5),
        ("a", 5, "DOWN", 2, 4), ("a", 6, "UP", 2, 6),
        ("b", 2, "DOWN", 1, 0), ("b", 3, "UP", 1, 2),
    ]
    # ONE ROW PER MATCH: CLASSIFIER() = variable of the last row; MATCH_NUMBER is bigint
    import cepsql
    df = cepsql.match_recognize("""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym
        ORDER BY ts MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS cls, count(DOWN.*) AS nd
        PATTERN (DOWN+ UP) DEFINE DOWN AS p < PREV(p), UP AS p > PREV(p))""", t=t)
    assert list(df.columns) == ["sym", "mn", "cls", "nd"]
    assert str(df["mn"].dtype) == "Int64"
    assert srt(list(df.astype(object).itertuples(index=False, name=None))) == [
        ("a", 1, "UP", 2), ("a", 2, "UP", 1), ("b", 1, "UP", 1)]


def test_quoted_variable_names_keep_their_case():
    # "b" (quoted) is a different variable from B; CLASSIFIER returns it as written.
    t = pd.DataFrame({"id": [1, 2], "p": [1, 2]})
    cols, rows = run("""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id
        MEASURES CLASSIFIER() AS c, MATCH_NUMBER() AS mn ALL ROWS PER MATCH
        PATTERN (a "b") DEFINE "b" AS "b".p > a.p)""", t=t)
    assert rows == [(1, "A", 1, 1), (2, "b", 1, 2)]


# --- MEASURES expressions ----------------------------------------------------------------

def test_measure_expressions_arithmetic_case_functions():
    # A=1 (p 10, name 'start'), B=2..4 (p 20 30 40; row 5 p 35 fails B).
    t = pd.DataFrame({"id": [1, 2, 3, 4, 5], "p": [10, 20, 30, 40, 35],
                      "name": ["start", "x", "y", "Zed", "w"]})
    cols, rows = run("""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id
        MEASURES LAST(B.p) - A.p AS gain,
                 LAST(B.p) / A.p AS ratio,
                 A.p * 2 + 1 AS lin,
                 CASE WHEN LAST(B.p) > 35 THEN 'big' WHEN LAST(B.p) > 20 THEN 'mid'
                      ELSE 'small' END AS size,
                 upper(A.name) AS up, lower(LAST(B.name)) AS lo,
                 concat(A.name, '-', LAST(B.name)) AS cat,
                 abs(A.p - LAST(B.p)) AS dist,
                 length(LAST(B.name)) AS len,
                 coalesce(NEXT(LAST(B.p), 5), -1) AS co
        PATTERN (A B+) DEFINE B AS B.p > PREV(B.p))""", t=t)
    assert cols == ["gain", "ratio", "lin", "size", "up", "lo", "cat", "dist", "len", "co"]
    # gain 40-10=30; ratio 40/10 = 4.0 (floating division); lin 21; size 'big';
    # NEXT(LAST(B.p), 5) is beyond the partition -> NULL -> coalesce -1
    assert rows == [(30, 4.0, 21, "big", "START", "zed", "start-Zed", 30, 3, -1)]
    assert isinstance(rows[0][1], float)


def test_division_by_zero_is_null_without_ansi():
    # under ANSI (the default) Spark raises DIVIDE_BY_ZERO: tests/test_hardening_frontend.py
    t = pd.DataFrame({"id": [1], "p": [0]})
    with planner_options(ansi=False):
        cols, rows = run("""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id
            MEASURES 1 / A.p AS q PATTERN (A))""", t=t)
    assert rows == [(None,)]


# --- output layout --------------------------------------------------------------------------

LAYOUT = pd.DataFrame({"p": [1, 2, 3, 4], "sym": ["a", "a", "b", "b"],
                       "note": ["w", "x", "y", "z"], "ts": [1, 2, 1, 2]})


def test_one_row_per_match_layout_partition_cols_then_measures():
    cols, rows = run_sorted("""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts
        MEASURES LAST(B.note) AS last_note, A.p AS first_p
        ONE ROW PER MATCH PATTERN (A B))""", t=LAYOUT)
    assert cols == ["sym", "last_note", "first_p"]
    assert rows == [("a", "x", 1), ("b", "z", 3)]


def test_all_rows_per_match_layout():
    # partition cols, order-by cols, measures, remaining input columns in input order
    cols, rows = run_sorted("""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts
        MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH PATTERN (A B))""", t=LAYOUT)
    assert cols == ["sym", "ts", "c", "p", "note"]
    assert rows == [("a", 1, "A", 1, "w"), ("a", 2, "B", 2, "x"),
                    ("b", 1, "A", 3, "y"), ("b", 2, "B", 4, "z")]


def test_all_rows_layout_with_several_order_columns_and_no_measures():
    t = pd.DataFrame({"v": [9, 8], "k": [1, 1], "s": [2, 1], "g": ["x", "x"]})
    cols, rows = run("""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY g ORDER BY k, s
        ALL ROWS PER MATCH PATTERN (A B))""", t=t)
    # order (k, s): (1,1) v 8 then (1,2) v 9
    assert cols == ["g", "k", "s", "v"]
    assert rows == [("x", 1, 1, 8), ("x", 1, 2, 9)]


# --- AFTER MATCH SKIP PAST LAST ROW / TO NEXT ROW ------------------------------------------

def test_skip_past_last_row_and_to_next_row():
    t = pd.DataFrame({"id": [1, 2, 3, 4], "p": [1, 2, 3, 4]})
    q = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id
        MEASURES A.id AS a, LAST(B.id) AS b, MATCH_NUMBER() AS mn
        AFTER MATCH SKIP {skip} PATTERN (A B+) DEFINE B AS B.p > PREV(B.p))"""
    # past last row: one match 1..4
    assert run(q.format(skip="PAST LAST ROW"), t=t)[1] == [(1, 4, 1)]
    # to next row: matches start at 1, 2, 3 (row 4 has no B after it); they overlap
    assert srt(run(q.format(skip="TO NEXT ROW"), t=t)[1]) == [(1, 4, 1), (2, 4, 2), (3, 4, 3)]


def test_skip_to_next_row_all_rows_repeats_rows():
    t = pd.DataFrame({"id": [1, 2, 3], "p": [1, 2, 3]})
    cols, rows = run_sorted("""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id
        MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS c ALL ROWS PER MATCH
        AFTER MATCH SKIP TO NEXT ROW PATTERN (A B) DEFINE B AS B.p > PREV(B.p))""", t=t)
    # match 1: rows 1 (A), 2 (B); match 2: rows 2 (A), 3 (B)
    assert cols == ["id", "mn", "c", "p"]
    assert rows == [(1, 1, "A", 1), (2, 1, "B", 2), (2, 2, "A", 2), (3, 2, "B", 3)]


# --- PARTITION BY / ORDER BY -----------------------------------------------------------------

def test_partition_by_several_columns():
    t = pd.DataFrame({"a": [1, 1, 1, 2], "b": ["x", "y", "x", "x"], "ts": [1, 2, 3, 4],
                      "p": [5, 6, 7, 8]})
    cols, rows = run_sorted("""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY a, b ORDER BY ts
        MEASURES count(*) AS n, sum(p) AS s PATTERN (A+))""", t=t)
    assert cols == ["a", "b", "n", "s"]
    assert rows == [(1, "x", 2, 12), (1, "y", 1, 6), (2, "x", 1, 8)]


def test_partition_by_expression():
    # lower(sym) puts 'a'/'A' together and 'B'/'b' together; the output column is named
    # like Spark names the expression: lower(sym).
    t = pd.DataFrame({"sym": ["a", "B", "b", "A"], "id": [1, 2, 3, 4], "p": [10, 8, 6, 7]})
    cols, rows = run_sorted("""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY lower(sym)
        ORDER BY id MEASURES count(*) AS n, FIRST(p) AS f, LAST(p) AS l PATTERN (A+))""", t=t)
    assert cols == ["lower(sym)", "n", "f", "l"]
    assert rows == [("a", 2, 10, 7), ("b", 2, 8, 6)]


ORDERED = pd.DataFrame({"ts": pd.array([1, None, 3, 2], dtype="Int64"),
                        "v": ["one", "null", "three", "two"]})
ORDER_Q = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY {order}
    MEASURES A.v AS a, B.v AS b, C.v AS c, D.v AS d PATTERN (A B C D))"""


def test_order_by_asc_default_nulls_first():
    # Spark defaults: ASC -> NULLS FIRST
    assert run(ORDER_Q.format(order="ts"), t=ORDERED)[1] == [("null", "one", "two", "three")]
    assert run(ORDER_Q.format(order="ts ASC"), t=ORDERED)[1] == [("null", "one", "two", "three")]


def test_order_by_desc_default_nulls_last():
    # Spark defaults: DESC -> NULLS LAST
    assert run(ORDER_Q.format(order="ts DESC"), t=ORDERED)[1] == [("three", "two", "one", "null")]


def test_order_by_explicit_null_placement():
    assert run(ORDER_Q.format(order="ts DESC NULLS FIRST"), t=ORDERED)[1] == [
        ("null", "three", "two", "one")]
    assert run(ORDER_Q.format(order="ts ASC NULLS LAST"), t=ORDERED)[1] == [
        ("one", "two", "three", "null")]


def test_prev_follows_descending_order():
    # ORDER BY ts DESC: rows 3,2,1 -> B AS p < PREV(p) holds on every later row.
    t = pd.DataFrame({"ts": [1, 2, 3], "p": [1, 2, 3]})
    cols, rows = run("""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts DESC
        MEASURES A.ts AS a, LAST(B.ts) AS b, count(B.*) AS nb PATTERN (A B+)
        DEFINE B AS p < PREV(p))""", t=t)
    assert rows == [(3, 1, 2)]


def test_no_partition_by_is_one_partition():
    t = pd.DataFrame({"sym": ["a", "b", "a"], "ts": [1, 2, 3], "p": [1, 2, 3]})
    cols, rows = run("""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts
        MEASURES count(*) AS n, FIRST(sym) AS f, LAST(sym) AS l PATTERN (A+))""", t=t)
    assert cols == ["n", "f", "l"]
    assert rows == [(3, "a", "a")]


def test_no_order_by_orders_by_all_columns():
    # Without ORDER BY every row ties; the engine's tie break orders by the input columns
    # ascending, nulls first. Input order 3,1,2 sorted -> 1,2,3, so a strictly rising
    # A B C matches (in input order 3,1,2 it would not).
    t = pd.DataFrame({"v": [3, 1, 2]})
    cols, rows = run("""SELECT * FROM t MATCH_RECOGNIZE (
        MEASURES A.v AS a, B.v AS b, C.v AS c PATTERN (A B C)
        DEFINE B AS B.v > A.v, C AS C.v > B.v)""", t=t)
    assert rows == [(1, 2, 3)]


def test_order_by_ties_broken_by_remaining_columns():
    # All ts tie; remaining columns (x, y) ascending, nulls first:
    # (None,'q'), (1,'z'), (2,'a'), (2,'b')
    t = pd.DataFrame({"ts": [1, 1, 1, 1], "x": pd.array([2, 1, 2, None], dtype="Int64"),
                      "y": ["b", "z", "a", "q"]})
    cols, rows = run("""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts
        MEASURES A.y AS a, B.y AS b, C.y AS c, D.y AS d PATTERN (A B C D))""", t=t)
    assert rows == [("q", "z", "a", "b")]


# --- empty input, NULLs -------------------------------------------------------------------------

def test_empty_input_one_row_and_all_rows():
    t = pa.table({"sym": pa.array([], pa.string()), "ts": pa.array([], pa.int64()),
                  "p": pa.array([], pa.float64())})
    cols, rows = run("""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts
        MEASURES count(*) AS n PATTERN (A+))""", t=t)
    assert (cols, rows) == (["sym", "n"], [])
    cols, rows = run("""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts
        MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH PATTERN (A+))""", t=t)
    assert (cols, rows) == (["sym", "ts", "c", "p"], [])


def test_null_partition_key_is_its_own_partition():
    # sym a: p 1 then NULL -> B: NULL > 1 is NULL -> no match.
    # sym NULL: p 5, 6 -> match (5, 6). NULL keys group together.
    t = pd.DataFrame({"sym": ["a", None, "a", None], "ts": [1, 1, 2, 2],
                      "p": pd.array([1, 5, None, 6], dtype="Int64")})
    cols, rows = run("""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts
        MEASURES A.p AS a, B.p AS b PATTERN (A B) DEFINE B AS B.p > A.p)""", t=t)
    assert cols == ["sym", "a", "b"]
    assert rows == [(None, 5, 6)]


def test_null_values_in_measures():
    # A=1 (p NULL), B=2 (p 4): arithmetic with NULL is NULL; coalesce picks the first
    # non-null; count(A.p) skips NULL, count(A.*) does not.
    t = pd.DataFrame({"id": [1, 2], "p": pd.array([None, 4], dtype="Int64")})
    cols, rows = run("""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id
        MEASURES A.p + B.p AS s, coalesce(A.p, B.p) AS co, count(A.p) AS ca,
                 count(A.*) AS cs, A.p IS NULL AS isn
        PATTERN (A B))""", t=t)
    assert rows == [(None, 4, 0, 1, True)]


def test_coalesce_of_navigation_in_define_runs_in_a_subprocess():
    # coalesce(PREV(p), 0) = 0 holds only on row 1 (no previous row -> NULL -> 0).
    # Run in a child process: this crashed the interpreter (heap corruption) once.
    import subprocess
    import sys
    code = ("import pandas as pd, cepsql\n"
            "t = pd.DataFrame({'id': [1, 2, 3], 'p': [5, 3, 4]})\n"
            "df = cepsql.match_recognize(\"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id "
            "MEASURES A.id AS a AFTER MATCH SKIP TO NEXT ROW PATTERN (A) "
            "DEFINE A AS coalesce(PREV(p), 0) = 0)\", t=t)\n"
            "print(df['a'].tolist())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[1]"
