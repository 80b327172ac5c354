"""SQL around MATCH_RECOGNIZE outside local_sql's subset runs on DuckDB
(cepsql/backends/local/duck.py): joins, window functions, GROUP BY over joined matches,
CTEs, subqueries in expressions — side by side with spark.cep.sql (same rows, same types),
and the Spark-vs-DuckDB differences the transpilation fixes, construct by construct."""
from __future__ import annotations

import math
from decimal import Decimal

import pandas as pd
import pyarrow as pa
import pytest

from cepsql.errors import CepRuntimeError, CepUnsupportedError
from cepsql.backends.local.engine import run_local

TICKS = pd.DataFrame({"sym": ["a"] * 6 + ["b"] * 4 + ["c"] * 3,
                      "ts": list(range(6)) + list(range(4)) + list(range(3)),
                      "price": [5, 4, 3, 4, 5, 6, 1, 2, 1, 2, 7, 8, 9]})
REGIONS = pd.DataFrame({"sym": ["a", "b", "c"], "region": ["eu", "us", "eu"],
                        "fee": [Decimal("1.25"), Decimal("0.10"), Decimal("2.00")],
                        "w": [1.5, math.nan, None]})
CLAUSE = """ticks MATCH_RECOGNIZE (
  PARTITION BY sym ORDER BY ts
  MEASURES FIRST(A.price) AS start_price, LAST(B.price) AS top, MATCH_NUMBER() AS mn,
           count(B.price) AS ups
  PATTERN (A B+)
  DEFINE B AS B.price > PREV(B.price)
) AS m"""

STATEMENTS = {
    "join": f"SELECT m.sym, m.mn, r.region, m.top FROM {CLAUSE} "
            "JOIN regions r ON m.sym = r.sym ORDER BY m.sym, m.mn",
    "window": f"SELECT sym, mn, top, row_number() OVER (PARTITION BY sym ORDER BY top DESC, mn) "
              f"AS rk, sum(ups) OVER (PARTITION BY sym) AS total_ups, lag(top) OVER "
              f"(PARTITION BY sym ORDER BY mn) AS prev_top FROM {CLAUSE} ORDER BY sym, mn",
    "group_by_joined": f"SELECT r.region, count(*) AS n, sum(m.ups) AS ups, avg(m.top) AS avg_top, "
                       f"sum(r.fee) AS fees, avg(r.fee) AS avg_fee FROM {CLAUSE} JOIN regions r "
                       "ON m.sym = r.sym GROUP BY r.region ORDER BY r.region",
    "cte": "WITH cheap AS (SELECT * FROM ticks WHERE price < 9), hits AS (SELECT * FROM cheap "
           "MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES count(*) AS c, "
           "MATCH_NUMBER() AS mn PATTERN (A B+) DEFINE B AS B.price > PREV(B.price)) x) "
           "SELECT h.sym, h.mn, h.c, t.price FROM hits h JOIN ticks t ON h.sym = t.sym "
           "AND t.ts = 0 ORDER BY h.sym, h.mn",
    "scalar_subquery": f"SELECT sym, mn, top FROM {CLAUSE} WHERE top > "
                       "(SELECT avg(price) FROM ticks) ORDER BY sym, mn",
    "decimals_nan_nulls": f"SELECT m.sym, m.mn, r.fee * m.top AS cost, r.fee / m.top AS share, "
                          f"CAST(m.top / 3 AS INT) AS third, r.w, rank() OVER (ORDER BY r.w) "
                          f"AS w_rank, rank() OVER (ORDER BY r.w DESC) AS w_desc FROM {CLAUSE} "
                          "JOIN regions r ON m.sym = r.sym ORDER BY m.sym, m.mn",
    "functions": f"SELECT m.sym, length(r.region) AS len, instr(r.region, 'u') AS pos, "
                 f"m.top div 2 AS half, year(DATE '2024-03-05') AS y, "
                 f"dayofweek(DATE '2024-03-05') AS dow, upper(r.region) AS up FROM {CLAUSE} "
                 "JOIN regions r ON m.sym = r.sym ORDER BY m.sym, m.mn",
}


def _normal(t: pa.DataType) -> pa.DataType:
    return pa.string() if pa.types.is_large_string(t) else t


def _rows(table: pa.Table) -> list[tuple]:
    def key(v):
        return "NaN" if isinstance(v, float) and math.isnan(v) else v
    return [tuple(key(v) for v in r.values()) for r in table.to_pylist()]


@pytest.fixture(scope="module")
def spark_tables(spark):
    import cepsql  # noqa: F401  (attaches spark.cep)
    spark.createDataFrame(TICKS).createOrReplaceTempView("ticks")
    schema = "sym STRING, region STRING, fee DECIMAL(3,2), w DOUBLE"
    spark.createDataFrame(REGIONS.astype(object).where(REGIONS.notna(), None)
                          .assign(w=[1.5, float("nan"), None]), schema) \
        .createOrReplaceTempView("regions")
    return spark


def _local(sql: str) -> pa.Table:
    regions = pa.Table.from_pandas(REGIONS, preserve_index=False).set_column(
        2, "fee", pa.array(REGIONS["fee"], pa.decimal128(3, 2)))
    return run_local(sql, {"ticks": TICKS, "regions": regions})


@pytest.mark.parametrize("name", list(STATEMENTS))
def test_same_rows_and_types_as_spark(spark_tables, name):
    sql = STATEMENTS[name]
    local = _local(sql)
    remote = spark_tables.cep.sql(sql).toArrow()
    assert local.column_names == remote.column_names, sql
    assert [_normal(t) for t in local.schema.types] == \
        [_normal(t) for t in remote.schema.types], sql
    assert _rows(local) == _rows(remote), sql
    assert local.num_rows > 0


# --- the transpilation's fixes, without Spark ----------------------------------------------

T = pa.table({"k": pa.array([1, 2, 3], pa.int32()), "x": [2.5, -2.5, 7.0],
              "d": pa.array([Decimal("1.10"), Decimal("2.25"), Decimal("0.05")],
                            pa.decimal128(5, 2)), "s": ["hello", "ab", None]})
U = pa.table({"k": pa.array([1, 2], pa.int64())})
JOIN = "FROM t JOIN u ON t.k = u.k"


def q(sql: str) -> pa.Table:
    return run_local(sql, {"t": T, "u": U})


def test_integer_results_keep_spark_types():
    out = q(f"SELECT sum(t.k) AS s, row_number() OVER (ORDER BY t.k) AS rn, "
            f"dense_rank() OVER (ORDER BY t.k) AS dr, sum(t.k * 2 + u.k) AS e "
            f"{JOIN} GROUP BY t.k")
    assert out.schema.types == [pa.int64(), pa.int32(), pa.int32(), pa.int64()]


def test_cast_truncates_and_division_by_zero_fails():
    out = q(f"SELECT CAST(x AS INT) AS i, CAST(x AS BIGINT) AS b {JOIN} ORDER BY t.k")
    assert out.to_pydict() == {"i": [2, -2], "b": [2, -2]}
    with pytest.raises(CepRuntimeError, match="DIVIDE_BY_ZERO"):
        q(f"SELECT t.k / (t.k - 1) AS z {JOIN}")
    with pytest.raises(CepRuntimeError, match="DIVIDE_BY_ZERO"):
        q(f"SELECT t.k % (t.k - 1) AS z {JOIN}")
    assert q(f"SELECT try_cast('x' AS INT) AS n {JOIN}").column("n").to_pylist() == [None] * 2


def test_decimal_result_types_follow_spark():
    out = q(f"SELECT sum(d) AS s, avg(d) AS a, max(d * d) AS m, max(d / t.k) AS q {JOIN}")
    assert out.schema.types == [pa.decimal128(15, 2), pa.decimal128(9, 6),
                                pa.decimal128(11, 4), pa.decimal128(16, 13)]
    assert out.to_pylist() == [{"s": Decimal("3.35"), "a": Decimal("1.675000"),
                                "m": Decimal("5.0625"), "q": Decimal("1.1250000000000")}]


def test_strings_percentile_floor_and_names():
    out = q(f"SELECT substring(s, 0, 2), substr(s, 2) AS tail, percentile(t.k, 0.5) AS p, "
            f"floor(x) AS f, concat(s, NULL) AS c {JOIN} GROUP BY s, x ORDER BY s")
    assert out.column_names == ["substring(s, 0, 2)", "tail", "p", "f", "c"]
    assert out.to_pylist() == [
        {"substring(s, 0, 2)": "ab", "tail": "b", "p": 2.0, "f": -3, "c": None},
        {"substring(s, 0, 2)": "he", "tail": "ello", "p": 1.0, "f": 2, "c": None}]
    assert out.schema.field("f").type == pa.int64()


def test_null_and_nan_order_as_in_spark():
    v = pa.table({"v": [1.0, math.nan, None, -1.0]})
    out = run_local("SELECT v, row_number() OVER (ORDER BY v) AS up, "
                    "row_number() OVER (ORDER BY v DESC) AS down FROM v, u WHERE u.k = 1 "
                    "ORDER BY up", {"v": v, "u": U})
    assert out.column("down").to_pylist() == [4, 3, 2, 1]
    assert out.column("v").to_pylist()[:3] == [None, -1.0, 1.0]


def test_what_duckdb_cannot_run_keeps_the_located_subset_error():
    with pytest.raises(CepUnsupportedError, match="table-valued") as info:
        q("SELECT *\nFROM range(3) JOIN u ON id = k")
    assert (info.value.line, info.value.col) == (2, 15)  # the JOIN local_sql stopped at
    assert "spark.cep.sql" in info.value.message


def test_a_clause_runs_once_when_the_query_moves_to_duckdb(monkeypatch):
    """local_sql runs the clause, then meets a window function: DuckDB reuses the result."""
    import cepsql.backends.local.engine as local
    calls = []
    real = local.execute_plan

    def counting(table, plan, *args, **kwargs):
        calls.append(table.num_rows)
        return real(table, plan, *args, **kwargs)
    monkeypatch.setattr(local, "execute_plan", counting)
    out = run_local(f"SELECT sym, mn, rank() OVER (PARTITION BY sym ORDER BY top DESC) AS r "
                    f"FROM {CLAUSE} ORDER BY sym, mn", {"ticks": TICKS})
    assert calls == [len(TICKS)]
    assert out.column("r").to_pylist() == [1, 1, 1, 1]  # b: two matches, both top 2
