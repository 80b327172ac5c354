"""In-process run-time errors point into the user's text (issue 24 B6): the condition VM
and Arrow's kernels name no position, runtime/error_position.py finds the expression."""
from __future__ import annotations

import pandas as pd
import pytest

import cepsql
from cepsql.algebra.limits import MAX_PAREN_NESTING
from cepsql.errors import CepRuntimeError, CepSyntaxError

TICKS = pd.DataFrame({"sym": ["a"] * 6, "ts": range(6), "n": [5, 3, 4, 6, 2, 7]})


def test_divide_by_zero_in_define_points_at_the_division_expression():
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts\n"
           "  MEASURES LAST(b.n) AS v ONE ROW PER MATCH PATTERN (a b+)\n"
           "  DEFINE b AS b.n / (a.n - a.n) > 1)")
    with cepsql.planner_options(ansi=True), pytest.raises(CepRuntimeError) as info:
        cepsql.match_recognize(sql, t=TICKS)
    assert "DIVIDE_BY_ZERO" in info.value.message
    assert (info.value.line, info.value.col) == (3, sql.split("\n")[2].index("b.n /") + 1)


def test_deep_nesting_around_the_clause_is_a_cep_error():
    def query(depth):
        nested = "(" * depth + "v" + ")" * depth
        return (f"SELECT {nested} FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
                "MEASURES LAST(b.n) AS v ONE ROW PER MATCH PATTERN (a b+) DEFINE b AS b.n > a.n)")
    assert len(cepsql.match_recognize(query(300), t=TICKS)) == 2
    with pytest.raises(CepSyntaxError) as info:
        cepsql.match_recognize(query(3000), t=TICKS)
    assert (info.value.line, info.value.col) == (1, len("SELECT ") + MAX_PAREN_NESTING + 1)
