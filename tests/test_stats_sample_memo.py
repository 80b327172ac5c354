"""stats.SampleMemo: the estimates of many clauses over one sample (a workload's sharing
planner) compute what they have in common once, and give each clause exactly the
statistics it gets alone."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from cepsql.parse import find_match_recognize
from cepsql.stats import estimate_from_table
from cepsql.stats.sample_memo import SampleMemo


def _spec(body: str):
    return find_match_recognize(f"SELECT * FROM t MATCH_RECOGNIZE ({body})")[0].spec


def _table(n: int = 3_000) -> pa.Table:
    rng = np.random.default_rng(5)
    ts = np.cumsum(rng.exponential(0.05, n))  # ~20 rows per second
    return pa.table({
        "ts": pa.array((ts * 1e6).astype("int64"), pa.timestamp("us")),
        "sym": pa.array(rng.choice(["A", "B", "C", "D"], n, p=[0.6, 0.3, 0.09, 0.01])),
        "diff": pa.array(rng.normal(size=n)),
        "g": pa.array(rng.integers(0, 3, n)),
    })


CLAUSES = [
    # the same event types and pair condition under other variable names, other windows
    "ORDER BY ts MEASURES a.ts AS t STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) "
    "WITHIN INTERVAL '1' SECOND DEFINE a AS a.sym = 'A', b AS b.sym = 'B' AND a.diff < b.diff",
    "ORDER BY ts MEASURES x.ts AS t STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(x, y, z)) "
    "WITHIN INTERVAL '1' SECOND DEFINE x AS x.sym = 'A', y AS y.sym = 'B' AND x.diff < y.diff, "
    "z AS z.sym = 'D' AND z.diff > y.diff + 1",
    "ORDER BY ts MEASURES p.ts AS t STRATEGY SKIP_TILL_ANY_MATCH PATTERN (AND(p, q)) "
    "WITHIN INTERVAL '2' SECOND DEFINE p AS p.sym = 'A', q AS q.sym = 'B' AND p.diff < q.diff",
    # no D-row pair within a millisecond: the note names this clause's variables
    "ORDER BY ts MEASURES u.ts AS t STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(u, w)) "
    "WITHIN INTERVAL '0.001' SECOND DEFINE u AS u.sym = 'D', w AS w.sym = 'D' AND u.diff < w.diff",
    "ORDER BY ts MEASURES k.ts AS t STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(k, m)) "
    "WITHIN INTERVAL '0.001' SECOND DEFINE k AS k.sym = 'D', m AS m.sym = 'D' AND k.diff < m.diff",
    # another partitioning and a row window over the same conditions
    "PARTITION BY g ORDER BY ts MEASURES a.ts AS t STRATEGY SKIP_TILL_ANY_MATCH "
    "PATTERN (SEQ(a, b)) WITHIN 2 ROWS "
    "DEFINE a AS a.sym = 'A', b AS b.sym = 'B' AND a.diff < b.diff",
]


def test_memo_gives_each_clause_its_own_statistics_and_shares_the_work():
    table = _table()
    specs = [_spec(c) for c in CLAUSES]
    memo = SampleMemo()
    for spec in specs:
        alone = estimate_from_table(spec, table, max_rows=table.num_rows)
        shared = estimate_from_table(spec, table, max_rows=table.num_rows, memo=memo)
        assert shared.rates == alone.rates
        assert shared.unary_selectivity == alone.unary_selectivity
        assert shared.selectivities == alone.selectivities
        assert shared.pairs_evaluated == alone.pairs_evaluated
        assert shared.notes == alone.notes
    assert memo.hits >= 8  # flags of sym = 'A' / 'B' / 'D', the time axis, a's pair twice
    notes = estimate_from_table(specs[4], table, max_rows=table.num_rows, memo=memo).notes
    assert any(n.startswith("K-M: no candidate pairs within the window") for n in notes)


def test_memo_is_not_used_for_a_sample_of_the_table():
    """A sample smaller than the table is drawn per call: nothing is kept."""
    table = _table()
    memo = SampleMemo()
    for spec in [_spec(c) for c in CLAUSES[:3]]:
        estimate_from_table(spec, table, max_rows=1_000, memo=memo)
    assert memo.hits == 0
