"""CEP-mode MEASURES beyond count/sum/avg/min/max (issue 12): array_agg/collect_list,
DISTINCT, CLASSIFIER()/MATCH_NUMBER() in arguments, the stddev/variance family,
max_by/min_by, listagg, count_if, bool_and/bool_or, collect_set.

The CEP matcher lists each output row's rows (cep.pyx, A_LIST) and the worker folds them
as in SQL:2016 mode (compile/gathered.py). Checked against the CEP oracle
(reference_cep), against Spark's GROUP BY / running windows over the match rows, and the
in-process path against spark.cep.sql. Matches overlap under SKIP_TILL_ANY_MATCH, so a
row may belong to several matches: Spark groups by MATCH_NUMBER.
"""
from __future__ import annotations

import math
from collections import Counter
from decimal import Decimal

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import cepsql
from cepsql.backends.local.engine import to_arrow
from cepsql.reference.cep import evaluate_reference_cep
from support.sqlhelp import plain
from test_property_sql import normalise, spec_of

T = pd.DataFrame({
    "id": [1, 2, 3, 4, 5, 6, 7, 8, 9],
    "v": [1.5, 2.0, 4.0, 3.0, 5.0, None, 0.5, 0.2, 6.0],
    "k": pd.array([3, 1, 3, None, 2, 2, 5, 1, 4], dtype="Int64"),
    "s": ["a", "b", "c", None, "e", "f", "g", "b", "h"],
    "d": [Decimal("1.50"), Decimal("2.25"), Decimal("1.50"), Decimal("0.10"),
          Decimal("3.00"), None, Decimal("2.25"), Decimal("1.00"), Decimal("0.75")],
})
CLAUSE = """FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES {m} {rows}
    STRATEGY {strategy} PATTERN (SEQ(A, B+, C)) WITHIN 5 ROWS
    DEFINE A AS A.v IS NULL OR A.v < 3.5, B AS B.k IS NULL OR B.k < 4,
           C AS C.v IS NULL OR C.v > 2)"""
STRATEGIES = ["STRICT_CONTIGUITY", "PARTITION_CONTIGUITY", "SKIP_TILL_NEXT_MATCH",
              "SKIP_TILL_ANY_MATCH"]

AGGS = [
    # (measure over the match, the same aggregate over the match's rows in Spark)
    ("array_agg(v)", "nullif(array_agg(v), array())"),
    ("collect_list(B.s)", "nullif(collect_list(CASE WHEN cls = 'B' THEN s END), array())"),
    ("stddev(v)", "stddev(v)"),
    ("stddev_pop(B.v)", "stddev_pop(CASE WHEN cls = 'B' THEN v END)"),
    ("var_samp(k)", "var_samp(k)"),
    ("var_pop(d)", "var_pop(d)"),
    ("count_if(v > 2)", "count_if(v > 2)"),
    ("bool_and(v > 1)", "bool_and(v > 1)"),
    ("bool_or(B.k > 2)", "bool_or(CASE WHEN cls = 'B' THEN k > 2 END)"),
    ("max_by(s, v)", "max_by(s, v)"),
    ("min_by(id, k)", "min_by(id, k)"),
    ("listagg(s, '/')", "listagg(s, '/')"),
    ("string_agg(k)", "string_agg(k)"),
    ("count(DISTINCT k)", "count(DISTINCT k)"),
    ("sum(DISTINCT d)", "sum(DISTINCT d)"),
    ("avg(DISTINCT d)", "avg(DISTINCT d)"),
    ("sum(MATCH_NUMBER() * 100 + k)", "sum(mn * 100 + k)"),
    ("listagg(s || CLASSIFIER(), ',')", "listagg(s || cls, ',')"),
    ("max(CLASSIFIER())", "max(cls)"),
    ("count(DISTINCT CLASSIFIER())", "count(DISTINCT cls)"),
    ("collect_set(B.k)", "nullif(collect_set(CASE WHEN cls = 'B' THEN k END), array())"),
]


def q(measures: str, rows: str = "ONE ROW PER MATCH",
      strategy: str = "SKIP_TILL_ANY_MATCH") -> str:
    return "SELECT * " + CLAUSE.format(m=measures, rows=rows, strategy=strategy)


def _close(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-12)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return a == b


def _norm(value):
    """normalise() extended to list values (array_agg, collect_list)."""
    if isinstance(value, (list, tuple)) or (hasattr(value, "tolist") and
                                            getattr(value, "ndim", 0) == 1):
        return tuple(_norm(v) for v in list(value))
    return normalise(value)


def row_multiset(rows) -> Counter:
    return Counter(tuple(_norm(v) for v in row) for row in rows)


def _type(t):
    """A Spark type without the element nullability of arrays (cepsql's arrays say
    containsNull=true, as in SQL:2016 mode; Spark's collect_list says false)."""
    from pyspark.sql.types import ArrayType
    return ("array", _type(t.elementType)) if isinstance(t, ArrayType) else t


def _sets_to_sorted(value):
    return sorted(value, key=repr) if isinstance(value, list) else value


def _oracle_equal(sql: str) -> pd.DataFrame:
    """The in-process result, after checking it equals the CEP oracle's rows."""
    df = cepsql.match_recognize(sql, t=T)
    names, rows = evaluate_reference_cep(spec_of(sql), to_arrow(T))
    assert list(df.columns) == names
    got = row_multiset(df.itertuples(index=False, name=None))
    assert got == row_multiset(rows), (sql, got, row_multiset(rows))
    return df


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("rows", ["ONE ROW PER MATCH", "ALL ROWS PER MATCH"])
def test_gathered_measures_equal_the_oracle(strategy, rows):
    running = ", ".join(f"{m} AS r{i}" for i, (m, _) in enumerate(AGGS)
                        if not m.startswith("collect_set"))  # set order: see below
    final = ", ".join(f"FINAL {m} AS f{i}" for i, (m, _) in enumerate(AGGS)
                      if not m.startswith("collect_set"))
    df = _oracle_equal(q(f"MATCH_NUMBER() AS mn, {running}, {final}", rows, strategy))
    assert len(df) > 0


def test_by_hand_any_match():
    df = _oracle_equal(q("MATCH_NUMBER() AS mn, FIRST(A.id) AS a, LAST(C.id) AS c, "
                         "array_agg(id) AS ids, listagg(CLASSIFIER(), '') AS labels, "
                         "count(DISTINCT CLASSIFIER()) AS nl, array_agg(MATCH_NUMBER()) AS mns"))
    by = {(r.a, r.c): r for r in df.itertuples()}
    # SEQ(A, B+, C) over ids 1..3 under ANY: A=1, B=2, C=3 is one match
    m = by[(1, 3)]
    assert list(m.ids) == [1, 2, 3] and m.labels == "ABC" and m.nl == 3
    assert list(m.mns) == [m.mn] * 3
    # skip till any match: A=1, B in {2, 3}, C=5 (v=5 > 2); both B orders listed in order
    assert any(list(r.ids) == [1, 3, 5] for r in df.itertuples() if (r.a, r.c) == (1, 5))


def test_running_and_final_in_all_rows_per_match():
    df = _oracle_equal(q("MATCH_NUMBER() AS mn, RUNNING listagg(CLASSIFIER(), '') AS r, "
                         "FINAL listagg(CLASSIFIER(), '') AS f, RUNNING array_agg(id) AS ids",
                         "ALL ROWS PER MATCH", "SKIP_TILL_NEXT_MATCH"))
    for mn, group in df.groupby("mn"):
        final = group["f"].iloc[0]
        assert list(group["r"]) == [final[:i + 1] for i in range(len(group))]
        assert list(group["ids"].iloc[-1]) == list(group["id"])


def test_no_value_gives_null():
    df = _oracle_equal(q("array_agg(CASE WHEN v > 100 THEN v END) AS a, "
                         "stddev(B.v) AS s, max_by(s, CASE WHEN v > 100 THEN v END) AS m, "
                         "listagg(CASE WHEN v > 100 THEN s END) AS l, count_if(v > 100) AS c",
                         strategy="STRICT_CONTIGUITY"))
    assert len(df) > 0
    assert df["a"].isna().all() and df["m"].isna().all() and df["l"].isna().all()
    assert (df["c"] == 0).all()


def test_unmatched_rows_get_null_aggregates():
    sql = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES array_agg(id) AS ids,
        listagg(CLASSIFIER()) AS l, count(DISTINCT k) AS n
        ALL ROWS PER MATCH WITH UNMATCHED ROWS STRATEGY STRICT_CONTIGUITY
        PATTERN (SEQ(A, C)) WITHIN 5 ROWS DEFINE A AS A.v < 1, C AS C.v > 2)"""
    df = _oracle_equal(sql)
    matched = df[df["l"].notna()]
    assert list(matched["id"]) == [8, 9] and list(matched["ids"].iloc[1]) == [8, 9]
    unmatched = df[df["l"].isna()]
    assert len(unmatched) == 7 and unmatched["ids"].isna().all()


# --- against Spark -----------------------------------------------------------------------


def test_final_aggregates_equal_spark_over_the_match_rows(spark):
    spark.createDataFrame(T).createOrReplaceTempView("t")
    matched = spark.cep.sql(q("MATCH_NUMBER() AS mn, CLASSIFIER() AS cls",
                              "ALL ROWS PER MATCH"))
    matched.createOrReplaceTempView("matched")
    measures = ", ".join(f"{m} AS a{i}" for i, (m, _) in enumerate(AGGS))
    ours = spark.cep.sql(q("MATCH_NUMBER() AS mn, " + measures))
    theirs = spark.sql("SELECT mn, " + ", ".join(f"{s} AS a{i}" for i, (_, s) in
                                                 enumerate(AGGS)) +
                       " FROM matched GROUP BY mn")
    assert [_type(f.dataType) for f in ours.schema] == \
        [_type(f.dataType) for f in theirs.schema]
    got = {r["mn"]: r for r in ours.collect()}
    want = {r["mn"]: r for r in theirs.collect()}
    assert sorted(got) == sorted(want) and len(want) >= 3
    for mn in want:
        for i, (m, _) in enumerate(AGGS):
            g, w = got[mn][f"a{i}"], want[mn][f"a{i}"]
            if m.startswith("collect_set"):
                g, w = _sets_to_sorted(g), _sets_to_sorted(w)
            assert _close(g, w), (m, mn, g, w)
    local = cepsql.match_recognize(q("MATCH_NUMBER() AS mn, " + measures), t=T)
    for row in local.astype(object).itertuples(index=False):
        for i, (m, _) in enumerate(AGGS):
            value = plain(getattr(row, f"a{i}"))
            theirs_v = got[row.mn][f"a{i}"]
            if m.startswith("collect_set"):
                value, theirs_v = _sets_to_sorted(value), _sets_to_sorted(theirs_v)
            assert _close(value, theirs_v), (m, row.mn, value)


def test_running_aggregates_equal_spark_running_windows(spark):
    spark.createDataFrame(T).createOrReplaceTempView("t")
    pairs = [("stddev(v)", "stddev(v)"), ("count_if(k > 1)", "count_if(k > 1)"),
             ("listagg(CLASSIFIER())", "listagg(cls)"), ("max_by(s, k)", "max_by(s, k)"),
             ("var_pop(B.k)", "var_pop(CASE WHEN cls = 'B' THEN k END)"),
             ("bool_or(v > 3)", "bool_or(v > 3)"), ("var_samp(d)", "var_samp(d)"),
             ("bool_and(k > 1)", "bool_and(k > 1)"), ("min_by(s, v)", "min_by(s, v)"),
             ("sum(MATCH_NUMBER() * k)", "sum(mn * k)"),
             ("array_agg(id)", "nullif(array_agg(id) {w}, array())"),
             ("collect_list(s || CLASSIFIER())", "nullif(collect_list(s || cls) {w}, array())")]
    pairs += [(f"FINAL {m}", f"{s} FULL") for m, s in pairs]
    measures = ", ".join(f"{'' if m.startswith('FINAL') else 'RUNNING '}{m} AS a{i}"
                         for i, (m, _) in enumerate(pairs))
    sql = q("MATCH_NUMBER() AS mn, CLASSIFIER() AS cls, " + measures, "ALL ROWS PER MATCH")
    ours = spark.cep.sql(sql)
    ours.createOrReplaceTempView("ours")
    window = "OVER (PARTITION BY mn ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
    full = "OVER (PARTITION BY mn)"

    def over(s: str) -> str:
        frame = full if s.endswith(" FULL") else window
        s = s.removesuffix(" FULL")
        return s.format(w=frame) if "{w}" in s else f"{s} {frame}"

    theirs = spark.sql("SELECT mn, id, " + ", ".join(f"{over(s)} AS a{i}" for i, (_, s) in
                                                     enumerate(pairs)) + " FROM ours")
    got = {(r["mn"], r["id"]): r for r in ours.collect()}
    want = {(r["mn"], r["id"]): r for r in theirs.collect()}
    assert sorted(got) == sorted(want) and len(want) >= 6
    for key in want:
        for k, (m, _) in enumerate(pairs):
            assert _close(got[key][f"a{k}"], want[key][f"a{k}"]), (m, key, got[key], want[key])
    local = cepsql.match_recognize(sql, t=T)
    for row in local.astype(object).itertuples(index=False):
        for k, (m, _) in enumerate(pairs):
            value = plain(getattr(row, f"a{k}"))
            assert _close(value, got[(row.mn, row.id)][f"a{k}"]), (m, row.id, value)


# --- property: random streams, every strategy ------------------------------------------

_PROPERTY_MEASURES = (
    "MATCH_NUMBER() AS mn, array_agg(id) AS ids, listagg(CLASSIFIER(), '') AS labels, "
    "count(DISTINCT v) AS dv, stddev(v) AS sd, max_by(id, v) AS mb, count_if(B.v > 2) AS ci, "
    "bool_or(C.k > 2) AS bo, sum(DISTINCT d) AS sdd, FINAL min_by(id, k) AS fm")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_random_streams_equal_the_oracle(strategy):
    row = st.tuples(st.one_of(st.none(), st.sampled_from([0.5, 1.0, 2.5, 3.0, 4.5])),
                    st.one_of(st.none(), st.integers(0, 5)),
                    st.one_of(st.none(), st.sampled_from(["1.25", "0.50", "2.00"])))

    @settings(max_examples=30, deadline=None, derandomize=True)
    @given(data=st.lists(row, min_size=1, max_size=12),
           rows=st.sampled_from(["ONE ROW PER MATCH", "ALL ROWS PER MATCH"]))
    def check(data, rows):
        table = pa.table({
            "id": list(range(1, len(data) + 1)),
            "v": [r[0] for r in data],
            "k": pa.array([r[1] for r in data], pa.int64()),
            "s": [None if r[1] is None else "x" * r[1] for r in data],
            "d": pa.array([None if r[2] is None else Decimal(r[2]) for r in data],
                          pa.decimal128(6, 2)),
        })
        sql = q(_PROPERTY_MEASURES, rows, strategy)
        df = cepsql.match_recognize(sql, t=table)
        names, expected = evaluate_reference_cep(spec_of(sql), table)
        assert list(df.columns) == names
        got = row_multiset(df.itertuples(index=False, name=None))
        assert got == row_multiset(expected), (sql, table.to_pylist())
    check()
