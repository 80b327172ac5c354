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
from cepsql.backends.local.engine import run_local
from cepsql.parse import explain_analyze, explain_format, parse_explain
from cepsql.runtime import worker as worker_module
from cepsql.runtime.run_stats import GroupSizes, RunStatistics

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
    # a's single-row part is price < 50; b's and c's read other rows, so they have none
    assert clause.variable_rows == {"A": int((df.price < 50).sum()), "B": None, "C": None}
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


def test_spark_figures_equal_in_process(spark, capsys):
    """Through the command line's script runner (spark.cep.sql -> EXPLAIN ANALYZE)."""
    df = _ticks(300)
    spark.createDataFrame(df).createOrReplaceTempView("ea_ticks")
    query = CEP_MODE.replace("FROM t", "FROM ea_ticks")
    _, local = _analyzed(CEP_MODE, df)
    assert run_script(spark, "EXPLAIN ANALYZE " + query + ";", header=False) == 0
    text = capsys.readouterr().out
    assert f"rows read:        {local.rows_read:,}" in text
    assert f"rows kept:        {local.rows_relevant:,}" in text
    for var, held in local.variable_rows.items():
        assert f"    {var}: {held:,} (" in text
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
