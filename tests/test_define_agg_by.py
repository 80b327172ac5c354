"""max_by/min_by in DEFINE: running values over the rows matched so far (current row
included) equal Spark's running window aggregate, in SQL:2016 and CEP mode, through
spark.cep.sql and cepsql.match_recognize, and equal the reference evaluator.

Every row carries Spark's own running max_by/min_by (a window from the partition's first
row); a pattern A+ whose DEFINE requires the matcher's value to equal it at every row
spans the whole partition exactly when the two agree at every row.
"""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

import cepsql
from cepsql.parse import find_match_recognize
from cepsql.errors import CepUnsupportedError
from cepsql.reference.sql import evaluate_reference
from support.running import longest_from_first_row, running_window_view

NAN = float("nan")
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
ROWS = [  # k, id, x DECIMAL(10,2), y DOUBLE, n BIGINT, ts TIMESTAMP
    (0, 1, Decimal("1.50"), 2.0, 5, T0),
    (0, 2, None, 3.0, 2 ** 62, T0 + dt.timedelta(microseconds=1)),
    (0, 3, Decimal("7.25"), 3.0, -4, T0),
    (0, 4, Decimal("0.01"), None, 9, None),
    (0, 5, Decimal("-2.00"), NAN, 2 ** 62 + 1, T0 + dt.timedelta(microseconds=1)),
    (0, 6, Decimal("3.00"), 1.0, None, T0 - dt.timedelta(days=1)),
    (0, 7, Decimal("4.00"), NAN, 8, T0 + dt.timedelta(microseconds=2)),
    (1, 1, None, None, None, None),
    (1, 2, Decimal("2.00"), -0.0, 1, T0),
    (1, 3, Decimal("9.99"), 0.0, 1, T0),
    (1, 4, Decimal("1.00"), -1.0, 0, T0),
]
SCHEMA = "k INT, id BIGINT, x DECIMAL(10,2), y DOUBLE, n BIGINT, ts TIMESTAMP"
# (DEFINE aggregate, the same aggregate as a Spark running window)
AGGS = [("max_by(A.x, A.y)", "max_by(x, y)"), ("min_by(A.x, A.y)", "min_by(x, y)"),
        ("max_by(A.y, A.n)", "max_by(y, n)"), ("min_by(A.n, A.ts)", "min_by(n, ts)"),
        ("max_by(A.ts, A.x)", "max_by(ts, x)"), ("max_by(A.n - 1, A.y + 1)", "max_by(n - 1, y + 1)")]


def _query(view: str, agg: str, cep: bool, col: str) -> str:
    strategy = "STRATEGY PARTITION_CONTIGUITY " if cep else ""
    cond = f"({agg} = A.{col} OR ({agg} IS NULL AND A.{col} IS NULL))"
    return (f"SELECT * FROM {view} MATCH_RECOGNIZE (PARTITION BY k ORDER BY id "
            "MEASURES FIRST(A.id) AS s, COUNT(A.*) AS c ONE ROW PER MATCH "
            f"{strategy}PATTERN (A+) DEFINE A AS {cond})")


@pytest.fixture(scope="module")
def by_view(spark):
    yield from running_window_view(spark, ROWS, SCHEMA, [f"{s} {{w}}" for _, s in AGGS],
                                   "by_rows")


@pytest.mark.parametrize("i", range(len(AGGS)), ids=[a for a, _ in AGGS])
def test_running_max_by_min_by_equal_sparks_window(spark, by_view, i):
    view, table = by_view
    sizes = {0: 7, 1: 4}
    for cep in (False, True):
        sql = _query(view, AGGS[i][0], cep, f"e{i}")
        got = longest_from_first_row((r.k, r.s, r.c) for r in spark.cep.sql(sql).collect())
        assert got == sizes, (AGGS[i][0], cep, "spark.cep.sql")
        local = cepsql.match_recognize(sql, by_rows=table)
        assert longest_from_first_row(zip(local["k"], local["s"], local["c"])) == sizes, \
            (AGGS[i][0], cep)


def test_reference_agrees(by_view):
    """The reference evaluator accepts the same DEFINE and finds the same matches."""
    _, table = by_view
    for i, (agg, _) in enumerate(AGGS):
        sql = _query("by_rows", agg, False, f"e{i}")
        names, rows = evaluate_reference(find_match_recognize(sql)[0].spec, table)
        ref = sorted((r[names.index("k")], r[names.index("s")], r[names.index("c")])
                     for r in rows)
        local = cepsql.match_recognize(sql, by_rows=table)
        assert ref == sorted(zip(local["k"], local["s"], local["c"])), agg


def test_max_by_in_define_decides_a_match():
    """A rising run that stops when the value at the highest price falls below 5."""
    t = pa.table({"id": pa.array(range(1, 7), pa.int64()),
                  "price": pa.array([1.0, 3.0, 2.0, 4.0, 4.0, 5.0]),
                  "v": pa.array([9, 7, 1, 6, 4, 8], pa.int64())})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(A.*) AS c "
           "ONE ROW PER MATCH PATTERN (A+) DEFINE A AS max_by(A.v, A.price) >= 5)")
    # rows 1-4 (max at 4: v 6), row 5 ties the max price and takes v 4: the match stops
    assert list(cepsql.match_recognize(sql, t=t)["c"]) == [4, 1]


def test_string_arguments_are_refused_with_the_position():
    t = pa.table({"id": pa.array([1, 2], pa.int64()), "s": ["a", "b"], "v": [1, 2]})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(A.*) AS c "
           "PATTERN (A+) DEFINE A AS max_by(A.s, A.v) = 'b')")
    with pytest.raises(CepUnsupportedError, match="max_by.*MEASURES take any type") as err:
        cepsql.match_recognize(sql, t=t)
    assert "column" in str(err.value)
