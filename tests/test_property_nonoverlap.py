"""AFTER MATCH SKIP PAST LAST ROW in CEP mode: SASE+'s non-overlap format (rule R7).

A match is output only if it starts after the previously output match completes; the
one completing first wins (then the earlier start, the smaller positions, the smaller
labels). Both evaluators (the run NFA for every strategy, the planned evaluator for
SKIP_TILL_ANY_MATCH under every algorithm), streamed in tiny chunks too, must give
exactly the oracle's rows; the oracle selects STRICT_CONTIGUITY matches over the whole
input while the evaluators select per partition (the same matches, see R7).
"""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cepsql
from cepsql.runtime.run_stats import RunStatistics
from cepsql.reference.cep import evaluate_reference_cep

try:
    from .support.strategies import STREAM_SCHEMA
    from .support.strategies_cep import STRATEGIES, cep_queries, cep_streams
    from .test_cep_streaming import _chunked
    from .test_property_cep import assert_cep_matches
    from .test_property_sql import SETTINGS, spec_of
except ImportError:
    from support.strategies import STREAM_SCHEMA
    from support.strategies_cep import STRATEGIES, cep_queries, cep_streams
    from test_cep_streaming import _chunked
    from test_property_cep import assert_cep_matches
    from test_property_sql import SETTINGS, spec_of

PAST = "AFTER MATCH SKIP PAST LAST ROW"
ANY = "SKIP_TILL_ANY_MATCH"
FIXTURE_SETTINGS = {**SETTINGS, "suppress_health_check": [
    *SETTINGS["suppress_health_check"], HealthCheck.function_scoped_fixture]}


def non_overlapping(sql: str) -> str:
    """The generated query with AFTER MATCH SKIP PAST LAST ROW written."""
    if PAST in sql:
        return sql
    return sql.replace(" STRATEGY ", f" {PAST} STRATEGY ", 1)


# Shapes where candidates overlap in time without sharing rows (two runs in flight),
# with trailing NOTs (candidates undecided until later rows arrive) and closures.
_SHAPES = ["SEQ(A, B)", "SEQ(A, B, C)", "AND(A, B)", "SEQ(A, KL(B), C)", "A B+",
           "SEQ(A, NOT(C), B)", "SEQ(A, B, NOT(C))", "SEQ(NOT(C), A, B)",
           "OR(SEQ(A, B), SEQ(B, C))", "SEQ(A, AND(B, C))", "SEQ(A, B{0,2}, C)"]
_CONDS = ["{v}.tag = 'x'", "{v}.tag = 'y'", "{v}.tag <> 'z'", "{v}.price > 4",
          "{v}.price <= 5", "{v}.vol >= 1.5", "{v}.price > {o}.price",
          "{v}.tag = {o}.tag", "true"]


@st.composite
def overlap_queries(draw, strategy: str | None = None) -> str:
    """Small SEQ/AND/OR/NOT/KL clauses over loose conditions, so that several candidate
    matches overlap: the cases where SASE+'s non-overlap format decides."""
    shape = draw(st.sampled_from(_SHAPES))
    strategy = strategy or draw(st.sampled_from(STRATEGIES))
    names = [v for v in "ABC" if v in shape.replace("SEQ", "").replace("AND", "")]
    defines = []
    for v in names:
        cond = draw(st.sampled_from(_CONDS))
        if "{o}" in cond:
            others = [o for o in names if o != v and f"NOT({o})" not in shape]
            if not others or f"NOT({v})" in shape:
                cond = "{v}.tag = 'x'"
            else:
                cond = cond.replace("{o}", draw(st.sampled_from(others)))
        defines.append(f"{v} AS " + cond.format(v=v))
    if "KL(B)" in shape or "B+" in shape:
        defines = [d if not d.startswith("B ") else
                   d + " AND (count(B.*) = 1 OR B.price >= LAST(B.price, 1))" for d in defines]
    measures = draw(st.sampled_from([
        "MEASURES FIRST(ts) AS t0, LAST(ts) AS t1, MATCH_NUMBER() AS mn ONE ROW PER MATCH",
        "MEASURES count(*) AS n, CLASSIFIER() AS cls, MATCH_NUMBER() AS mn ALL ROWS PER MATCH",
        "MEASURES FIRST(ts) AS t0 ALL ROWS PER MATCH WITH UNMATCHED ROWS"]))
    window = draw(st.sampled_from(["", "WITHIN 4 ROWS", "WITHIN 6 ROWS",
                                   "WITHIN INTERVAL '5' SECOND"]))
    if strategy == ANY and not window:
        window = "WITHIN 7 ROWS"
    partition = draw(st.sampled_from(["PARTITION BY part", ""]))
    return (f"SELECT * FROM t MATCH_RECOGNIZE ({partition} ORDER BY ts {measures} {PAST} "
            f"STRATEGY {strategy} PATTERN ({shape}) {window} DEFINE {', '.join(defines)})")


@st.composite
def busy_streams(draw, min_rows: int = 6, max_rows: int = 12) -> pa.Table:
    """Streams of a few rows per partition and tag, so that runs overlap."""
    n = draw(st.integers(min_rows, max_rows))

    def column(values):
        return draw(st.lists(st.sampled_from(values), min_size=n, max_size=n))
    return pa.table({"part": column(["a", "a", "b", None]),
                     "ts": draw(st.permutations(list(range(1, n + 1)))),
                     "price": column(list(range(10)) + [None]),
                     "vol": column([0.5, 1.0, 1.5, 2.25, 3.0, None]),
                     "tag": column(["x", "x", "y", "y", "z"])}, schema=STREAM_SCHEMA)


@st.composite
def cases(draw, strategy: str, partitioned: bool | None = None,
          window: bool = False) -> tuple[str, pa.Table]:
    """(query, stream): half from overlap_queries over busy streams (where the selection
    decides), half from the general CEP generator (every construct) with SKIP PAST LAST
    ROW added. ``window`` adds a WITHIN where none was drawn (chunked streaming)."""
    if draw(st.booleans()):
        sql, table = draw(overlap_queries(strategy)), draw(busy_streams())
    else:
        sql = non_overlapping(draw(cep_queries(strategy)))
        table = draw(cep_streams(unique_ts=draw(st.booleans()), with_nulls=True))
    if partitioned is False:
        sql = sql.replace("PARTITION BY part ", "")
    elif partitioned and "PARTITION BY" not in sql:
        sql = sql.replace("MATCH_RECOGNIZE ( ORDER BY",
                          "MATCH_RECOGNIZE (PARTITION BY part ORDER BY", 1)
    if window and "WITHIN" not in sql:   # the worker streams only with a window
        within = draw(st.sampled_from(["WITHIN 4 ROWS", "WITHIN INTERVAL '3' SECOND"]))
        sql = sql.replace(" DEFINE ", f" {within} DEFINE ", 1) if " DEFINE " in sql \
            else sql[:-1] + f" {within})"
    return sql, table


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_overlapping_candidates_match_reference(strategy):
    @settings(max_examples=80, **SETTINGS)
    @given(sql=overlap_queries(strategy), table=busy_streams())
    def check(sql, table):
        assert_cep_matches(sql, table)
    check()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_matches_reference(strategy):
    @settings(max_examples=60, **SETTINGS)
    @given(case=cases(strategy))
    def check(case):
        assert_cep_matches(*case)
    check()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_without_partition_by_matches_reference(strategy):
    # one stream: matches of different tags overlap in time without sharing rows
    @settings(max_examples=40, **SETTINGS)
    @given(case=cases(strategy, partitioned=False))
    def check(case):
        assert_cep_matches(*case)
    check()


@pytest.mark.parametrize("algorithm", ["DP_LD", "DP_B", "GREEDY", "ZSTREAM"])
def test_planned_evaluator_matches_reference(algorithm):
    seen = {"planned": 0}

    @settings(max_examples=40, **SETTINGS)
    @given(case=cases(ANY))
    def check(case):
        stats = RunStatistics()
        with cepsql.planner_options(algorithm=algorithm):
            assert_cep_matches(*case, stats=stats)
        seen["planned"] += int(stats.last.get("planned", 0))
    check()
    assert seen["planned"] > 0


@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_tiny_chunks_match_reference(monkeypatch, rows, strategy):
    """The last selected row carries across chunks (rebased with the state)."""
    _chunked(monkeypatch, rows)

    @settings(max_examples=40, **FIXTURE_SETTINGS)
    @given(case=cases(strategy, window=True))
    def check(case):
        assert_cep_matches(*case)
    check()


@pytest.mark.parametrize("algorithm", ["DP_B", "GREEDY"])
def test_planned_tiny_chunks_match_reference(monkeypatch, algorithm):
    _chunked(monkeypatch, 2)

    @settings(max_examples=40, **FIXTURE_SETTINGS)
    @given(case=cases(ANY, window=True))
    def check(case):
        with cepsql.planner_options(algorithm=algorithm):
            assert_cep_matches(*case)
    check()


def test_strict_contiguity_with_partition_by_matches_reference(monkeypatch):
    # the oracle selects over the whole input, the evaluators per partition
    _chunked(monkeypatch, 3)

    @settings(max_examples=60, **FIXTURE_SETTINGS)
    @given(case=cases("STRICT_CONTIGUITY", partitioned=True))
    def check(case):
        assert_cep_matches(*case)
    check()


@st.composite
def _stream_and_query(draw):
    """A case with unique ts (the invariants below compare ts as positions)."""
    strategy = draw(st.sampled_from(STRATEGIES))
    if draw(st.booleans()):
        return draw(overlap_queries(strategy)), draw(busy_streams())
    return non_overlapping(draw(cep_queries(strategy))), draw(cep_streams())


@settings(max_examples=100, **SETTINGS)
@given(case=_stream_and_query())
def test_output_is_the_greedy_non_overlapping_subset(case):
    """The oracle's own invariants, per partition (also under STRICT_CONTIGUITY, whose
    whole-input selection picks the same matches): output matches are candidates (the
    clause without the SKIP clause finds them) and disjoint ranges of rows, each the
    earliest-completing candidate that starts after the previous one, and no candidate
    starts after the last one."""
    sql, table = case
    sql = _summary(sql)
    _, kept = evaluate_reference_cep(spec_of(sql), table)
    _, every = evaluate_reference_cep(spec_of(sql.replace(PAST, "")), table)
    assert set(kept) <= set(every)
    for key in {r[0] for r in every}:
        candidates = [r[1:] for r in every if r[0] == key]
        last_end = None
        for f, l in sorted(r[1:] for r in kept if r[0] == key):
            later = [c for c in candidates if last_end is None or c[0] > last_end]
            assert l == min(c[1] for c in later)
            assert f == min(c[0] for c in later if c[1] == l)
            last_end = l
        assert all(last_end is not None and c[0] <= last_end for c in candidates)


def _summary(sql: str) -> str:
    """One row per match: partition key (0 without PARTITION BY), first and last ts
    (ts is unique, so ts order is position order)."""
    import re
    key = "" if "PARTITION BY part" in sql else "0 AS k, "
    return re.sub(r"MEASURES .*? (ONE|ALL) ROWS? PER MATCH( WITH UNMATCHED ROWS)?",
                  f"MEASURES {key}FIRST(ts) AS f, LAST(ts) AS l ONE ROW PER MATCH", sql)
