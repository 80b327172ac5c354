"""Nested composite KL (issue 12 point 4): KL(SEQ(a, KL(SEQ(b, c)))),
KL(SEQ(KL(SEQ(a, b)), c)), KL(OR(SEQ(a, KL(b)), c), 2).

R6b applied twice: each outer iteration is a match of the outer pattern. With both
closures unbounded and the inner one required at most once, an outer alternative
p q+ s is a set of flat alternatives -- SEQ(p, q) starts an outer iteration, q
continues it, s alone ends it (p q+: SEQ(p, q) or q end it) -- that follow each other
as the nested closures allow (cep_group_shapes.flatten_nested: per alternative the ones that
may follow, whether the group may be left after it, whether it counts an outer
iteration); the run NFA's states after each take are the same, so the evaluator must
equal the oracle (reference_cep) under every strategy; a bounded outer KL counts the
outer iterations. A bounded inner KL or one requiring n iterations is unrolled into
copies of q as the Thompson NFA does (each copy its own flat alternatives). NOT inside
the nested KL raises CepUnsupportedError. EXPLAIN says these clauses run in order, as for NOT in KL.
"""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import cepsql
from cepsql.parse import find_match_recognize
from cepsql.errors import CepUnsupportedError
from cepsql.compile.clause import plan_query
from cepsql.explain.clause import explain_clause

from support.strategies import STREAM_SCHEMA
from support.strategies_cep import STRATEGIES, cep_streams
from test_composite_kl_shared import DEFINES, _check, _sql

PATTERNS = [
    "KL(SEQ(a, KL(SEQ(b, c))))",
    "KL(SEQ(a, KL(SEQ(b, c), 0)))",
    "SEQ(c, KL(SEQ(a, KL(b))))",
    "KL(SEQ(a, KL(OR(b, SEQ(c, b)))))",
    "KL(SEQ(a+, KL(SEQ(b, c))), 0)",
    "SEQ(KL(SEQ(a, KL(b))), c)",
    "KL(SEQ(a, KL(AND(b, c))))",
    # the inner KL followed by an item: ((b c)+ a)+, (a (b)+ c)*, ...
    "KL(SEQ(KL(SEQ(b, c)), a))",
    "KL(SEQ(a, KL(b), c), 0)",
    "SEQ(c, KL(SEQ(KL(OR(a, SEQ(b, a))), b)))",
    # the outer KL requiring two iterations; an OR of nested and plain alternatives
    "KL(SEQ(a, KL(SEQ(b, c))), 2)",
    "KL(OR(SEQ(a, KL(b)), SEQ(KL(c), b)))",
    "KL(OR(SEQ(a, KL(SEQ(b, c))), c), 2)",
    # a bounded outer KL counts outer iterations (continuations go on at its maximum)
    "KL(SEQ(a, KL(SEQ(b, c))), 1, 2)",
    "KL(SEQ(KL(OR(a, b)), c), 2, 3)",
    # bounded inner KLs and ones requiring two iterations: copies of q (Thompson)
    "KL(SEQ(a, KL(SEQ(b, c), 2)))",
    "KL(SEQ(a, KL(OR(b, SEQ(c, b)), 1, 3)))",
    "KL(SEQ(KL(AND(a, b), 2, 3), c), 1, 2)",
]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_nested_kl_equals_the_oracle(strategy):
    @settings(max_examples=50, deadline=None, derandomize=True)
    @given(pattern=st.sampled_from(PATTERNS), define=st.sampled_from(DEFINES),
           rows=st.sampled_from(["ONE ROW PER MATCH", "ALL ROWS PER MATCH"]),
           window=st.sampled_from(["WITHIN 5 ROWS", "WITHIN 8 ROWS", ""]),
           table=cep_streams())
    def check(pattern, define, rows, window, table):
        sql = _sql(strategy, pattern, define, rows, window)
        try:
            _check(sql, table)
        except CepUnsupportedError as exc:   # no shape above is refused
            raise AssertionError(sql) from exc
    check()


def test_nested_iterations_by_hand():
    # x y z y z x y z: a (b c)+ twice -> ABCBCABC over rows 1-8 (contiguous)
    table = pa.table({"part": ["p"] * 8, "ts": list(range(1, 9)), "price": [0] * 8,
                      "vol": [1.0] * 8, "tag": list("xyzyzxyz")}, schema=STREAM_SCHEMA)
    sql = _sql("PARTITION_CONTIGUITY", "KL(SEQ(a, KL(SEQ(b, c))))", DEFINES[0],
               "ONE ROW PER MATCH", "")
    df = cepsql.match_recognize(sql, t=table)
    assert set(zip(df["t0"], df["t1"], df["labels"])) == {
        (1, 3, "ABC"), (1, 5, "ABCBC"), (1, 8, "ABCBCABC"), (6, 8, "ABC")}
    _check(sql, table)


@pytest.mark.parametrize("pattern", [
    "KL(SEQ(KL(SEQ(b, c), 0), a))",       # an optional inner KL with nothing before it
    "KL(SEQ(a, KL(SEQ(b, c), 1, 9)))",    # more than 8 copies of the inner KL
    "KL(SEQ(a, KL(SEQ(b, NOT(a), c))))",  # NOT inside the nested KL
])
def test_other_nestings_are_refused(pattern):
    table = pa.table({"part": ["p"], "ts": [1], "price": [1], "vol": [1.0], "tag": ["x"]},
                     schema=STREAM_SCHEMA)
    sql = _sql("SKIP_TILL_ANY_MATCH", pattern, DEFINES[0], "ONE ROW PER MATCH", "")
    with pytest.raises(CepUnsupportedError, match="nested in a composite"):
        cepsql.match_recognize(sql, t=table)


@pytest.mark.parametrize("pattern", ["KL(SEQ(a, KL(SEQ(b, c))))", "KL(SEQ(a, NOT(c), b))"])
def test_explain_says_nested_kl_and_not_in_kl_run_in_order(pattern):
    sql = _sql("SKIP_TILL_ANY_MATCH", pattern, DEFINES[0], "ONE ROW PER MATCH", "")
    text = explain_clause(plan_query(find_match_recognize(sql)[0].spec, STREAM_SCHEMA, sql))
    assert "evaluator: in-order SASE+ run NFA" in text
    assert "KL over a composite pattern has no JQPG reduction" in text
