"""Spark's own errors about the SQL around a clause come back as cepsql errors at the
user's line:column, not at positions of the statement cepsql rewrote (issue 24 B6)."""
from __future__ import annotations

import pytest

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
    hard.conf.set("spark.sql.ansi.enabled", "true")
    try:
        df = hard.cep.sql(sql)
        with pytest.raises(CepRuntimeError) as info:
            df.collect()
    finally:
        hard.conf.unset("spark.sql.ansi.enabled")
    assert "DIVIDE_BY_ZERO" in info.value.message
    _at(info.value, sql, "1/0")


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
    hard.conf.set("spark.sql.ansi.enabled", "true")
    try:
        with pytest.raises(CepRuntimeError) as info:
            hard.cep.sql(sql).collect()
    finally:
        hard.conf.unset("spark.sql.ansi.enabled")
    assert "DIVIDE_BY_ZERO" in info.value.message
    _at(info.value, sql, "b.n /")


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
