"""Nested values in DEFINE / MEASURES (issue 12 item 3): struct fields ``A.s.f``, map
values ``A.m['k']``, array elements ``A.arr[0]`` (0-based like Spark's subscript; NULL
out of range and for a missing key), also under navigation (``PREV(A.s.f)``). Each
construct runs in-process, against the reference evaluator, and through Spark."""
from __future__ import annotations

import pyarrow as pa
import pytest

import cepsql
from cepsql.reference.cep import evaluate_reference_cep
from cepsql.errors import CepAnalysisError
from support.sqlhelp import loc, run

from cepsql.reference.sql import evaluate_reference

try:
    from .test_property_sql import assert_engine_matches, row_multiset, spec_of
except ImportError:
    from test_property_sql import assert_engine_matches, row_multiset, spec_of

SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("s", pa.struct([("f", pa.int64()), ("Name", pa.string())])),
    ("m", pa.map_(pa.string(), pa.int64())),
    ("arr", pa.list_(pa.int64())),
])
NESTED = pa.table({
    "id": [1, 2, 3, 4, 5],
    "s": [{"f": 1, "Name": "a"}, {"f": 3, "Name": "b"}, None, {"f": 7, "Name": "d"},
          {"f": 2, "Name": "e"}],
    "m": [[("k", 10)], [("k", 20), ("j", 1)], [("j", 5)], None, [("k", 5)]],
    "arr": [[1, 2], [5], [], None, [9, 8, 7]],
}, schema=SCHEMA)


def q(body: str) -> str:
    return f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id {body})"


CASES = [
    # struct field with navigation: rises of s.f (row 3's struct is NULL -> NULL field)
    (q("MEASURES A.id AS a, A.s.f AS f, PREV(A.s.f) AS pf, A.s.name AS nm "
       "PATTERN (A) DEFINE A AS A.s.f > PREV(A.s.f)"),
     [(2, 3, 1, "b")]),
    # map value; a missing key or NULL map reads NULL
    (q("MEASURES A.id AS a, A.m['k'] AS k, NEXT(A.m['k']) AS nk "
       "PATTERN (A) DEFINE A AS A.m['j'] IS NOT NULL"),
     [(2, 20, None), (3, None, None)]),
    # array element, 0-based; out of range is NULL
    (q("MEASURES A.id AS a, A.arr[0] AS first, A.arr[2] AS third, B.arr[1] AS b1 "
       "PATTERN (A B) DEFINE A AS A.arr[0] < 5, B AS B.arr[0] > A.arr[0]"),
     [(1, 1, None, None)]),
]


@pytest.mark.parametrize("sql,expected", CASES)
def test_nested_access_in_process(sql, expected):
    cols, rows = run(sql, t=NESTED)
    assert rows == expected


@pytest.mark.parametrize("sql,expected", CASES)
def test_nested_access_matches_reference(sql, expected):
    assert_engine_matches(sql, NESTED)


def test_nested_access_in_all_rows_with_running_navigation():
    sql = q("MEASURES LAST(A.s.f) AS last_f, FIRST(A.arr[0]) AS a0 ALL ROWS PER MATCH "
            "PATTERN (A+) DEFINE A AS A.s.f IS NOT NULL")
    cols, rows = run(sql, t=NESTED)
    expected = [(1, 1, 1), (2, 3, 1), (4, 7, None), (5, 2, None)]
    assert [(r[0], r[1], r[2]) for r in rows] == expected
    names, ref_rows = evaluate_reference(spec_of(sql), NESTED)
    assert names == cols and [r[:3] for r in ref_rows] == expected


def test_field_of_an_array_element():
    table = pa.table({"id": [1, 2], "xs": [[{"v": 4}], [{"v": 6}]]})
    cols, rows = run(q("MEASURES B.xs[0].v AS v PATTERN (A B) DEFINE B AS B.xs[0].v > "
                       "A.xs[0].v"), t=table)
    assert rows == [(6,)]


def test_unknown_field_is_an_analysis_error_with_position():
    sql = q("MEASURES A.s.nope AS x PATTERN (A)")
    with pytest.raises(CepAnalysisError, match="no field nope") as info:
        cepsql.match_recognize(sql, t=NESTED)
    assert (info.value.line, info.value.col) == loc(sql, "A.s.nope")


def test_subscript_of_a_scalar_is_an_analysis_error_with_position():
    sql = q("MEASURES A.id[0] AS x PATTERN (A)")
    with pytest.raises(CepAnalysisError, match="needs an array or a map") as info:
        cepsql.match_recognize(sql, t=NESTED)
    assert (info.value.line, info.value.col) == loc(sql, "A.id[0]")


def test_nested_access_through_spark(spark):
    rows = [(r["id"], r["s"], None if r["m"] is None else dict(r["m"]), r["arr"])
            for r in NESTED.to_pylist()]
    spark.createDataFrame(rows, schema="id long, s struct<f: long, Name: "
                          "string>, m map<string, long>, arr array<long>"
                          ).createOrReplaceTempView("nested_t")
    for sql, expected in CASES:
        got = spark.cep.sql(sql.replace("FROM t ", "FROM nested_t ")).orderBy("a").collect()
        assert [tuple(r) for r in got] == expected, sql


# --- property: nested access against the reference on generated streams --------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

try:
    from .test_property_sql import SETTINGS
except ImportError:
    from test_property_sql import SETTINGS

NESTED_DEFINES = ["{v}.s.f > PREV({v}.s.f)", "{v}.arr[{i}] >= {v}.s.f", "{v}.m['k'] IS NULL",
                  "{v}.m['k'] < {v}.arr[0] + 3", "{v}.s.f = LAST({o}.s.f, 1)",
                  "coalesce({v}.arr[{i}], -1) < NEXT({v}.m['j'])", "{v}.m['k'] > {o}.m['j']",
                  "{v}.arr[{i}] <> FIRST({o}.arr[0])"]
NESTED_MEASURES = ["LAST({v}.s.f)", "FIRST({v}.arr[{i}])", "{v}.m['j']", "PREV({v}.s.f, 2)",
                   "LAST({v}.arr[1]) - FIRST({v}.m['k'])"]


@st.composite
def nested_streams(draw):
    n = draw(st.integers(0, 12))
    small = st.one_of(st.none(), st.integers(0, 5))
    rows = {"id": list(range(n)),
            "s": draw(st.lists(st.one_of(st.none(), st.builds(lambda f: {"f": f, "Name": "x"},
                                                                small)), min_size=n, max_size=n)),
            "m": draw(st.lists(st.one_of(st.none(), st.lists(st.tuples(
                st.sampled_from(["k", "j"]), small), max_size=2, unique_by=lambda kv: kv[0])),
                min_size=n, max_size=n)),
            "arr": draw(st.lists(st.one_of(st.none(), st.lists(small, max_size=3)),
                                 min_size=n, max_size=n))}
    return pa.table(rows, schema=SCHEMA)


@st.composite
def nested_queries(draw):
    pattern = draw(st.sampled_from(["A B+", "A+ B", "A B? C", "(A | B)+", "A B*? C"]))
    variables = sorted(set(pattern) & set("ABC"))
    defines = []
    for v in variables:
        if draw(st.booleans()):
            o = draw(st.sampled_from(variables))
            defines.append(f"{v} AS " + draw(st.sampled_from(NESTED_DEFINES)).format(
                v=v, o=o, i=draw(st.integers(0, 2))))
    measures = [draw(st.sampled_from(NESTED_MEASURES)).format(
        v=draw(st.sampled_from(variables)), i=draw(st.integers(0, 2))) + f" AS x{k}"
        for k in range(2)]
    define = f" DEFINE {', '.join(defines)}" if defines else ""
    return (f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS a, "
            f"{', '.join(measures)} AFTER MATCH SKIP TO NEXT ROW PATTERN ({pattern}){define})")


@settings(max_examples=60, **SETTINGS)
@given(sql=nested_queries(), table=nested_streams())
def test_nested_access_matches_reference_on_generated_streams(sql, table):
    assert_engine_matches(sql, table)


def test_nested_access_in_cep_mode_matches_reference():
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS a, B.id AS b, "
           "B.arr[0] AS b0 STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(A, B)) "
           "DEFINE B AS B.s.f > A.s.f AND B.m['k'] > A.m['k'])")
    assert sorted(run(sql, t=NESTED)[1]) == [(1, 2, 5)]
    assert_cep_reference(sql, NESTED)


def assert_cep_reference(sql: str, table: pa.Table) -> None:
    """CEP mode: the engine's rows equal the CEP reference evaluator's."""
    names, rows = evaluate_reference_cep(spec_of(sql), table)
    got = cepsql.match_recognize(sql, t=table)
    assert list(got.columns) == names
    assert row_multiset(got.itertuples(index=False, name=None)) == row_multiset(rows)


def test_unqualified_struct_field_and_subscripts_in_keys():
    table = pa.table({"id": [3, 1, 2], "s": [{"f": 3}, {"f": 1}, {"f": 2}],
                      "arr": [[1], [1], [2]]})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY arr[0] ORDER BY (s).f "
           "MEASURES A.id AS a, (A.s).f AS f ONE ROW PER MATCH PATTERN (A) DEFINE A AS (s).f > 1)")
    cols, rows = run(sql, t=table)
    assert sorted(rows) == [(1, 3, 3), (2, 2, 2)]
    with pytest.raises(CepAnalysisError, match=r"written \(s\)\.f"):
        cepsql.match_recognize(sql.replace("ORDER BY (s).f", "ORDER BY s.f"), t=table)
