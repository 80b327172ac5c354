"""User mistakes in MATCH_RECOGNIZE raise a cepsql error class naming the problem, located
at the offending token (1-based line and column in the statement as written)."""
from __future__ import annotations

import pandas as pd
import pytest

import cepsql
from cepsql.errors import CepAnalysisError, CepError, CepSyntaxError
from support.sqlhelp import loc

T = pd.DataFrame({"id": [1, 2], "p": [1, 2]})

BASE = """SELECT *
FROM t MATCH_RECOGNIZE (
  ORDER BY id
  MEASURES {m} AS x
  {rows}
  PATTERN ({pat})
  {subset}
  DEFINE {d}
)"""


def stmt(m="A.p", pat="A B", d="B AS B.p > 0", rows="", subset=""):
    return BASE.format(m=m, pat=pat, d=d, rows=rows, subset=subset)


def check(sql: str, cls: type, needle: str, nth: int = 1, match: str | None = None):
    with pytest.raises(cls, match=match) as info:
        cepsql.match_recognize(sql, t=T)
    err = info.value
    assert (err.line, err.col) == loc(sql, needle, nth), str(err)
    assert err.sql == sql.rstrip().rstrip(";") or err.sql == sql
    return err


# --- syntax errors in PATTERN -------------------------------------------------------------

def test_empty_alternative_in_pattern():
    sql = stmt(pat="A | | B")
    check(sql, CepSyntaxError, "| B")  # the second '|' where a primary was expected


def test_unclosed_quantifier():
    sql = stmt(pat="A {3 B")
    check(sql, CepSyntaxError, "B)")  # expected ',' or '}' but found B


def test_illegal_character_in_pattern():
    sql = stmt(pat="A B!")
    check(sql, CepSyntaxError, "!", match="'!'")


def test_quantifier_after_quantifier():
    sql = stmt(pat="A+* B", d="A AS true")
    check(sql, CepSyntaxError, "* B")


def test_empty_pattern_text():
    # PATTERN () has nothing between the parentheses (the empty pattern is written (()))
    sql = stmt(pat="", d="A AS true")
    err = check(sql, CepSyntaxError, ")\n")  # at the ")" where a pattern was expected
    assert "PATTERN" in err.message


def test_unbalanced_parenthesis_is_located_in_the_users_text():
    # PATTERN (A B)) closes the clause early; whatever token is blamed, the error must
    # be a syntax error located in the statement as written (not in a rewritten text).
    sql = stmt(pat="A B)")
    with pytest.raises(CepSyntaxError) as info:
        cepsql.match_recognize(sql, t=T)
    err = info.value
    assert "__cep" not in str(err)
    assert err.line is not None and (err.line, err.col) >= loc(sql, "))")


# --- bad quantifier bounds ----------------------------------------------------------------

def test_quantifier_lower_bound_above_upper_bound():
    sql = stmt(pat="A{3,2} B")
    check(sql, CepSyntaxError, "{3,2}", match="3.*2")


def test_reluctant_quantifier_bad_bounds():
    sql = stmt(pat="A B{5,1}?")
    check(sql, CepSyntaxError, "{5,1}")


# --- unknown variables ---------------------------------------------------------------------

def test_define_of_a_variable_not_in_pattern():
    sql = stmt(d="C AS C.p > 0")
    check(sql, CepAnalysisError, "C AS", match="C")


def test_unknown_variable_inside_define_condition():
    sql = stmt(d="B AS A.p + Z.p > 0")
    check(sql, CepAnalysisError, "Z.p", match="Z")


def test_unknown_variable_in_measures():
    sql = stmt(m="LAST(Z.p) + 1")
    check(sql, CepAnalysisError, "Z.p", match="Z")


def test_unknown_variable_in_skip_to():
    sql = stmt(rows="AFTER MATCH SKIP TO LAST Q")
    check(sql, CepAnalysisError, "Q\n", match="Q")


def test_unknown_variable_in_subset():
    sql = stmt(subset="SUBSET U = (A, Q)")
    check(sql, CepAnalysisError, "Q)", match="Q")


# --- unknown columns ----------------------------------------------------------------------

def test_unknown_qualified_column_in_measures():
    sql = stmt(m="A.nope")
    check(sql, CepAnalysisError, "A.nope", match="nope")


def test_unknown_column_in_define():
    sql = stmt(d="B AS nope > 0")
    check(sql, CepAnalysisError, "nope", match="nope")


def test_unknown_column_in_order_by():
    sql = stmt().replace("ORDER BY id", "ORDER BY nope")
    check(sql, CepAnalysisError, "nope", match="nope")


# --- FINAL in DEFINE, invalid nesting, misplaced functions ----------------------------------

def test_final_navigation_in_define():
    sql = stmt(d="B AS FINAL LAST(B.p) > 0")
    check(sql, CepAnalysisError, "FINAL", match="FINAL")


def test_final_aggregate_in_define():
    sql = stmt(d="B AS FINAL count(B.*) > 0")
    check(sql, CepAnalysisError, "FINAL", match="FINAL")


def test_physical_navigation_inside_logical_is_rejected():
    sql = stmt(d="B AS FIRST(PREV(B.p)) > 0")
    check(sql, CepAnalysisError, "PREV", match="PREV")


def test_aggregate_over_two_variables_is_rejected():
    sql = stmt(m="sum(A.p + B.p)")
    check(sql, CepAnalysisError, "sum", match="same pattern variable")


def test_exclusion_with_unmatched_rows_is_rejected():
    # SQL:2016 / Trino: pattern exclusion is not allowed with ALL ROWS PER MATCH
    # WITH UNMATCHED ROWS
    sql = stmt(pat="A {- B -}", rows="ALL ROWS PER MATCH WITH UNMATCHED ROWS")
    check(sql, CepAnalysisError, "{-")


def test_every_error_is_a_cep_error():
    for sql in (stmt(pat="A |"), stmt(d="Q AS true"), stmt(m="A.zzz")):
        with pytest.raises(CepError):
            cepsql.match_recognize(sql, t=T)


def test_cross_row_function_error_lists_what_is_supported():
    from cepsql.errors import CepUnsupportedError
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.s AS x PATTERN (A B) "
           "DEFINE B AS concat(B.s, A.s) = 'ba') m")
    t = pd.DataFrame({"ts": [1, 2], "s": ["a", "b"]})
    with pytest.raises(CepUnsupportedError) as err:
        cepsql.match_recognize(sql, t=t)
    assert "functions that combine different rows: abs, bround, ceil" in err.value.message
    assert (err.value.line, err.value.col) == (1, sql.index("concat") + 1)
