"""Errors cepsql finds inside Spark tasks come back as CepErrors with their position in
the user's SQL, on every action of the returned DataFrame (issue 12, item 5); other
task errors keep pyspark's own types. The console side is checked in a subprocess by
tests/test_spark_deployments.py."""
from __future__ import annotations

import pytest
from pyspark.errors import PythonException

from cepsql import CepAnalysisError, CepRuntimeError
from cepsql.errors import WIRE_TAG, decode_error, encode_error, position_of, transported

BODY = ("MEASURES A.v AS av ONE ROW PER MATCH AFTER MATCH SKIP TO FIRST A "
        "PATTERN (A B) DEFINE B AS B.v > A.v")
CLAUSE = f"SELECT *\nFROM te_rows MATCH_RECOGNIZE (PARTITION BY k ORDER BY id\n  {BODY})"
MESSAGE = "AFTER MATCH SKIP TO A: cannot skip to the first row of the match"


@pytest.fixture(scope="module")
def rows(spark):
    spark.createDataFrame([(1, "x", 1), (2, "x", 2), (3, "y", 5)],
                          "id int, k string, v int").createOrReplaceTempView("te_rows")
    yield spark
    spark.catalog.dropTempView("te_rows")


def test_wire_line_round_trip_and_garbage():
    err = CepAnalysisError("bad thing", sql="SELECT 1\nFROM t", pos=13)
    back = decode_error("Traceback ...\nsome text " + encode_error(err) + "\n SQLSTATE: 38000")
    assert type(back) is CepAnalysisError and str(back) == str(err) == "bad thing (line 2, column 5)"
    assert decode_error("no tag here") is None
    assert decode_error(WIRE_TAG + "{not json") is None
    assert decode_error(WIRE_TAG + '{"type": "NotOurs", "message": "m"}') is None


def test_transported_keeps_class_and_adds_the_wire_line():
    with pytest.raises(CepRuntimeError) as info:
        with transported():
            raise CepRuntimeError("boom", sql="SELECT x", pos=7)
    text = str(info.value)
    assert text.splitlines()[0] == "boom (line 1, column 8)"
    assert decode_error(text).pos == 7


@pytest.mark.filterwarnings("ignore:toPandas attempted Arrow optimization")
def test_every_action_raises_cep_runtime_error_at_the_skip_variable(rows, tmp_path):
    df = rows.cep.sql(CLAUSE)  # lazy: nothing has run yet
    pos = CLAUSE.index("FIRST A ") + len("FIRST ")
    line, col = position_of(CLAUSE, pos)
    assert line == 3
    actions = [df.collect, df.count, df.toPandas,
               lambda: df.write.mode("overwrite").parquet(str(tmp_path / "out"))]
    for action in actions:
        with pytest.raises(CepRuntimeError) as info:
            action()
        err = info.value
        assert (err.message, err.pos, err.sql, err.line, err.col) == (MESSAGE, pos, CLAUSE, line, col)


def test_table_function_raises_cep_runtime_error_located_in_the_statement(rows):
    sql = f"SELECT * FROM cep_match(TABLE(te_rows) PARTITION BY k ORDER BY id, '{BODY}')"
    with pytest.raises(CepRuntimeError) as info:
        rows.cep.sql(sql).collect()
    assert (info.value.message, info.value.sql) == (MESSAGE, sql)
    assert info.value.pos == sql.index("FIRST A ") + len("FIRST ")


def test_other_task_errors_keep_pysparks_types(rows):
    def failing(batches):
        for _ in batches:
            raise ValueError("not cepsql's")
        yield from ()
    with pytest.raises(PythonException, match="not cepsql's"):
        rows.range(1).mapInArrow(failing, "id long").collect()
