"""SQL:2016 mode with a WITHIN window (no STRATEGY): the engine equals the reference,
where a row may join a match only while the match still fits the window."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cepsql.reference.cep import evaluate_reference_cep

try:
    from .support.strategies import queries, streams
    from .test_property_sql import SETTINGS, row_multiset, spec_of
except ImportError:
    from support.strategies import queries, streams
    from test_property_sql import SETTINGS, row_multiset, spec_of

WINDOWS = ["WITHIN 1 ROWS", "WITHIN 2 ROWS", "WITHIN 3 ROWS", "WITHIN 5 ROWS",
           "WITHIN INTERVAL '2' SECOND", "WITHIN INTERVAL '4' SECONDS",
           "WITHIN INTERVAL '1500' MILLISECOND"]


def with_window(sql: str, window: str) -> str:
    lines = sql.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("PATTERN ("))
    return "\n".join(lines[:at + 1] + [window] + lines[at + 1:])


@settings(max_examples=150, **SETTINGS)
@given(sql=queries(), table=streams(), window=st.sampled_from(WINDOWS))
def test_windowed_sql_mode_matches_reference(sql, table, window):
    import cepsql
    from cepsql.errors import CepError
    sql = with_window(sql, window)
    try:
        names, rows = evaluate_reference_cep(spec_of(sql), table)
    except CepError as expected:
        try:
            cepsql.match_recognize(sql, t=table)
        except CepError as err:
            assert type(err) is type(expected), (sql, err, expected)
            return
        raise AssertionError(f"engine did not raise {expected!r} for\n{sql}")
    df = cepsql.match_recognize(sql, t=table)
    assert list(df.columns) == names, sql
    got = row_multiset(df.itertuples(index=False, name=None))
    want = row_multiset(rows)
    assert got == want, (f"{sql}\nmissing: {want - got}\nextra: {got - want}\n"
                         f"input: {table.to_pylist()}")
