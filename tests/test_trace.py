"""The matcher trace (cepsql.trace / spark.cep.trace / cepsql trace / plot_trace).

The trace's matches equal the engine's (property test over generated queries and streams),
its held/failed marks equal the whole DEFINE's verdict, Spark and in-process agree.
"""
from __future__ import annotations

import re
from collections import Counter

import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import cepsql
from cepsql.analyze.conjuncts import split_conjuncts
from cepsql.api.cli import main
from cepsql.errors import CepAnalysisError, CepError, CepRuntimeError, CepUnsupportedError
from cepsql.parse import find_match_recognize
from cepsql.reference.expr import evaluate
from cepsql.reference.sql import ReferenceQuery, partitioned_rows
from support.strategies import patterns, queries, streams
from support.strategies_cep import cep_queries, cep_streams

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                      HealthCheck.data_too_large])

TICKS = pd.DataFrame({"sym": ["a"] * 8 + ["b"] * 4, "ts": list(range(8)) + list(range(4)),
                      "price": [5, 4, 3, 4, 6, 5, 5, 2, 1, 2, 3, 4]})
V_SHAPE = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts
  MEASURES FIRST(A.ts) AS s PATTERN (A B+ C+)
  DEFINE B AS B.price < PREV(B.price),
         C AS C.price > PREV(C.price) AND C.price > FIRST(A.price))"""


def _matched_rows(sql: str, table) -> Counter:
    """(partition, ts, match number, variable) of every matched row, by the engine."""
    if "STRATEGY" in sql:  # the CEP generator writes one line
        sql = re.sub(r"MEASURES .*?(ONE|ALL) ROWS? PER MATCH",
                     "MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS cls ALL ROWS PER MATCH",
                     sql)
        return _engine_rows(sql, table)
    lines = []
    for line in sql.splitlines():
        if line.startswith("MEASURES"):
            line = "MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS cls"
        elif line.startswith(("ONE ROW", "ALL ROWS")):
            line = "ALL ROWS PER MATCH"
        lines.append(line)
    if not any(line.startswith("ALL ROWS") for line in lines):
        lines.insert(3, "ALL ROWS PER MATCH")
    return _engine_rows("\n".join(lines), table)


def _engine_rows(sql: str, table) -> Counter:
    out = cepsql.match_recognize(sql, t=table)
    part = out["part"] if "PARTITION BY part" in sql else [None] * len(out)
    return Counter((p, int(t), int(m), c if isinstance(c, str) else None)
                   for p, t, m, c in zip(part, out["ts"], out["mn"], out["cls"]))


def _traced_rows(frame: pd.DataFrame) -> Counter:
    """The same, read off the trace's match steps."""
    has_part = "part" in frame
    ts = {(r.part if has_part else None, r.row): r.ts for r in frame.itertuples()
          if not pd.isna(r.ts)}
    got = Counter()
    for r in frame[frame["event"] == "match"].itertuples():
        p = r.part if has_part else None
        names = r.path.split()
        if not names:
            got[(p, int(ts[(p, r.attempt)]), int(r.match_number), None)] += 1
        for row, name in zip(map(int, filter(None, r.path_rows.split(", "))), names):
            got[(p, int(ts[(p, row)]), int(r.match_number), name)] += 1
    return got


@settings(max_examples=60, **SETTINGS)
@given(sql=queries(max_items=4), table=streams(max_rows=12))
def test_trace_matches_are_the_engines(sql, table):
    assume("{-" not in sql)  # excluded rows are not output rows
    try:
        want = _matched_rows(sql, table)
    except CepError as err:
        with pytest.raises(type(err)):
            cepsql.trace(sql, t=table)
        return
    assert _traced_rows(cepsql.trace(sql, t=table)) == want, sql


@pytest.mark.parametrize("strategy", ["SKIP_TILL_NEXT_MATCH", "SKIP_TILL_ANY_MATCH",
                                      "PARTITION_CONTIGUITY", "STRICT_CONTIGUITY"])
def test_cep_trace_matches_are_the_engines(strategy):
    @settings(max_examples=25, **SETTINGS)
    @given(sql=cep_queries(strategy), table=cep_streams(max_rows=8))
    def check(sql, table):
        assume("{-" not in sql)
        try:
            want = _matched_rows(sql, table)
        except CepError as err:
            with pytest.raises(type(err)):
                cepsql.trace(sql, t=table)
            return
        assert _traced_rows(cepsql.trace(sql, t=table)) == want, sql
    check()


CONJUNCTS = ["{v}.price > PREV({v}.price)", "{v}.vol > 0.5", "count({v}.*) < 3",
             "{v}.price >= FIRST({v}.price)", "{v}.tag = 'x' OR {v}.vol IS NULL",
             "sum({v}.price) <= 12", "{v}.price BETWEEN 2 AND 8"]


@st.composite
def conjunctive_queries(draw) -> str:
    """Patterns of the property generator, each DEFINE an AND of two or three conditions."""
    pattern = draw(patterns(4))
    variables = sorted(set(re.findall(r"\b[A-Z]\b", pattern))) or ["A"]
    if not re.findall(r"\b[A-Z]\b", pattern):
        pattern = f"({pattern}) A"
    defines = []
    for v in variables:
        parts = draw(st.lists(st.sampled_from(CONJUNCTS), min_size=2, max_size=3, unique=True))
        defines.append(f"{v} AS " + " AND ".join(f"({p.format(v=v)})" for p in parts))
    return (f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES "
            f"count(*) AS n PATTERN ({pattern}) DEFINE {', '.join(defines)})")


@settings(max_examples=40, **SETTINGS)
@given(sql=conjunctive_queries(), table=streams(max_rows=10))
def test_held_and_failed_marks_are_the_whole_defines_verdict(sql, table):
    frame = cepsql.trace(sql, t=table)
    spec = find_match_recognize(sql)[0].spec
    query = ReferenceQuery(spec, table.column_names)
    parts = {tuple(_key(p, spec)): p for p in partitioned_rows(spec, table.to_pylist(),
                                                                query.colmap)}
    tried = frame[frame["event"].isin(["extended", "failed"])]
    for r in tried.itertuples():
        rows = parts[(r.part,)]
        labels = tuple(r.path.split())
        ctx = query.context(rows, start=r.attempt, labels=labels, current=r.row,
                            match_number=1, in_define=True)
        held = evaluate(query.defines[r.variable], ctx) is True
        assert held == (r.event == "extended"), (sql, r)
        if r.event == "failed":  # the named conjunct is FALSE/NULL, those before it TRUE
            texts = [c.strip() for c in re.split(r"\) AND \(", _define_text(sql, r.variable))]
            verdicts = [evaluate(c, ctx) is True
                        for c in split_conjuncts(query.defines[r.variable])]
            i = texts.index(r.conjunct)
            assert verdicts[:i + 1] == [True] * i + [False], (sql, r.conjunct, verdicts)


def _define_text(sql: str, var: str) -> str:
    body = re.search(rf"\b{var} AS \((.*?)\)(, [A-Z] AS|\)$)", sql).group(1)
    return body


def _key(rows, spec):
    return [rows[0][k.name] for k in spec.partition_by] if rows else []


def test_trace_names_the_failed_conjunct_and_its_values():
    frame = cepsql.trace(V_SHAPE, t=TICKS, partition={"sym": "a"}, rows=(0, 4))
    failed = frame[frame["event"] == "failed"]
    first = failed.iloc[0]
    assert (first["row"], first["variable"], first["conjunct"]) == \
        (3, "B", "B.price < PREV(B.price)")
    assert first["values"] == "B.price = 4, PREV(B.price) = 3, result = FALSE"
    c_fail = failed[failed["variable"] == "C"].iloc[0]
    assert c_fail["conjunct"] == "C.price > FIRST(A.price)"  # the second conjunct
    assert "FIRST(A.price) = 5" in c_fail["values"]
    assert set(frame["sym"]) == {"a"} and frame["row"].max() <= 4


def test_trace_marks_matches_and_skipped_rows():
    frame = cepsql.trace(V_SHAPE, t=TICKS, partition={"sym": "b"})
    assert list(frame[frame["event"] == "match"]["path"]) == []
    data = pd.DataFrame({"ts": range(6), "price": [3, 2, 1, 2, 3, 9]})
    q = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(A.ts) AS s
      PATTERN (A B+ C+) DEFINE B AS B.price < PREV(B.price), C AS C.price > PREV(C.price))"""
    frame = cepsql.trace(q, t=data)
    match = frame[frame["event"] == "match"]
    assert list(zip(match["attempt"], match["row"], match["path"])) == [(0, 5, "A B B C C C")]
    skipped = frame[frame["event"] == "skipped"]
    assert list(skipped["row"]) == [1, 2, 3, 4, 5]
    assert set(skipped["conjunct"]) == {"AFTER MATCH SKIP PAST LAST ROW"}


def test_trace_window_cuts_rows():
    data = pd.DataFrame({"ts": range(6), "price": [3, 2, 1, 0, -1, -2]})
    q = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES count(*) AS n
      PATTERN (A B{4}) WITHIN 3 ROWS DEFINE B AS B.price < PREV(B.price))"""
    frame = cepsql.trace(q, t=data)
    assert "window" in set(frame["event"])
    assert frame[frame["event"] == "match"].empty
    assert cepsql.match_recognize(q, t=data).empty


def test_trace_is_capped_and_checks_its_arguments():
    with pytest.raises(CepRuntimeError, match="more than 5 steps"):
        cepsql.trace(V_SHAPE, t=TICKS, max_steps=5)
    with pytest.raises(CepRuntimeError, match="more than 3 rows"):
        cepsql.trace(V_SHAPE, t=TICKS, max_rows=3)
    with pytest.raises(CepAnalysisError, match="symbol is not a PARTITION BY column"):
        cepsql.trace(V_SHAPE, t=TICKS, partition={"symbol": "a"})
    with pytest.raises(CepAnalysisError, match="rows="):
        cepsql.trace(V_SHAPE, t=TICKS, rows=(4, 2))
    with pytest.raises(CepUnsupportedError, match="one MATCH_RECOGNIZE clause"):
        cepsql.trace(f"SELECT * FROM ({V_SHAPE}) JOIN ({V_SHAPE}) USING (sym)", t=TICKS)
    with pytest.raises(CepAnalysisError) as err:
        cepsql.trace(V_SHAPE.replace("PREV(B.price)", "PREV(B.nope)"), t=TICKS)
    assert err.value.line is not None


def test_cli_trace_prints_a_table(capsys):
    code = main(["trace", "-e", V_SHAPE.replace("FROM t", "FROM ticks").replace("sym", "symbol"),
                 "--demo-rows", "60", "--partition", "symbol=AAPL", "--rows", "0:4"])
    out = capsys.readouterr().out
    assert code == 0
    assert "| symbol | step | row |" in out and "B.price < PREV(B.price)" in out
    code = main(["trace", "-e", "SELECT * FROM ticks MATCH_RECOGNIZE (ORDER BY ts "
                 "PATTERN (A) DEFINE A AS A.nope > 1)", "--demo-rows", "10"])
    assert code == 1 and "nope" in capsys.readouterr().err


def test_plot_trace_draws_marks_and_paths(tmp_path):
    frame = cepsql.trace(V_SHAPE, t=TICKS)
    fig = cepsql.plot_trace(frame, TICKS, x="ts", y="price", where={"sym": "a"},
                            file=str(tmp_path / "trace.png"))
    ax = fig.axes[1]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["A", "B", "C"]
    assert {t.get_text() for t in ax.get_legend().get_texts()} >= {"held", "failed"}
    assert (tmp_path / "trace.png").stat().st_size > 0
    with pytest.raises(CepAnalysisError, match="one partition"):
        cepsql.plot_trace(frame)


def test_spark_trace_and_near_misses_equal_in_process(spark):
    spark.createDataFrame(TICKS).createOrReplaceTempView("trace_ticks")
    q = V_SHAPE.replace("FROM t", "FROM trace_ticks")
    got = spark.cep.trace(q, partition={"sym": "a"}, rows=(2, 7)).toPandas()
    want = cepsql.trace(V_SHAPE, t=TICKS, partition={"sym": "a"}, rows=(2, 7))
    assert _plain(got) == _plain(want)
    # every partition, in Spark tasks (a NULL key among them), overall and per partition
    keyed = TICKS.assign(sym=["a"] * 5 + [None] * 3 + ["b"] * 4)
    spark.createDataFrame(keyed).createOrReplaceTempView("trace_ticks_keyed")
    q = V_SHAPE.replace("FROM t", "FROM trace_ticks_keyed")
    for per_partition in (False, True):
        got = spark.cep.near_misses(q, 3, per_partition=per_partition).toPandas()
        want = cepsql.near_misses(V_SHAPE, 3, per_partition=per_partition, t=keyed)
        assert _plain(got) == _plain(want) and len(want) >= 3
    with pytest.raises(CepAnalysisError, match="not a PARTITION BY column"):
        spark.cep.trace(q, partition={"symbol": "a"})


def _plain(frame: pd.DataFrame) -> list:
    return [tuple(None if pd.isna(v) else (int(v) if isinstance(v, float) and v.is_integer()
                                           else v) for v in row)
            for row in frame.itertuples(index=False)]
