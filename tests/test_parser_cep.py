"""CEP-mode syntax: STRATEGY, WITHIN and the SEQ/AND/OR/NOT/KL pattern operators."""
import pytest

from cepsql.algebra.pattern import (Alternation, Concat, Negation, Permute, Quantified, Var,
                                    pattern_to_text, pattern_variables)
from cepsql.algebra.spec import Window
from cepsql.parse import find_match_recognize
from cepsql.parse.pattern_parser import parse_pattern
from cepsql.errors import CepAnalysisError, CepSyntaxError

A, B, C, D, E = (Var(x) for x in "ABCDE")


def clause(body):
    sql = f"SELECT * FROM t MATCH_RECOGNIZE ({body})"
    return find_match_recognize(sql)[0].spec


def error_of(body, kind=CepSyntaxError):
    sql = f"SELECT * FROM t MATCH_RECOGNIZE ({body})"
    with pytest.raises(kind) as info:
        find_match_recognize(sql)
    return sql, info.value


@pytest.mark.parametrize("name", ["STRICT_CONTIGUITY", "PARTITION_CONTIGUITY",
                                  "SKIP_TILL_NEXT_MATCH", "skip_till_any_match"])
def test_strategy_names(name):
    spec = clause(f"ORDER BY ts STRATEGY {name} PATTERN (a b)")
    assert spec.strategy == name.upper() and spec.window is None


def test_strategy_after_sql_clauses_and_measures():
    spec = clause("PARTITION BY p ORDER BY ts MEASURES a.x AS ax ALL ROWS PER MATCH "
                  "AFTER MATCH SKIP PAST LAST ROW STRATEGY SKIP_TILL_ANY_MATCH "
                  "PATTERN (SEQ(a, b)) WITHIN 10 ROWS DEFINE a AS a.x > 0")
    assert spec.strategy == "SKIP_TILL_ANY_MATCH" and spec.rows_per_match == "ALL"
    assert spec.after_match_skip.explicit and spec.window == Window("rows", 10)
    assert list(spec.defines) == ["A"]


def test_strategy_is_not_taken_as_a_measure_name():
    sql, err = error_of("ORDER BY ts MEASURES a.x STRATEGY SKIP_TILL_ANY_MATCH PATTERN (a)")
    assert "measure needs a name" in err.message and err.pos == sql.index("a.x")


def test_after_match_explicit_flag():
    spec = clause("ORDER BY ts STRATEGY SKIP_TILL_ANY_MATCH PATTERN (a)")
    assert not spec.after_match_skip.explicit
    assert clause("ORDER BY ts AFTER MATCH SKIP TO NEXT ROW PATTERN (a)").after_match_skip.explicit


@pytest.mark.parametrize("text,micros", [
    ("INTERVAL '20' MINUTE", 20 * 60_000_000), ("INTERVAL 20 MINUTES", 20 * 60_000_000),
    ("INTERVAL '3' HOURS", 3 * 3_600_000_000), ("INTERVAL '1' DAY", 86_400_000_000),
    ("INTERVAL '500' MILLISECOND", 500_000), ("INTERVAL 2 SECONDS", 2_000_000),
    ("INTERVAL '1.5' HOUR", 5_400_000_000), ("INTERVAL '12 hours'", 12 * 3_600_000_000)])
def test_within_interval(text, micros):
    spec = clause(f"ORDER BY ts STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (a b) WITHIN {text}")
    assert spec.window == Window("time", micros)


def test_within_without_strategy_and_before_define():
    spec = clause("ORDER BY ts PATTERN (a b+) WITHIN 5 ROWS SUBSET u = (a, b) DEFINE b AS true")
    assert spec.strategy is None and spec.window == Window("rows", 5)
    assert spec.subsets == {"U": ("A", "B")}


def test_operators_map_to_nodes():
    assert parse_pattern("SEQ(a, b, c)") == Concat((A, B, C))
    assert parse_pattern("OR(a, b)") == Alternation((A, B))
    assert parse_pattern("AND(a, b)") == Permute((A, B))
    assert parse_pattern("NOT(a)") == Negation(A)
    assert parse_pattern("KL(a)") == Quantified(A, 1, None, True)
    assert parse_pattern("KL(a, 2, 5)") == Quantified(A, 2, 5, True)
    assert parse_pattern("KL(a, 0)") == Quantified(A, 0, None, True)
    assert parse_pattern("KL(a, 2, )") == Quantified(A, 2, None, True)


def test_nesting_and_mixing_with_regex():
    node = parse_pattern("SEQ(a, b+ c, OR(d, e))")
    assert node == Concat((A, Quantified(B, 1, None), C, Alternation((D, E))))
    node = parse_pattern("a KL(SEQ(b, c)) | AND(d, NOT(e), SEQ(a, b))")
    assert node == Alternation((Concat((A, Quantified(Concat((B, C)), 1, None))),
                                Permute((D, Negation(E), Concat((A, B))))))
    assert parse_pattern("SEQ(SEQ(a, b), c)") == Concat((A, B, C))
    assert parse_pattern("(a | b) NOT(c) d") == Concat((Alternation((A, B)), Negation(C), D))


def test_operator_names_are_variables_without_paren():
    assert parse_pattern("seq and") == Concat((Var("SEQ"), Var("AND")))
    assert parse_pattern("kl+ not") == Concat((Quantified(Var("KL"), 1, None), Var("NOT")))
    assert parse_pattern('"SEQ"(a)') == Concat((Var("SEQ"), A))


def test_round_trip_text():
    for text in ["SEQ(a, NOT(b), KL(c))", "AND(a, NOT(b), c)", "seq KL(a, 2, 3)",
                 "OR(SEQ(a, b), c)", "a NOT(OR(b, c)) d"]:
        node = parse_pattern(text)
        assert parse_pattern(pattern_to_text(node)) == node
    assert pattern_to_text(parse_pattern("SEQ(a, NOT(b), c)")) == "A NOT(B) C"
    assert pattern_variables(parse_pattern("SEQ(a, NOT(b), c)")) == ["A", "B", "C"]


def test_negated_variable_may_be_defined():
    spec = clause("ORDER BY ts STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, NOT(n), b)) "
                  "DEFINE n AS n.x > a.x")
    assert spec.variables == ["A", "N", "B"] and "N" in spec.defines


# --- errors with positions ---------------------------------------------------------------

def test_error_unknown_strategy():
    sql, err = error_of("ORDER BY ts STRATEGY SKIP_TILL_SOME PATTERN (a)")
    assert err.pos == sql.index("SKIP_TILL_SOME") and "unknown STRATEGY" in str(err)
    assert err.line == 1 and err.col == err.pos + 1


def test_error_strategy_missing_name():
    sql, err = error_of("ORDER BY ts STRATEGY PATTERN (a)")
    assert "PATTERN" in str(err)


def test_error_not_alone():
    sql, err = error_of("ORDER BY ts STRATEGY SKIP_TILL_ANY_MATCH PATTERN (NOT(a))")
    assert err.pos == sql.index("NOT(") and "whole pattern" in err.message
    sql, err = error_of("ORDER BY ts STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(NOT(a), NOT(b)))")
    assert err.pos == sql.index("NOT(") and "positive" in err.message


@pytest.mark.parametrize("pattern,what", [("OR(a, NOT(b))", "OR"), ("KL(NOT(a))", "KL"),
                                          ("a NOT(b)*", "KL"), ("SEQ(a, NOT(NOT(b)))", "nested")])
def test_error_not_placement(pattern, what):
    sql, err = error_of(f"ORDER BY ts STRATEGY SKIP_TILL_ANY_MATCH PATTERN ({pattern})")
    assert what in err.message
    assert sql[err.pos:err.pos + 4] == "NOT("


def test_error_not_needs_cep_mode():
    sql, err = error_of("ORDER BY ts PATTERN (a NOT(b) c)", CepAnalysisError)
    assert err.pos == sql.index("NOT(") and "STRATEGY" in err.message


@pytest.mark.parametrize("pattern,msg", [("KL(a, 3, 2)", "exceeds"), ("KL(a, 0, 0)", "at least 1"),
                                         ("KL(a, x)", "lower bound"), ("KL(a, 1, 2, 3)", "')'"),
                                         ("NOT(a, b)", "exactly one")])
def test_error_kl_and_not_arguments(pattern, msg):
    sql, err = error_of(f"ORDER BY ts STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(b, {pattern}))")
    assert msg in err.message
    assert sql.index(pattern[:2]) <= err.pos < sql.index(pattern[:2]) + len(pattern)


def test_error_within_unit_and_zero():
    sql, err = error_of("ORDER BY ts PATTERN (a) WITHIN INTERVAL '3' WEEK")
    assert err.pos == sql.index("WEEK") and "unit" in err.message
    sql, err = error_of("ORDER BY ts PATTERN (a) WITHIN 0 ROWS")
    assert err.pos == sql.index("0 ROWS") and "positive" in err.message
    sql, err = error_of("ORDER BY ts PATTERN (a) WITHIN INTERVAL '0' SECOND")
    assert err.pos == sql.index("'0'") and "positive" in err.message
    sql, err = error_of("ORDER BY ts PATTERN (a) WITHIN 5 MINUTES")
    assert err.pos == sql.index("MINUTES") and "ROWS" in err.message
    sql, err = error_of("ORDER BY ts PATTERN (a) WITHIN INTERVAL 'x' SECOND")
    assert "number" in err.message


def test_error_strategy_after_pattern():
    sql, err = error_of("ORDER BY ts PATTERN (a) STRATEGY SKIP_TILL_ANY_MATCH")
    assert err.pos == sql.index("STRATEGY")
