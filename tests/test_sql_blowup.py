"""No quadratic blow-up in SQL:2016 mode (issue 13, point 5).

The matcher simulates every start row in one pass where no DEFINE can tell start rows
apart (matcher.pyx: _scan), else skips configurations that failed attempts reached
(_memo_has), and stops once a label every match needs holds on no later row
(_dead_at). None may change results: random queries are checked against the reference
evaluator and against the plain per-start search with all three switched off
(SqlMatcher.set_search), on whole partitions and through tiny streaming chunks.
"""
from __future__ import annotations

import contextlib

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cepsql
from cepsql.errors import CepError
from cepsql.runtime import worker as worker_module

try:
    from .support.strategies import (MEASURE_TEMPLATES, _fill, _has, _render, _variables,
                             pattern_trees, queries, streams)
    from .test_property_sql import SETTINGS, assert_engine_matches, row_multiset
except ImportError:
    from support.strategies import (MEASURE_TEMPLATES, _fill, _has, _render, _variables,
                            pattern_trees, queries, streams)
    from test_property_sql import SETTINGS, assert_engine_matches, row_multiset

# DEFINE conditions that leave the pattern start-free (row-local, or MATCH_NUMBER()),
# so the one-pass search applies; START_DEPENDENT_DEFINES do not (per start + memo).
START_FREE_DEFINES = [
    "{v}.price > PREV({v}.price)",
    "{v}.price < PREV({v}.price)",
    "{v}.price >= PREV({v}.price, 2)",
    "NEXT({v}.price) > {v}.price",
    "{v}.vol IS NULL",
    "{v}.vol IS NOT NULL AND {v}.vol > 1.5",
    "{v}.tag = 'x'",
    "{v}.tag <> 'y' OR {v}.price > 6",
    "{v}.price BETWEEN 3 AND 7",
    "{v}.price % 2 = 0",
    "{v}.price IN (1, 4, 8)",
    "{v}.price > 8",
    "{v}.price IS NULL",
    "coalesce(PREV({v}.price), 0) < {v}.price",
    "MATCH_NUMBER() <= 2 AND {v}.price > 2",
]
START_DEPENDENT_DEFINES = ["{v}.price >= FIRST({o}.price)", "count({v}.*) <= 2"]

ROWS = ["ONE ROW PER MATCH", "ALL ROWS PER MATCH", "ALL ROWS PER MATCH SHOW EMPTY MATCHES",
        "ALL ROWS PER MATCH OMIT EMPTY MATCHES", "ALL ROWS PER MATCH WITH UNMATCHED ROWS"]


@st.composite
def start_free_queries(draw, dependent: bool = False) -> str:
    """Random patterns (anchors, exclusions, reluctant quantifiers, alternation,
    PERMUTE, empty matches) with mostly start-free DEFINEs, every SKIP and rows mode."""
    tree = draw(pattern_trees(5))
    if not _variables(tree):
        tree = ("concat", (tree, ("quant", ("var", "A"), "?")))
    variables = sorted(set(_variables(tree)))
    pool = START_FREE_DEFINES + (START_DEPENDENT_DEFINES if dependent else [])
    defined = draw(st.lists(st.sampled_from(variables), min_size=1, unique=True))
    defines = [f"{v} AS {_fill(draw, draw(st.sampled_from(pool)), variables, v)}"
               for v in sorted(defined)]
    measures = [f"{_fill(draw, draw(st.sampled_from(MEASURE_TEMPLATES + ['count(*)'])), variables)}"
                f" AS m{i}" for i in range(draw(st.integers(1, 2)))]
    rows = draw(st.sampled_from(ROWS))
    if "UNMATCHED" in rows and _has(tree, "exclude"):
        rows = "ALL ROWS PER MATCH"
    skip = draw(st.sampled_from(["AFTER MATCH SKIP PAST LAST ROW", "AFTER MATCH SKIP TO NEXT ROW",
                                 f"AFTER MATCH SKIP TO LAST {variables[-1]}",
                                 f"AFTER MATCH SKIP TO FIRST {variables[-1]}"]))
    partition = draw(st.sampled_from(["PARTITION BY part", ""]))
    return "\n".join(x for x in [
        "SELECT * FROM t MATCH_RECOGNIZE (", partition, "ORDER BY ts",
        "MEASURES " + ", ".join(measures), rows, skip, f"PATTERN ({_render(tree)})",
        "DEFINE " + ", ".join(defines), ")"] if x)


@contextlib.contextmanager
def search(one_pass: bool, early_stop: bool, memo: bool, memo_span: int = 16,
           memo_keys: int = 0):
    """Run the in-process engine with the matcher's search strategies switched."""
    original = worker_module.MatchWorker._new_matcher

    def new_matcher(self):
        matcher = original(self)
        matcher.set_search(one_pass, early_stop, memo, memo_span, memo_keys)
        return matcher

    worker_module.MatchWorker._new_matcher = new_matcher
    try:
        yield
    finally:
        worker_module.MatchWorker._new_matcher = original


def outcome(sql: str, table):
    """Rows as a multiset, or the type of the CepError raised."""
    try:
        return row_multiset(cepsql.match_recognize(sql, t=table).itertuples(index=False,
                                                                           name=None))
    except CepError as err:
        return type(err)


def assert_same_as_per_start(sql: str, table, **current) -> None:
    """The search as configured by ``current`` (default: as shipped) gives what the
    plain per-start search gives."""
    with search(one_pass=False, early_stop=False, memo=False):
        want = outcome(sql, table)
    if current:
        with search(**current):
            got = outcome(sql, table)
    else:
        got = outcome(sql, table)
    assert got == want, f"{sql}\ninput: {table.to_pylist()}"


# --- property tests ----------------------------------------------------------------


@settings(max_examples=60, **SETTINGS)
@given(sql=start_free_queries(), table=streams())
def test_one_pass_matches_reference(sql, table):
    assert_engine_matches(sql, table)


@settings(max_examples=40, **SETTINGS)
@given(sql=start_free_queries(dependent=True), table=streams(max_rows=80))
def test_one_pass_matches_per_start_search(sql, table):
    assert_same_as_per_start(sql, table)


@settings(max_examples=40, **SETTINGS)
@given(sql=queries(), table=streams(max_rows=60))
def test_any_query_matches_per_start_search(sql, table):
    assert_same_as_per_start(sql, table)


@settings(max_examples=60, **SETTINGS)
@given(sql=st.one_of(queries(), start_free_queries(dependent=True)),
       table=streams(max_rows=60), memo_keys=st.sampled_from([0, 3, 20]))
def test_failed_attempt_memo_matches_per_start_search(sql, table, memo_keys):
    # every pattern through the per-start search, every failed attempt feeding the memo
    # (tiny memo_keys: the memo forgets, and attempts note only part of what they reach)
    assert_same_as_per_start(sql, table, one_pass=False, early_stop=True, memo=True,
                             memo_span=0, memo_keys=memo_keys)


@pytest.fixture()
def tiny_chunks(monkeypatch):
    """Chunks of 3 rows: the last partition of a chunk stays open (no early stop, and the
    one pass reports the first start whose outcome needs the next chunk)."""
    monkeypatch.setattr(worker_module, "CHUNK_ROWS", 3)


@settings(max_examples=40, deadline=None, suppress_health_check=[
    *SETTINGS["suppress_health_check"], HealthCheck.function_scoped_fixture])
@given(sql=start_free_queries(), table=streams())
def test_one_pass_through_tiny_chunks_matches_reference(tiny_chunks, sql, table):
    assert_engine_matches(sql, table)


# --- the blow-up patterns at 10^5 rows ---------------------------------------------

N = 100_000


def _run(pattern: str, define: str, table: pa.Table, rows: str = "ONE ROW PER MATCH",
         measures: str = "count(*) AS n") -> list[tuple]:
    sql = (f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES {measures} {rows} "
           f"PATTERN ({pattern}) DEFINE {define})")
    return [tuple(r) for r in cepsql.match_recognize(sql, t=table).itertuples(index=False)]


def _ids(n: int, v) -> pa.Table:
    return pa.table({"id": pa.array(range(n), pa.int64()), "v": pa.array(v, pa.int64())})


@pytest.mark.parametrize("pattern,define", [
    ("(A+)+ B", "A AS v >= 0, B AS v < 0"),
    ("A* B", "A AS v >= 0, B AS v < 0"),
    ("(A | B | C)+ D", "A AS v >= 0, B AS v >= 1, C AS v >= 2, D AS v < 0"),
    ("(A? B? C?)+ D", "A AS v >= 0, B AS v >= 1, C AS v >= 2, D AS v < 0"),
])
def test_required_label_never_holds(pattern, define):
    # early stop: no start row scans the partition
    assert _run(pattern, define, _ids(N, [i % 7 for i in range(N)])) == []


def test_rare_label_after_a_breaker_one_pass():
    # C holds on the last row only, after a row neither A nor B: no match, and no early
    # stop applies (C does occur); the one pass keeps it linear
    v = [i % 2 for i in range(N)]
    v[-2], v[-1] = 5, 9
    assert _run("(A | B)* C", "A AS v = 0, B AS v = 1, C AS v = 9", _ids(N, v)) == [(1,)]
    # (the only match is C alone on the last row)


def test_rare_label_matches_every_block():
    # C every 1000 rows: each block of A/B rows ending in a C is one match
    v = [9 if i % 1000 == 999 else i % 2 for i in range(N)]
    got = _run("(A | B)* C", "A AS v = 0, B AS v = 1, C AS v = 9", _ids(N, v),
               measures="count(*) AS n, FIRST(id) AS f")
    assert got == [(1000, k * 1000) for k in range(N // 1000)]


def test_long_match_history_survives_collection():
    # a 100k-row match built while dead branches are collected (_compact_history):
    # every row's label must still be the one it matched
    v = [i % 2 for i in range(N)]
    v[-1] = 9
    got = _run("(A | B)* C", "A AS v = 0, B AS v = 1, C AS v = 9", _ids(N, v),
               rows="ALL ROWS PER MATCH", measures="CLASSIFIER() AS c")
    want = ["A" if i % 2 == 0 else "B" for i in range(N - 1)] + ["C"]
    assert [row[1] for row in got] == want  # id, c, v
    assert [row[0] for row in got] == list(range(N))


def test_winner_history_survives_collection():
    # the winner (A on row 0) is decided while the preferred branch A B* C runs on over
    # 10^5 rows and fails at the breaker: collection must keep the winner's history
    v = [1] * N
    v[0], v[-2], v[-1] = 0, 5, 9
    got = _run("A B* C | A", "A AS v = 0, B AS v = 1, C AS v = 9", _ids(N, v),
               measures="count(*) AS n, CLASSIFIER() AS c, FIRST(id) AS f")
    assert got == [(1, "A", 0)]


@pytest.mark.parametrize("define,one_pass,memo", [
    ("A AS v > PREV(v), B AS v < 0", True, False),
    ("A AS v > 0, B AS MATCH_NUMBER() > 1", True, False),
    ("A AS v > 0, B AS B.v > A.v", False, True),           # tracked position of A
    ("A AS count(*) < 3, B AS v < 0", False, True),        # DEFINE aggregate
    ("A AS v > FIRST(v), B AS v < 0", False, False),       # reads the start row
    ("A AS PREV(CLASSIFIER()) IS NULL, B AS v < 0", False, False),  # label history
    ("A AS v > 0, B AS LAST(A.v, 1) > 0", False, False),   # label history
])
def test_which_patterns_use_which_search(define, one_pass, memo):
    sql = (f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES MATCH_NUMBER() AS mn "
           f"PATTERN (A+ B) DEFINE {define})")
    seen = []
    original = worker_module.MatchWorker._new_matcher

    def spy(self):
        matcher = original(self)
        seen.append((matcher.one_pass, matcher.memo))
        return matcher

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(worker_module.MatchWorker, "_new_matcher", spy)
        cepsql.match_recognize(sql, t=_ids(5, [1, 2, 3, -1, 0]))
    assert seen == [(one_pass, memo)]


def test_within_keeps_the_plain_per_start_search():
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(id) AS f "
           "PATTERN (A+ B) WITHIN 3 ROWS "
           "DEFINE A AS v > 0, B AS v < 0)")
    seen = []
    original = worker_module.MatchWorker._new_matcher

    def spy(self):
        matcher = original(self)
        seen.append(matcher)
        return matcher

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(worker_module.MatchWorker, "_new_matcher", spy)
        got = cepsql.match_recognize(sql, t=_ids(6, [1, 1, 1, 1, -1, 0]))
    assert (seen[0].one_pass, seen[0].memo) == (False, False)
    assert got["f"].tolist() == [2]  # rows 2..4: the window holds 3 rows


@pytest.mark.parametrize("define,rows,last_row_matches", [
    ("A AS v >= 0, B AS B.v > A.v + 5", N, True),  # last row of A: attempts hit the memo
    # first row of A: every attempt's state differs, no memo hits (quadratic, kept small)
    ("A AS v >= 0, B AS B.v > FIRST(A.v) + 20", 1000, False),
])
def test_tracked_positions_failing(define, rows, last_row_matches):
    v = [i % 2 for i in range(rows)]
    v[-2], v[-1] = 5, 9
    assert _run("A+ B", define, _ids(rows, v)) == []
    v[-1] = 20  # B after the breaker: one match over everything (B.v > A.v + 5 only)
    got = _run("A+ B", define, _ids(rows, v), measures="count(*) AS n, FIRST(id) AS f")
    assert got == ([(rows, 0)] if last_row_matches else [])
