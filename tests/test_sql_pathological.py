"""Issue 24, A3 / A4 / B8: pathological SQL:2016 patterns stay fast, large finite
patterns compile to counted loops, and Ctrl-C stops a running match.

The size tests run inputs that took minutes before the fix (nested empty-able loops,
a searched PERMUTE with no match, a partition open across a chunk boundary) under a
pytest-timeout: a regression hangs and fails, no timing is asserted. Results are
checked against the reference evaluator on small inputs (counted loops forced)."""
from __future__ import annotations

import re
from unittest import mock

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cepsql
from cepsql.compile import program
from cepsql.compile.opcodes import OP_COUNT_LOOP
from cepsql.errors import CepError, CepUnsupportedError
from cepsql.runtime import worker as worker_module

try:
    from .support.interrupt import interrupt_after_ready
    from .support.strategies import queries, streams
    from .test_property_sql import SETTINGS, assert_engine_matches
except ImportError:
    from support.interrupt import interrupt_after_ready
    from support.strategies import queries, streams
    from test_property_sql import SETTINGS, assert_engine_matches

HEAD = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES MATCH_NUMBER() AS mn, "
        "COUNT(*) AS n ONE ROW PER MATCH PATTERN ")


def ones(n: int) -> pd.DataFrame:
    return pd.DataFrame({"id": np.arange(n), "x": np.ones(n, dtype=np.int64)})


@pytest.mark.timeout(30)
@pytest.mark.parametrize("pattern", ["(A*)*B", "(A*)+B"])
def test_nested_loops_with_a_match_dependent_b(pattern):
    # before: ~n^4 (400 rows 32 s); one thread per row an iteration began at
    sql = HEAD + f"({pattern}) DEFINE A AS x = 1, B AS FIRST(A.x) = 5)"
    assert len(cepsql.match_recognize(sql, t=ones(600))) == 0
    t = ones(600)
    t.loc[599, "x"] = 5   # B's row; FIRST(A.x) = 5 only from a start at row 599 ...
    t.loc[598, "x"] = 5   # ... or 598 (A then B): one match of 2 rows
    out = cepsql.match_recognize(sql.replace("A AS x = 1", "A AS x >= 1"), t=t)
    assert out["n"].tolist() == [2]


@pytest.mark.timeout(30)
def test_nested_loops_across_a_chunk_boundary():
    # before: > 40 s from 65,536 rows on (the open chunk ran without early stop, with
    # one thread per row an iteration began at)
    sql = HEAD + "((A*)+B) DEFINE A AS x = 1, B AS x = 5)"
    t = ones(70_000)
    assert len(cepsql.match_recognize(sql, t=t)) == 0
    t.loc[69_999, "x"] = 5
    assert cepsql.match_recognize(sql, t=t)["n"].tolist() == [70_000]


@pytest.mark.timeout(30)
def test_searched_permute_without_match():
    # before: 300 rows 5.9 s, 1,000 rows > 60 s (B never holds, yet every start searched)
    sql = HEAD + ("(PERMUTE(A+, C+, D+, E+, F+, G+, B)) DEFINE A AS x = 1, C AS x = 1, "
                  "D AS x = 1, E AS x = 1, F AS x = 1, G AS x = 1, B AS x = 5)")
    assert len(cepsql.match_recognize(sql, t=ones(3_000))) == 0


def test_large_finite_pattern_is_a_counted_loop():
    # before: "pattern too large (>200000 instructions)"
    sql = HEAD + "((A{700}){700}) DEFINE A AS x = 1)"
    assert len(cepsql.match_recognize(sql, t=ones(1_000))) == 0
    sql = HEAD + "((A{70}){70}) DEFINE A AS x = 1)"
    assert cepsql.match_recognize(sql, t=ones(10_000))["n"].tolist() == [4_900, 4_900]


def test_counted_loop_program_is_small():
    from cepsql.algebra.pattern import Quantified, Var
    prog = program.compile_pattern(Quantified(Quantified(Var("A"), 700, 700), 700, 700), ["A"])
    assert len(prog) < 1_000   # unrolled: 490,001 instructions
    assert (prog.ops[:, 0] == OP_COUNT_LOOP).sum() == 1   # the inner {700} unrolls


def test_program_size_limit_is_positioned():
    alternatives = " | ".join(f"A{{{i}}}" for i in range(1, 700))
    sql = HEAD + f"({alternatives}) DEFINE A AS x = 1)"
    with pytest.raises(CepUnsupportedError) as err:
        cepsql.match_recognize(sql, t=ones(3))
    assert "pattern too large" in str(err.value) and err.value.line is not None


@settings(max_examples=120, **SETTINGS)
@given(sql=queries(), table=streams())
def test_counted_loops_match_reference(sql, table):
    """Every bounded quantifier with more than one iteration as a counted loop."""
    with mock.patch.object(program, "UNROLL_LIMIT", 0):
        assert_engine_matches(sql, table)


_SLOW = """
import numpy as np, pandas as pd, cepsql
n = 200_000
t = pd.DataFrame({"id": np.arange(n), "x": np.ones(n, dtype=np.int64)})
sql = %r
cepsql.match_recognize(sql, t=t.head(10))  # imports and compilation done
print("ready", flush=True)
cepsql.match_recognize(sql, t=t)   # quadratic in the start rows: minutes
print("finished", flush=True)
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sql", [
    # SQL:2016 matcher: quadratic in the start rows (FIRST(A.id) differs with every
    # start, so no failed attempt's memo key serves a later one; FIRST(A.x) = 5 no
    # longer is: all-ones rows share their FIRST(A.x) value)
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n "
    "PATTERN ((A*)*B) DEFINE A AS x = 1, B AS B.id - FIRST(A.id) > 1000000)",
    # CEP evaluator: every b row tried against every earlier a (never true), quadratic
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(a.id) AS f "
    "ONE ROW PER MATCH STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) "
    "WITHIN 10000000 ROWS DEFINE a AS a.x = 1, b AS b.x > a.x)"], ids=["sql", "cep"])
def test_ctrl_c_stops_a_running_match(sql):
    run = interrupt_after_ready(_SLOW % sql, timeout=20)
    assert run.waited < 10 and "finished" not in run.out
    assert run.returncode != 0 and "KeyboardInterrupt" in run.err, run.err[-2000:]


# --- the search's work, counted (SqlMatcher.thread_steps), and its pruning bound -----


def thread_steps(sql: str, table: pd.DataFrame, chunk_rows: int | None = None) -> int:
    """Live threads the matcher advanced over a row for sql on table (chunk_rows: the
    in-process chunk size, so that partitions stay open across chunks)."""
    matchers = []
    original = worker_module.MatchWorker._new_matcher

    def spy(self):
        matchers.append(original(self))
        return matchers[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(worker_module.MatchWorker, "_new_matcher", spy)
        if chunk_rows is not None:
            mp.setattr(worker_module, "CHUNK_ROWS", chunk_rows)
        assert len(cepsql.match_recognize(sql, t=table)) == 0
    return sum(m.thread_steps for m in matchers)


FIRST_B = HEAD + "((A*)*B) DEFINE A AS x = 1, B AS FIRST(A.x) = 5)"
PERMUTE_7 = HEAD + ("(PERMUTE(A+, C+, D+, E+, F+, G+, B)) DEFINE A AS x = 1, C AS x = 1, "
                    "D AS x = 1, E AS x = 1, F AS x = 1, G AS x = 1, B AS x = 5)")
COUNTED = HEAD + "((A{700}){700}) DEFINE A AS x = 1)"


@pytest.mark.parametrize("sql", [FIRST_B, FIRST_B.replace("(A*)*B", "(A*)+B")])
def test_match_dependent_b_search_is_linear(sql):
    # before: the failed-attempt memo keyed FIRST(A)'s row, different for every start,
    # so each start ran to the partition's end: 4x the steps for 2x the rows
    small, large = thread_steps(sql, ones(500)), thread_steps(sql, ones(1_000))
    assert large < 2.5 * small and large < 40 * 1_000, (small, large)


def test_open_chunk_permute_without_match_probes():
    # before: the open chunk's first attempt ran every mask's thread to the chunk's end
    # (about 500 steps a row); now a probe of 8 threads shows it undecided
    n = 2_000
    assert thread_steps(PERMUTE_7, ones(n), chunk_rows=n // 2) < 60 * n


@pytest.mark.parametrize("chunk_rows", [None, 1_000])
def test_counted_loop_longer_than_the_input(chunk_rows):
    # before: one thread per start row to the end of the input (n^2 / 2 steps); now no
    # start is tried closer than 490,000 rows to a closed partition's end, and an open
    # chunk's first start is shown undecided by one probe thread
    n = 2_000
    assert thread_steps(COUNTED, ones(n), chunk_rows=chunk_rows) <= 2 * n


def fewest_rows_seen(mp: pytest.MonkeyPatch, sql: str) -> list[int]:
    """The fewest_rows bound of every matcher sql's run builds (over three ones)."""
    seen = []
    original = worker_module.MatchWorker._new_matcher

    def spy(self):
        matcher = original(self)
        seen.append(matcher.fewest_rows)
        return matcher

    mp.setattr(worker_module.MatchWorker, "_new_matcher", spy)
    cepsql.match_recognize(sql, t=ones(3))
    return seen


@pytest.mark.parametrize("pattern,fewest", [
    ("(A{700}){700}", 490_000), ("A+ B?", 1), ("(A B){2,} C", 5), ("(A* B?)* C", 1),
    ("(A{2}){3} B{2,}", 8), ("(A{2,3} | B){4}", 4), ("^ A $", 1), ("A?", 0),
    ("{- A -} B{3}", 4), ("(A{5000}){0,3} B", 1), ("(A{3000}){2} | B", 1),
    ("PERMUTE(A, B{2}, C?)", 3), ("PERMUTE(A+, PERMUTE(B, C){2})", 5),
    ("PERMUTE(A*, B | C{3}, C) A", 3)])
@pytest.mark.parametrize("unroll_limit", [program.UNROLL_LIMIT, 0])
def test_fewest_rows_of_a_match(pattern, fewest, unroll_limit):
    # the bound that ends the search near a partition's end; exact for these patterns,
    # unrolled and as counted loops (UNROLL_LIMIT 0) alike
    defines = {"A": "A AS x = 1", "B": "B AS x = 2", "C": "C AS x = 3"}
    used = ", ".join(d for v, d in defines.items() if v in pattern)
    sql = HEAD + f"({pattern}) DEFINE {used})"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(program, "UNROLL_LIMIT", unroll_limit)
        assert fewest_rows_seen(mp, sql) == [fewest]


def test_searched_permute_counts_every_item():
    # PERMUTE(A+, C+, D+, E+, F+, G+, B): every item is used, at least one row each
    with pytest.MonkeyPatch.context() as mp:
        assert fewest_rows_seen(mp, PERMUTE_7) == [7]


def test_memo_tells_first_values_apart():
    # a failed attempt's configurations (FIRST(A) = 1) must not hide a later start's
    # (FIRST(A) = 5): keys hold a row with the same values, not any row
    table = pa.table({"ts": list(range(1, 7)), "price": [1, 5, 0, 0, 0, 0]})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(ts) AS f, "
           "count(*) AS n PATTERN ((A*)*B) DEFINE A AS price >= 0, B AS FIRST(A.price) = 5)")
    original = worker_module.MatchWorker._new_matcher

    def new_matcher(self):
        matcher = original(self)
        matcher.set_search(memo_span=0)   # every failed attempt feeds the memo
        return matcher

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(worker_module.MatchWorker, "_new_matcher", new_matcher)
        assert_engine_matches(sql, table)
        assert cepsql.match_recognize(sql, t=table).values.tolist() == [[2, 5]]


# --- the shapes against the reference evaluator, small inputs ----------------------

SHAPES = ["(A*)*B", "(A*)+B", "(A* B?)* C", "(A+ | B*)* C", "(A*)*? B",
          "PERMUTE(A+, C+, D+, E+, B)", "PERMUTE(A+, B, C?, D*, E)", "S PERMUTE(A+, C, D+, E?, B)",
          "(A{2}){2,3} B?", "(A{1,2} B){2}", "A{3,} B", "(A{2}){2} | B{2,} C"]
SHAPE_DEFINES = ["{v}.price > 2", "{v}.price >= FIRST({o}.price)", "FIRST({o}.price) = {v}.price - 1",
                 "FIRST({o}.price) = 5", "FIRST({o}.price) > 6", "{v}.price IS NOT NULL",
                 "{v}.price IS NOT NULL", "{v}.price > 8",
                 "{v}.price < PREV({v}.price)", "FIRST({o}.tag) = 'x'", "{v}.price % 2 = 0",
                 "FIRST({o}.vol) IS NULL OR {v}.vol > FIRST({o}.vol)"]


@st.composite
def shape_queries(draw) -> str:
    """The pathological shapes (nested empty-able loops, searched and dispatched PERMUTE,
    counted loops) with FIRST-reading and row-local DEFINEs."""
    pattern = draw(st.sampled_from(SHAPES))
    variables = sorted(set(re.findall(r"\b[A-GS]\b", pattern)))
    defines = [f"{v} AS {draw(st.sampled_from(SHAPE_DEFINES)).format(v=v, o=draw(st.sampled_from(variables)))}"
               for v in variables if draw(st.booleans()) or v == variables[-1]]
    rows = draw(st.sampled_from(["ONE ROW PER MATCH", "ALL ROWS PER MATCH"]))
    skip = draw(st.sampled_from(["AFTER MATCH SKIP PAST LAST ROW", "AFTER MATCH SKIP TO NEXT ROW"]))
    partition = draw(st.sampled_from(["PARTITION BY part", ""]))
    return (f"SELECT * FROM t MATCH_RECOGNIZE ({partition} ORDER BY ts MEASURES "
            f"MATCH_NUMBER() AS mn, count(*) AS n, FIRST(ts) AS f {rows} {skip} "
            f"PATTERN ({pattern}) DEFINE {', '.join(defines)})")


@settings(max_examples=150, **SETTINGS)
@given(sql=shape_queries(), table=streams(max_rows=14), chunk_rows=st.sampled_from([None, 3, 5]),
       unroll_limit=st.sampled_from([program.UNROLL_LIMIT, 0]), memo_span=st.sampled_from([16, 0]))
def test_shapes_match_reference(sql, table, chunk_rows, unroll_limit, memo_span):
    """Whole partitions and tiny chunks (open partitions: probes), counted loops forced,
    every failed attempt feeding the memo (memo_span 0: value-keyed FIRST rows)."""
    original = worker_module.MatchWorker._new_matcher

    def new_matcher(self):
        matcher = original(self)
        matcher.set_search(memo_span=memo_span)
        return matcher

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(worker_module.MatchWorker, "_new_matcher", new_matcher)
        if chunk_rows is not None:
            mp.setattr(worker_module, "CHUNK_ROWS", chunk_rows)
        mp.setattr(program, "UNROLL_LIMIT", unroll_limit)
        assert_engine_matches(sql, table)


def chunk_resumes(sql: str, table: pa.Table, chunk_rows: int, early_stop: bool) -> list:
    """Where each chunk's open partition resumes (row, match number, covered), or the
    error's type; early_stop=False also switches the probes off."""
    resumes = []
    new_original = worker_module.MatchWorker._new_matcher
    process_original = worker_module.MatchWorker._process

    def new_matcher(self):
        matcher = new_original(self)
        matcher.set_search(early_stop=early_stop)
        return matcher

    def process(self, *args):
        out, resume = process_original(self, *args)
        resumes.append(resume)
        return out, resume

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(worker_module.MatchWorker, "_new_matcher", new_matcher)
        mp.setattr(worker_module.MatchWorker, "_process", process)
        mp.setattr(worker_module, "CHUNK_ROWS", chunk_rows)
        try:
            cepsql.match_recognize(sql, t=table)
        except CepError as err:
            resumes.append(type(err))
    return resumes


@settings(max_examples=100, **SETTINGS)
@given(sql=shape_queries(), table=streams(max_rows=14), chunk_rows=st.sampled_from([3, 5]))
def test_probes_decide_like_the_full_run(sql, table, chunk_rows):
    """A probe calls an attempt undecided only when the full run would: a wrong
    "undecided" would not change the rows (the next chunk decides again) but would carry
    rows a streaming query could have let go, so the chunks' resume points are compared."""
    assert chunk_resumes(sql, table, chunk_rows, True) == \
        chunk_resumes(sql, table, chunk_rows, False), f"{sql}\ninput: {table.to_pylist()}"


def test_probe_leaves_a_start_whose_threads_die():
    # B never holds, so no match ends in the open chunk; the threads of the start at row
    # 0 die at the NULL: that start has no match, and the chunk resumes at row 4 (the
    # first start alive at the chunk's end), not at row 0
    table = pa.table({"ts": list(range(1, 15)), "price": [1, 1, 1, None] + [1] * 10})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES count(*) AS n "
           "PATTERN (PERMUTE(A+, C+, D+, E+, B)) DEFINE A AS price >= 0, C AS price >= 0, "
           "D AS price >= 0, E AS price >= 0, B AS price > 100)")
    assert chunk_resumes(sql, table, 3, True)[0] == (4, 0, 0)
