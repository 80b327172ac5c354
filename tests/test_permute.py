"""PERMUTE without factorial expansion (issue 12 item 3).

PERMUTE(X1..Xn) is the alternation of its n! orders, lexicographic by item position.
For single-path items the VM (a used-items mask per thread) and the reference (a lazy
depth-first choice of the next item) never build that alternation. Checked here: the
lazy reference equals the fully expanded one; the engine equals the reference with
8-10 items; what stays unsupported raises CepUnsupportedError with a position. Items
with inner choices past 7 items: tests/test_permute_choices.py.
"""
from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cepsql
from cepsql.algebra.pattern import Concat, Permute, Quantified, Var
from cepsql.errors import CepUnsupportedError
from cepsql.compile.program import compile_pattern
from cepsql.reference.pattern import PatternMatcher

try:
    from .test_property_sql import SETTINGS, assert_engine_matches
except ImportError:
    from test_property_sql import SETTINGS, assert_engine_matches
from support.sqlhelp import loc, run

NAMES = [f"X{i}" for i in range(10)]


# --- the lazy reference against the expanded alternation ------------------------------

@st.composite
def permute_patterns(draw):
    """PERMUTE of 2-5 single-path items (variables, pairs, fixed repeats), maybe inside
    a concatenation or a quantifier."""
    k = draw(st.integers(2, 5))
    items = []
    for name in NAMES[:k]:
        shape = draw(st.sampled_from(["var", "var", "pair", "repeat"]))
        if shape == "var":
            items.append(Var(name))
        elif shape == "pair":
            items.append(Concat((Var(name), Var(draw(st.sampled_from(NAMES[:k]))))))
        else:
            items.append(Quantified(Var(name), 2, 2, True))
    node = Permute(tuple(items))
    wrap = draw(st.sampled_from(["none", "prefix", "plus", "optional"]))
    if wrap == "prefix":
        return Concat((Var(NAMES[0]), node))
    if wrap == "plus":
        return Quantified(node, 1, None, draw(st.booleans()))
    if wrap == "optional":
        return Concat((Quantified(node, 0, 1, True), Var(NAMES[1])))
    return node


# 100 examples: the 5-item PERMUTEs (a quarter of the draws) are ~97% of the cost, their
# expanded alternation being 120 orders long (it was 200 examples, ~18 s CPU)
@settings(max_examples=100, **SETTINGS)
@given(pattern=permute_patterns(), n_rows=st.integers(0, 9),
       truth=st.lists(st.lists(st.booleans(), min_size=10, max_size=10),
                      min_size=9, max_size=9),
       after=st.dictionaries(st.sampled_from(NAMES[:5]), st.sampled_from(NAMES[:5])))
def test_lazy_permute_search_equals_expanded_alternation(pattern, n_rows, truth, after):
    # accept depends on the row and on the previous row's variable (so the order of the
    # labels matters, not only which rows each item took)
    def accept(start, row, labels):
        var = labels[-1]
        ok = truth[row][NAMES.index(var)]
        if var in after and len(labels) > 1:
            ok = ok and labels[-2] != after[var]
        return ok

    lazy = PatternMatcher(pattern, n_rows, accept)
    expanded = PatternMatcher(pattern, n_rows, accept, lazy_permute=False)
    for start in range(n_rows + 1):
        assert lazy.match(start) == expanded.match(start), (pattern, start)


def test_lazy_permute_search_stays_small_with_ten_items():
    # every item accepts every row: the first order matches at once
    items = tuple(Var(n) for n in NAMES)
    matcher = PatternMatcher(Permute(items), 10, lambda s, r, labels: True, max_steps=1000)
    assert [v for v, _ in matcher.match(0)] == NAMES


# --- the engine against the reference with 8-10 items ----------------------------------

def _permute_query(k: int, body: str, measure: str) -> str:
    defines = ", ".join(f"X{i} AS X{i}.price {'<=' if i % 2 else '>='} {i % 5 + 2}"
                        for i in range(k))
    return (f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts "
            f"MEASURES {measure} PATTERN ({body}) DEFINE {defines})")


@st.composite
def wide_permute_queries(draw):
    k = draw(st.integers(8, 10))
    names = [f"X{i}" for i in range(k)]
    items = list(names)
    shape = draw(st.sampled_from(["vars", "pair", "repeat", "anchor"]))
    j = draw(st.integers(0, k - 1))
    if shape == "pair":  # fixed sequences stay single-path items
        items[j] = f"{names[j]} {names[(j + 1) % k]}"
    elif shape == "repeat":
        items[j] = f"{names[j]}{{2}}"
    elif shape == "anchor":
        items[j] = f"^ {names[j]}"
    body = "PERMUTE(" + ", ".join(items) + ")"
    body = draw(st.sampled_from([body, f"{body}+", f"X0 {body}", f"{body} X1?",
                                 f"({body} | X2)"]))
    measure = draw(st.sampled_from([
        "CLASSIFIER() AS c, MATCH_NUMBER() AS mn ALL ROWS PER MATCH",
        "FIRST(CLASSIFIER()) AS c0, LAST(CLASSIFIER()) AS cn, count(*) AS n",
        "X3.ts AS t3, FIRST(X0.price) AS p0 ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW",
    ]))
    return _permute_query(k, body, measure)


@st.composite
def price_streams(draw):
    n = draw(st.integers(0, 14))
    return pa.table({
        "part": draw(st.lists(st.sampled_from(["a", "a", "b"]), min_size=n, max_size=n)),
        "ts": list(range(n)),
        "price": draw(st.lists(st.integers(0, 9), min_size=n, max_size=n))})


@settings(max_examples=25, **SETTINGS)
@given(sql=wide_permute_queries(), table=price_streams())
def test_engine_matches_reference_on_wide_permute(sql, table):
    assert_engine_matches(sql, table)


def test_ten_item_permute_prefers_lexicographic_order():
    # X0 only takes v = 0, the others anything: orders starting X0 fail on a first row
    # v = 1, the first order starting X1 is X1 X0 X2 ... X9 (X0 takes row 2, v = 0).
    t = pd.DataFrame({"id": range(1, 11), "v": [1, 0] + [5] * 8})
    names = ", ".join(NAMES)
    cols, rows = run("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() "
                     f"AS c ALL ROWS PER MATCH PATTERN (PERMUTE({names})) "
                     "DEFINE X0 AS v = 0, X1 AS v > 0)", t=t)
    assert [r[cols.index("c")] for r in rows] == ["X1", "X0"] + NAMES[2:]


def test_program_grows_linearly_with_permute_items():
    labels = NAMES
    size = len(compile_pattern(Permute(tuple(Var(n) for n in labels)), labels))
    assert size < 4 * len(labels) + 4


def test_spark_runs_wide_permute(spark):
    t = pd.DataFrame({"id": range(1, 11), "v": [1, 0] + [5] * 8})
    spark.createDataFrame(t).createOrReplaceTempView("perm10")
    names = ", ".join(NAMES)
    sql = ("SELECT * FROM perm10 MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS c "
           f"ALL ROWS PER MATCH PATTERN (PERMUTE({names})) "
           "DEFINE X0 AS v = 0, X1 AS v > 0)")
    got = [r.c for r in spark.cep.sql(sql).orderBy("id").collect()]
    assert got == ["X1", "X0"] + NAMES[2:]


# --- what stays unsupported ----------------------------------------------------------

def test_wide_permute_with_inner_choices_is_unsupported_with_position():
    # inside a quantifier (searched only once per match: test_permute_choices.py)
    items = ", ".join(f"X{i}+" for i in range(8))
    sql = (f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES MATCH_NUMBER() AS mn "
           f"PATTERN ((PERMUTE({items}))+))")
    with pytest.raises(CepUnsupportedError, match="PERMUTE with more than 7") as info:
        cepsql.match_recognize(sql, t=pd.DataFrame({"id": [1]}))
    assert (info.value.line, info.value.col) == loc(sql, "PERMUTE")


def test_narrow_permute_with_inner_choices_still_works():
    # PERMUTE(X, Y+) keeps the expanded alternation (X Y+ | Y+ X)
    t = pd.DataFrame({"id": [1, 2, 3], "v": [5, 5, 1]})
    cols, rows = run("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() "
                     "AS c ALL ROWS PER MATCH PATTERN (PERMUTE(X, Y+)) "
                     "DEFINE X AS v = 1, Y AS v = 5)", t=t)
    assert [r[cols.index("c")] for r in rows] == ["Y", "Y", "X"]
