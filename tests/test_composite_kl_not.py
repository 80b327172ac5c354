"""KL of a composite pattern holding a NOT (issue 12 point 4): KL(SEQ(a, NOT(f), b)),
KL(SEQ(NOT(f), a, b)), KL(SEQ(a, b, NOT(f))), KL(AND(a, NOT(f), b)).

R6b: a NOT item of a SEQ inside KL's pattern is scoped to its iteration -- no match of
the NOT's pattern strictly between that iteration's previous item's last row and next
item's first row (as R6 defines NOT between SEQ neighbours). R6c: a side no row of its
SEQ bounds (the iteration's start or end, optional items that took no row, an AND's NOT
whose scope is the iteration) is the previous iteration's last row / the next
iteration's first row, else the KL's slot in its enclosing SEQ, else open (window).
The evaluator records in each buffer node the component that took the row and splits
a complete match into iterations from them (cep.pyx _neg_iter_ok); it must equal the
oracle (reference_cep) under every strategy, also when the worker streams the
partition in tiny chunks (an open trailing side waits for rows to come). Only an
alternative whose iterations split more than one way (its one required item a closure)
is refused.
"""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import cepsql
from cepsql.errors import CepUnsupportedError
from cepsql.runtime import cep_worker as cep_worker_module

from support.strategies import STREAM_SCHEMA
from support.strategies_cep import STRATEGIES, cep_streams
from test_composite_kl_shared import _check, _sql
from test_property_sql import SETTINGS

PATTERNS = [
    "KL(SEQ(a, NOT(c), b))",
    "KL(SEQ(a, NOT(c), b), 2)",
    "SEQ(c, KL(SEQ(a, NOT(d), b+)))",
    "KL(OR(SEQ(a, NOT(c), b), d))",
    "KL(SEQ(a+, NOT(OR(c, d)), b), 1, 3)",
    "KL(SEQ(a, NOT(SEQ(c, d)), b))",
    "KL(AND(SEQ(a, NOT(c), b), d))",
    "KL(SEQ(NOT(c), a, b))",                  # R6c: open sides at the iteration's edges
    "SEQ(d, KL(SEQ(a, b+, NOT(c)), 1, 2))",
    "KL(AND(a, NOT(c), b))",                  # an AND's scope per iteration
    "SEQ(KL(SEQ(a?, NOT(c), b)), d)",
    "KL(OR(SEQ(NOT(c), a), b), 2)",
    "KL(SEQ(a, AND(b, NOT(SEQ(c, d)))))",
]
DEFINES = [
    {"a": "a.tag = 'x'", "b": "b.tag = 'y'", "c": "c.tag = 'z'", "d": "d.price > 5"},
    {"a": "a.price > 2", "b": "b.price < 7", "c": "c.price > LAST(a.price)",
     "d": "d.vol > 2"},
    # the NOT reads the iteration's neighbours; a reads its previous iteration (R6b)
    {"a": "a.tag <> 'z' AND (LAST(a.price, 1) IS NULL OR a.price >= LAST(a.price, 1))",
     "b": "b.tag <> 'x'", "c": "c.vol < LAST(b.vol)", "d": "d.tag = 'z'"},
]
def _query(strategy: str, window_choices: list[str]):
    return st.builds(lambda p, d, r, w: _sql(strategy, p, d, r, w),
                     st.sampled_from(PATTERNS), st.sampled_from(DEFINES),
                     st.sampled_from(["ONE ROW PER MATCH", "ALL ROWS PER MATCH"]),
                     st.sampled_from(window_choices))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_kl_with_not_equals_the_oracle(strategy):
    @settings(max_examples=50, deadline=None, derandomize=True)
    @given(sql=_query(strategy, ["WITHIN 5 ROWS", "WITHIN 8 ROWS", ""]), table=cep_streams())
    def check(sql, table):
        _check(sql, table)
    check()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_kl_with_not_in_tiny_chunks(monkeypatch, strategy):
    # with WITHIN the worker streams the partition: 3-row chunks, one row per batch
    monkeypatch.setattr(cep_worker_module, "CHUNK_ROWS", 3)
    original = cep_worker_module.CepWorker.__call__

    def small_batches(self, batches):
        return original(self, (b.slice(i, 1) for b in batches for i in range(b.num_rows)))

    monkeypatch.setattr(cep_worker_module.CepWorker, "__call__", small_batches)

    @settings(max_examples=25, **{**SETTINGS, "suppress_health_check": [
        *SETTINGS["suppress_health_check"], HealthCheck.function_scoped_fixture]})
    @given(sql=_query(strategy, ["WITHIN 4 ROWS", "WITHIN INTERVAL '6' SECOND"]),
           table=cep_streams())
    def check(sql, table):
        _check(sql, table)
    check()


def test_not_blocks_only_its_own_iteration():
    # x z y x y x y: a=1 .. b=3 has z between (blocked); a=4 b=5 and a=6 b=7 are fine,
    # and a=4 .. b=7 spans no z either (ANY_MATCH skips rows 5, 6)
    table = pa.table({"part": ["p"] * 7, "ts": list(range(1, 8)), "price": [0] * 7,
                      "vol": [1.0] * 7, "tag": list("xzyxyxy")}, schema=STREAM_SCHEMA)
    for strategy in STRATEGIES:
        sql = _sql(strategy, "KL(SEQ(a, NOT(c), b))", DEFINES[0], "ONE ROW PER MATCH", "")
        df = cepsql.match_recognize(sql, t=table)
        assert 1 not in set(df["t0"]), strategy
        if strategy != "STRICT_CONTIGUITY":
            assert {(4, 5, "AB"), (4, 7, "ABAB"), (6, 7, "AB")} <= \
                set(zip(df["t0"], df["t1"], df["labels"])), strategy
        _check(sql, table)


def test_open_sides_come_from_the_neighbouring_iterations():
    # w x y z x y w: KL(SEQ(NOT(c), a, b)) inside SEQ(d, ...): the second iteration's
    # leading region lies after the first iteration's last row (row 3), so the z at
    # row 4 blocks x y x y; the first iteration's lies after d (row 1)
    table = pa.table({"part": ["p"] * 7, "ts": list(range(1, 8)), "price": [9] * 7,
                      "vol": [1.0] * 7, "tag": list("wxyzxyw")}, schema=STREAM_SCHEMA)
    for strategy in STRATEGIES:
        sql = _sql(strategy, "SEQ(d, KL(SEQ(NOT(c), a, b)))", DEFINES[0],
                   "ONE ROW PER MATCH", "")
        labels = set(zip(df_t0(sql, table), df_labels(sql, table)))
        if strategy in ("SKIP_TILL_ANY_MATCH", "SKIP_TILL_NEXT_MATCH"):
            assert (1, "DAB") in labels and (1, "DABAB") not in labels, strategy
        _check(sql, table)
    # KL(AND(a, NOT(c), b)): an iteration's scope ends at the next iteration's first row
    sql = _sql("SKIP_TILL_NEXT_MATCH", "KL(AND(a, NOT(c), b))", DEFINES[0],
               "ONE ROW PER MATCH", "")
    assert "ABAB" not in set(df_labels(sql, table))
    _check(sql, table)


def df_t0(sql, table):
    return list(cepsql.match_recognize(sql, t=table)["t0"])


def df_labels(sql, table):
    return list(cepsql.match_recognize(sql, t=table)["labels"])


@pytest.mark.parametrize("pattern", ["SEQ(b, KL(SEQ(NOT(c), a+)))", "KL(SEQ(a?, b{1,3}, NOT(c)))"])
def test_not_in_an_alternative_split_two_ways_is_refused(pattern):
    table = pa.table({"part": ["p"], "ts": [1], "price": [1], "vol": [1.0], "tag": ["x"]},
                     schema=STREAM_SCHEMA)
    sql = _sql("SKIP_TILL_NEXT_MATCH", pattern, DEFINES[0], "ONE ROW PER MATCH", "")
    with pytest.raises(CepUnsupportedError, match="split one way"):
        cepsql.match_recognize(sql, t=table)


@pytest.mark.parametrize("pattern", ["KL(SEQ(a, NOT(c), b))", "KL(SEQ(a, KL(SEQ(b, d))))",
                                     "KL(SEQ(a, b, NOT(c)))"])
@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "STRICT_CONTIGUITY"])
def test_stream_carry_over_keeps_the_iteration_components(monkeypatch, pattern, strategy):
    # the streaming engine exports the evaluator's buffer nodes (their labels carry the
    # taking component) between 2-row chunks and one-row increments: still the batch
    # (STRICT_CONTIGUITY with PARTITION BY is refused over streams)
    from cepsql.backends.streaming import engine as engine_module
    from test_streaming_engine import simulate
    monkeypatch.setattr(engine_module, "CHUNK_ROWS", 2)
    sql = (f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES "
           f"count(*) AS n, listagg(CLASSIFIER(), '') AS labels ONE ROW PER MATCH "
           f"STRATEGY {strategy} PATTERN ({pattern}) WITHIN INTERVAL '6' SECOND DEFINE "
           "a AS a.tag = 'x', b AS b.tag = 'y', " +
           ("c AS c.tag = 'z')" if "c" in pattern else "d AS d.tag = 'z')"))
    p_tags, q_tags = "xyzyzxyz", "xzyxyxyy"       # key p: nested iterations; q: NOTs
    tags = [t for pair in zip(p_tags, q_tags) for t in pair]
    table = pa.table({"part": ["p", "q"] * 8, "ts": list(range(1, 17)), "price": [0] * 16,
                      "vol": [1.0] * 16, "tag": tags})
    got, want, late, dropped = simulate(sql, table, list(range(16)), list(range(1, 16)), 0)
    assert late == dropped == 0
    assert got == want and sum(want.values()) > 0, (got, want)
