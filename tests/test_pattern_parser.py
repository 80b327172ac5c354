"""PATTERN grammar: quantifiers, precedence, grouping, anchors, exclusion, PERMUTE, errors."""
import pytest

from cepsql.algebra.pattern import (Alternation, Anchor, Concat, Empty, Exclusion, Permute,
                                    Quantified, Var, pattern_to_text, pattern_variables)
from cepsql.parse.pattern_parser import parse_pattern
from cepsql.errors import CepSyntaxError

A, B, C, D = Var("A"), Var("B"), Var("C"), Var("D")


@pytest.mark.parametrize("text, lo, hi, greedy", [
    ("A*", 0, None, True), ("A+", 1, None, True), ("A?", 0, 1, True),
    ("A*?", 0, None, False), ("A+?", 1, None, False), ("A??", 0, 1, False),
    ("A{3}", 3, 3, True), ("A{3}?", 3, 3, False),
    ("A{2,}", 2, None, True), ("A{2,}?", 2, None, False),
    ("A{,4}", 0, 4, True), ("A{,4}?", 0, 4, False),
    ("A{2,4}", 2, 4, True), ("A{2,4}?", 2, 4, False),
    ("A{ 2 , 4 }", 2, 4, True), ("A{,}", 0, None, True),
])
def test_quantifiers(text, lo, hi, greedy):
    assert parse_pattern(text) == Quantified(A, lo, hi, greedy)


def test_precedence_alternation_lowest():
    assert parse_pattern("A B | C D*") == Alternation((Concat((A, B)), Concat((C, Quantified(D, 0, None)))))


def test_quantifier_binds_to_primary():
    assert parse_pattern("A B+") == Concat((A, Quantified(B, 1, None)))
    assert parse_pattern("(A B)+") == Quantified(Concat((A, B)), 1, None)


def test_grouping_and_flattening():
    assert parse_pattern("(A B) (C D)") == Concat((A, B, C, D))
    assert parse_pattern("(A | B) | C") == Alternation((A, B, C))
    assert parse_pattern("A (B | C)") == Concat((A, Alternation((B, C))))
    assert parse_pattern("((A))") == A


def test_empty_and_anchors():
    assert parse_pattern("()") == Empty()
    assert parse_pattern("() | A") == Alternation((Empty(), A))
    assert parse_pattern("^ A $") == Concat((Anchor("start"), A, Anchor("end")))
    assert parse_pattern("^A$") == Concat((Anchor("start"), A, Anchor("end")))


def test_exclusion_nested():
    assert parse_pattern("A {- B {- C -} -} D") == Concat(
        (A, Exclusion(Concat((B, Exclusion(C)))), D))
    assert parse_pattern("{- A -}*") == Quantified(Exclusion(A), 0, None)


def test_permute():
    assert parse_pattern("PERMUTE(A, B | C, D+)") == Permute(
        (A, Alternation((B, C)), Quantified(D, 1, None)))
    assert parse_pattern("permute (A,B) C") == Concat((Permute((A, B)), C))


def test_variable_names_canonical():
    node = parse_pattern('a "b" `Cc` d_1 "x""y"')
    assert [v.name for v in node.items] == ["A", "b", "Cc", "D_1", 'x"y']
    assert pattern_variables(parse_pattern("B A B+ A")) == ["B", "A"]


def test_positions_absolute():
    node = parse_pattern("A  B", base=100)
    assert [v.pos for v in node.items] == [100, 103]


def test_comments_ignored():
    assert parse_pattern("A -- comment\n B /* x */ C") == Concat((A, B, C))


@pytest.mark.parametrize("text", [
    "A B+? C{2,5} | D", "(A | B)* C", "^ A {- B -} C $", "PERMUTE(A, B, C)", "() | A",
    "A{3} B{2,} C{0,4}?", "(A B)+? C",
])
def test_pattern_to_text_roundtrip(text):
    node = parse_pattern(text)
    assert parse_pattern(pattern_to_text(node)) == node


@pytest.mark.parametrize("text, pos, message", [
    ("A{3,2}", 1, "lower bound 3 exceeds upper bound 2"),
    ("A B |", 5, "expected a pattern variable"),
    ("A ) B", 2, "found ')'"),
    ("(A B", 4, "expected ')'"),
    ("A**", 2, "quantifier cannot follow"),
    ("A{}", 1, "empty quantifier"),
    ("A{2", 3, "expected ',' or '}'"),
    ("A{2,x}", 4, "expected '}' closing"),
    ("A {- B", 6, "expected '-}'"),
    ("A # B", 2, "unexpected character '#'"),
    ("   ", 3, "empty PATTERN"),
    ("+A", 0, "expected a pattern variable"),
    ('A "B', 2, "unterminated quoted identifier"),
])
def test_errors(text, pos, message):
    with pytest.raises(CepSyntaxError) as info:
        parse_pattern(text, base=10)
    assert info.value.pos == 10 + pos
    assert message in info.value.message


def test_error_line_column_in_sql():
    sql = "PATTERN (\n  A B{5,1}\n)"
    with pytest.raises(CepSyntaxError) as info:
        parse_pattern(sql[9:-1], base=9)
    err = info.value.with_sql(sql)
    assert (err.line, err.col) == (2, 6)
