"""cep_match / cep_view table functions: through spark.cep.sql (batch-based, per-query
Arrow UDTF) and through plain spark.sql (the registered analyze-based fallback)."""
import pyarrow as pa
import pytest

from cepsql.errors import CepAnalysisError, CepSyntaxError
from cepsql.parse.tf_calls import MatchCall, decode_string, find_calls, map_body_pos

BODY_ONE = ("MEASURES FIRST(A.price) AS start_price, LAST(B.price) AS top, "
            "MATCH_NUMBER() AS mn, CLASSIFIER() AS cls "
            "ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS B.price > PREV(B.price)")
BODY_ALL = ("MEASURES RUNNING LAST(B.price) AS top, MATCH_NUMBER() AS mn, CLASSIFIER() AS cls "
            "ALL ROWS PER MATCH AFTER MATCH SKIP TO NEXT ROW "
            "PATTERN (A B*) DEFINE B AS B.price >= PREV(B.price)")


def rows(df):
    return sorted((tuple(r) for r in df.collect()), key=repr)


@pytest.fixture(scope="module")
def ticks(spark):
    import cepsql  # noqa: F401
    spark.createDataFrame(pa.table({
        "sym": ["a", "a", "a", "a", None, None, None, "b", "b", "b"],
        "ts": [1, 2, 3, 4, 1, 2, 3, 1, 2, 2],   # b has an ORDER BY tie: tie-breakers matter
        "price": [5.0, 6.0, 7.0, 1.0, 3.0, 4.0, 2.0, 9.0, 8.0, 9.5],
    })).createOrReplaceTempView("tf_ticks")
    return spark


# --- text level (no Spark) ---------------------------------------------------------------

def test_find_call_with_unparenthesised_order_by_and_escapes():
    sql = "SELECT * FROM cep_match(TABLE(t) PARTITION BY a, b ORDER BY ts DESC, 'x \\'q\\' y')"
    (call,) = find_calls(sql)
    assert isinstance(call, MatchCall)
    assert [p.text for p in call.table.partition_by] == ["a", "b"]
    assert [p.text for p in call.table.order_by] == ["ts DESC"]
    assert call.body == "x 'q' y"
    assert sql[map_body_pos(call, call.body.index("y"))] == "y"
    assert sql[call.start:call.end].startswith("cep_match(") and sql[call.end - 1] == ")"


def test_decode_doubled_quotes_and_unicode():
    text = "'it''s \\u0041'"
    value, offsets = decode_string(text, 0, len(text))
    assert value == "it's A" and len(offsets) == len(value) + 1


# --- spark.cep.sql ---------------------------------------------------------------------

def test_cep_match_equals_match_recognize_one_and_all_rows(ticks):
    spark = ticks
    for body in (BODY_ONE, BODY_ALL):
        clause = spark.cep.sql(
            f"SELECT * FROM tf_ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts {body})")
        table_fn = spark.cep.sql(
            f"SELECT * FROM cep_match(TABLE(tf_ticks) PARTITION BY sym ORDER BY ts, '{body}')")
        assert table_fn.columns == clause.columns
        assert table_fn.schema == clause.schema
        assert rows(table_fn) == rows(clause) and rows(clause)


def test_body_form_query_source_and_outer_sql(ticks):
    spark = ticks
    body = BODY_ONE.replace("MEASURES", "PARTITION BY sym ORDER BY ts MEASURES")
    got = spark.cep.sql(
        "WITH src AS (SELECT * FROM tf_ticks WHERE sym IS NOT NULL)\n"
        "SELECT m.sym, m.top FROM cep_match(TABLE(SELECT * FROM src), "
        f"'{body}') AS m WHERE m.mn = 1 ORDER BY m.sym")
    assert [tuple(r) for r in got.collect()] == [("a", 7.0), ("b", 9.5)]


def test_plain_spark_sql_fallback_same_rows(ticks):
    spark = ticks
    clause = spark.cep.sql(
        f"SELECT * FROM tf_ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts {BODY_ALL})")
    body = BODY_ALL.replace("MEASURES", "PARTITION BY sym ORDER BY ts MEASURES")
    plain = spark.sql(f"SELECT * FROM cep_match(TABLE(tf_ticks), '{body}')")
    assert plain.columns == clause.columns
    assert rows(plain) == rows(clause)


def test_cep_view(ticks):
    spark = ticks
    spark.cep.sql("CREATE OR REPLACE TEMPORARY VIEW tf_runs AS SELECT * FROM "
                  f"cep_match(TABLE(tf_ticks) PARTITION BY sym ORDER BY ts, '{BODY_ONE}')")
    assert "tf_runs" in [v["name"] for v in spark.cep.views()]
    got = spark.cep.sql("SELECT sym, top FROM cep_view('tf_runs') WHERE mn = 1")
    assert rows(got) == rows(spark.sql("SELECT sym, top FROM tf_runs WHERE mn = 1"))
    with pytest.raises(CepAnalysisError, match="unknown pattern view 'nope'") as info:
        spark.cep.sql("SELECT * FROM cep_view('nope')")
    assert (info.value.line, info.value.col) == (1, 25)
    with pytest.raises(Exception, match="works only through spark.cep.sql"):
        spark.sql("SELECT * FROM cep_view('tf_runs')").collect()


def test_errors_point_into_the_statement(ticks):
    spark = ticks
    sql = ("SELECT *\nFROM cep_match(TABLE(tf_ticks) PARTITION BY sym ORDER BY ts,\n"
           "  'PATTERN (A B+) DEFINE B AS B.price >>> 1')")
    with pytest.raises(CepSyntaxError) as info:
        spark.cep.sql(sql)
    assert info.value.line == 3 and sql.splitlines()[2][info.value.col - 1:].startswith(">")
    with pytest.raises(CepAnalysisError, match="unknown column|nope") as info:
        spark.cep.sql("SELECT * FROM cep_match(TABLE(tf_ticks) PARTITION BY sym ORDER BY ts, "
                      "'PATTERN (A) DEFINE A AS nope > 1')")
    assert info.value.col > 60
    with pytest.raises(CepAnalysisError, match="must be columns"):
        spark.cep.sql("SELECT * FROM cep_match(TABLE(tf_ticks) PARTITION BY upper(sym) "
                      "ORDER BY ts, 'PATTERN (A)')")
