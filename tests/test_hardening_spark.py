"""Spark's own errors about the SQL around a clause come back as cepsql errors at the
user's line:column, not at positions of the statement cepsql rewrote (issue 24 B6)."""
from __future__ import annotations

import pyarrow as pa
import pytest

import cepsql
from cepsql.algebra.expressions import ColumnRef, FunctionCall, Literal
from cepsql.backends.spark import task_errors
from cepsql.errors import CepAnalysisError, CepRuntimeError, CepSyntaxError

CLAUSE = ("MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES LAST(b.n) AS v "
          "ONE ROW PER MATCH PATTERN (a b+) DEFINE b AS b.n > PREV(b.n))")


@pytest.fixture(scope="module")
def hard(spark):
    spark.createDataFrame([("a", i, n) for i, n in enumerate([5, 3, 4, 6, 2, 7])],
                          "sym string, ts int, n int").createOrReplaceTempView("hard")
    return spark


def _at(err, sql: str, needle: str) -> None:
    offset = sql.index(needle)
    line = sql.count("\n", 0, offset) + 1
    col = offset - (sql.rfind("\n", 0, offset) + 1) + 1
    assert (err.line, err.col) == (line, col), str(err)
    assert "rewritten by cepsql" not in err.message


def _ansi_error(spark, sql: str) -> CepRuntimeError:
    """The CepRuntimeError collecting sql raises under ANSI (the setting unset after)."""
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        df = spark.cep.sql(sql)
        with pytest.raises(CepRuntimeError) as info:
            df.collect()
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
    return info.value


@pytest.mark.parametrize("sql, cls, needle", [
    (f"SELECT * FROM hard {CLAUSE}\n) -- extra", CepSyntaxError, ") --"),
    (f"SELECT *\n  FROM hard {CLAUSE} WHERE nope_fn(v) > 1", CepAnalysisError, "nope_fn"),
    (f"SELECT *\x00 FROM hard {CLAUSE}", CepSyntaxError, "\x00"),
])
def test_spark_errors_around_the_clause_at_the_users_position(hard, sql, cls, needle):
    with pytest.raises(cls) as info:
        hard.cep.sql(sql)
    _at(info.value, sql, needle)


def test_run_time_error_around_the_clause_at_the_users_position(hard):
    sql = f"SELECT * FROM hard {CLAUSE}\n WHERE v > 1/0"
    error = _ansi_error(hard, sql)
    assert "DIVIDE_BY_ZERO" in error.message
    _at(error, sql, "1/0")


@pytest.mark.parametrize("measure, define, needle, error_class", [
    ("LAST(b.n) AS v", "b.s = 5", "b.s = 5", "CAST_INVALID_INPUT"),
    ("sum(b.n) / (count(a.*) - 1) AS v", "b.n > a.n", "sum(b.n) /", "DIVIDE_BY_ZERO"),
])
def test_run_time_error_in_a_generated_expression_at_the_users_position(
        hard, measure, define, needle, error_class):
    """Spark evaluates MEASURES and row-local DEFINE parts as text cepsql generated; its
    run-time errors there (at collect) come back as CepRuntimeError at the expression."""
    hard.createDataFrame([("a", i, n, s) for i, (n, s) in
                          enumerate([(5, "x"), (3, "1"), (4, "2"), (6, "y")])],
                         "sym string, ts int, n int, s string").createOrReplaceTempView("hard_s")
    sql = (f"SELECT * FROM hard_s MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts\n"
           f"  MEASURES {measure} ONE ROW PER MATCH PATTERN (a b+)\n  DEFINE b AS {define})")
    with pytest.raises(CepRuntimeError) as info:
        hard.cep.sql(sql).collect()
    assert error_class in info.value.message
    _at(info.value, sql, needle)


@pytest.mark.parametrize("mode", ["", "STRATEGY SKIP_TILL_NEXT_MATCH "])
def test_divide_by_zero_in_a_define_at_the_division(hard, mode):
    """The condition VM raises in a task, which has no SQL text: the driver locates the
    error through the clause's error_site, as in-process."""
    sql = (f"SELECT * FROM hard MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts\n"
           f"  MEASURES LAST(b.n) AS v ONE ROW PER MATCH {mode}PATTERN (a b+)\n"
           "  DEFINE b AS b.n / (a.n - a.n) > 1)")
    error = _ansi_error(hard, sql)
    assert "DIVIDE_BY_ZERO" in error.message
    _at(error, sql, "b.n /")


def test_round_scale_overflow_as_in_process(hard):
    sql = ("SELECT * FROM hard MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts\n"
           "  MEASURES ROUND(LAST(b.n) * 1.5e0 - a.n, 999999999) AS v ONE ROW PER MATCH\n"
           "  PATTERN (a b+) DEFINE b AS b.n > PREV(b.n))")
    with pytest.raises(CepRuntimeError) as info:
        hard.cep.sql(sql).collect()
    assert info.value.message.startswith("[ARITHMETIC_OVERFLOW] round(): 10^999999999")
    _at(info.value, sql, "ROUND(")


def test_no_json_log_line_for_an_error_cepsql_reports(hard, caplog):
    """PySpark logs a JSON line when it builds the collect's error; cepsql reports it at
    the user's position, so the line is dropped (the user's own spark.sql keeps it)."""
    def logged() -> bool:
        found = any(r.name == "SQLQueryContextLogger" for r in caplog.records)
        caplog.clear()
        return found
    sql = f"SELECT * FROM hard {CLAUSE}\n WHERE v > 1/0"
    hard.conf.set("spark.sql.ansi.enabled", "true")
    try:
        df = hard.cep.sql(sql)
        caplog.clear()
        with pytest.raises(CepRuntimeError):
            df.collect()
        assert not logged()
        with pytest.raises(Exception) as plain:
            hard.sql("SELECT 1/0 AS z").collect()
        assert not isinstance(plain.value, CepRuntimeError)
        assert logged()
    finally:
        hard.conf.unset("spark.sql.ansi.enabled")


_DIVIDES = ("  MEASURES LAST(b.n) AS v ONE ROW PER MATCH PATTERN (a b+)\n"
            "  DEFINE b AS b.n / (a.n - a.n) > 1)")


@pytest.fixture()
def ansi(hard):
    hard.conf.set("spark.sql.ansi.enabled", "true")
    yield hard
    hard.conf.unset("spark.sql.ansi.enabled")


def test_workload_define_error_at_the_views_division(ansi):
    """A workload's shared pass runs every view's clause in one task: the error is
    located through the raising pattern's error_site, in that view's own statement."""
    views = {"hard_ok": "CREATE TEMPORARY VIEW hard_ok AS SELECT * FROM hard MATCH_RECOGNIZE "
                        f"(PARTITION BY sym ORDER BY ts {CLAUSE[CLAUSE.index('MEASURES'):]}",
             "hard_bad": "CREATE TEMPORARY VIEW hard_bad AS\nSELECT * FROM hard "
                         f"MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts\n{_DIVIDES}"}
    try:
        for sql in views.values():
            ansi.cep.sql(sql)
        with pytest.raises(CepRuntimeError) as info:
            ansi.cep.workload("hard").dataframes()["hard_bad"].collect()
    finally:
        for name in views:
            ansi.cep.sql(f"DROP VIEW IF EXISTS {name}")
    assert "DIVIDE_BY_ZERO" in info.value.message
    _at(info.value, views["hard_bad"], "b.n /")


def test_streaming_define_error_at_the_division(ansi, tmp_path):
    """A streaming query's stateful tasks send the error to the driver, which raises it
    located when the query fails (awaitTermination), not Spark's StreamingQueryException."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "p.json").write_text("".join(
        f'{{"sym": "a", "ts": "2024-01-01 00:00:0{i}", "n": {n}}}\n'
        for i, n in enumerate([5, 3, 4, 6])))
    ansi.readStream.schema("sym string, ts timestamp, n int").json(str(folder)) \
        .withWatermark("ts", "1 second").createOrReplaceTempView("hard_stream")
    sql = f"SELECT * FROM hard_stream MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts\n{_DIVIDES}"
    query = ansi.cep.sql(sql).writeStream.format("memory").queryName("hard_stream_out") \
        .trigger(availableNow=True).start()
    try:
        with pytest.raises(CepRuntimeError) as info:
            query.awaitTermination()
    finally:
        query.stop()
    assert "DIVIDE_BY_ZERO" in info.value.message
    _at(info.value, sql, "b.n /")


def test_round_overflow_log_filter_only_after_cepsql_generates_one(hard, monkeypatch):
    """Spark's "Lost task" line of a BigInteger round overflow cannot be told apart from a
    round in the user's own spark.sql, so attaching cepsql does not drop it: only noting
    an overflowing round cepsql generated does (task_errors' module docstring)."""
    for attr in (task_errors.PENDING_ATTR, task_errors.PENDING_OVERFLOWS_ATTR):
        monkeypatch.setattr(hard, attr, {}, raising=False)  # no note outlives the test
    added = []
    monkeypatch.setattr(task_errors, "_add_filter",
                        lambda jvm, config, logger, regex: added.append(regex))
    assert task_errors.quiet_task_logs(hard)
    assert not [r for r in added if task_errors.BIG_INTEGER_OVERFLOW in r]
    fine = FunctionCall("round", (ColumnRef(None, "n"), Literal(2, "int")), pos=3)
    task_errors.note_expression("round(n, 2)", fine)
    assert not [r for r in added if task_errors.BIG_INTEGER_OVERFLOW in r]
    huge = FunctionCall("round", (ColumnRef(None, "n"), Literal(999999999, "int")), pos=3)
    task_errors.note_expression("round(n, 999999999)", huge)
    assert [r for r in added if task_errors.BIG_INTEGER_OVERFLOW in r]


_OVERFLOWS = "  DEFINE b AS b.n * 4611686018427387904 > 0)"


def test_workload_shared_column_error_at_the_first_views_expression(ansi):
    """A row-local column two views share is computed once in the shared pass: its
    overflow points at the expression in the first view (registration order) and names
    the views sharing it (it had no view, so no line:column)."""
    views = {name: f"CREATE TEMPORARY VIEW {name} AS\nSELECT * FROM hard MATCH_RECOGNIZE "
                   f"(PARTITION BY sym ORDER BY ts\n  MEASURES LAST(b.n) AS v ONE ROW PER "
                   f"MATCH PATTERN (a b+)\n{_OVERFLOWS}"
             for name in ("hard_sh1", "hard_sh2")}
    try:
        for sql in views.values():
            ansi.cep.sql(sql)
        with pytest.raises(CepRuntimeError) as info:
            ansi.cep.workload("hard").dataframes()["hard_sh2"].collect()
    finally:
        for name in views:
            ansi.cep.sql(f"DROP VIEW IF EXISTS {name}")
    assert info.value.message.startswith("[ARITHMETIC_OVERFLOW] overflow. Use 'try_multiply'")
    assert "computed once for the views hard_sh1, hard_sh2; located in hard_sh1" \
        in info.value.message
    assert info.value.sql == views["hard_sh1"]
    _at(info.value, views["hard_sh1"], "b.n * 46")


def _spark_words(spark, expr: str, rows: str) -> str:
    """Spark's own message evaluating expr over the VALUES rows (its SQLSTATE cut off).
    The expressions cepsql noted are set aside meanwhile: an error Spark gives no query
    context would otherwise be located in them by its words (task_errors)."""
    noted = spark.__dict__.pop(task_errors.EXPRESSIONS_ATTR, None)
    try:
        with pytest.raises(Exception) as info:
            spark.sql(f"SELECT {expr} AS v FROM VALUES {rows}").collect()
    finally:
        if noted is not None:
            setattr(spark, task_errors.EXPRESSIONS_ATTR, noted)
    text = str(info.value).split("\n")[0]
    return text[:text.index(" SQLSTATE")] if " SQLSTATE" in text else text


@pytest.mark.parametrize("cond, culprit, plain, rows", [
    ("b.x + LAST(a.x) > 0", "b.x + LAST(a.x)", "x + y",
     "(1L, 9223372036854775807L) AS t(x, y)"),
    ("b.s * a.s > 0", "b.s * a.s", "x * y",
     "(CAST(30000 AS SMALLINT), CAST(2 AS SMALLINT)) AS t(x, y)"),
    ("b.d + a.d > 0", "b.d + a.d", "x + y",
     "(9e37BD, 9e37BD) AS t(x, y)"),
])
def test_condition_vm_overflow_in_sparks_own_words(ansi, cond, culprit, plain, rows):
    """The condition VM's overflow on Spark: the message Spark gives for the same
    expression, at the expression in the user's DEFINE."""
    ansi.sql("SELECT * FROM VALUES (1, 9223372036854775807L, CAST(2 AS SMALLINT), "
             "CAST(9e37 AS DECIMAL(38, 0))), (2, 1L, CAST(30000 AS SMALLINT), "
             "CAST(9e37 AS DECIMAL(38, 0))) AS t(ts, x, s, d)"
             ).createOrReplaceTempView("hard_vm")
    sql = ("SELECT * FROM hard_vm MATCH_RECOGNIZE (ORDER BY ts\n"
           "  MEASURES LAST(b.ts) AS v ONE ROW PER MATCH PATTERN (a b)\n"
           f"  DEFINE b AS {cond})")
    with pytest.raises(CepRuntimeError) as info:
        ansi.cep.sql(sql).collect()
    assert info.value.message == _spark_words(ansi, plain, rows)
    _at(info.value, sql, culprit)


@pytest.mark.parametrize("enabled", [True, False])
def test_condition_vm_interval_overflow_as_spark_in_both_modes(hard, enabled):
    hard.conf.set("spark.sql.ansi.enabled", str(enabled).lower())
    try:
        hard.sql("SELECT * FROM VALUES (1, INTERVAL '106751991' DAY), "
                 "(2, INTERVAL '106751991' DAY) AS t(ts, iv)").createOrReplaceTempView("hard_iv")
        sql = ("SELECT * FROM hard_iv MATCH_RECOGNIZE (ORDER BY ts MEASURES LAST(b.ts) AS v "
               "ONE ROW PER MATCH PATTERN (a b) DEFINE b AS b.iv + a.iv > INTERVAL '0' DAY)")
        with pytest.raises(CepRuntimeError) as info:
            hard.cep.sql(sql).collect()
        spark_says = _spark_words(hard, "x + y", "(INTERVAL '106751991' DAY, "
                                  "INTERVAL '106751991' DAY) AS t(x, y)")
    finally:
        hard.conf.unset("spark.sql.ansi.enabled")
    assert info.value.message == spark_says
    _at(info.value, sql, "b.iv + a.iv")


@pytest.mark.parametrize("enabled", [True, False])
def test_smallint_times_typed_literal_as_spark(hard, enabled):
    """x * CAST(30000 AS SMALLINT) keeps Spark's SMALLINT on Spark and in-process."""
    hard.conf.set("spark.sql.ansi.enabled", str(enabled).lower())
    try:
        hard.sql("SELECT * FROM VALUES (1, CAST(30000 AS SMALLINT)) AS t(ts, s)"
                 ).createOrReplaceTempView("hard_small")
        sql = ("SELECT * FROM {t} MATCH_RECOGNIZE (ORDER BY ts MEASURES "
               "b.s * CAST(30000 AS SMALLINT) AS v ONE ROW PER MATCH PATTERN (b) "
               "DEFINE b AS b.s > 1)")
        table = pa.table({"ts": [1], "s": pa.array([30000], pa.int16())})
        with cepsql.planner_options(ansi=enabled):
            if enabled:  # Spark gives its error no query context: located by its words
                with pytest.raises(CepRuntimeError) as remote:
                    hard.cep.sql(sql.format(t="hard_small")).collect()
                with pytest.raises(CepRuntimeError) as local:
                    cepsql.match_recognize(sql.format(t="t"), t=table)
                words = _spark_words(hard, "x * CAST(30000 AS SMALLINT)",
                                     "(CAST(30000 AS SMALLINT)) AS t(x)")
                assert local.value.message == remote.value.message == words
                _at(remote.value, sql.format(t="hard_small"), "b.s * CAST")
            else:
                df = hard.cep.sql(sql.format(t="hard_small"))
                assert dict(df.dtypes)["v"] == "smallint"
                assert [r.v for r in df.collect()] == \
                    cepsql.match_recognize(sql.format(t="t"), t=table).v.tolist() == [-5888]
    finally:
        hard.conf.unset("spark.sql.ansi.enabled")


_NO_CONTEXT_ROWS = ("(1, CAST(30000 AS SMALLINT), CAST(100 AS TINYINT), -2147483648, "
                    "3000000000L) AS t(ts, s, y, i, l)")


@pytest.fixture(scope="module")
def no_context(hard):
    hard.sql(f"SELECT * FROM VALUES {_NO_CONTEXT_ROWS}").createOrReplaceTempView("hard_nc")
    return hard


@pytest.mark.parametrize("measure, culprit, plain", [
    ("LAST(b.ts) + b.s * b.s", "b.s * b.s", "s * s"),
    ("b.y + b.y", "b.y + b.y", "y + y"),
    ("2 + -b.i", "b.i AS", "-i"),  # a unary minus's position is its operand's
    ("abs(b.i)", "abs(b.i)", "abs(i)"),
    ("CAST(b.l AS INT)", "b.l AS INT", "CAST(l AS INT)"),  # a CAST's: its operand's
    ("b.i - 1", "b.i - 1", "i - 1"),  # with a query context: the same words
])
def test_measure_error_without_spark_context_at_the_expression(no_context, measure, culprit,
                                                               plain):
    """Spark raises these in MEASURES with no query context (so its raw exception used to
    reach the user): a CepRuntimeError in Spark's words, at the expression that can raise
    it (told by the error class, operator and type); the same message in-process."""
    sql = ("SELECT * FROM {t} MATCH_RECOGNIZE (ORDER BY ts\n"
           f"  MEASURES LAST(b.ts) AS t0, {measure} AS v ONE ROW PER MATCH\n"
           "  PATTERN (b) DEFINE b AS b.ts > 0)")
    no_context.conf.set("spark.sql.ansi.enabled", "true")
    try:
        with pytest.raises(CepRuntimeError) as remote:
            no_context.cep.sql(sql.format(t="hard_nc")).collect()
        words = _spark_words(no_context, plain, _NO_CONTEXT_ROWS)
    finally:
        no_context.conf.unset("spark.sql.ansi.enabled")
    assert remote.value.message == words
    _at(remote.value, sql.format(t="hard_nc"), culprit)
    with cepsql.planner_options(ansi=True), pytest.raises(CepRuntimeError) as local:
        cepsql.match_recognize(sql.format(t="t"), t=no_context.table("hard_nc").toArrow())
    assert local.value.message == words
    _at(local.value, sql.format(t="t"), culprit)


def test_measure_error_without_context_names_every_candidate(no_context):
    """Two expressions can raise the same SMALLINT overflow: the first one's position,
    both named."""
    sql = ("SELECT * FROM hard_nc MATCH_RECOGNIZE (ORDER BY ts\n"
           "  MEASURES b.s * b.s AS v,\n    LAST(b.s) * FIRST(b.s) AS w ONE ROW PER MATCH\n"
           "  PATTERN (b) DEFINE b AS b.ts > 0)")
    error = _ansi_error(no_context, sql)
    assert error.message.startswith("[BINARY_ARITHMETIC_OVERFLOW] 30000S * 30000S")
    assert error.message.endswith("(in one of: line 2, column 12; line 3, column 5)")
    _at(error, sql, "b.s * b.s")


@pytest.mark.parametrize("ta, a, tb, b, op", [
    ("20,5", "123456789012345.67891", "38,20", "999999999999999999.99999999999999999999", "*"),
    ("38,0", "99999999999999999999999999999999999999", "10,9", "0.123456789", "/"),
    ("38,5", "-999999999999999999999999999999999.99999", "38,3", "1.005", "-"),
])
def test_condition_vm_decimal_overflow_shows_sparks_value(ansi, ta, a, tb, b, op):
    """The value Spark's NUMERIC_VALUE_OUT_OF_RANGE shows (a product to 39 digits, a
    quotient rounded to the result's scale), in-process and on Spark."""
    rows = (f"(1, CAST('{a}' AS DECIMAL({ta})), CAST('{b}' AS DECIMAL({tb}))), "
            f"(2, CAST('{a}' AS DECIMAL({ta})), CAST('{b}' AS DECIMAL({tb}))) AS t(ts, x, y)")
    ansi.sql(f"SELECT * FROM VALUES {rows}").createOrReplaceTempView("hard_dec")
    sql = ("SELECT * FROM {t} MATCH_RECOGNIZE (ORDER BY ts MEASURES LAST(b.ts) AS v "
           f"ONE ROW PER MATCH PATTERN (a b) DEFINE b AS a.x {op} b.y > 0)")
    words = _spark_words(ansi, f"x {op} y", rows)
    with pytest.raises(CepRuntimeError) as remote:
        ansi.cep.sql(sql.format(t="hard_dec")).collect()
    with cepsql.planner_options(ansi=True), pytest.raises(CepRuntimeError) as local:
        cepsql.match_recognize(sql.format(t="t"), t=ansi.table("hard_dec").toArrow())
    assert remote.value.message == local.value.message == words
