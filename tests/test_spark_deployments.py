"""The core queries on the deployments users run (issue 12, items 5 and 7), each in its
own process, started with the test session so their JVM start-ups overlap the other
tests (tests/support/background.py):

- Spark Connect: a real local Connect server (``SparkSession.builder.remote("local[2]")``);
  it runs in a subprocess because pyspark's local Connect server and the classic session
  of this test run cannot share one Python process (the server needs its own
  SparkContext, and only one can be active per process).
- ``local-cluster[2,1,1024]``: separate executor JVMs with their own Python workers, so
  plans are pickled and cepsql (Cython extension included) is imported there — the pip
  pyspark package supports this mode as it is.
- the console of ``cepsql sql`` (local mode) for an error only found while the job runs:
  the CepRuntimeError with its position, and no Java stack trace or worker traceback.

Results must equal the in-process session's (tests/support/deploy_queries.py)."""
from __future__ import annotations

import json
import os
import sys

import pytest

from support.background import Job
from support.deploy_queries import FAILING, FAILING_AT, STREAM_LATE, run_all, run_stream
from cepsql.errors import position_of

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
_DRIVER = os.path.join(HERE, "_deploy_driver.py")

#: started with the test session (conftest.py), so the three JVM start-ups overlap the
#: other tests instead of stalling the run
BACKGROUND = {
    "deploy-connect": Job((sys.executable, _DRIVER, "connect"), cwd=ROOT),
    "deploy-cluster": Job((sys.executable, _DRIVER, "cluster"), cwd=ROOT),
    "deploy-console": Job((sys.executable, "-m", "cepsql", "sql", "--master", "local[1]",
                           "--conf", "spark.ui.enabled=false", "-e",
                           "CREATE TEMPORARY VIEW dep_ticks AS SELECT * FROM VALUES "
                           "('a', 0, 5), ('a', 1, 6) AS v(sym, ts, price);\n" + FAILING),
                          cwd=ROOT),
}


@pytest.fixture(scope="module")
def runs(background):
    """{name: (rc, stdout, stderr)} of the three processes."""
    out = {}
    for job in BACKGROUND:
        done = background.result(job)
        out[job.split("-", 1)[1]] = (done.returncode, done.stdout, done.stderr)
    return out


@pytest.fixture(scope="module")
def expected(spark):
    return run_all(spark)


def _result(runs, name: str) -> dict:
    rc, stdout, stderr = runs[name]
    assert rc == 0, f"{name} driver failed:\n{stderr[-4000:]}"
    return json.loads(stdout.strip().splitlines()[-1])


def test_in_process_failing_query_raises_cep_runtime_error_at_the_skip_variable(expected):
    line, col = position_of(FAILING, FAILING_AT)
    assert expected["failing"] == {
        "raised": "CepRuntimeError", "line": line, "col": col,
        "message": "AFTER MATCH SKIP TO A: cannot skip to the first row of the match"}
    assert all(expected[k]["rows"] for k in ("sql2016", "cep", "pattern_view", "table_function"))


def test_spark_connect_matches_in_process(runs, expected):
    """(with Spark's default 200 shuffle partitions on the Connect server)"""
    got = _result(runs, "connect")
    assert got.pop("session_type") == "pyspark.sql.connect.session"
    got.pop("requests")
    got.pop("stream")
    assert got == expected


def test_spark_connect_streaming_clause_matches_classic(runs, spark, tmp_path):
    """A MATCH_RECOGNIZE over a file stream (transformWithState, restarted from its
    checkpoint) on Connect: the classic session's rows, and its late row counted with
    no SparkContext (observed metric + progress listener instead of an accumulator)."""
    want = run_stream(spark, str(tmp_path))
    assert want["rows"] and want["late"] == STREAM_LATE
    assert _result(runs, "connect")["stream"] == want


def test_spark_connect_statement_reads_the_conf_in_one_request(runs):
    """Every conf.get is a round trip on Connect: a statement reads the session's conf
    once (conf.getAll; the time zone is set here, else one more; it was 19 requests),
    and asks for schemas only where it needs them (the input's, whether it streams)."""
    requests = _result(runs, "connect")["requests"]
    assert requests["config"] == 1, requests
    assert requests["analyze"] <= 2, requests


def test_local_cluster_matches_in_process_on_separate_python_workers(runs, expected):
    got = _result(runs, "cluster")
    workers, driver = got.pop("workers"), got.pop("driver_pid")
    assert got.pop("session_type") == "pyspark.sql.session"
    assert got == expected
    assert len({parent for _, parent, _ in workers}) == 2  # two executors' worker daemons
    assert driver not in {pid for pid, _, _ in workers} | {p for _, p, _ in workers}
    assert {module for _, _, module in workers} == {os.path.join(ROOT, "cepsql", "__init__.py")}


def test_console_shows_the_error_with_its_position_and_no_stack_trace(runs):
    rc, stdout, stderr = runs["console"]
    assert rc == 1
    line, col = position_of(FAILING, FAILING_AT)
    assert (f"Error: AFTER MATCH SKIP TO A: cannot skip to the first row of the match "
            f"(line {line + 1}, column {col})") in stderr
    # neither Spark's Java trace nor the worker's Python traceback of this error (pyspark's
    # daemon may print a traceback of its own when the aborted job's other task or the
    # session's shutdown cuts an idle worker's socket: that one names no cepsql frame)
    assert "\tat org.apache" not in stderr and "PythonException" not in stderr
    assert "[cepsql-error]" not in stderr and "CepRuntimeError:" not in stderr
    assert os.path.join("cepsql", "runtime") not in stderr
