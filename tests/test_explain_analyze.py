"""EXPLAIN ANALYZE (explain/analyze.py, runtime/run_stats.py): the measured figures equal
what the run actually read and returned, in-process and on Spark alike."""
from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import cepsql
from cepsql.api.cli import run_script
from cepsql.errors import CepUnsupportedError
from cepsql.backends.local.engine import run_local
from cepsql.parse import (explain_analyze, explain_format, find_match_recognize,
                          parse_explain, parse_explain_workload)
from cepsql.runtime import worker as worker_module
from cepsql.runtime.run_stats import GroupSizes, PositionalCounts, RunStatistics

SQL_MODE = """
SELECT * FROM t MATCH_RECOGNIZE (
  PARTITION BY sym ORDER BY ts
  MEASURES FIRST(a.ts) AS start_ts, LAST(c.ts) AS end_ts
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (a b+ c)
  DEFINE a AS price < 50, b AS b.price > PREV(b.price), c AS c.price < a.price)
"""

CEP_MODE = """
SELECT * FROM t MATCH_RECOGNIZE (
  PARTITION BY sym ORDER BY ts
  MEASURES a.ts AS a_ts, b.ts AS b_ts
  ONE ROW PER MATCH
  STRATEGY SKIP_TILL_NEXT_MATCH
  PATTERN (SEQ(a, b))
  DEFINE a AS a.price < 20, b AS b.price > 90 AND b.price > a.price)
"""


def _ticks(n: int = 600, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    syms = rng.choice(["A", "B", "C", "D"], size=n, p=[0.55, 0.25, 0.15, 0.05])
    return pd.DataFrame({"sym": syms, "ts": np.arange(n, dtype=np.int64),
                         "price": rng.integers(0, 100, size=n).astype(np.int64)})


def _analyzed(sql: str, df: pd.DataFrame):
    stats = RunStatistics()
    out = run_local(sql, {"t": df}, stats=stats)
    assert len(stats.clauses) == 1
    return out, stats.clauses[0]


def test_sql_mode_figures_equal_the_run():
    df = _ticks()
    out, clause = _analyzed(SQL_MODE, df)
    assert clause.rows_read == len(df)
    assert clause.output_rows == out.num_rows > 0
    assert clause.counters["matches_output"] == out.num_rows  # ONE ROW PER MATCH
    assert clause.counters["attempts"] >= out.num_rows
    assert clause.counters["peak_thread_states"] >= 1
    sizes = df.groupby("sym").size()
    assert sorted(clause.partition_rows) == sorted(sizes.tolist())
    assert clause.skew() == (sizes.max(), float(np.median(sizes)))
    # a's conjunct reads its row, b's PREV of it (counted after the sort); c's reads A's
    rising = df.sort_values(["sym", "ts"]).groupby("sym").price.diff() > 0
    assert clause.variable_rows == {"A": int((df.price < 50).sum()),
                                    "B": int(rising.sum()), "C": None}
    assert set(clause.seconds) == {"input", "shuffle+sort", "evaluation", "output"}


@pytest.mark.parametrize("chunk", [3, 50])
def test_counters_across_chunks(monkeypatch, chunk):
    """Chunked (attempts undecided at a chunk's end are retried in the next) and split
    over threads (each slice's worker counts, the counts are merged), the matches
    counted are still the rows output."""
    df = _ticks(400)
    _, whole = _analyzed(SQL_MODE, df)
    monkeypatch.setattr(worker_module, "CHUNK_ROWS", chunk)
    with cepsql.planner_options(threads=2):
        out, chunked = _analyzed(SQL_MODE, df)
    assert chunked.counters["matches_output"] == out.num_rows == whole.output_rows
    assert chunked.counters["attempts"] >= whole.counters["attempts"]  # retried starts


def test_cep_mode_counts_the_relevance_filter_and_selection():
    df = _ticks()
    out, clause = _analyzed(CEP_MODE, df)
    a, b = int((df.price < 20).sum()), int((df.price > 90).sum())
    assert clause.rows_read == len(df)
    assert clause.rows_relevant == int(((df.price < 20) | (df.price > 90)).sum())
    assert clause.variable_rows == {"A": a, "B": b}
    assert clause.output_rows == out.num_rows > 0
    assert clause.counters["matches_output"] == out.num_rows
    assert clause.counters["matches_found"] >= out.num_rows
    assert sum(clause.partition_rows) == clause.rows_relevant


NAVIGATION = """
SELECT * FROM t MATCH_RECOGNIZE (
  {partition} ORDER BY ts
  MEASURES FIRST(up.ts) AS start_ts, LAST(dn.ts) AS end_ts
  ONE ROW PER MATCH
  PATTERN (up{{2,}} dn)
  DEFINE up AS up.price > PREV(up.price) * 1.001,
         dn AS dn.price < PREV(dn.price, 2) AND NEXT(price) > 10 AND dn.price % 2 = 0
               AND dn.price < FIRST(up.price))
"""


def _navigation_expected(df: pd.DataFrame, keys: list[str]) -> dict[str, int]:
    """The DEFINE conjuncts on the row and PREV/NEXT of it, by pandas shift()."""
    s = df.sort_values(keys + ["ts"])
    price = s.price.astype("float64")  # NULL as NaN: every comparison with it False
    shifted = price.groupby([s[k] for k in keys]).shift if keys else price.shift
    up = price > shifted(1) * 1.001
    dn = (price < shifted(2)) & (shifted(-1) > 10) & (price % 2 == 0)
    return {"UP": int(up.sum()), "DN": int(dn.sum())}


def _with_nulls(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df["price"] = df.price.astype("Int64").mask(df.index % 17 == 5)
    return df


@pytest.mark.parametrize("partition", ["PARTITION BY sym", "PARTITION BY lower(sym)", ""])
def test_prev_next_conjuncts_counted_as_pandas_shift(partition):
    """PREV/NEXT read the rows of the same partition in ORDER BY order, NULL past its
    edges: the counts equal pandas' groupby().shift() over the sorted input (partitions
    sorted per slice in threads, sorted whole, and one unpartitioned stream)."""
    df = _with_nulls(_ticks(500, seed=5))
    sql = NAVIGATION.format(partition=partition)
    _, clause = _analyzed(sql, df)
    assert clause.variable_rows == _navigation_expected(df, ["sym"] if partition else [])
    text = cepsql.explain_query(sql, analyze=True, t=df)
    held = clause.variable_rows["UP"]
    assert f"UP: {held:,} of 500 rows ({100 * held / 500:.1f}%) satisfy " \
           "UP.price > (PREV(UP.price, 1) * 1.001)" in text
    # the counted conjuncts named; the one reading FIRST(up.price) is not counted
    assert "satisfy DN.price < PREV(DN.price, 2) AND NEXT(price, 1) > 10 AND " \
           "(DN.price % 2) = 0\n" in text


@pytest.mark.parametrize("sizes", [[1] * 12, [2, 5, 1, 4], [12]])
def test_positional_counts_across_batches(sizes):
    """Rows whose NEXT rows come in a later batch wait for it; PREV reads the rows kept
    from the batch before; groups split across batches stay one group."""
    df = _with_nulls(_ticks(12, seed=1)).sort_values(["sym", "ts"], ignore_index=True)
    spec = find_match_recognize(NAVIGATION.format(partition="PARTITION BY sym"))[0].spec
    table = pa.Table.from_pandas(df, preserve_index=False)
    counts = PositionalCounts(spec, ["sym"])
    at = 0
    for size in sizes:
        counts.add(table.slice(at, size).to_batches()[0])
        at += size
    assert counts.counts() == _navigation_expected(df, ["sym"])


def test_group_sizes_across_batches():
    sizes = GroupSizes(["k"])
    for keys in (["x", "x"], ["x", "y", "y"], ["y"], [None, None], [None, "z"]):
        sizes.add(pa.table({"k": pa.array(keys, pa.string())}))
    assert sizes.sizes() == [3, 3, 3, 1]
    whole = GroupSizes([])  # no PARTITION BY: one group
    whole.add(pa.table({"v": [1, 2]}))
    whole.add(pa.table({"v": [3]}))
    assert whole.sizes() == [3]


def test_explain_text_and_svg_in_process(tmp_path):
    df = _ticks(200)
    n_matches = len(cepsql.match_recognize(SQL_MODE, t=df))
    text = cepsql.explain_query(SQL_MODE, analyze=True, t=df)
    assert "rows read:        200" in text
    assert f"matches output (after AFTER MATCH / strategy rules): {n_matches}" in text
    assert f"rows returned: {n_matches}" in text
    assert "time per stage:   input" in text
    # the statement form, and EXPLAIN without ANALYZE plans only
    assert cepsql.explain_query("EXPLAIN ANALYZE " + SQL_MODE, t=df).count("rows read") == 1
    plain = cepsql.explain_query("EXPLAIN " + SQL_MODE, t=df)
    assert "== MATCH_RECOGNIZE clause 1 ==" in plain and "rows read" not in plain
    drawing = cepsql.explain_query("EXPLAIN ANALYZE FORMAT SVG " + SQL_MODE, t=df,
                             file=str(tmp_path / "p.svg"))
    assert drawing.startswith("<svg") and f"{n_matches:,} matches" in drawing
    assert f"rows 200 -&gt; {n_matches}" in drawing
    assert (tmp_path / "p.svg").read_text() == drawing


def test_parse_explain_analyze():
    stmt = "EXPLAIN ANALYZE FORMAT SVG SELECT 1"
    assert explain_analyze(stmt) and explain_format(stmt) == "SVG"
    assert parse_explain(stmt) == ("SELECT 1", len("EXPLAIN ANALYZE FORMAT SVG "))
    assert not explain_analyze("EXPLAIN SELECT 1")
    assert parse_explain("explain analyze select 1")[0] == "select 1"
    stmt = "EXPLAIN ANALYZE WORKLOAD (v1, v2)"
    assert parse_explain_workload(stmt) == (["v1", "v2"], stmt.index("(")) \
        and explain_analyze(stmt)
    assert not explain_analyze("EXPLAIN WORKLOAD ticks")
    with pytest.raises(CepUnsupportedError, match="spark.cep.sql") as err:
        cepsql.explain_query("EXPLAIN ANALYZE WORKLOAD t", t=_ticks(3))
    assert "line 1, column 26" in str(err.value)  # at the workload's name


def test_explain_analyze_workload_counts_the_pass(spark):
    """EXPLAIN ANALYZE WORKLOAD runs the shared pass once more, measured: rows read, rows
    the pass feeds each clause (its own relevance filter), rows each returns."""
    df = _ticks(200)
    spark.createDataFrame(df).createOrReplaceTempView("eaw_ticks")
    views = {"eaw_cep": CEP_MODE, "eaw_sql": SQL_MODE}
    for name, query in views.items():
        spark.cep.sql(f"CREATE OR REPLACE TEMPORARY VIEW {name} AS "
                      + query.replace("FROM t", "FROM eaw_ticks"))
    try:
        text = spark.cep.sql("EXPLAIN ANALYZE WORKLOAD eaw_ticks").collect()[0][0]
        plain = spark.cep.sql("EXPLAIN WORKLOAD eaw_ticks").collect()[0][0]
    finally:
        for name in views:
            spark.cep.sql(f"DROP VIEW IF EXISTS {name}")
    analyzed = text[text.index("== Analyze =="):]
    assert "rows read:        200\n" in analyzed
    fed = {"eaw_cep": int(((df.price < 20) | (df.price > 90)).sum()), "eaw_sql": len(df)}
    for name, query in views.items():
        returned = len(cepsql.match_recognize(query, t=df))
        assert f"    {name}: {fed[name]:,} -> {returned:,}\n" in analyzed
    assert "time in tasks:    shuffle+sort" in analyzed and "the pass's job:" in analyzed
    assert "rows read" not in plain


def test_spark_figures_equal_in_process(spark, capsys):
    """Through the command line's script runner (spark.cep.sql -> EXPLAIN ANALYZE); the
    PREV/NEXT conjuncts counted in the Spark tasks as in-process (and as pandas)."""
    df = _with_nulls(_ticks(300))
    spark.createDataFrame(df).createOrReplaceTempView("ea_ticks")
    query = CEP_MODE.replace("FROM t", "FROM ea_ticks")
    navigation = NAVIGATION.format(partition="PARTITION BY sym")
    _, local = _analyzed(CEP_MODE, df)
    _, moving = _analyzed(navigation, df)
    assert moving.variable_rows == _navigation_expected(df, ["sym"])
    assert run_script(spark, "EXPLAIN ANALYZE " + navigation.replace("FROM t", "FROM ea_ticks")
                      + ";", header=False) == 0
    text = capsys.readouterr().out
    for var, held in moving.variable_rows.items():
        assert f"    {var}: {held:,} of {len(df):,} rows (" in text
    assert run_script(spark, "EXPLAIN ANALYZE " + query + ";", header=False) == 0
    text = capsys.readouterr().out
    assert f"rows read:        {local.rows_read:,}" in text
    assert f"rows kept:        {local.rows_relevant:,}" in text
    for var, held in local.variable_rows.items():
        assert f"    {var}: {held:,} of {local.rows_relevant:,} rows (" in text
    assert f"partitions:       {local.partitions:,}; largest {local.skew()[0]:,} rows" in text
    assert f"matches output (after AFTER MATCH / strategy rules): " \
           f"{local.counters['matches_output']:,}" in text
    assert f"output rows:      {local.output_rows:,}" in text
    assert f"rows returned: {local.output_rows:,}" in text


def test_the_explain_package_is_not_shadowed_by_the_in_process_entry_point():
    """``import cepsql.explain.x as y`` reads the attribute cepsql.explain: a function of
    that name made it fail (ImportError), so the entry point is cepsql.explain_query."""
    assert importlib.import_module("cepsql.explain").__name__ == "cepsql.explain"
    assert cepsql.explain is importlib.import_module("cepsql.explain")
