"""CEP mode: the Cython run-based evaluator returns exactly the reference's rows.

Queries come from tests/support/strategies_cep.py; shapes the evaluator does not support (it
raises CepUnsupportedError, e.g. KL of a sequence) are rejected.
Rows are compared as multisets (helpers from test_property_sql).
"""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, reject, settings

from cepsql.backends.local.engine import to_pandas
from cepsql.errors import CepUnsupportedError
from cepsql.reference.cep import evaluate_reference_cep
from cepsql.runtime.run_stats import RunStatistics

try:
    from .support.strategies_cep import (STRATEGIES, cep_queries, cep_streams,
                                         repeat_then_closure_queries)
    from .test_property_sql import SETTINGS, row_multiset, spec_of
except ImportError:
    from support.strategies_cep import (STRATEGIES, cep_queries, cep_streams,
                                        repeat_then_closure_queries)
    from test_property_sql import SETTINGS, row_multiset, spec_of


def assert_cep_matches(sql: str, table: pa.Table, stats: RunStatistics | None = None
                       ) -> None:
    """The engine's rows equal the reference's (the evaluators' counters go to stats)."""
    import cepsql
    try:
        if stats is None:
            df = cepsql.match_recognize(sql, t=table)
        else:
            df = to_pandas(cepsql.backends.local.engine.run_local(sql, {"t": table},
                                                                  stats=stats))
    except CepUnsupportedError:
        reject()
    names, rows = evaluate_reference_cep(spec_of(sql), table)
    assert list(df.columns) == names, sql
    got = row_multiset(df.itertuples(index=False, name=None))
    want = row_multiset(rows)
    assert got == want, (f"{sql}\nmissing: {want - got}\nextra: {got - want}\n"
                         f"input: {table.to_pylist()}")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_cep_engine_matches_reference(strategy):
    @settings(max_examples=100, **SETTINGS)
    @given(sql=cep_queries(strategy), table=cep_streams())
    def check(sql, table):
        assert_cep_matches(sql, table)
    check()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_cep_engine_matches_reference_with_nulls_and_ties(strategy):
    # ts has ties (and nulls): both sides order ties by the remaining columns (ASC, NULLS
    # FIRST); tag, price, vol and part have nulls; DEFINEs include null-sensitive tests
    @settings(max_examples=60, **SETTINGS)
    @given(sql=cep_queries(strategy, null_conditions=True),
           table=cep_streams(unique_ts=False, with_nulls=True))
    def check(sql, table):
        assert_cep_matches(sql, table)
    check()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_repetition_beside_a_navigating_closure_matches_reference(strategy):
    # SEQ(R{n}, KL(K)) with K's DEFINE reading LAST(K, 1) and R (issue 24 A2)
    @settings(max_examples=40, **SETTINGS)
    @given(sql=repeat_then_closure_queries(strategy), table=cep_streams())
    def check(sql, table):
        assert_cep_matches(sql, table)
    check()


# --- hand-written: SASE+ Figure 1 style queries --------------------------------------

def _ticks():
    return pa.table({
        "part": ["x"] * 10 + ["y"] * 6,
        "ts": list(range(10)) + list(range(6)),
        "price": [5.0, 6.0, 4.0, 7.0, 8.0, 3.0, 9.0, 9.5, 2.0, 10.0,
                  1.0, 2.0, 3.0, 1.5, 4.0, 0.5],
        "vol": [1.0, 2.0, 1.0, 3.0, 2.0, 1.0, 2.0, 2.0, 1.0, 4.0,
                1.0, 1.0, 2.0, 1.0, 3.0, 1.0],
        "tag": ["a", "b", "a", "b", "c", "a", "b", "c", "a", "b",
                "a", "b", "b", "a", "c", "a"],
    })


HAND = [
    # Kleene closure with an iterator predicate (rising run), then a drop
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES count(*) AS n, "
    "FIRST(a.ts) AS t0, LAST(ts) AS t1, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
    "STRATEGY {s} PATTERN (a+ b) WITHIN 6 ROWS "
    "DEFINE a AS count(a.*) = 1 OR a.price > LAST(a.price, 1), b AS b.price < LAST(a.price))",
    # average iterator predicate
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES count(*) AS n, "
    "avg(a.price) AS ap, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
    "STRATEGY {s} PATTERN (a{{1,3}} b) WITHIN 5 ROWS "
    "DEFINE a AS a.price >= avg(a.price), b AS b.vol > 1)",
    # negation between two events (SASE Q: shelf reading, no counter reading, exit)
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES a.ts AS ta, "
    "b.ts AS tb ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
    "STRATEGY {s} PATTERN (SEQ(a, NOT(c), b)) WITHIN INTERVAL '4' SECOND "
    "DEFINE a AS tag = 'a', b AS tag = 'b', c AS c.tag = 'c')",
    # AND / OR, ALL ROWS PER MATCH
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES "
    "CLASSIFIER() AS cls, MATCH_NUMBER() AS mn ALL ROWS PER MATCH "
    "STRATEGY {s} PATTERN (OR(AND(a, b), SEQ(c, a))) WITHIN 3 ROWS "
    "DEFINE a AS tag = 'a', b AS b.price > a.price, c AS tag = 'c')",
]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("query", range(len(HAND)))
def test_sase_style_queries(strategy, query):
    import cepsql
    sql = HAND[query].format(s=strategy)
    table = _ticks()
    names, rows = evaluate_reference_cep(spec_of(sql), table)
    df = cepsql.match_recognize(sql, t=table)
    assert list(df.columns) == names
    assert row_multiset(df.itertuples(index=False, name=None)) == row_multiset(rows), sql


def test_rising_run_finds_expected_matches():
    import cepsql
    sql = HAND[0].format(s="SKIP_TILL_NEXT_MATCH")
    df = cepsql.match_recognize(sql, t=_ticks())
    assert len(df) > 0 and set(df["n"]) >= {2}


@pytest.mark.parametrize("strategy,pattern,message", [
    ("SKIP_TILL_ANY_MATCH", "SEQ(b, KL(SEQ(NOT(c), a+)))", "NOT inside KL"),
])
def test_composite_kleene_outside_the_run_nfa_is_unsupported(strategy, pattern, message):
    import cepsql
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES count(*) AS n "
           f"STRATEGY {strategy} PATTERN ({pattern}) DEFINE a AS tag = 'a', b AS tag = 'b')")
    with pytest.raises(CepUnsupportedError, match=message):
        cepsql.match_recognize(sql, t=_ticks())


@pytest.mark.parametrize("strategy", ["SKIP_TILL_ANY_MATCH", "PARTITION_CONTIGUITY",
                                      "SKIP_TILL_NEXT_MATCH"])
def test_kleene_of_sequence_runs_in_order(strategy):
    # rising prices across iterations: a's DEFINE reads the previous iteration's a (R6b)
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES "
           "count(*) AS n, FIRST(a.ts) AS t0, LAST(b.ts) AS t1 "
           f"STRATEGY {strategy} PATTERN (KL(SEQ(a, b), 2)) WITHIN 6 ROWS "
           "DEFINE a AS tag = 'a' AND (LAST(a.price, 1) IS NULL OR a.price < LAST(a.price, 1)), "
           "b AS tag = 'b')")
    assert_cep_matches(sql, _ticks())
    assert_cep_matches(sql.replace("KL(SEQ(a, b), 2)", "KL(AND(a, b), 2)"), _ticks())
    assert_cep_matches(sql.replace("KL(SEQ(a, b), 2)", "KL(OR(SEQ(a, b), c), 2)")
                       .replace("b AS tag = 'b')", "b AS tag = 'b', c AS tag = 'c')"), _ticks())


@pytest.mark.parametrize("pattern", [
    "AND(A, OR(B, C), KL(SEQ(D, KL(E, 1, 2)), 0))",
    "AND(A, OR(B, C), KL(SEQ(D, E), 0))",
    "SEQ(A, KL(SEQ(D, E), 0), OR(B, C))",
])
def test_next_match_sees_past_a_group_that_may_not_run(pattern):
    """Found by the property test above: under SKIP_TILL_NEXT_MATCH a run waiting for C
    after A ignored a row B could take whenever an optional iteration group
    (KL(SEQ(d, e), 0)) stood between A and B in the sibling order (A1 C2 was extra)."""
    table = pa.table({"part": ["a"] * 4, "ts": [1, 1, 2, 1], "price": [0] * 4,
                      "vol": [0.5] * 4, "tag": ["x", "x", "x", "y"]})
    assert_cep_matches(
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES count(*) AS n "
        "ONE ROW PER MATCH STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (" + pattern + ") "
        "DEFINE C AS tag = 'x', D AS tag = 'x')", table)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("order", ["{r}, KL(b)", "KL(b), {r}"])
def test_repetition_beside_a_navigating_closure_does_not_hang(order):
    """Issue 24 A2: SEQ(a{2}, KL(b)) over 40 shipment rows ran > 400 s (each alert
    enumerated every closure of b alone, b's DEFINE needing a to prune); it must equal
    the same pattern with the repetition written as two variables (a, a2), which the
    planned evaluator runs as plain leaves."""
    import cepsql
    from cepsql.datagen import generate_shipments
    rows = generate_shipments(400).slice(200, 40)
    sql = ("SELECT * FROM s MATCH_RECOGNIZE (ORDER BY ts MEASURES {first} AS t0, "
           "LAST(b.ts) AS t1, count(b.*) AS nb ONE ROW PER MATCH "
           "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ({order})) WITHIN INTERVAL '3' HOUR "
           "DEFINE a AS a.kind = 'alert', {extra}b AS b.kind = 'shipment' AND "
           "b.from_site = COALESCE(LAST(b.to_site, 1), {last}.site))")
    repeated = cepsql.match_recognize(sql.format(
        first="FIRST(a.ts)", order=order.format(r="a{2}"), extra="", last="a"), s=rows)
    unrolled = cepsql.match_recognize(sql.format(
        first="a.ts", order=order.format(r="a, a2"), extra="a2 AS a2.kind = 'alert', ",
        last="a2"), s=rows)
    assert len(repeated) > 0
    assert row_multiset(repeated.itertuples(index=False, name=None)) == \
        row_multiset(unrolled.itertuples(index=False, name=None))
