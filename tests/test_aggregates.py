"""Aggregates beyond count/sum/avg/min/max (issue 12, item 3): DISTINCT, the
stddev/variance family, listagg/string_agg, max_by/min_by, count_if, bool_and/bool_or,
collect_set, arguments reading CLASSIFIER() or MATCH_NUMBER(); the DEFINE forms the
matcher computes incrementally; MATCH_NUMBER() in DEFINE; errors for the rest.

Values are checked three ways: by hand (small cases), against Spark computing the same
aggregate over the same rows (groupBy over a match's rows for FINAL, a running window for
RUNNING), and the in-process path against spark.cep.sql side by side.
"""
from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import cepsql
from cepsql.errors import CepAnalysisError, CepRuntimeError, CepUnsupportedError
from cepsql.backends.local.engine import to_arrow
from cepsql.runtime import spark_folds
from cepsql.analyze.aggregate_functions import result_type
from cepsql.reference.sql import evaluate_reference
from cepsql.runtime.spark_folds import fold_groups, fold_one
from support.sqlhelp import loc, plain, run as run_local
from test_property_sql import assert_engine_matches, row_multiset, spec_of

T = pd.DataFrame({
    "id": [1, 2, 3, 4, 5, 6, 7, 8],
    "v": [1.5, 2.0, 4.0, 3.0, 5.0, None, 0.5, 0.2],
    "k": pd.array([3, 1, 3, None, 2, 2, 5, 1], dtype="Int64"),
    "s": ["a", "b", "c", None, "e", "f", "g", "b"],
    "d": [Decimal("1.50"), Decimal("2.25"), Decimal("1.50"), Decimal("0.10"),
          Decimal("3.00"), None, Decimal("2.25"), Decimal("1.00")],
})
# A: v < 3.5 or no v; B+: rows while v rises (or k = 5). Matches: rows 1-3 (A B B), 4-5
# (A B), 6-7 (A B; row 7 is B through k = 5); row 8 is an A without a B.
CLAUSE = """FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES {m} {rows}
    AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+)
    DEFINE A AS A.v IS NULL OR A.v < 3.5, B AS B.v > PREV(B.v) OR B.k = 5)"""


def q(measures: str, rows: str = "ONE ROW PER MATCH") -> str:
    return "SELECT * " + CLAUSE.format(m=measures, rows=rows)


def run(sql: str, **tables):
    """The in-process rows, after checking that the reference evaluator (the oracle)
    gives the same rows."""
    cols, rows = run_local(sql, **tables)
    names, expected = evaluate_reference(spec_of(sql), to_arrow(tables["t"]))
    assert names == cols
    assert row_multiset(rows) == row_multiset(expected), (rows, expected)
    return cols, rows


# --- by hand ---------------------------------------------------------------------------

def test_variance_family_by_hand():
    # match 1: v = 1.5, 2.0, 4.0; match 2: 3.0, 5.0; match 3: None, 0.5 (B takes 0.5 via k=5)
    cols, rows = run(q("MATCH_NUMBER() AS mn, stddev(v) AS sd, var_pop(B.v) AS vp, "
                       "variance(v) AS var, stddev_pop(v) AS sdp"), t=T)
    assert [r[0] for r in rows] == [1, 2, 3]
    m1 = [1.5, 2.0, 4.0]
    mean = sum(m1) / 3
    assert rows[0][1] == pytest.approx(math.sqrt(sum((x - mean) ** 2 for x in m1) / 2))
    assert rows[0][2] == pytest.approx(1.0)  # B rows 2.0, 4.0
    assert rows[1][3] == pytest.approx(2.0)  # 3.0, 5.0
    assert rows[1][4] == pytest.approx(1.0)
    assert rows[2][1] is None  # one non-null value: the sample forms are NULL (Spark)
    assert rows[2][4] == 0.0


def test_boolean_count_if_and_by_aggregates_by_hand():
    cols, rows = run(q("count_if(v > 2) AS ci, bool_and(v > 1) AS ba, bool_or(B.v > 4) AS bo, "
                       "max_by(s, v) AS mxb, min_by(s, k) AS mnb, every(k IS NOT NULL) AS ev"),
                     t=T)
    assert rows == [(1, True, False, "c", "b", True),
                    (2, True, True, "e", "e", False),  # k NULL on row 4; min k row 5 (2)
                    (0, False, False, "g", "f", True)]  # v NULL skipped; 0.5 > 1 false


def test_listagg_string_agg_and_distinct_by_hand():
    cols, rows = run(q("listagg(s, ',') AS l, string_agg(DISTINCT B.s) AS sa, "
                       "count(DISTINCT d) AS cd, sum(DISTINCT d) AS sd, avg(DISTINCT k) AS ak, "
                       "collect_set(d) AS cs, listagg(k, '-') AS lk"), t=T)
    assert rows[0][:5] == ("a,b,c", "bc", 2, Decimal("3.75"), 2.0)
    assert sorted(rows[0][5]) == [Decimal("1.50"), Decimal("2.25")]
    assert rows[0][6] == "3-1-3"  # listagg casts to STRING like Spark
    assert rows[1][:2] == ("e", "e")  # row 4's s is NULL: skipped
    assert rows[2][2:5] == (1, Decimal("2.25"), 3.5)


def test_classifier_and_match_number_in_arguments():
    cols, rows = run(q("array_agg(s || CLASSIFIER()) AS tagged, "
                       "sum(MATCH_NUMBER() * 100 + k) AS total, "
                       "listagg(CLASSIFIER(), '') AS labels, count_if(CLASSIFIER() = 'B') AS nb"),
                     t=T)
    assert rows == [(["aA", "bB", "cB"], 307, "ABB", 2),
                    (["eB"], 202, "AB", 1),  # k NULL on row 4: only row 5 sums  # s NULL on row 4: NULL || 'A' is skipped
                    (["fA", "gB"], 607, "AB", 1)]


def test_running_and_final_in_all_rows_per_match():
    cols, rows = run(q("RUNNING listagg(CLASSIFIER(), '') AS r, FINAL listagg(s) AS f, "
                       "RUNNING count(DISTINCT k) AS dk, stddev_pop(v) AS sd",
                       "ALL ROWS PER MATCH"), t=T)
    got = [(r[cols.index("id")], r[cols.index("r")], r[cols.index("f")], r[cols.index("dk")],
            r[cols.index("sd")]) for r in rows]
    assert [g[:4] for g in got] == [(1, "A", "abc", 1), (2, "AB", "abc", 2), (3, "ABB", "abc", 2),
                                    (4, "A", "e", 0), (5, "AB", "e", 1),
                                    (6, "A", "fg", 1), (7, "AB", "fg", 2)]
    assert got[0][4] == 0.0 and got[1][4] == pytest.approx(0.25) and got[3][4] == 0.0
    assert got[5][4] is None  # only a NULL v so far


def test_empty_match_and_no_rows():
    # an empty match: count-like aggregates 0, everything else NULL
    cols, rows = run("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES count_if(v > 0) AS c, "
                     "count(DISTINCT v) AS cd, stddev(v) AS s, listagg(s) AS l, max_by(s, v) AS m,"
                     " bool_and(v > 0) AS b, collect_set(v) AS cs PATTERN (A*) DEFINE A AS false)",
                     t=T.head(1))
    assert rows == [(0, 0, None, None, None, None, None)]


# --- DEFINE ------------------------------------------------------------------------------

def test_define_count_if_bool_and_bool_or():
    # B+ while at most one B row has v > 2.5: rows 2 (2.0), 3 (4.0) then 4 (3.0) is a second
    sql = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(id) AS f, LAST(id) AS l
        PATTERN (A B+) DEFINE A AS id = 1, B AS count_if(B.v > 2.5) <= 1)"""
    assert run(sql, t=T)[1] == [(1, 3)]
    sql = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES count(*) AS n
        PATTERN (A+) DEFINE A AS bool_and(A.s <> 'c') AND NOT bool_or(A.v > 4.5))"""
    # rows 1-2 (s = 'c' breaks at row 3); row 4: bool_and over only a NULL s is NULL;
    # row 5: v > 4.5; row 6: bool_or over only a NULL v is NULL; rows 7-8 match
    assert run(sql, t=T)[1] == [(2,), (2,)]


def test_define_aggregates_reading_classifier():
    sql = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES count(*) AS n,
        listagg(CLASSIFIER()) AS labels
        PATTERN ((A | B)+) DEFINE A AS A.v < 2.5 AND count_if(CLASSIFIER() = 'B') < 2,
        B AS max(CLASSIFIER()) = 'B' AND count(CASE WHEN CLASSIFIER() = 'A' THEN 1 END) >= 1)"""
    # rows 1-2 A (v < 2.5, no B yet); rows 3-5 B (v too large for A; B's max label, with
    # the current row tentatively B, is 'B' and one A exists); row 6 B (v NULL); rows 7-8
    # have v < 2.5 but four B rows are already labelled, so A fails and they are B
    cols, rows = run(sql, t=T)
    assert rows == [(8, "AABBBBBB")]
    # with fewer B rows allowed before: A takes row 7 only if count_if(...) < 5
    cols, rows = run(sql.replace("= 'B') < 2", "= 'B') < 5"), t=T)
    assert rows == [(8, "AABBBBAA")]


def test_define_variance_family():
    # B+ while the running stddev of v (current row included) stays below 1.2:
    # rows 1-3: v 1.5, 2.0, 4.0 -> stddev_samp(1.5, 2.0) = 0.354, (1.5, 2.0, 4.0) = 1.323;
    # from row 4: (3.0, 5.0) -> 1.414
    sql = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(id) AS f,
        LAST(id) AS l, stddev(v) AS sd PATTERN (A B+) DEFINE A AS id IN (1, 4),
        B AS stddev(v) < 1.2 AND var_pop(B.k) IS NOT NULL AND stddev_pop(v) >= 0)"""
    cols, rows = run(sql, t=T)
    assert [r[:2] for r in rows] == [(1, 2)]
    assert rows[0][2] == pytest.approx(math.sqrt(0.125))
    # a sample form over one value is NULL: variance 0.125, 1.75, 1.196 then 2.05 (row 5
    # ends match 1); [5.0] and [5.0, NULL] -> NULL, then 10.125; [0.5], [0.5, 0.2] -> 0.045
    sql = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES count(*) AS n
        PATTERN (A+) DEFINE A AS coalesce(variance(A.v), 0) < 2)"""
    assert run(sql, t=T)[1] == [(4,), (2,), (2,)]


def test_match_number_in_define():
    # Trino accepts MATCH_NUMBER() in DEFINE: the number the match would get
    sql = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES MATCH_NUMBER() AS mn,
        count(*) AS n PATTERN (A+) DEFINE A AS count(*) <= MATCH_NUMBER())"""
    assert run(sql, t=T)[1] == [(1, 1), (2, 2), (3, 3), (4, 2)]


@pytest.mark.parametrize("define", [
    "max(MATCH_NUMBER()) < 3", "min(B.id) > 0 AND max(MATCH_NUMBER()) >= 2",
    "sum(MATCH_NUMBER()) <= 3", "sum(B.id) IS NULL OR count(DISTINCT MATCH_NUMBER()) = 1",
    "avg(MATCH_NUMBER()) > 1.5 OR count(MATCH_NUMBER()) < 3", "sum(DISTINCT MATCH_NUMBER()) < 3",
])
def test_define_aggregates_of_match_number_equal_the_reference(define):
    """count / sum / avg / min / max of MATCH_NUMBER() in DEFINE (issue 24 B8): folded to
    the number and the row count, as the reference evaluator aggregates it row by row."""
    sql = f"""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES MATCH_NUMBER() AS mn,
        count(*) AS n ALL ROWS PER MATCH PATTERN (A B+) DEFINE A AS true, B AS {define})"""
    assert_engine_matches(sql, to_arrow(T))


# --- errors ------------------------------------------------------------------------------

@pytest.mark.parametrize("measure, needle, message", [
    ("percentile(v, 0.5)", "percentile", "supported: any, array_agg"),
    ("median(A.v)", "median", "not supported in MATCH_RECOGNIZE"),
    ("kurtosis(v)", "kurtosis", "stddev"),
])
def test_other_aggregates_are_rejected_with_the_supported_list(measure, needle, message):
    sql = q(f"{measure} AS x")
    with pytest.raises(CepUnsupportedError, match=message) as err:
        cepsql.match_recognize(sql, t=T)
    assert (err.value.line, err.value.col) == loc(sql, needle)


@pytest.mark.parametrize("define, needle, message", [
    ("kurtosis(B.v) < 2", "kurtosis", "supported: any, array_agg"),
    ("listagg(B.s) = 'a'", "listagg", r"supported only as the list argument of size\(\)"),
    ("array_max(array_agg(B.v)) < 2", "array_max", "DEFINE reads a list aggregate through"),
    ("array_contains(array_agg(B.v), B.k)", "B.k)", "needs a constant"),
    ("max_by(B.s, B.v) = 'c'", "max_by", "max_by.*string.*MEASURES take any type"),
])
def test_unsupported_define_aggregates(define, needle, message):
    sql = f"""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(id) AS f
        PATTERN (A B+) DEFINE A AS true, B AS {define})"""
    with pytest.raises(CepUnsupportedError, match=message) as err:
        cepsql.match_recognize(sql, t=T)
    assert (err.value.line, err.value.col) == loc(sql, needle)


@pytest.mark.parametrize("measure, needle, message", [
    ("count_if(v)", "count_if", "BOOLEAN"),
    ("bool_and(k)", "bool_and", "BOOLEAN"),
    ("stddev(s)", "stddev", "numeric"),
    ("max_by(s)", "max_by", "takes 2 arguments"),
    ("listagg(s, s)", "s)", "delimiter must be a string constant"),
])
def test_aggregate_argument_errors(measure, needle, message):
    sql = q(f"{measure} AS x")
    with pytest.raises(CepAnalysisError, match=message) as err:
        cepsql.match_recognize(sql, t=T)
    assert (err.value.line, err.value.col) == loc(sql, needle)


def test_one_result_type_rule_for_matcher_and_gathered_aggregates():
    """analyze.aggregates.result_type serves the matcher's codes and the gathered names
    alike, by Spark's rules: sum/avg of an interval is an interval (the gathered copy
    rejected it), the moments are DOUBLE (the matcher's copy returned the argument's
    type), sum of a BOOLEAN is an error (the matcher's copy said DOUBLE)."""
    dec = pa.decimal128(36, 2)
    for sum_name, avg_name in (("SUM", "AVG"), ("sum", "avg")):
        assert result_type(sum_name, pa.duration("us")) == pa.duration("us")
        assert result_type(avg_name, pa.duration("us")) == pa.duration("us")
        assert result_type(sum_name, pa.int32()) == pa.int64()
        assert result_type(sum_name, pa.float32()) == pa.float64()
        assert result_type(sum_name, dec) == pa.decimal128(38, 2)
        assert result_type(avg_name, dec) == pa.decimal128(38, 6)
        assert result_type(avg_name, pa.int64()) == pa.float64()
        with pytest.raises(CepAnalysisError, match="numeric"):
            result_type(sum_name, pa.bool_())
    for moment in ("STDDEV_SAMP", "var_pop"):
        assert result_type(moment, pa.int64()) == pa.float64()
    assert result_type("COUNT_STAR", None) == pa.int64()
    assert result_type("LIST", pa.int32()) == result_type("array_agg", pa.int32()) == pa.list_(pa.int32())


def test_cep_mode_rejects_moment_aggregates_in_define():
    # (CEP MEASURES take every aggregate: tests/test_cep_measures.py)
    sql = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES count(*) AS n
        STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (A B+) DEFINE A AS true, B AS stddev(B.v) < 1)"""
    with pytest.raises(CepUnsupportedError, match="not supported in CEP mode") as err:
        cepsql.match_recognize(sql, t=T)
    assert (err.value.line, err.value.col) == loc(sql, "stddev")


# --- against Spark -----------------------------------------------------------------------

SPARK_AGGS = [
    # (measure over the match, the same aggregate over the match's rows in Spark)
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
    ("sum(DISTINCT k)", "sum(DISTINCT k)"),
    ("sum(MATCH_NUMBER() * 100 + k)", "sum(mn * 100 + k)"),
    ("listagg(s || CLASSIFIER(), ',')", "listagg(s || cls, ',')"),
    ("max(CLASSIFIER())", "max(cls)"),
]


def _close(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-12)
    return a == b


def test_final_aggregates_equal_spark_over_the_match_rows(spark):
    spark.createDataFrame(T).createOrReplaceTempView("t")
    matched = spark.cep.sql(
        "SELECT * " + CLAUSE.format(m="MATCH_NUMBER() AS mn, CLASSIFIER() AS cls",
                                    rows="ALL ROWS PER MATCH"))
    matched.createOrReplaceTempView("matched")
    measures = ", ".join(f"{m} AS a{i}" for i, (m, _) in enumerate(SPARK_AGGS))
    ours = spark.cep.sql("SELECT * " + CLAUSE.format(m="MATCH_NUMBER() AS mn, " + measures,
                                                     rows="ONE ROW PER MATCH"))
    theirs = spark.sql("SELECT mn, " + ", ".join(f"{s} AS a{i}" for i, (_, s) in
                                                 enumerate(SPARK_AGGS)) +
                       " FROM matched GROUP BY mn")
    # Spark's result types exactly
    assert [f.dataType for f in ours.schema] == [f.dataType for f in theirs.schema]
    got = {r["mn"]: r for r in ours.collect()}
    want = {r["mn"]: r for r in theirs.collect()}
    assert sorted(got) == sorted(want) == [1, 2, 3]
    for mn in want:
        for i, (m, _) in enumerate(SPARK_AGGS):
            assert _close(got[mn][f"a{i}"], want[mn][f"a{i}"]), (m, mn, got[mn], want[mn])
    local = cepsql.match_recognize("SELECT * " + CLAUSE.format(
        m="MATCH_NUMBER() AS mn, " + measures, rows="ONE ROW PER MATCH"), t=T)
    for row in local.astype(object).itertuples(index=False):
        for i, (m, _) in enumerate(SPARK_AGGS):
            value = plain(getattr(row, f"a{i}"))
            assert _close(value, got[row.mn][f"a{i}"]), (m, row.mn, value)


def test_running_aggregates_equal_spark_running_windows(spark):
    spark.createDataFrame(T).createOrReplaceTempView("t")
    pairs = [("stddev(v)", "stddev(v)"), ("count_if(k > 1)", "count_if(k > 1)"),
             ("listagg(CLASSIFIER())", "listagg(cls)"), ("max_by(s, k)", "max_by(s, k)"),
             ("var_pop(B.k)", "var_pop(CASE WHEN cls = 'B' THEN k END)"),
             ("bool_or(v > 3)", "bool_or(v > 3)"), ("var_samp(d)", "var_samp(d)"),
             ("stddev_pop(k)", "stddev_pop(k)"), ("bool_and(k > 1)", "bool_and(k > 1)"),
             ("min_by(s, v)", "min_by(s, v)"), ("string_agg(s, '+')", "string_agg(s, '+')"),
             ("sum(MATCH_NUMBER() * k)", "sum(mn * k)"),
             # NULL, not an empty array, when no value is non-NULL (as array_agg before)
             ("collect_list(s || CLASSIFIER())", "nullif(collect_list(s || cls) {w}, array())")]
    pairs += [(f"FINAL {m}", f"{s} FULL") for m, s in pairs]
    measures = ", ".join(f"{'' if m.startswith('FINAL') else 'RUNNING '}{m} AS a{i}"
                         for i, (m, _) in enumerate(pairs))
    ours = spark.cep.sql("SELECT * " + CLAUSE.format(
        m="MATCH_NUMBER() AS mn, CLASSIFIER() AS cls, " + measures, rows="ALL ROWS PER MATCH"))
    ours.createOrReplaceTempView("ours")
    window = "OVER (PARTITION BY mn ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
    full = "OVER (PARTITION BY mn)"

    def over(s: str) -> str:
        frame = full if s.endswith(" FULL") else window
        s = s.removesuffix(" FULL")
        return s.format(w=frame) if "{w}" in s else f"{s} {frame}"

    theirs = spark.sql("SELECT id, " + ", ".join(f"{over(s)} AS a{i}" for i, (_, s) in
                                                 enumerate(pairs)) + " FROM ours")
    got = {r["id"]: r for r in ours.collect()}
    want = {r["id"]: r for r in theirs.collect()}
    assert sorted(got) == sorted(want) == [1, 2, 3, 4, 5, 6, 7]
    for i in want:
        for k, (m, _) in enumerate(pairs):
            assert _close(got[i][f"a{k}"], want[i][f"a{k}"]), (m, i, got[i], want[i])
    local = cepsql.match_recognize("SELECT * " + CLAUSE.format(
        m="MATCH_NUMBER() AS mn, CLASSIFIER() AS cls, " + measures, rows="ALL ROWS PER MATCH"),
        t=T)
    for row in local.astype(object).itertuples(index=False):
        for k, (m, _) in enumerate(pairs):
            value = plain(getattr(row, f"a{k}"))
            assert _close(value, got[row.id][f"a{k}"]), (m, row.id, value)


def test_define_aggregates_and_match_number_on_spark(spark):
    spark.createDataFrame(T).createOrReplaceTempView("t")
    sql = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES MATCH_NUMBER() AS mn,
        count(*) AS n PATTERN (A+) DEFINE A AS count(*) <= MATCH_NUMBER()
        AND bool_or(A.id > 0) AND count_if(A.v > 100) = 0
        AND coalesce(stddev(A.v), 0) < 100 AND coalesce(var_pop(A.k), 0) >= 0)"""
    got = [tuple(r) for r in spark.cep.sql(sql).orderBy("mn").collect()]
    assert got == run(sql, t=T)[1] == [(1, 1), (2, 2), (3, 3), (4, 2)]


# --- the vectorised folds against the per-group definitions --------------------------------

_VALUES = {
    "double": (None, st.sampled_from([0.5, -0.0, 0.0, 2.25, 1e300, -3.0,
                                                 float("nan"), None])),
    "int": (None, st.sampled_from([0, 1, -7, 3, 2 ** 62, None])),
    "string": (None, st.sampled_from(["a", "b", "é", "", "z", None])),
    "bool": (None, st.sampled_from([True, False, None])),
    "decimal": (None, st.sampled_from([Decimal("1.50"), Decimal("-0.25"), Decimal("9.99"),
                                       None])),
}
_FUNCS = {
    "double": ["count", "sum", "avg", "min", "max", "stddev_samp", "stddev_pop", "var_samp",
               "var_pop", "array_agg", "collect_set"],
    "int": ["count", "sum", "avg", "min", "max", "var_pop", "stddev_samp"],
    "string": ["count", "min", "max", "listagg", "array_agg"],
    "bool": ["count", "count_if", "bool_and", "bool_or", "min", "max"],
    "decimal": ["count", "sum", "avg", "min", "max", "var_samp"],
}


@st.composite
def _groups(draw):
    kind = draw(st.sampled_from(sorted(_VALUES)))
    sizes = draw(st.lists(st.integers(0, 6), min_size=1, max_size=5))
    values = draw(st.lists(_VALUES[kind][1], min_size=sum(sizes), max_size=sum(sizes)))
    keys = draw(st.lists(st.sampled_from([1, 2, 2, 3, None]), min_size=sum(sizes),
                         max_size=sum(sizes)))
    types = {"double": pa.float64(), "int": pa.int64(), "string": pa.string(),
             "bool": pa.bool_(), "decimal": pa.decimal128(3, 2)}
    return kind, sizes, pa.array(values, types[kind]), pa.array(keys, pa.int64())


@settings(max_examples=300, deadline=None)
@given(case=_groups(), distinct=st.booleans(), data=st.data())
def test_vector_folds_equal_the_per_group_definitions(case, distinct, data):
    kind, sizes, values, keys = case
    func = data.draw(st.sampled_from(_FUNCS[kind] + ["max_by", "min_by"]))
    args = [values, keys] if func in ("max_by", "min_by") else [values]
    result = result_type(func, args[0].type)
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    cost, spark_folds._STEP_COST = spark_folds._STEP_COST, 0  # the vector path, always
    try:
        got = fold_groups(func, distinct, args, bounds, result, ",").to_pylist()
    except CepRuntimeError:  # int64 overflow: the per-group definition raises too
        with pytest.raises(CepRuntimeError):
            for lo, hi in zip(bounds[:-1], bounds[1:]):
                fold_one(func, distinct, [a.to_pylist()[lo:hi] for a in args], result, ",")
        return
    finally:
        spark_folds._STEP_COST = cost
    want = [fold_one(func, distinct, [a.to_pylist()[lo:hi] for a in args], result, ",")
            for lo, hi in zip(bounds[:-1], bounds[1:])]
    assert [_same(g, w) for g, w in zip(got, want)] == [True] * len(want), (func, got, want)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b  # bit-for-bit the same update
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b and type(a) is type(b)


def test_unknown_spark_aggregate_in_measures_or_define_is_a_clear_error(spark):
    # a session aggregate cepsql cannot know: Spark would aggregate over all matches (no
    # other output column) or fail with MISSING_GROUP_BY; both become CepUnsupportedError
    from pyspark.sql.functions import pandas_udf

    @pandas_udf("double")
    def spread(v: pd.Series) -> float:
        return float(v.max() - v.min())

    spark.udf.register("spread", spread)
    spark.createDataFrame(T).createOrReplaceTempView("t")
    in_define = "SELECT * " + CLAUSE.format(m="count(*) AS n", rows="").replace(
        "B.k = 5)", "B.k = 5 AND spread(B.v) > 0)")
    for sql in (q("spread(v) AS x"), q("spread(v) AS x, count(*) AS n"),
                q("spread(v) AS x", "ALL ROWS PER MATCH"), in_define):
        with pytest.raises(CepUnsupportedError, match="supported aggregates: any, array_agg"):
            spark.cep.sql(sql).collect()


def test_table_function_gives_the_clause_rows(spark):
    # cep_match runs the same worker inside a UDTF: same rows and types as the clause
    spark.createDataFrame(T).createOrReplaceTempView("t")
    body = ("MEASURES stddev(v) AS sd, listagg(s || CLASSIFIER(), \\',\\') AS l, "
            "count(DISTINCT k) AS dk, max_by(s, v) AS mb "
            "PATTERN (A B+) DEFINE A AS A.v IS NULL OR A.v < 3.5, "
            "B AS (B.v > PREV(B.v) OR B.k = 5) AND count_if(B.v > 100) = 0")
    clause = spark.cep.sql(f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id {body})".replace(
        "\\'", "'"))
    table_fn = spark.cep.sql(f"SELECT * FROM cep_match(TABLE(t) ORDER BY id, '{body}')")
    assert table_fn.schema == clause.schema
    got = sorted((tuple(r) for r in table_fn.collect()), key=repr)
    assert got == sorted((tuple(r) for r in clause.collect()), key=repr) and len(got) == 3
