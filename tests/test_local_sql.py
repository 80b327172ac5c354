"""The in-process SQL subset around MATCH_RECOGNIZE (cepsql.backends.local.sql): each construct
against expected rows, a few statements against Spark, unsupported constructs located."""
import datetime
from decimal import Decimal

import pandas as pd
import pyarrow as pa
import pytest

from cepsql.errors import CepAnalysisError, CepSyntaxError, CepUnsupportedError
from cepsql.backends.local.engine import run_local
from cepsql.backends.local.sql import Scope, run_sql

T = pa.table({
    "sym": pa.array(["a", "b", "a", None, "b", "a"]),
    "ts": pa.array([1, 1, 2, 3, 2, 3], pa.int32()),
    "price": pa.array([1.5, 4.0, None, 2.0, 3.0, 6.0]),
    "qty": pa.array([10, 5, 7, None, 1, 2], pa.int64()),
    "amt": pa.array([Decimal("1.10"), Decimal("2.25"), None, Decimal("0.05"), Decimal("3.00"),
                     Decimal("1.00")], pa.decimal128(5, 2)),
})
U = pa.table({"k": pa.array([1, 2], pa.int64()), "name": ["one", "two"]})


def q(sql, **tables):
    """Rows of a plain query (no MATCH_RECOGNIZE) over t and u, as tuples."""
    out = run_local(sql, {"t": T, "u": U, **tables})
    return [tuple(r.values()) for r in out.to_pylist()]


def names(sql):
    return run_local(sql, {"t": T, "u": U}).column_names


# --- SELECT list, WHERE ------------------------------------------------------------------

def test_star_alias_star_and_expressions():
    assert q("SELECT * FROM u") == [(1, "one"), (2, "two")]
    assert q("SELECT x.* FROM u AS x") == [(1, "one"), (2, "two")]
    assert q("SELECT k * 10 AS k10, upper(name) AS n, k FROM u") == \
        [(10, "ONE", 1), (20, "TWO", 2)]
    assert names("SELECT K, u.name, k + 1 AS plus, upper(name) FROM u") == \
        ["K", "name", "plus", "upper(name)"]


def test_where_three_valued_logic():
    assert q("SELECT ts FROM t WHERE price > 2 ORDER BY ts") == [(1,), (2,), (3,)]
    assert q("SELECT ts, sym FROM t WHERE NOT (price > 2) ORDER BY ts") == [(1, "a"), (3, None)]
    assert q("SELECT ts FROM t WHERE sym IS NULL") == [(3,)]
    assert q("SELECT ts FROM t WHERE sym IN ('b') AND ts BETWEEN 2 AND 5") == [(2,)]
    assert q("SELECT ts FROM t WHERE NULL") == []


def test_qualified_columns_use_the_alias_or_table_name():
    assert q("SELECT t.k FROM u t WHERE t.name LIKE 't%'") == [(2,)]
    assert q("SELECT u.k FROM u WHERE u.k = 1") == [(1,)]
    with pytest.raises(CepAnalysisError, match="unknown qualifier") as info:
        q("SELECT u.k FROM u AS x")
    assert (info.value.line, info.value.col) == (1, 8)


# --- GROUP BY / aggregates ---------------------------------------------------------------

def test_group_by_aggregates_and_spark_result_types():
    out = run_local("SELECT sym, count(*) AS n, count(price) AS np, count(DISTINCT ts) AS d, "
                    "sum(qty) AS s, avg(qty) AS a, min(price) AS lo, max(ts) AS hi, "
                    "sum(amt) AS sa, avg(amt) AS aa FROM t GROUP BY sym ORDER BY sym",
                    {"t": T})
    assert out.to_pylist() == [
        {"sym": None, "n": 1, "np": 1, "d": 1, "s": None, "a": None, "lo": 2.0, "hi": 3,
         "sa": Decimal("0.05"), "aa": Decimal("0.050000")},
        {"sym": "a", "n": 3, "np": 2, "d": 3, "s": 19, "a": 19 / 3, "lo": 1.5, "hi": 3,
         "sa": Decimal("2.10"), "aa": Decimal("1.050000")},
        {"sym": "b", "n": 2, "np": 2, "d": 2, "s": 6, "a": 3.0, "lo": 3.0, "hi": 2,
         "sa": Decimal("5.25"), "aa": Decimal("2.625000")}]
    types = dict(zip(out.column_names, out.schema.types))
    assert types["n"] == pa.int64() and types["s"] == pa.int64() and types["a"] == pa.float64()
    assert types["sa"] == pa.decimal128(15, 2) and types["aa"] == pa.decimal128(9, 6)


def test_global_aggregate_having_ordinals_and_aliases():
    assert q("SELECT count(*), sum(qty) FROM t WHERE ts > 100") == [(0, None)]
    assert q("SELECT max(ts) - min(ts) AS span FROM t") == [(2,)]
    assert q("SELECT upper(sym) AS s, count(*) AS c FROM t GROUP BY s HAVING c > 1 "
             "ORDER BY c DESC") == [("A", 3), ("B", 2)]
    assert q("SELECT sym, sum(qty) FROM t WHERE sym IS NOT NULL GROUP BY 1 "
             "ORDER BY sum(qty)") == [("b", 6), ("a", 19)]
    assert q("SELECT ts % 2 AS odd, count(*) FROM t GROUP BY ts % 2 ORDER BY odd") == \
        [(0, 2), (1, 4)]


def test_grouping_errors():
    with pytest.raises(CepAnalysisError, match="price must be in GROUP BY") as info:
        q("SELECT sym, price FROM t GROUP BY sym")
    assert info.value.col == 13
    with pytest.raises(CepAnalysisError, match="not allowed in WHERE"):
        q("SELECT sym FROM t WHERE count(*) > 1")
    with pytest.raises(CepAnalysisError, match="cannot be nested"):
        q("SELECT sum(count(*)) FROM t")
    with pytest.raises(CepAnalysisError, match="numeric"):
        q("SELECT sum(sym) FROM t")


# --- DISTINCT, ORDER BY, LIMIT -----------------------------------------------------------

def test_distinct_order_nulls_and_limit():
    assert q("SELECT DISTINCT sym FROM t ORDER BY sym") == [(None,), ("a",), ("b",)]
    assert q("SELECT DISTINCT sym FROM t ORDER BY sym DESC") == [("b",), ("a",), (None,)]
    assert q("SELECT DISTINCT sym FROM t ORDER BY 1 NULLS LAST LIMIT 2") == [("a",), ("b",)]
    assert q("SELECT ts, price FROM t ORDER BY price DESC NULLS FIRST, ts") == \
        [(2, None), (3, 6.0), (1, 4.0), (2, 3.0), (3, 2.0), (1, 1.5)]
    # ORDER BY a source column that is not selected, and an expression
    assert q("SELECT sym FROM t WHERE qty IS NOT NULL ORDER BY qty LIMIT 3") == \
        [("b",), ("a",), ("b",)]
    assert q("SELECT k FROM u ORDER BY -k") == [(2,), (1,)]
    assert q("SELECT k FROM u LIMIT 0") == []
    with pytest.raises(CepAnalysisError, match="DISTINCT"):
        q("SELECT DISTINCT sym FROM t ORDER BY ts")


# --- sources, CTEs, UNION ALL -----------------------------------------------------------

def test_subquery_sources_and_ctes():
    assert q("SELECT s.n FROM (SELECT name AS n, k FROM u WHERE k > 1) AS s") == [("two",)]
    assert q("SELECT * FROM ((SELECT k FROM u))") == [(1,), (2,)]
    assert q("WITH a AS (SELECT k FROM u), b AS (SELECT k * 2 AS k2 FROM a) "
             "SELECT k2 FROM b ORDER BY k2 DESC") == [(4,), (2,)]
    # a CTE shadows a given table of the same name, only inside its statement
    assert q("WITH u AS (SELECT 'x' AS name FROM t LIMIT 1) SELECT name FROM u") == [("x",)]
    assert q("SELECT k FROM db.u WHERE k = 2") == [(2,)]
    with pytest.raises(CepAnalysisError, match="unknown table nosuch") as info:
        q("SELECT * FROM\n  nosuch")
    assert (info.value.line, info.value.col) == (2, 3)


def test_union_all():
    assert q("SELECT k, name FROM u UNION ALL SELECT ts, sym FROM t WHERE ts = 3 "
             "ORDER BY 1 DESC, name LIMIT 3") == [(3, None), (3, "a"), (2, "two")]
    out = run_local("SELECT k AS x FROM u UNION ALL SELECT price FROM t WHERE ts = 1",
                    {"t": T, "u": U})
    assert out.column_names == ["x"] and out.schema.types == [pa.float64()]
    assert out.column("x").to_pylist() == [1.0, 2.0, 1.5, 4.0]
    with pytest.raises(CepAnalysisError, match="columns"):
        q("SELECT k FROM u UNION ALL SELECT k, name FROM u")


def test_run_sql_directly():
    out = run_sql("SELECT ts FROM t WHERE ts > 2", Scope({"t": T}), base=0)
    assert out.column("ts").to_pylist() == [3, 3]


# --- outside the subset: DuckDB runs it (backends/local/duck.py) -------------------------

@pytest.mark.parametrize("sql,expected", [
    ("SELECT t.ts, u.name FROM t\nJOIN u ON t.ts = u.k ORDER BY t.ts, t.sym",
     [(1, "one"), (1, "one"), (2, "two"), (2, "two")]),
    ("SELECT count(*) FROM t, u", [(12,)]),
    ("SELECT ts,\n  row_number() OVER (ORDER BY ts, sym) AS rn FROM t ORDER BY rn",
     [(1, 1), (1, 2), (2, 3), (2, 4), (3, 5), (3, 6)]),
    ("SELECT DISTINCT ts FROM t WHERE ts IN (SELECT k FROM u) ORDER BY ts", [(1,), (2,)]),
    ("SELECT count(*) FROM t WHERE EXISTS (SELECT k FROM u)", [(6,)]),
    ("SELECT k FROM u LATERAL VIEW explode(array(1)) e AS x ORDER BY k", [(1,), (2,)]),
    ("SELECT k FROM u UNION SELECT k FROM u ORDER BY k", [(1,), (2,)]),
    ("SELECT k FROM u INTERSECT SELECT k FROM u ORDER BY k", [(1,), (2,)]),
    ("SELECT k FROM u ORDER BY k LIMIT 1 OFFSET 1", [(2,)]),
    ("SELECT 1", [(1,)]),
    ("SELECT sym, count(*) FROM t GROUP BY ROLLUP (sym) ORDER BY sym NULLS LAST, 2",
     [("a", 3), ("b", 2), (None, 1), (None, 6)]),
    ("SELECT sort_array(collect_list(sym)) FROM t", [(["a", "a", "a", "b", "b"],)]),
    ("SELECT percentile(ts, 0.5) FROM t", [(2.0,)]),
    ("WITH RECURSIVE r AS (SELECT k FROM u) SELECT * FROM r ORDER BY k", [(1,), (2,)]),
])
def test_constructs_outside_the_subset_run_on_duckdb(sql, expected):
    assert q(sql) == expected


def test_unsupported_constructs_are_located():
    """What neither engine runs with Spark's semantics keeps the subset's located error."""
    with pytest.raises(CepUnsupportedError) as info:
        run_local("SELECT *\nFROM range(3)", {"t": T, "u": U})
    err = info.value
    assert "table-valued" in err.message and "spark.cep.sql" in err.message
    assert "subset" in err.message
    assert (err.line, err.col) == (2, 6), err


def test_syntax_error_is_located():
    with pytest.raises(CepSyntaxError) as info:
        run_local("SELECT k FROM u WHERE", {"u": U})
    assert info.value.line == 1


# --- with MATCH_RECOGNIZE (real dialect and planner) -------------------------------------

TICKS = pd.DataFrame({"sym": ["a"] * 6 + ["b"] * 4, "ts": list(range(6)) + list(range(4)),
                      "price": [5, 4, 3, 4, 5, 6, 1, 2, 1, 2]})
CLAUSE = """ticks MATCH_RECOGNIZE (
  PARTITION BY sym ORDER BY ts
  MEASURES FIRST(A.price) AS start_price, LAST(B.price) AS top, MATCH_NUMBER() AS mn,
           count(B.price) AS ups
  PATTERN (A B+)
  DEFINE B AS B.price > PREV(B.price)
) AS m"""

SPARK_STATEMENTS = [
    # WHERE, qualified columns, expressions, ORDER BY with NULLS, LIMIT
    f"SELECT m.sym, top - start_price AS gain, mn, CASE WHEN ups > 1 THEN 'long' END AS kind "
    f"FROM {CLAUSE} WHERE m.mn >= 1 ORDER BY kind NULLS LAST, sym, mn LIMIT 5",
    # aggregation with HAVING over the clause's output
    f"SELECT sym, count(*) AS matches, sum(ups) AS ups, avg(top) AS avg_top, max(mn) AS last_mn "
    f"FROM {CLAUSE} GROUP BY sym HAVING count(*) >= 1 ORDER BY sym",
    # CTE as the clause's source, UNION ALL, DISTINCT over a subquery source
    "WITH cheap AS (SELECT * FROM ticks WHERE price < 6) "
    "SELECT DISTINCT sym, n FROM (SELECT sym, c AS n FROM cheap MATCH_RECOGNIZE ("
    " PARTITION BY sym ORDER BY ts MEASURES count(*) AS c PATTERN (A+) DEFINE A AS true)) "
    "UNION ALL SELECT 'z', 0 FROM cheap WHERE ts = 0 AND sym = 'a' ORDER BY sym",
]
EXPECTED = [
    [("a", 3, 1, "long"), ("b", 1, 1, None), ("b", 1, 2, None)],
    [("a", 1, 3, 6.0, 1), ("b", 2, 2, 2.0, 2)],
    [("a", 5), ("b", 4), ("z", 0)],
]


@pytest.fixture(scope="module")
def real_planner():
    import cepsql.compile.clause as executor
    return executor


@pytest.mark.parametrize("sql,expected", list(zip(SPARK_STATEMENTS, EXPECTED)))
def test_statements_around_clauses(real_planner, sql, expected):
    out = run_local(sql, {"ticks": TICKS})
    assert [tuple(r.values()) for r in out.to_pylist()] == expected


def test_clause_errors_keep_statement_positions(real_planner):
    out = run_local(f"SELECT m.sym, count(*) AS n\nFROM {CLAUSE}\nJOIN ticks ON m.sym = ticks.sym "
                    "GROUP BY m.sym ORDER BY m.sym", {"ticks": TICKS})
    assert out.to_pylist() == [{"sym": "a", "n": 6}, {"sym": "b", "n": 8}]
    with pytest.raises(CepAnalysisError, match="unknown column nope") as info:
        run_local(f"SELECT sym FROM (SELECT * FROM {CLAUSE}) WHERE nope > 1", {"ticks": TICKS})
    assert info.value.line == 7 and info.value.col == 15


def test_same_rows_as_spark(spark, real_planner):
    import cepsql  # noqa: F401  (attaches spark.cep)
    spark.createDataFrame(TICKS).createOrReplaceTempView("ticks")
    for sql, expected in zip(SPARK_STATEMENTS, EXPECTED):
        local = run_local(sql, {"ticks": TICKS})
        got = spark.cep.sql(sql)
        assert got.columns == local.column_names, sql
        assert [tuple(r) for r in got.collect()] == expected, sql


def test_dates_and_decimals_round_trip(real_planner):
    days = pd.DataFrame({"d": [datetime.date(2024, 1, i) for i in (1, 2, 3)], "v": [1, 3, 2]})
    out = run_local("SELECT first_day, CAST(peak AS DECIMAL(5,2)) AS p FROM days "
                    "MATCH_RECOGNIZE (ORDER BY d MEASURES FIRST(A.d) AS first_day, "
                    "MAX(B.v) AS peak PATTERN (A B+) DEFINE B AS B.v > PREV(B.v)) "
                    "WHERE first_day >= DATE '2024-01-01'", {"days": days})
    assert out.to_pylist() == [{"first_day": datetime.date(2024, 1, 1), "p": Decimal("3.00")}]
