"""Compact partitions (issue 24 A1; cep_output._set_compact): under ONE ROW PER MATCH with
no window a run folds what the output reads instead of recording buffer nodes, and a
match is held as its output row. Every such query must keep the reference's matches,
including when two matches share their first and last rows (the partition is then run
again with nodes, which order them by their rows)."""
from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from cepsql.runtime.run_stats import RunStatistics

try:
    from .support.strategies_cep import cep_streams
    from .test_property_cep import assert_cep_matches
    from .test_property_sql import SETTINGS
except ImportError:
    from support.strategies_cep import cep_streams
    from test_property_cep import assert_cep_matches
    from test_property_sql import SETTINGS

PATTERNS = ["SEQ(a, KL(b), c)", "a b* c", "a b? c", "SEQ(a, KL(b, 2, 3), c)", "a b c+",
            "a b+ c?", "SEQ(a, b)"]
MEASURES = ["FIRST(a.ts)", "LAST(b.ts)", "FIRST(b.ts, 1)", "LAST(b.price, 1)",
            "count(b.*)", "sum(b.price)", "max(b.vol)", "avg(b.vol)", "min(ts)",
            "CLASSIFIER()", "LAST(ts)", "MATCH_NUMBER()", "PREV(LAST(b.ts))",
            "count(DISTINCT b.tag)"]
DEFINES = ["a AS a.price < 5", "b AS b.price > a.price", "b AS b.vol > 1",
           "c AS c.price > 2", "c AS c.tag = 'x'", "b AS b.price > LAST(b.price, 1)"]


@st.composite
def compact_queries(draw):
    strategy = draw(st.sampled_from(["SKIP_TILL_NEXT_MATCH", "STRICT_CONTIGUITY",
                                     "PARTITION_CONTIGUITY"]))
    pattern = draw(st.sampled_from(PATTERNS))
    measures = draw(st.lists(st.sampled_from(MEASURES), min_size=1, max_size=4,
                             unique=True))
    defines = {}
    for d in draw(st.lists(st.sampled_from(DEFINES), max_size=3)):
        if f"{d[0]}" in pattern.replace("SEQ", "").replace("KL", ""):
            defines.setdefault(d[0], d)
    part = draw(st.sampled_from(["", "PARTITION BY part "]))
    return (f"SELECT * FROM t MATCH_RECOGNIZE ({part}ORDER BY ts MEASURES "
            + ", ".join(f"{m} AS m{i}" for i, m in enumerate(measures))
            + f" ONE ROW PER MATCH STRATEGY {strategy} PATTERN ({pattern})"
            + (" DEFINE " + ", ".join(defines.values()) if defines else "") + ")")


@settings(max_examples=60, **SETTINGS)
@given(sql=compact_queries(), table=cep_streams())
def test_compact_queries_match_reference(sql, table):
    assert_cep_matches(sql, table)


def test_equal_first_and_last_rows_run_again_with_rows():
    """a b+ c? where rows 2 and 3 are both b and c: (a, b, b) and (a, b, c) both end at
    row 3, so only their labels order them; the partition runs again with nodes."""
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(a.ts) AS t0, "
           "LAST(ts) AS t1, count(b.*) AS nb, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
           "STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (a b+ c?) "
           "DEFINE a AS a.price = 0, b AS b.price > 0, c AS c.price > 5)")
    table = pa.table({"ts": [1, 2, 3, 4], "price": [0, 7, 8, 1]})
    stats = RunStatistics()
    assert_cep_matches(sql, table, stats)
    assert stats.last["compact_retries"] == 1
    assert stats.last["peak_nodes"] > 0
