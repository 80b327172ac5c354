"""Issue 23.3: every statement spark.sql accepts works through spark.cep.sql and the CLI
unchanged; only statements holding MATCH_RECOGNIZE or a cepsql table function are
rewritten. Each shape runs through both entry points on tiny tables in a temp dir and
leaves the session as found."""
from __future__ import annotations

import pytest

from cepsql.api import cli
from cepsql.parse import changed_view, needs_rewrite, parse_create_view

CLAUSE = ("SELECT * FROM pt_src MATCH_RECOGNIZE (ORDER BY t MEASURES LAST(B.v) AS lv "
          "PATTERN (A B+) DEFINE B AS B.v > PREV(B.v))")

# (setup statements, the statement under test, cleanup statements); {d} is a temp dir
SHAPES = {
    "view using csv": ([], "CREATE TEMPORARY VIEW pt_v USING csv "
                           "OPTIONS (path '{src}/src.csv', header 'true')", ["DROP VIEW pt_v"]),
    "view using csv with schema": (
        [], "CREATE OR REPLACE TEMP VIEW pt_v (t INT, v DOUBLE) USING csv "
            "OPTIONS (path '{src}/src.csv', header 'true')", ["DROP VIEW pt_v"]),
    "view as select": ([], "CREATE TEMPORARY VIEW pt_v AS SELECT t FROM pt_src",
                       ["DROP VIEW pt_v"]),
    "view with column list": ([], "CREATE TEMP VIEW pt_v (a COMMENT 'x', b) "
                                  "AS SELECT t, v FROM pt_src", ["DROP VIEW pt_v"]),
    "global temp view": ([], "CREATE GLOBAL TEMPORARY VIEW pt_g AS SELECT 1 AS x",
                         ["DROP VIEW global_temp.pt_g"]),
    "table using parquet": ([], "CREATE TABLE pt_t (a INT) USING parquet "
                                "LOCATION '{d}/pt_t'", ["DROP TABLE pt_t"]),
    "table as select": ([], "CREATE TABLE pt_t USING parquet LOCATION '{d}/pt_t' "
                            "AS SELECT * FROM pt_src", ["DROP TABLE pt_t"]),
    "table like": (["CREATE TABLE pt_t (a INT) USING parquet LOCATION '{d}/pt_t'"],
                   "CREATE TABLE pt_t2 LIKE pt_t USING parquet LOCATION '{d}/pt_t2'",
                   ["DROP TABLE pt_t2", "DROP TABLE pt_t"]),
    "insert into": (["CREATE TABLE pt_t (a INT) USING parquet LOCATION '{d}/pt_t'"],
                    "INSERT INTO pt_t VALUES (1), (2)", ["DROP TABLE pt_t"]),
    "insert overwrite": (["CREATE TABLE pt_t (a INT) USING parquet LOCATION '{d}/pt_t'"],
                         "INSERT OVERWRITE TABLE pt_t SELECT t FROM pt_src",
                         ["DROP TABLE pt_t"]),
    "cache table": ([], "CACHE TABLE pt_src", ["UNCACHE TABLE pt_src"]),
    "cache lazy as select": ([], "CACHE LAZY TABLE pt_c AS SELECT * FROM pt_src",
                             ["UNCACHE TABLE pt_c", "DROP VIEW pt_c"]),
    "uncache": (["CACHE TABLE pt_src"], "UNCACHE TABLE IF EXISTS pt_src", []),
    "set": ([], "SET pt.key = 5", ["RESET pt.key"]),
    "set show": ([], "SET spark.sql.shuffle.partitions", []),
    "reset": (["SET pt.key = 5"], "RESET pt.key", []),
    "show tables": ([], "SHOW TABLES", []),
    "show views": ([], "SHOW VIEWS", []),
    "show functions": ([], "SHOW FUNCTIONS LIKE 'upper'", []),
    "describe": ([], "DESCRIBE pt_src", []),
    "describe query": ([], "DESCRIBE QUERY SELECT t FROM pt_src", []),
    "analyze": (["CREATE TABLE pt_t USING parquet LOCATION '{d}/pt_t' AS SELECT * FROM pt_src"],
                "ANALYZE TABLE pt_t COMPUTE STATISTICS", ["DROP TABLE pt_t"]),
    "explain plain query": ([], "EXPLAIN SELECT t FROM pt_src WHERE v > 1", []),
    "explain extended": ([], "EXPLAIN EXTENDED SELECT count(*) FROM pt_src", []),
    "use": ([], "USE default", []),
    "drop if exists": ([], "DROP VIEW IF EXISTS pt_never_made", []),
    "comments": ([], "/* a block; comment */ SELECT -- match_recognize here is a comment\n"
                     "t FROM pt_src WHERE v > 1 OR 'match_recognize' = ''", []),
    "with cte": ([], "WITH x AS (SELECT t FROM pt_src) SELECT max(t) FROM x", []),
    "values": ([], "VALUES (1, 'a'), (2, 'b')", []),
}


@pytest.fixture(scope="module")
def pt_src(spark, tmp_path_factory):
    d = tmp_path_factory.mktemp("passthrough")
    (d / "src.csv").write_text("t,v\n1,1.0\n2,3.0\n3,2.0\n")
    spark.createDataFrame([(1, 1.0), (2, 3.0), (3, 2.0)], "t int, v double") \
        .createOrReplaceTempView("pt_src")
    yield str(d)
    spark.catalog.dropTempView("pt_src")


def _session_state(spark):
    tables = sorted((t.name, t.isTemporary) for t in spark.catalog.listTables())
    return tables, spark.catalog.currentDatabase(), spark.catalog.isCached("pt_src")


def _cli(spark, text: str, capsys) -> tuple[int, str, str]:
    code = cli.run_script(spark, text)
    out = capsys.readouterr()
    return code, out.out, out.err


def _statements(shape: str, src: str, d) -> tuple[list[str], str, list[str]]:
    setup, stmt, cleanup = SHAPES[shape]
    fill = lambda s: s.format(src=src, d=d)  # noqa: E731
    return [fill(s) for s in setup], fill(stmt), [fill(s) for s in cleanup]


@pytest.mark.parametrize("shape", list(SHAPES))
def test_statement_shapes_pass_through(spark, pt_src, shape, tmp_path):
    """spark.cep.sql gives what spark.sql gives, and leaves the session the same."""
    before = _session_state(spark)
    results = []
    for run, entry in (("spark", spark.sql), ("cep", spark.cep.sql)):
        setup, stmt, cleanup = _statements(shape, pt_src, tmp_path / run)
        assert not needs_rewrite(stmt)
        for s in setup:
            spark.sql(s)
        try:
            results.append(entry(stmt).collect())
        finally:
            for s in cleanup:
                spark.sql(s)
        assert _session_state(spark) == before, run
    spark_rows, cep_rows = results
    if shape.startswith(("explain", "set show", "describe", "show")):  # ids may differ
        assert [r.asDict().keys() for r in cep_rows] == [r.asDict().keys() for r in spark_rows]
        assert len(cep_rows) == len(spark_rows)
    else:
        assert cep_rows == spark_rows
    if shape.startswith("explain"):
        assert "== Physical Plan ==" in cep_rows[0][0] and "MATCH_RECOGNIZE" not in cep_rows[0][0]


def test_every_shape_through_the_cli(spark, pt_src, tmp_path, capsys):
    """The CLI's statement runner: every shape (its setup and cleanup too) in one script."""
    before = _session_state(spark)
    script = []
    for shape in SHAPES:
        setup, stmt, cleanup = _statements(shape, pt_src, tmp_path / shape.replace(" ", "_"))
        script += setup + [stmt] + cleanup
    code, out, err = _cli(spark, ";\n".join(script) + ";", capsys)
    assert code == 0, err
    assert err.count("Time taken:") == len(script)
    assert "col_name\tdata_type\tcomment\nt\tint\tNULL" in out  # DESCRIBE pt_src
    assert _session_state(spark) == before


def test_loading_a_file_then_matching_over_it_in_one_cli_script(spark, pt_src, capsys):
    """The issue's case: a CLI user loads a CSV into a view and runs a clause over it."""
    script = (f"CREATE TEMPORARY VIEW pt_bars USING csv OPTIONS (path '{pt_src}/src.csv', "
              "header 'true', inferSchema 'true');\n"
              + CLAUSE.replace("pt_src", "pt_bars") + ";\nDROP VIEW pt_bars;")
    code, out, err = _cli(spark, script, capsys)
    assert code == 0, err
    assert out.splitlines() == ["lv", "3.0"]
    assert not spark.catalog.tableExists("pt_bars")


def test_several_statements_in_one_call_mix_spark_and_cepsql(spark, pt_src):
    def pattern_views() -> set[str]:
        return {v["name"] for v in spark.cep.views()}
    others = pattern_views()  # other tests' views the shared session may still list
    df = spark.cep.sql("SET pt.limit = 1; CREATE TEMP VIEW pt_m AS " + CLAUSE
                       + "; SELECT lv FROM pt_m WHERE lv > ${pt.limit}")
    try:
        assert df.collect() == [(3.0,)]
        assert pattern_views() - others == {"pt_m"}
        spark.cep.sql("CREATE OR REPLACE TEMP VIEW pt_m USING csv "
                      f"OPTIONS (path '{pt_src}/src.csv', header 'true')")
        assert "pt_m" not in pattern_views()  # replaced by Spark: no pattern view any more
    finally:
        spark.sql("RESET pt.limit")
        spark.sql("DROP VIEW IF EXISTS pt_m")


def test_spark_errors_stay_sparks_own(spark, pt_src):
    from pyspark.errors import ParseException
    with pytest.raises(ParseException):
        spark.cep.sql("CREATE TEMPORARY VIEW pt_bad USING")


def test_which_statements_are_rewritten():
    assert needs_rewrite(CLAUSE)
    assert needs_rewrite("SELECT * FROM cep_match(TABLE(t) ORDER BY ts, 'PATTERN (A)')")
    assert needs_rewrite("SELECT * FROM CEP_WORKLOAD('t')")
    assert not needs_rewrite("SELECT 'MATCH_RECOGNIZE' AS `match_recognize` -- MATCH_RECOGNIZE")
    assert parse_create_view("CREATE TEMP VIEW v USING csv OPTIONS (path 'x')") is None
    assert parse_create_view("CREATE TEMP VIEW v (a INT) USING csv") is None
    view = parse_create_view("CREATE TEMP VIEW `v 1` (a, `b c`) AS " + CLAUSE)
    assert (view.quoted, view.columns) == ("`v 1`", ("a", "b c"))
    assert changed_view("CREATE OR REPLACE TEMP VIEW v USING csv") == "v"
    assert changed_view("DROP TABLE IF EXISTS `a b`") == "a b"
    assert changed_view("SELECT 1") is None
