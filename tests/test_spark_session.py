"""spark.cep.sql end to end with a fake dialect finder and a fake planner."""
import re
from types import SimpleNamespace

import pyarrow as pa
import pytest

from cepsql import CepSession
from cepsql.errors import CepAnalysisError


class FakeDialect:
    """Just enough of cepsql.parse for CREATE/DROP VIEW."""

    @staticmethod
    def split_statements(text):
        return [p for p in text.split(";") if p.strip()]

    @staticmethod
    def parse_create_view(stmt):
        m = re.match(r"\s*CREATE\s+(OR\s+REPLACE\s+)?TEMPORARY\s+VIEW\s+(IF\s+NOT\s+EXISTS\s+)?"
                     r"(\w+)\s+AS\s+", stmt, re.I)
        if not m:
            return None
        return SimpleNamespace(name=m.group(3), or_replace=bool(m.group(1)),
                               if_not_exists=bool(m.group(2)), query_text=stmt[m.end():],
                               query_offset=m.end(), quoted=m.group(3), columns=())

    @staticmethod
    def parse_drop_view(stmt):
        m = re.match(r"\s*DROP\s+VIEW\s+(IF\s+EXISTS\s+)?(\w+)", stmt, re.I)
        return SimpleNamespace(name=m.group(2), if_exists=bool(m.group(1))) if m else None


@pytest.fixture(scope="module")
def cep(spark, fake_finder, fake_planner):
    spark.createDataFrame(pa.table({
        "sym": ["a", "a", "b", "b", "a"], "ts": [1, 2, 1, 2, 3], "price": [1.0, 2.0, 3.0, 4.0, 5.0],
    })).createOrReplaceTempView("ticks")
    return CepSession(spark, finder=fake_finder, planner=fake_planner, dialect=FakeDialect())


def test_join_of_two_clauses_and_outer_sql(cep):
    df = cep.sql("SELECT p.sym, p.rn, q.price2 FROM ticks MATCH_RECOGNIZE "
                 "(PARTITION BY sym ORDER BY ts) AS p JOIN ticks MATCH_RECOGNIZE "
                 "(PARTITION BY sym ORDER BY ts DOUBLE price) q ON p.sym = q.sym AND p.ts = q.ts "
                 "WHERE p.rn > 1 ORDER BY p.sym, p.rn")
    assert [tuple(r) for r in df.collect()] == [("a", 2, 4.0), ("a", 3, 10.0), ("b", 2, 8.0)]


def test_cte_and_nested_subquery_sources(cep):
    df = cep.sql("WITH big AS (SELECT * FROM ticks WHERE price > 1) "
                 "SELECT sym, ts, rn FROM (SELECT sym, ts FROM big MATCH_RECOGNIZE "
                 "(PARTITION BY sym ORDER BY ts) AS i WHERE rn = 1) MATCH_RECOGNIZE (ORDER BY ts) "
                 "ORDER BY rn")
    assert [tuple(r) for r in df.collect()] == [("b", 1, 1), ("a", 2, 2)]


def test_plain_sql_passes_through(cep):
    assert cep.sql("SELECT count(*) AS n FROM ticks").collect()[0].n == 5


def test_views(cep, spark):
    cep.sql("CREATE TEMPORARY VIEW runs AS SELECT * FROM ticks MATCH_RECOGNIZE "
            "(PARTITION BY sym ORDER BY ts)")
    assert spark.sql("SELECT max(rn) AS m FROM runs").collect()[0].m == 3
    assert cep.views() == [{"name": "runs", "pattern": "PARTITION BY sym ORDER BY ts",
                            "source": "ticks", "sql": "CREATE TEMPORARY VIEW runs AS SELECT * "
                            "FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts)"}]
    with pytest.raises(CepAnalysisError, match="already exists"):
        cep.sql("CREATE TEMPORARY VIEW runs AS SELECT * FROM ticks MATCH_RECOGNIZE (ORDER BY ts)")
    cep.sql("CREATE TEMPORARY VIEW IF NOT EXISTS runs AS SELECT 1")
    cep.sql("CREATE OR REPLACE TEMPORARY VIEW runs AS SELECT * FROM ticks "
            "MATCH_RECOGNIZE (ORDER BY ts)")
    assert spark.sql("SELECT max(rn) AS m FROM runs").collect()[0].m == 5
    cep.sql("DROP VIEW runs")
    assert cep.views() == [] and not spark.catalog.tableExists("runs")


def test_errors_carry_the_sql(cep):
    sql = "SELECT *\nFROM ticks MATCH_RECOGNIZE (FAIL)"
    with pytest.raises(CepAnalysisError) as info:
        cep.sql(sql)
    assert info.value.sql == sql and (info.value.line, info.value.col) == (2, 29)
    with pytest.raises(CepAnalysisError, match="nosuch"):
        cep.sql("SELECT * FROM nosuch MATCH_RECOGNIZE (ORDER BY ts)")
    # Spark's error about the SQL around the clause: at the user's line:column, without
    # the note on cepsql's generated views (the position is in the user's own text)
    with pytest.raises(CepAnalysisError, match="nocol") as info:
        cep.sql("SELECT nocol FROM ticks MATCH_RECOGNIZE (ORDER BY ts)")
    assert (info.value.line, info.value.col) == (1, 8)
    assert "cepsql's views" not in info.value.message
