"""The in-process path and Spark agree (issue 24 D11): the same rows, or an error where
Spark refuses, at the user's line:column; in-process run-time errors point into the
user's text (B6: the condition VM and Arrow's kernels name no position,
runtime/error_position.py finds the expression)."""
from __future__ import annotations

from decimal import Decimal

import pandas as pd
import pyarrow as pa
import pytest

import cepsql
from cepsql.algebra.expressions import BinaryOp, ColumnRef
from cepsql.algebra.limits import MAX_PAREN_NESTING
from cepsql.backends.local.engine import run_local
from cepsql.backends.local.spark_functions import SPARK_FUNCTIONS
from cepsql.errors import (CepAnalysisError, CepError, CepRuntimeError, CepSyntaxError)
from cepsql.exprs.arrow_eval import evaluate_arrow
from cepsql.exprs.json_path import json_object_at, parse_json_path
from cepsql.reference.sql import evaluate_reference
from test_property_sql import spec_of

TICKS = pd.DataFrame({"sym": ["a"] * 6, "ts": range(6), "n": [5, 3, 4, 6, 2, 7]})


def test_divide_by_zero_in_define_points_at_the_division_expression():
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts\n"
           "  MEASURES LAST(b.n) AS v ONE ROW PER MATCH PATTERN (a b+)\n"
           "  DEFINE b AS b.n / (a.n - a.n) > 1)")
    with cepsql.planner_options(ansi=True), pytest.raises(CepRuntimeError) as info:
        cepsql.match_recognize(sql, t=TICKS)
    assert "DIVIDE_BY_ZERO" in info.value.message
    assert (info.value.line, info.value.col) == (3, sql.split("\n")[2].index("b.n /") + 1)


def test_deep_nesting_around_the_clause_is_a_cep_error():
    def query(depth):
        nested = "(" * depth + "v" + ")" * depth
        return (f"SELECT {nested} FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
                "MEASURES LAST(b.n) AS v ONE ROW PER MATCH PATTERN (a b+) DEFINE b AS b.n > a.n)")
    assert len(cepsql.match_recognize(query(300), t=TICKS)) == 2
    with pytest.raises(CepSyntaxError) as info:
        cepsql.match_recognize(query(3000), t=TICKS)
    assert (info.value.line, info.value.col) == (1, len("SELECT ") + MAX_PAREN_NESTING + 1)


# --- D11: the in-process path accepts what Spark accepts and gives Spark's rows ------------

ROWS = pa.table({"sym": ["a", "a", "a", "a", "a", "b"], "ts": [0, 1, 2, 3, 4, 5],
                 "n": [5, 3, 4, 6, 2, 7],
                 "arr": [[1, 2], [1, None], [1, 2], [2], None, [1, 2]],
                 "s": ['{"a":1,"b":[1.5,{"c":"x"}]}', '{"a":2}', "not json", '{"a":"t"}',
                       None, '{"a":1}']})
KEYS_ONLY = pa.table({"k": [1, 1, 2, 2, 2]})
NULL_KEYS = pa.Table.from_batches([  # two chunks, NULL keys in both
    pa.record_batch({"k": ["x", None, "y"], "ts": [1, 2, 3]}),
    pa.record_batch({"k": [None, "x", "z"], "ts": [4, 5, 6]})])
TABLES = {"par": ROWS, "par_keys": KEYS_ONLY, "par_nulls": NULL_KEYS}
CLAUSE = ("par MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES LAST(b.n) AS v "
          "ONE ROW PER MATCH PATTERN (a b+) DEFINE b AS b.n > a.n)")


@pytest.fixture(scope="module")
def views(spark):
    for name, table in TABLES.items():
        spark.createDataFrame(table).createOrReplaceTempView(name)  # Arrow types kept
    return spark


def _spark_rows(spark, sql: str) -> list[dict]:
    return spark.cep.sql(sql).toArrow().to_pylist()


def _local_rows(sql: str) -> list[dict]:
    return run_local(sql, TABLES).to_pylist()


def _unordered(rows: list[dict]) -> list[str]:
    return sorted(map(repr, rows))


def test_array_json_and_struct_functions_in_the_clause_give_sparks_rows(views):
    sql = ("SELECT * FROM par MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES "
           "CAST(a.arr AS STRING) AS c, named_struct('x', a.n, 'y', 2) AS st, "
           "replace(a.sym, 'a', 'bb') AS r, get_json_object(a.s, '$.a') AS j, "
           "get_json_object(a.s, '$.b') AS jb, size(a.arr) AS z, LAST(b.n) AS v "
           "ONE ROW PER MATCH PATTERN (a b+) DEFINE b AS b.n > a.n AND size(b.arr) >= 1 "
           "AND replace(b.sym, 'a', 'x') = 'x' AND CAST(b.arr AS STRING) LIKE '[%]')")
    local = _local_rows(sql)
    assert local and _unordered(local) == _unordered(_spark_rows(views, sql))


def test_partition_by_the_only_column_without_order_by(views):
    sql = ("SELECT * FROM par_keys MATCH_RECOGNIZE (PARTITION BY k MEASURES count(*) AS c "
           "ONE ROW PER MATCH PATTERN (a+) DEFINE a AS true)")
    local = _local_rows(sql)
    assert _unordered(local) == _unordered(_spark_rows(views, sql)) == \
        _unordered([{"k": 1, "c": 2}, {"k": 2, "c": 3}])


def test_null_partition_keys_in_a_multi_chunk_input(views):
    sql = ("SELECT * FROM par_nulls MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts "
           "MEASURES count(*) AS c ONE ROW PER MATCH PATTERN (a+) DEFINE a AS true)")
    local = _local_rows(sql)
    assert {"k": None, "c": 2} in local
    assert _unordered(local) == _unordered(_spark_rows(views, sql))


def test_order_by_an_array_column_in_and_around_the_clause(views):
    sql = ("SELECT * FROM par MATCH_RECOGNIZE (ORDER BY arr, ts MEASURES a.ts AS ta, "
           "b.ts AS tb, a.arr AS arr ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW "
           "PATTERN (a b) DEFINE b AS true) ORDER BY arr DESC, ta")
    local = _local_rows(sql)
    # order by arr, ts: NULL, [1, NULL], [1, 2] x3, [2] (a NULL element sorts first)
    assert [r["ta"] for r in local] == [0, 2, 5, 1, 4]
    assert local == _spark_rows(views, sql)


@pytest.mark.parametrize("sql, needle", [
    (f"SELECT ROW(v, 3) FROM {CLAUSE}", "ROW("),
    (f"SELECT DISTINCT FROM {CLAUSE}", "FROM"),
    (f"SELECT+ * FROM {CLAUSE}", "+"),
    (f"SELECT -* FROM {CLAUSE}", "-"),
    (f"SELECT (), v FROM {CLAUSE}", "("),
])
def test_what_spark_refuses_around_the_clause_is_refused_in_process(views, sql, needle):
    with pytest.raises(CepError) as local:
        _local_rows(sql)
    assert (local.value.line, local.value.col) == (1, sql.index(needle) + 1), local.value
    with pytest.raises(Exception) as spark_err:  # noqa: PT011  (Spark's own or a CepError)
        _spark_rows(views, sql)
    if isinstance(spark_err.value, CepError):
        assert type(local.value) is type(spark_err.value), (spark_err.value, local.value)


def test_every_listed_spark_function_is_one_spark_knows(views):
    known = {r[0] for r in views.sql("SHOW SYSTEM FUNCTIONS").collect()}
    assert SPARK_FUNCTIONS <= known, sorted(SPARK_FUNCTIONS - known)


def test_get_json_object_text_is_jacksons():
    steps = parse_json_path("$.a[1]['b c']")
    assert steps == ("a", 1, "b c")
    assert json_object_at('{"a": [0, {"b c": {"d": [1e10, 0.5, true, null, "q"]}}]}', steps) \
        == '{"d":[1.0E10,0.5,true,null,"q"]}'
    assert json_object_at("{bad", ()) is None and parse_json_path("a.b") is None


def test_division_by_zero_around_the_clause_raises_under_ansi_as_in_spark():
    """``WHERE v > 1/0`` around the clause: DIVIDE_BY_ZERO under ANSI (Spark's answer),
    no rows without ANSI; a guarded division in a CASE branch not taken never raises."""
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES LAST(b.n) "
           "AS v ONE ROW PER MATCH PATTERN (a b+) DEFINE b AS b.n > a.n) WHERE v > 1/0")
    with cepsql.planner_options(ansi=True), pytest.raises(CepRuntimeError) as info:
        cepsql.match_recognize(sql, t=TICKS)
    assert "DIVIDE_BY_ZERO" in info.value.message and info.value.col == sql.index("1/0") + 1
    with cepsql.planner_options(ansi=False):
        assert len(cepsql.match_recognize(sql, t=TICKS)) == 0
    guarded = sql.replace("WHERE v > 1/0", "WHERE CASE WHEN v > 0 THEN true ELSE 1/0 > 0 END")
    with cepsql.planner_options(ansi=True):
        assert len(cepsql.match_recognize(guarded, t=TICKS)) == 2


def test_type_mismatch_in_sparks_words_not_arrows():
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts\n"
           "  MEASURES LAST(b.n) AS v ONE ROW PER MATCH PATTERN (a b+)\n"
           "  DEFINE b AS b.s = INTERVAL '1' DAY)")
    with pytest.raises(CepAnalysisError) as info:
        cepsql.match_recognize(sql, t=TICKS.assign(s=list("x12y34")))
    assert info.value.message.startswith("[DATATYPE_MISMATCH")
    assert '"STRING"' in info.value.message and "kernel" not in info.value.message
    assert (info.value.line, info.value.col) == (3, sql.split("\n")[2].index("b.s") + 1)


def test_cast_invalid_input_names_the_value():
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts\n"
           "  MEASURES LAST(b.n) AS v ONE ROW PER MATCH PATTERN (a b+)\n"
           "  DEFINE b AS b.s = 5)")
    with cepsql.planner_options(ansi=True), pytest.raises(CepRuntimeError) as info:
        cepsql.match_recognize(sql, t=TICKS.assign(s=["1", " 2", "x7", "3", "y", "4"]))
    assert info.value.message.startswith(
        "[CAST_INVALID_INPUT] The value 'x7' of the type \"STRING\" cannot be cast to "
        "\"BIGINT\" because it is malformed.")


@pytest.mark.parametrize("to, shown", [("INT", "INT"), ("DOUBLE", "DOUBLE"),
                                       ("DECIMAL(5, 1)", "DECIMAL(5,1)"),
                                       ("BOOLEAN", "BOOLEAN")])
def test_explicit_cast_of_a_malformed_string_in_sparks_words(to, shown):
    """CAST(s AS ...) of a value that does not parse: Spark's CAST_INVALID_INPUT with the
    value as written under ANSI (Arrow's "Failed to parse string" before), NULL without."""
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id\n"
           f"  MEASURES CAST(a.s AS {to}) AS y ALL ROWS PER MATCH PATTERN (a) DEFINE a AS true)")
    t = pd.DataFrame({"id": [1, 2, 3], "s": ["1", " x2", "0"]})
    with cepsql.planner_options(ansi=True), pytest.raises(CepRuntimeError) as info:
        cepsql.match_recognize(sql, t=t)
    assert info.value.message == (
        f"[CAST_INVALID_INPUT] The value ' x2' of the type \"STRING\" cannot be cast to "
        f"\"{shown}\" because it is malformed. Correct the value as per the syntax, or "
        "change its target type. Use `try_cast` to tolerate malformed input and return NULL "
        "instead.")
    assert (info.value.line, info.value.col) == (2, sql.split("\n")[1].index("a.s") + 1)  # its operand
    with cepsql.planner_options(ansi=False):
        out = cepsql.match_recognize(sql, t=t)["y"].tolist()
    assert pd.isna(out[1]) and not pd.isna(out[0]) and not pd.isna(out[2])


# --- integer and interval overflow: Spark's values without ANSI, Spark's words with it -----

BIG = 9223372036854775807
_OVERFLOW_SQL = ("SELECT * FROM {t} MATCH_RECOGNIZE (ORDER BY ts\n"
                 f"  MEASURES b.x * {BIG} AS y, b.i * 2147483647 AS z, -b.x AS w "
                 "ONE ROW PER MATCH PATTERN (a b)\n"
                 f"  DEFINE b AS b.x + {BIG} < 0)")
_SPARK_OVERFLOW = ("[ARITHMETIC_OVERFLOW] overflow. Use 'try_add' to tolerate overflow and "
                   "return NULL instead. If necessary set \"spark.sql.ansi.enabled\" to "
                   "\"false\" to bypass this error.")


def test_integer_overflow_wraps_without_ansi_as_in_spark(spark):
    """Java's long and int arithmetic under spark.sql.ansi.enabled=false: the DEFINE
    takes the row whose sum wraps negative, the MEASURES wrap too (Arrow's checked
    kernels raised "overflow" in both modes)."""
    table = pa.table({"ts": [1, 2, 3], "x": pa.array([-1, 2, 3], pa.int64()),
                      "i": pa.array([1, 2, 3], pa.int32())})
    with cepsql.planner_options(ansi=False):
        local = cepsql.match_recognize(_OVERFLOW_SQL.format(t="t"), t=table)
    spark.createDataFrame(table.to_pandas()).selectExpr(
        "ts", "x", "cast(i as int) i").createOrReplaceTempView("par_ovf")
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        remote = spark.cep.sql(_OVERFLOW_SQL.format(t="par_ovf")).collect()
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
    assert [tuple(r) for r in local.itertuples(index=False)] == [tuple(r) for r in remote] \
        == [(-2, -2, -2)]


def test_integer_overflow_under_ansi_in_sparks_words():
    table = pa.table({"ts": [1, 2, 3], "x": pa.array([-1, 2, 3], pa.int64()),
                      "i": pa.array([1, 2, 3], pa.int32())})
    sql = _OVERFLOW_SQL.format(t="t")
    with cepsql.planner_options(ansi=True), pytest.raises(CepRuntimeError) as info:
        cepsql.match_recognize(sql, t=table)
    assert info.value.message == _SPARK_OVERFLOW
    assert (info.value.line, info.value.col) == (3, sql.split("\n")[2].index("b.x +") + 1)


@pytest.mark.parametrize("ansi", [True, False])
@pytest.mark.parametrize("measure, message", [
    ("b.d + INTERVAL '100' HOUR", "[INTERVAL_ARITHMETIC_OVERFLOW.WITH_SUGGESTION] Integer "
     "overflow while operating with intervals. Use `try_add` to tolerate overflow and return "
     "NULL instead."),
    ("b.d - INTERVAL '-1' DAY", "[INTERVAL_ARITHMETIC_OVERFLOW.WITH_SUGGESTION] Integer "
     "overflow while operating with intervals. Use `try_subtract` to tolerate overflow and "
     "return NULL instead."),
    ("b.t + b.d", "long overflow"),
    ("avg(b.d)", "[INTERVAL_ARITHMETIC_OVERFLOW.WITH_SUGGESTION] Integer overflow while "
     "operating with intervals. Use `try_add` to tolerate overflow and return NULL instead."),
])
def test_interval_overflow_in_sparks_class_and_words(ansi, measure, message):
    """As Spark 4 says it, whatever spark.sql.ansi.enabled (Arrow's "overflow" and the
    condition VM's generic ARITHMETIC_OVERFLOW before)."""
    day = 86_400_000_000
    table = pa.table({"ts": [1, 2, 3],
                      "t": pa.array([10**15] * 3, pa.timestamp("us", tz="UTC")),
                      "d": pa.array([106751991 * day] * 3, pa.duration("us"))})
    sql = (f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES {measure} AS y "
           "ONE ROW PER MATCH PATTERN (a b+) DEFINE b AS true)")
    with cepsql.planner_options(ansi=ansi), pytest.raises(CepRuntimeError) as info:
        cepsql.match_recognize(sql, t=table)
    assert info.value.message == message


@pytest.mark.parametrize("ansi, outcome", [
    (True, "[BINARY_ARITHMETIC_OVERFLOW] 2S * 30000S caused overflow. Use `try_multiply` to "
           "ignore overflow problem and return NULL."),
    (False, [3, -5536]),
])
def test_smallint_overflow_as_spark(ansi, outcome):
    """SMALLINT * SMALLINT: Spark names the overflowing row's operands under ANSI and
    wraps around (Java's short) without it."""
    table = pa.table({"a": pa.array([1, 2], pa.int16()), "b": pa.array([3, 30000], pa.int16())})
    product = BinaryOp("*", ColumnRef(None, "a"), ColumnRef(None, "b"))
    if ansi:
        with pytest.raises(CepRuntimeError) as info:
            evaluate_arrow(product, table, ansi)
        assert info.value.message == outcome
    else:
        assert evaluate_arrow(product, table, ansi).to_pylist() == outcome


# --- the condition VM's errors (cross-row DEFINE): Spark's words, at the expression -----

_VM_SQL = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts\n"
           "  MEASURES LAST(b.ts) AS v ONE ROW PER MATCH PATTERN (a b)\n"
           "  DEFINE b AS {cond})")
_DAY = 86_400_000_000
_VM_TABLE = pa.table({
    "ts": [1, 2],
    "x": pa.array([BIG, 1], pa.int64()),
    "s": pa.array([2, 30000], pa.int16()),
    "d": pa.array([10**37 * 9, 10**37 * 9], pa.decimal128(38, 0)),
    "iv": pa.array([106751991 * _DAY] * 2, pa.duration("us"))})
# (DEFINE condition, the overflowing expression, x's two rows, what Spark says for it)
_VM_CASES = [
    ("b.x + LAST(a.x) > 0", "b.x + LAST(a.x)", [BIG, 1], _SPARK_OVERFLOW),
    ("b.s * a.s > 0", "b.s * a.s", [BIG, 1],
     "[BINARY_ARITHMETIC_OVERFLOW] 30000S * 2S caused overflow. Use `try_multiply` to "
     "ignore overflow problem and return NULL."),
    ("b.d + a.d > 0", "b.d + a.d", [BIG, 1],
     "[NUMERIC_VALUE_OUT_OF_RANGE.WITH_SUGGESTION]  180000000000000000000000000000000000000 "
     "cannot be represented as Decimal(38, 0). If necessary set \"spark.sql.ansi.enabled\" "
     "to \"false\" to bypass this error, and return NULL instead."),
    ("-(b.x - a.x) > 0 OR b.x - a.x IS NULL", "b.x - a.x", [-BIG, BIG],
     _SPARK_OVERFLOW.replace("try_add", "try_subtract")),
    ("abs(b.x - a.x) > 0", "abs(", [1, -BIG],
     "[ARITHMETIC_OVERFLOW] overflow. If necessary set \"spark.sql.ansi.enabled\" to "
     "\"false\" to bypass this error."),
]


@pytest.mark.parametrize("cond, culprit, xs, message", _VM_CASES)
def test_condition_vm_overflow_in_sparks_words_at_the_expression(cond, culprit, xs, message):
    """A cross-row DEFINE overflowing under ANSI: Spark's message for that operator and
    type (not the VM's generic ARITHMETIC_OVERFLOW), at the expression in the DEFINE."""
    sql = _VM_SQL.format(cond=cond)
    table = _VM_TABLE.set_column(1, "x", pa.array(xs, pa.int64()))
    with cepsql.planner_options(ansi=True), pytest.raises(CepRuntimeError) as info:
        cepsql.match_recognize(sql, t=table)
    assert info.value.message == message
    assert (info.value.line, info.value.col) == (3, sql.split("\n")[2].index(culprit) + 1)


def test_condition_vm_sum_overflow_in_sparks_words_at_the_aggregate():
    sql = _VM_SQL.format(cond="sum(b.x) > a.x").replace("(a b)", "(a b+)")
    table = pa.table({"ts": [1, 2, 3], "x": pa.array([1, BIG, 5], pa.int64())})
    with cepsql.planner_options(ansi=True), pytest.raises(CepRuntimeError) as info:
        cepsql.match_recognize(sql, t=table)
    assert info.value.message == _SPARK_OVERFLOW
    assert (info.value.line, info.value.col) == (3, sql.split("\n")[2].index("sum(") + 1)


@pytest.mark.parametrize("ansi", [True, False])
@pytest.mark.parametrize("op, hint", [("+", "try_add"), ("-", "try_subtract")])
def test_condition_vm_interval_overflow_raises_in_both_modes(ansi, op, hint):
    """interval +- interval across rows: Spark raises INTERVAL_ARITHMETIC_OVERFLOW whatever
    spark.sql.ansi.enabled (the VM gave NULL without ANSI: the row was not matched)."""
    iv = [106751991 * _DAY, 106751991 * _DAY if op == "+" else -106751991 * _DAY]
    table = pa.table({"ts": [1, 2], "iv": pa.array(iv, pa.duration("us"))})
    sql = _VM_SQL.format(cond=f"b.iv {op} a.iv > INTERVAL '0' DAY")
    with cepsql.planner_options(ansi=ansi), pytest.raises(CepRuntimeError) as info:
        cepsql.match_recognize(sql, t=table)
    assert info.value.message == (
        "[INTERVAL_ARITHMETIC_OVERFLOW.WITH_SUGGESTION] Integer overflow while operating "
        f"with intervals. Use `{hint}` to tolerate overflow and return NULL instead.")
    assert info.value.col == sql.split("\n")[2].index(f"b.iv {op}") + 1


_SMALL_SQL = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES "
              "b.s * CAST(30000 AS SMALLINT) AS v ONE ROW PER MATCH PATTERN (b) "
              "DEFINE b AS b.s > 1)")


@pytest.mark.parametrize("ansi", [True, False])
def test_smallint_times_typed_literal_keeps_smallint(ansi):
    """x * CAST(30000 AS SMALLINT) is SMALLINT in Spark: it wraps without ANSI and names
    the operands with it (the parser used to fold the cast into an INT literal)."""
    table = pa.table({"ts": [1, 2], "s": pa.array([1, 30000], pa.int16())})
    with cepsql.planner_options(ansi=ansi):
        if ansi:
            with pytest.raises(CepRuntimeError) as info:
                cepsql.match_recognize(_SMALL_SQL, t=table)
            assert info.value.message == (
                "[BINARY_ARITHMETIC_OVERFLOW] 30000S * 30000S caused overflow. Use "
                "`try_multiply` to ignore overflow problem and return NULL.")
        else:
            out = run_local(_SMALL_SQL, {"t": table})
            assert out.schema.field("v").type == pa.int16()
            assert out.column("v").to_pylist() == [-5888]


_BYPASS = 'If necessary set "spark.sql.ansi.enabled" to "false" to bypass this error.'


@pytest.mark.parametrize("measure, message", [
    ("abs(b.i)", f"[ARITHMETIC_OVERFLOW] overflow. {_BYPASS}"),
    ("CAST(b.l AS INT)", '[CAST_OVERFLOW] The value 3000000000L of the type "BIGINT" cannot '
     'be cast to "INT" due to an overflow. Use `try_cast` to tolerate overflow and return '
     "NULL instead."),
    ("CAST(b.i AS SMALLINT)", '[CAST_OVERFLOW] The value -2147483648 of the type "INT" '
     'cannot be cast to "SMALLINT" due to an overflow. Use `try_cast` to tolerate overflow '
     "and return NULL instead."),
    ("b.l / b.z", "[DIVIDE_BY_ZERO] Division by zero. Use `try_divide` to tolerate divisor "
     f"being 0 and return NULL instead. {_BYPASS}"),
    ("b.l % b.z", "[REMAINDER_BY_ZERO] Remainder by zero. Use `try_mod` to tolerate divisor "
     f"being 0 and return NULL instead. {_BYPASS}"),
    ("b.d + b.d", "[NUMERIC_VALUE_OUT_OF_RANGE.WITH_SUGGESTION]  180000000000000000000000000"
     f"000000000000 cannot be represented as Decimal(38, 0). {_BYPASS[:-1]}, and return NULL "
     "instead."),  # was NULL in-process
])
def test_measure_errors_in_sparks_words(measure, message):
    """Spark 4.3's words (SQLSTATE cut, as on Spark through cepsql) for MEASURES errors
    Spark raises without query context or in-process wording differed ("error evaluating
    expression: overflow", a remainder's DIVIDE_BY_ZERO)."""
    table = pa.table({"ts": [1], "i": pa.array([-2147483648], pa.int32()),
                      "l": pa.array([3000000000], pa.int64()), "z": pa.array([0], pa.int64()),
                      "d": pa.array([Decimal("9e37")], pa.decimal128(38, 0))})
    sql = (f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES {measure} AS v "
           "ONE ROW PER MATCH PATTERN (b) DEFINE b AS b.ts > 0)")
    with cepsql.planner_options(ansi=True), pytest.raises(CepRuntimeError) as info:
        cepsql.match_recognize(sql, t=table)
    assert info.value.message == message


def test_abs_wraps_without_ansi_as_spark():
    table = pa.table({"ts": [1], "i": pa.array([-2147483648], pa.int32())})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES abs(b.i) AS v "
           "ONE ROW PER MATCH PATTERN (b) DEFINE b AS b.ts > 0)")
    with cepsql.planner_options(ansi=False):
        assert cepsql.match_recognize(sql, t=table).v.tolist() == [-2147483648]


_BIGINT_LITERAL_SQL = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES a.x + 10L AS y "
                       "ONE ROW PER MATCH PATTERN (a) DEFINE a AS a.x + 10L > 0)")


@pytest.mark.parametrize("ansi", [True, False])
def test_bigint_literal_widens_int_column(ansi):
    """``x + 10L`` is BIGINT in Spark: an INT column at its maximum plus a BIGINT literal
    neither overflows under ANSI nor wraps without it (the parser used to fold 10L into an
    INT literal, so the sum overflowed at 32 bits); the reference agrees."""
    table = pa.table({"ts": [1, 2], "x": pa.array([2**31 - 1, 5], pa.int32())})
    with cepsql.planner_options(ansi=ansi):
        out = run_local(_BIGINT_LITERAL_SQL, {"t": table})
        assert out.schema.field("y").type == pa.int64()
        assert out.column("y").to_pylist() == [2**31 + 9, 15]
        spec = spec_of(_BIGINT_LITERAL_SQL)
        _, expected = evaluate_reference(spec, table)
    assert [row[-1] for row in expected] == [2**31 + 9, 15]
