"""Property tests: the in-process engine returns exactly the reference evaluator's rows.

Queries and streams come from tests/support/strategies.py. Rows are compared as multisets
after normalising values (floats rounded, NaN/NA as null, numpy scalars unwrapped).
The engine is imported inside the tests so this module collects before it exists.
"""
from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from decimal import Decimal

from hypothesis import HealthCheck, given, reject, settings

from cepsql.reference.sql import SearchBudgetExceeded, evaluate_reference

try:  # tests/ as a package or as a plain directory on sys.path
    from .support.strategies import queries, streams
except ImportError:
    from support.strategies import queries, streams

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                      HealthCheck.data_too_large])


def spec_of(sql: str):
    """The MatchRecognizeSpec of the query's (single) MATCH_RECOGNIZE clause."""
    from cepsql import parse as dialect
    finder = getattr(dialect, "find_match_recognize", None)
    if finder is not None:
        return finder(sql)[0].spec
    import sqlglot
    from sqlglot import exp

    from cepsql.parse.dialect import CepSpark
    return sqlglot.parse_one(sql, read=CepSpark).find(exp.MatchRecognize).meta["cep_spec"]


def normalise(value: object) -> object:
    """A hashable, comparison-friendly form of one output value."""
    if value is None:
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()  # numpy scalar
    try:
        import pandas as pd
        if value is pd.NA or value is pd.NaT:
            return None
        if isinstance(value, pd.Timestamp):
            value = value.to_pydatetime()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float, Decimal)):
        f = float(value)
        return None if math.isnan(f) else round(f, 6)
    if isinstance(value, (dt.datetime, dt.date, str)):
        return value
    return repr(value)


def row_multiset(rows) -> Counter:
    return Counter(tuple(normalise(v) for v in row) for row in rows)


def reference_or_error(sql: str, table):
    """(names, rows) from the reference, the CepError it raised, or reject() when too costly."""
    from cepsql.errors import CepError
    spec = spec_of(sql)
    try:
        return evaluate_reference(spec, table, max_steps=500_000)
    except SearchBudgetExceeded:
        reject()
    except CepError as err:
        return err


def assert_engine_matches(sql: str, table) -> None:
    import cepsql
    from cepsql.errors import CepError
    expected = reference_or_error(sql, table)
    if isinstance(expected, CepError):
        try:
            cepsql.match_recognize(sql, t=table)
        except CepError as err:
            assert type(err) is type(expected), (sql, err, expected)
            return
        raise AssertionError(f"engine did not raise {expected!r} for\n{sql}")
    names, rows = expected
    df = cepsql.match_recognize(sql, t=table)
    assert list(df.columns) == names, sql
    got = row_multiset(df.itertuples(index=False, name=None))
    want = row_multiset(rows)
    assert got == want, (f"{sql}\nmissing: {want - got}\nextra: {got - want}\n"
                         f"input: {table.to_pylist()}")


@settings(max_examples=150, **SETTINGS)
@given(sql=queries(), table=streams())
def test_engine_matches_reference(sql, table):
    assert_engine_matches(sql, table)


@settings(max_examples=50, **SETTINGS)
@given(sql=queries(), table=streams(unique_ts=False))
def test_engine_matches_reference_with_order_ties(sql, table):
    # ts has ties and nulls: both sides break ties by the remaining columns (ASC, NULLS FIRST)
    assert_engine_matches(sql, table)


@settings(max_examples=150, **SETTINGS)
@given(sql=queries(), table=streams())
def test_generated_queries_parse_and_evaluate(sql, table):
    # Needs only the parser and the reference: checks the generators themselves.
    expected = reference_or_error(sql, table)
    if isinstance(expected, tuple):
        names, rows = expected
        assert all(len(r) == len(names) for r in rows)
