"""The command line: exit codes, error locations in the script, -f with comments, the
prompt, and the shipped examples. Spark tests reuse the session fixture `spark`."""
import io
import re
import pathlib
import sys

import pandas as pd
import pytest

from support.background import Job
from cepsql.api import cli
from cepsql.errors import CepSyntaxError

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("cepsql ")


def test_examples_ship_in_the_package_and_match_sql_examples():
    shipped = {e.name: e for e in cli.load_examples()}
    browsable = sorted(p.name for p in (ROOT / "sql_examples").glob("*.sql"))
    assert sorted(shipped) == browsable and len(browsable) >= 3
    for name in browsable:
        assert (ROOT / "sql_examples" / name).read_text(encoding="utf-8") == shipped[name].text, name
        assert shipped[name].text.startswith("--"), name
    assert all(e.demo for e in cli.load_examples(demo_only=True))


def test_error_position_is_relative_to_the_script(capsys):
    script = "SELECT 1;\n\n-- note\nSELECT *\n  FROM t BAD;\n"
    stmt_offset = script.index("SELECT *")
    stmt = "SELECT *\n  FROM t BAD"
    err = CepSyntaxError("unexpected BAD", sql=stmt, pos=stmt.index("BAD"))
    cli.report_error(err, script, stmt, stmt_offset)
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["Error: unexpected BAD (line 5, column 10)", "  FROM t BAD;", "         ^"]


@pytest.fixture
def events(spark):
    df = pd.DataFrame({"id": [1, 1, 1, 1, 2, 2], "t": [1, 2, 3, 4, 1, 2],
                       "v": [5.0, 3.0, 4.0, 6.0, 1.0, 2.0]})
    spark.createDataFrame(df).createOrReplaceTempView("cli_events")
    yield
    spark.catalog.dropTempView("cli_events")


def test_file_with_comments_and_two_statements(spark, events, tmp_path, capsys):
    script = tmp_path / "q.sql"
    script.write_text(
        "-- header comment; with a semicolon\n"
        "CREATE OR REPLACE TEMPORARY VIEW cli_dips AS\n"
        "SELECT * FROM cli_events MATCH_RECOGNIZE (\n"
        "  PARTITION BY id ORDER BY t\n"
        "  MEASURES FIRST(A.v) AS start_v, LAST(B.v) AS low_v, MATCH_NUMBER() AS mn\n"
        "  PATTERN (A B+)\n"
        "  DEFINE B AS B.v < PREV(B.v)  /* a block comment */\n"
        ") m;\n"
        "/* second statement */\n"
        "SELECT id, start_v, low_v, mn FROM cli_dips ORDER BY id;\n"
    )
    assert cli.main(["sql", "-f", str(script)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["id\tstart_v\tlow_v\tmn", "1\t5.0\t3.0\t1"]
    spark.catalog.dropTempView("cli_dips")


def test_syntax_error_exits_nonzero_with_caret(spark, events, capsys):
    code = cli.main(["sql", "-e", "SELECT 1 AS x;\nSELECT * FROM cli_events MATCH_RECOGNIZE (\n"
                                  "  ORDER BY t PATTERN (A B DEFINE A AS v > 0) m;"])
    assert code != 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == ["x", "1"]
    err = captured.err
    assert re.search(r"^Error: .*\(line [23], column \d+\)$", err, re.M), err
    assert err.rstrip().endswith("^")


def test_prompt_keeps_going_after_an_error(spark, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(
        "SELECT 1\n  AS one;\nSELECT * FROM no_such_view_xyz;\nSELECT 2 AS two; quit;\nSELECT 3;\n"))
    assert cli.main(["sql", "--no-header"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == ["1", "2"]  # stdin is no terminal: no prompts
    assert "Error: " in captured.err


def test_demo_runs_every_example(spark, capsys):
    assert cli.main(["demo", "--rows", "3000"]) == 0
    out = capsys.readouterr().out
    for example in cli.load_examples(demo_only=True):
        assert example.name in out
    assert out.count("events/s:") >= len(cli.load_examples(demo_only=True))


_QUIET_SCRIPT = (
    "CREATE TEMPORARY VIEW t AS SELECT * FROM VALUES (1, 10), (2, 8), (3, 9) AS v(id, x);\n"
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.x AS top, B.x AS dip\n"
    "  PATTERN (A B) DEFINE B AS B.x < A.x) m;\n"
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.x AS top PATTERN (A B)\n"
    "  DEFINE B AS B.x < A.x) m WHERE nope > 1;\n")

#: a new JVM started by the CLI, from the start of the test session (tests/support/background.py)
BACKGROUND = {"cli-quiet-console": Job((sys.executable, "-m", "cepsql", "sql"),
                                       stdin=_QUIET_SCRIPT)}


def test_console_is_quiet_in_a_fresh_process(background):
    """A new JVM started by the CLI: no log lines the user did not cause (table-function
    re-registration, native-library probing, log4j banners), no prompts in piped output,
    and a failing statement prints cepsql's error only (no PySpark JSON log line)."""
    done = background.result("cli-quiet-console")
    assert done.stdout.splitlines() == ["top\tdip", "10\t8"]
    err = done.stderr
    assert "Error: " in err and "nope" in err
    for noise in ("SimpleTableFunctionRegistry", "NativeCodeLoader", "log4j profile",
                  "setLogLevel", '{"ts"', "Traceback", "cepsql>"):
        assert noise not in err, err
