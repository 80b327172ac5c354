"""Mutants of valid queries (tests/support/fuzz.py): every failure is a cepsql error
positioned in the mutant's own text, on both paths, and both paths agree on the rows of
valid queries (issue 24). Bounded: few examples, a short deadline; benchmarks/fuzz_errors.py
runs thousands."""
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cepsql.errors import CepError
from support.fuzz import SMALL_TICKS, mutate, positioned, run_in_process, seed_queries, seed_tables

SEEDS = seed_queries()
TABLES = seed_tables()

# Failures the fuzzer found without a position, each fixed where it starts: (SQL, error
# class, line:column of the offending text)
_HEAD = "SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts\n"
FOUND = [
    (_HEAD + "MEASURES () AS m PATTERN (A) DEFINE A AS A.price > 0)", "CepSyntaxError", (2, 10)),
    (_HEAD + "MEASURES CLASSIFIER(((()))) AS c PATTERN (A) DEFINE A AS A.price > 0)",
     "CepSyntaxError", (2, 23)),
    (_HEAD + "MEASURES a.ts AS t STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, b a))\n"
     "DEFINE a AS a.volume > 5, b AS b.volume > 7)", "CepUnsupportedError", (2, 68)),
    ("SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY symbol MEASURES a.ts AS t\n"
     "STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, b)) WITHIN INTERVAL '1' HOUR\n"
     "DEFINE a AS a.volume > 5, b AS b.volume > 7)", "CepAnalysisError", (2, 51)),
    ("WITH t AS (SELECT symbol - 0.0 AS s, ts, price FROM ticks)\nSELECT * FROM t "
     "MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A) DEFINE A AS A.price > 0)",
     "CepRuntimeError", (1, 19)),
    ("(SELECT) * 1 ticks MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A) "
     "DEFINE A AS A.price > 0)", "CepAnalysisError", (1, 2)),
]


@pytest.mark.parametrize("sql, kind, at", FOUND, ids=["paren", "nested-paren", "twice", "within",
                                                      "implicit-cast", "no-from"])
def test_found_failures_are_positioned(sql, kind, at):
    err = run_in_process(sql, TABLES).error
    assert type(err).__name__ == kind, repr(err)
    assert (err.line, err.col) == at, str(err)


def _check_failure(err: BaseException, sql: str) -> None:
    assert isinstance(err, CepError), f"{type(err).__name__}: {err} for {sql!r}"
    assert positioned(err, sql), f"no position inside the text: {err} for {sql!r}"


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32), st.integers(1, 3))
def test_in_process_mutants_fail_with_positioned_cep_errors(seed, n_mutations):
    rng = random.Random(seed)
    sql = rng.choice(SEEDS)
    for _ in range(n_mutations):
        sql = mutate(sql, rng)
    out = run_in_process(sql, TABLES)
    if out.error is not None:
        _check_failure(out.error, sql)


def test_seeds_run_in_process():
    for sql in SEEDS:
        assert run_in_process(sql, TABLES).error is None, sql


def test_spark_agrees_with_in_process_on_seed_and_mutants(spark):
    for name, table in TABLES.items():
        spark.createDataFrame(table.to_pandas()).createOrReplaceTempView(name)
    rng = random.Random(5)
    queries = [SMALL_TICKS] + [mutate(SMALL_TICKS, rng) for _ in range(3)]
    for sql in queries:
        local = run_in_process(sql, TABLES)
        try:
            rows = spark.cep.sql(sql).toArrow()
            error = None
        except Exception as e:  # noqa: BLE001  (the assertion names what it was)
            rows, error = None, e
        if error is not None:
            _check_failure(error, sql)
            assert local.error is not None and type(local.error) is type(error), \
                (sql, error, local.error)
        else:
            assert local.error is None, (sql, local.error)
            key = lambda t: sorted(map(str, t.to_pylist()))  # noqa: E731
            assert key(rows.cast(local.table.schema) if rows.schema != local.table.schema
                       else rows) == key(local.table), sql


def test_order_by_a_null_typed_column_runs():
    """The fuzzer's last non-CepError: an ORDER BY column of Spark's NULL type reached
    Arrow's comparison, which has no kernel for it."""
    sql = ("WITH t AS (SELECT symbol, NULL ts, price FROM ticks)\n"
           "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts\n"
           "MEASURES COUNT(*) AS n PATTERN (A B+) DEFINE B AS B.price > A.price)")
    out = run_in_process(sql, TABLES)
    assert out.error is None, repr(out.error)
    assert out.table.column_names == ["symbol", "n"] and out.table.num_rows > 0
