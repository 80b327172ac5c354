"""Output layout (issue 12 item 3): a key repeated in ORDER BY is shown once per key in
ALL ROWS PER MATCH (Trino: ``ORDER BY id ASC, id DESC`` gives two ``id`` columns), and
column aliases on the clause (``AS m(a, b)``) rename its output columns in order."""
from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

import cepsql
from cepsql.errors import CepAnalysisError, CepSyntaxError
from cepsql.reference.sql import evaluate_reference
from support.sqlhelp import loc, run

try:
    from .test_property_sql import spec_of
except ImportError:
    from test_property_sql import spec_of

T = pd.DataFrame({"id": [1, 2, 3], "v": [10, 20, 5]})

REPEATED = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id ASC, id DESC "
            "MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH PATTERN (A B) "
            "DEFINE B AS B.v > A.v)")


def test_repeated_order_key_is_shown_per_key():
    cols, rows = run(REPEATED, t=T)
    assert cols == ["id", "id", "c", "v"]
    assert rows == [(1, 1, "A", 10), (2, 2, "B", 20)]
    assert evaluate_reference(spec_of(REPEATED), pa.Table.from_pandas(T)) == (cols, rows)


def test_repeated_partition_and_order_key():
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY g ORDER BY g, id "
           "MEASURES A.v AS av ALL ROWS PER MATCH PATTERN (A))")
    t = T.assign(g=["x", "x", "y"])
    cols, rows = run(sql, t=t)
    assert cols == ["g", "g", "id", "av", "v"]
    assert evaluate_reference(spec_of(sql), pa.Table.from_pandas(t)) == (cols, rows)


def test_measure_named_like_a_column_is_a_second_column():
    # Spark allows duplicate output names (issue 24 B8); reading the name is ambiguous
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.v AS id "
           "ALL ROWS PER MATCH PATTERN (A))")
    assert run(sql, t=T) == (["id", "id", "v"], [(1, 10, 10), (2, 20, 20), (3, 5, 5)])
    assert evaluate_reference(spec_of(sql), pa.Table.from_pandas(T))[0] == ["id", "id", "v"]
    with pytest.raises(CepAnalysisError, match="ambiguous"):
        cepsql.match_recognize(sql.replace("SELECT *", "SELECT id"), t=T)


ALIASED = ("SELECT m.x + m.y AS s FROM t MATCH_RECOGNIZE (ORDER BY id "
           "MEASURES A.v AS av, B.v AS bv PATTERN (A B) DEFINE B AS B.v > A.v) AS m(x, y)")


def test_column_aliases_rename_the_output():
    assert run(ALIASED, t=T) == (["s"], [(30,)])
    cols, _ = run(ALIASED.replace("m.x + m.y AS s", "*"), t=T)
    assert cols == ["x", "y"]


@pytest.mark.parametrize("aliases,message", [
    ("(x)", "column alias list has 1 names but MATCH_RECOGNIZE returns 2 columns"),
    ("(x, X)", "column alias X is given twice"),
])
def test_column_alias_mistakes_are_analysis_errors_with_position(aliases, message):
    sql = ALIASED.replace("m.x + m.y AS s", "*").replace("(x, y)", aliases)
    with pytest.raises(CepAnalysisError, match=message) as info:
        cepsql.match_recognize(sql, t=T)
    assert (info.value.line, info.value.col) == loc(sql, aliases)


def test_unterminated_column_alias_list_is_a_syntax_error():
    sql = ALIASED.replace("(x, y)", "(x y)")
    with pytest.raises(CepSyntaxError, match="expected ',' or '\\)'"):
        cepsql.match_recognize(sql, t=T)


def test_layout_through_spark(spark):
    spark.createDataFrame(T).createOrReplaceTempView("layout_t")
    df = spark.cep.sql(REPEATED.replace("FROM t ", "FROM layout_t "))
    assert df.columns == ["id", "id", "c", "v"]
    assert [tuple(r) for r in df.collect()] == [(1, 1, "A", 10), (2, 2, "B", 20)]
    aliased = spark.cep.sql(ALIASED.replace("FROM t ", "FROM layout_t "))
    assert [tuple(r) for r in aliased.collect()] == [(30,)]
    with pytest.raises(CepAnalysisError, match="column alias list has 1 names"):
        spark.cep.sql(ALIASED.replace("FROM t ", "FROM layout_t ").replace("(x, y)", "(x)"))
