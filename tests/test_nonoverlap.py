"""AFTER MATCH SKIP PAST LAST ROW without PARTITION BY: the non-overlap selection runs over
the whole stream, so partition-key inference and time slicing stay off (EXPLAIN says
why), Spark gives the in-process rows, and the evaluator prunes what can no longer be
output."""
from __future__ import annotations

import pyarrow as pa
import pytest

import cepsql
from cepsql.parse import find_match_recognize
from cepsql.backends.local.engine import run_local
from cepsql.runtime.run_stats import RunStatistics
from cepsql.compile.clause import plan_query
from cepsql.analyze.partition_inference import infer_partition_keys
from cepsql.reference.cep import evaluate_reference_cep
from cepsql.backends.spark.slicing import slicing_blocker
from cepsql.explain.clause import explain_clause

PAST = "AFTER MATCH SKIP PAST LAST ROW"
# two symbols interleaved; a match is a, b, c of one symbol within 6 seconds
CROSS = ("SELECT * FROM ticks MATCH_RECOGNIZE (ORDER BY ts MEASURES a.sym AS sym, "
         "a.ts AS t0, c.ts AS t1 ONE ROW PER MATCH {skip} STRATEGY {s} "
         "PATTERN (SEQ(a, b, c)) WITHIN INTERVAL '6' SECOND "
         "DEFINE a AS a.kind = 'a', b AS b.kind = 'b' AND b.sym = a.sym, "
         "c AS c.kind = 'c' AND c.sym = a.sym)")


def _ticks(n: int = 40) -> pa.Table:
    return pa.table({"ts": list(range(n)),
                     "sym": ["X" if (i // 2) % 2 == 0 else "Y" for i in range(n)],
                     "kind": ["abc"[(i // 4 + i % 2) % 3] for i in range(n)],
                     "px": [float(i % 7) for i in range(n)]})


def _spec(sql: str):
    return find_match_recognize(sql)[0].spec


def _reference(sql: str, table: pa.Table) -> list[tuple]:
    return sorted(evaluate_reference_cep(_spec(sql), table)[1])


@pytest.mark.parametrize("strategy", ["SKIP_TILL_ANY_MATCH", "SKIP_TILL_NEXT_MATCH"])
def test_whole_stream_selection_blocks_inference_and_slicing(strategy):
    table = _ticks()
    every, past = CROSS.format(skip="", s=strategy), CROSS.format(skip=PAST, s=strategy)
    # without the SKIP clause the symbol is a partition key and the clause can be sliced
    assert [c for c, _ in infer_partition_keys(_spec(every), table.column_names)] == ["sym"]
    assert slicing_blocker(_spec(every)) is None
    assert infer_partition_keys(_spec(past), table.column_names) is None
    assert "PAST LAST ROW" in slicing_blocker(_spec(past))
    explain = explain_clause(plan_query(_spec(past), table.schema, past))
    assert "parallelism:   one task: AFTER MATCH SKIP PAST LAST ROW" in explain
    assert "parallelism" not in explain_clause(plan_query(_spec(every), table.schema, every))
    # the selection spans both symbols: fewer matches than one selection per symbol
    got = sorted(cepsql.match_recognize(past.replace("ticks", "t"), t=table)
                 .itertuples(index=False, name=None))
    assert got == _reference(past, table)
    per_symbol = past.replace("(ORDER BY ts", "(PARTITION BY sym ORDER BY ts")
    assert len(got) < len(_reference(per_symbol, table))


def test_spark_unpartitioned_matches_in_process(spark):
    table = _ticks(60)
    spark.createDataFrame(table.to_pandas()).createOrReplaceTempView("ticks")
    for strategy in ("SKIP_TILL_ANY_MATCH", "SKIP_TILL_NEXT_MATCH"):
        sql = CROSS.format(skip=PAST, s=strategy)
        want = _reference(sql, table)
        got = sorted(tuple(r) for r in spark.cep.sql(sql).collect())
        assert got == want and len(want) > 2
        plan = spark.cep.explain(sql)
        assert "parallelism:   one task" in plan and "Time slicing" not in plan


def test_spark_strict_contiguity_with_partition_by(spark):
    # two partitions interleaved in time; matches under STRICT_CONTIGUITY are contiguous
    # ranges of the whole input, so the whole-input selection is per partition
    table = pa.table({"part": list("AABBAAABBBAA"), "ts": list(range(12)),
                      "v": [0, 1, 0, 1, 0, 1, 1, 0, 1, 1, 0, 1]})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES "
           "FIRST(ts) AS t0, LAST(ts) AS t1, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
           f"{PAST} STRATEGY STRICT_CONTIGUITY PATTERN (a b+) "
           "DEFINE a AS v = 0, b AS v = 1)")
    want = _reference(sql, table)
    # A: (0,1) (4,5) (4,5,6) (10,11); B: (2,3) (7,8) (7,8,9) -- the longer ones overlap
    assert want == [("A", 0, 1, 1), ("A", 4, 5, 2), ("A", 10, 11, 3), ("B", 2, 3, 1),
                    ("B", 7, 8, 2)]
    assert sorted(cepsql.match_recognize(sql, t=table).itertuples(index=False, name=None)) \
        == want
    spark.createDataFrame(table.to_pandas()).createOrReplaceTempView("t")
    assert sorted(tuple(r) for r in spark.cep.sql(sql).collect()) == want


def _counters(sql: str, table: pa.Table) -> dict:
    stats = RunStatistics()
    with cepsql.planner_options(infer_partitions=False):
        run_local(sql, {"t": table}, stats=stats)
    return stats.last


def test_planned_partial_matches_are_pruned():
    """Once a match is selected, partial matches that started at or before its last row
    are never joined further: far fewer are formed than when every match is output."""
    n = 1500
    table = pa.table({"ts": list(range(n)), "sym": ["X"] * n,
                      "kind": ["abc"[i % 3] if i % 5 else "a" for i in range(n)],
                      "px": [0.0] * n})
    sql = CROSS.replace("ticks", "t").replace("'6' SECOND", "'30' SECOND")
    every = _counters(sql.format(skip="", s="SKIP_TILL_ANY_MATCH"), table)
    past = _counters(sql.format(skip=PAST, s="SKIP_TILL_ANY_MATCH"), table)
    assert every["planned"] == past["planned"] == 1
    assert past["partial_matches"] * 10 < every["partial_matches"]


def test_runs_are_pruned():
    """The run NFA drops runs that started at or before the selected match's last row
    (SASE+ section 4: "prune all other runs"), so their closures stop branching."""
    n = 1500
    table = pa.table({"ts": list(range(n)), "kind": [
        "a" if i % 4 == 0 else ("c" if i % 9 == 0 else "b") for i in range(n)]})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(a.ts) AS t0, "
           "LAST(c.ts) AS t1 {skip} STRATEGY SKIP_TILL_NEXT_MATCH "
           "PATTERN (SEQ(a, KL(b), c)) WITHIN 40 ROWS "
           "DEFINE a AS a.kind = 'a', b AS b.kind = 'b', c AS c.kind = 'c')")
    every = _counters(sql.format(skip=""), table)
    past = _counters(sql.format(skip=PAST), table)
    assert past["runs_created"] * 3 < every["runs_created"]
    assert past["peak_nodes"] * 10 < every["peak_nodes"]
