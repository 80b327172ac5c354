"""On Spark, a CEP evaluation stopped by its state bound (cepsql.cep.maxPartialMatches,
issue 24 A1) reaches the user as CepRuntimeError naming the key, not as a Py4JJavaError
or PythonException from a worker that ran out of memory."""
from __future__ import annotations

import pytest

from cepsql import CepRuntimeError
from cepsql.runtime.cep_worker import STATE_LIMIT_KEY


@pytest.fixture()
def limited(spark):
    spark.createDataFrame([(i, (i * 7) % 3) for i in range(120)], "ts int, x int") \
        .createOrReplaceTempView("sl_rows")
    spark.conf.set(STATE_LIMIT_KEY, "500")
    yield spark
    spark.conf.unset(STATE_LIMIT_KEY)
    spark.catalog.dropTempView("sl_rows")


def test_state_bound_arrives_as_cep_runtime_error(limited):
    df = limited.cep.sql(
        "SELECT * FROM sl_rows MATCH_RECOGNIZE (ORDER BY ts MEASURES count(b.*) AS nb "
        "ONE ROW PER MATCH STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, KL(b), c)) "
        "DEFINE a AS a.x = 0, b AS b.x = 1, c AS c.x = 2)")
    with pytest.raises(CepRuntimeError, match=STATE_LIMIT_KEY) as info:
        df.collect()
    assert "more than 500 " in str(info.value)   # the session's conf reached the task
