"""The in-process sequence fast path (cepsql/backends/local/sequence.py) gives exactly the
general VM's rows: random sequence patterns, row-local DEFINEs with PREV/NEXT, MEASURES
with logical and physical offsets, SUBSETs and CLASSIFIER, over partitions with NULL and
NaN values; plus the shapes it must leave to the general VM."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cepsql
from cepsql.backends.local.sequence import sequence_shape
from cepsql.backends.local.engine import run_local
from cepsql.runtime.workers import bind_worker

SETTINGS = dict(deadline=None, max_examples=60,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

QUANTIFIERS = ["", "", "+", "*", "?", "{2}", "{1,3}", "{2,}", "{0,2}", "+", "*"]
CONDITIONS = [
    "{v}.v > PREV({v}.v)",
    "{v}.v < PREV({v}.v)",
    "{v}.v < 5",
    "{v}.x % 2 = 0",
    "NEXT({v}.v) >= {v}.v",
    "{v}.v IS NULL OR {v}.x > 3",
    "PREV({v}.v, 2) <= {v}.v",
    "{v}.x > PREV({v}.x) AND {v}.v <> 3.0",
    "CLASSIFIER() = '{v}' AND {v}.x <> 1",
]


def _table(draw) -> pa.Table:
    n = draw(st.integers(0, 60))
    keys = draw(st.lists(st.sampled_from(["a", "b", "c", None]), min_size=n, max_size=n))
    xs = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    vs = draw(st.lists(st.one_of(st.sampled_from([0.0, 1.0, 2.0, 3.0, 5.0, 8.0]),
                                 st.just(float("nan")), st.none()),
                       min_size=n, max_size=n))
    ks = draw(st.lists(st.sampled_from([0, 1, None]), min_size=n, max_size=n))
    order = draw(st.permutations(list(range(n))))
    return pa.table({"p": pa.array(keys, pa.string()), "ts": pa.array(order, pa.int64()),
                     "x": pa.array(xs, pa.int64()), "v": pa.array(vs, pa.float64()),
                     "k": pa.array(ks, pa.int64())})


@st.composite
def cases(draw) -> tuple[str, pa.Table]:
    size = draw(st.integers(1, 4))
    names = draw(st.lists(st.sampled_from(["A", "B", "C"]), min_size=size, max_size=size))
    pattern = " ".join(v + draw(st.sampled_from(QUANTIFIERS)) for v in names)
    used = sorted(set(names))
    defines = [f"{v} AS " + draw(st.sampled_from(CONDITIONS)).format(v=v)
               for v in used if draw(st.booleans())]
    first, last = used[0], used[-1]
    measures = ["MATCH_NUMBER() AS mn", f"FIRST({first}.ts) AS f0", f"LAST({last}.ts) AS l0",
                f"FIRST({last}.v, 1) AS f1", f"LAST({first}.x, 2) AS l2",
                f"PREV(FIRST({first}.ts), 1) AS pf", f"NEXT(LAST({last}.v), 2) AS nl",
                "CLASSIFIER() AS cls", "FIRST(ts) AS fu", "LAST(x, 1) AS lu",
                "FIRST(U.ts, 1) AS fs", "LAST(U.x) AS ls", f"{first}.x * 2 + 1 AS e"]
    subset = ", ".join(used[:2])
    partition = draw(st.sampled_from(["PARTITION BY p", "PARTITION BY p", "",
                                      "PARTITION BY p, k"]))
    sql = (f"SELECT * FROM t MATCH_RECOGNIZE ({partition} ORDER BY ts MEASURES "
           f"{', '.join(measures)} ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
           f"PATTERN ({pattern}) SUBSET U = ({subset})"
           + (f" DEFINE {', '.join(defines)}" if defines else "") + ")")
    return sql, _table(draw)


def _both(sql: str, table: pa.Table) -> tuple[pa.Table, pa.Table]:
    fast = run_local(sql, {"t": table})
    with cepsql.planner_options(sequence_fast_path=False):
        general = run_local(sql, {"t": table})
    return fast, general


def _same(a: pa.Table, b: pa.Table) -> bool:
    """Equal schemas and values, NaN equal to NaN (and unlike NULL)."""
    def rows(t):
        return [{k: "NaN" if isinstance(v, float) and v != v else v for k, v in r.items()}
                for r in t.to_pylist()]
    return a.schema == b.schema and rows(a) == rows(b)


def _shape_of(sql: str, table: pa.Table):
    from cepsql.parse import find_match_recognize
    from cepsql.compile.clause import plan_query
    spec = find_match_recognize(sql)[0].spec
    from cepsql.exprs.arrow_eval import evaluate_arrow
    plan = plan_query(spec, table.schema, sql)
    prepared = table
    for name, expr in plan.prepare_columns:  # as execute_plan prepares them
        prepared = prepared.append_column(name, evaluate_arrow(expr, table))
    return sequence_shape(spec, bind_worker(plan, prepared.schema).worker)


@settings(**SETTINGS)
@given(cases())
def test_sequence_path_equals_general_vm(case):
    sql, table = case
    fast, general = _both(sql, table)
    assert _same(fast, general), sql


def test_generated_cases_take_the_fast_path():
    """The property above mostly exercises the fast path (not only the general VM)."""
    taken = 0
    examples = []

    @settings(deadline=None, max_examples=40, database=None)
    @given(cases())
    def collect(case):
        examples.append(case)
    collect()
    for sql, table in examples:
        taken += _shape_of(sql, table) is not None
    assert taken >= len(examples) // 2


@pytest.mark.parametrize("pattern, defines", [
    ("A B+ C", "B AS B.v > PREV(B.v), C AS C.v < PREV(C.v)"),
    ("A B* C+", "B AS B.x > 0, C AS C.x > 0"),  # overlapping conditions: backtracking
    ("A+ B+ C", "A AS A.x >= 0, B AS B.x >= 0, C AS C.x = 7"),  # long failing runs
    ("A{2,3} B? A", "A AS A.x % 3 <> 0"),
])
def test_known_shapes_equal_and_use_the_path(pattern, defines):
    rng = np.random.default_rng(7)
    n = 3000
    table = pa.table({"p": pa.array(rng.choice(["a", "b", "c"], n)),
                      "ts": pa.array(rng.permutation(n)),
                      "x": pa.array(rng.integers(0, 8, n)),
                      "v": pa.array(np.round(rng.normal(0, 1, n), 1))})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
           "MATCH_NUMBER() AS mn, FIRST(A.ts) AS a0, LAST(ts) AS z, CLASSIFIER() AS c "
           f"ONE ROW PER MATCH PATTERN ({pattern}) DEFINE {defines})")
    assert _shape_of(sql, table) is not None
    fast, general = _both(sql, table)
    assert _same(fast, general)


@pytest.mark.parametrize("pattern, extra", [
    ("A B+? C", ""),  # reluctant
    ("A (B | C)", ""),  # alternation
    ("A B* C*", "ALL ROWS PER MATCH"),
    ("A* B*", ""),  # may match empty
    ("A B+ C", "AFTER MATCH SKIP TO NEXT ROW"),
])
def test_other_shapes_stay_with_the_general_vm(pattern, extra):
    table = pa.table({"p": ["a"], "ts": [1], "x": [1], "v": [1.0]})
    rows = "" if "ROWS" in extra else "ONE ROW PER MATCH"
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
           f"FIRST(A.ts) AS a0 {rows} {extra} PATTERN ({pattern}) "
           "DEFINE B AS B.x > 0)")
    assert _shape_of(sql, table) is None


def test_define_reading_the_match_stays_with_the_general_vm():
    table = pa.table({"p": ["a"], "ts": [1], "x": [1], "v": [1.0]})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
           "FIRST(A.ts) AS a0 PATTERN (A B+) DEFINE B AS B.x > FIRST(A.x))")
    assert _shape_of(sql, table) is None


def test_pandas_in_pandas_out():
    df = pd.DataFrame({"p": ["a"] * 5, "ts": range(5), "v": [1.0, 2.0, 3.0, 1.0, 0.5]})
    out = cepsql.match_recognize(
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
        "FIRST(A.ts) AS s, LAST(C.ts) AS e, MATCH_NUMBER() AS mn PATTERN (A B+ C) "
        "DEFINE B AS B.v > PREV(B.v), C AS C.v < PREV(C.v))", t=df)
    assert out.to_dict("records") == [{"p": "a", "s": 0, "e": 3, "mn": 1}]


@settings(**SETTINGS)
@given(st.data())
def test_input_already_in_time_order_gives_the_sorted_result(data):
    """Input already in ORDER BY order (the sort is skipped, engine._in_input_order) gives
    what the same rows shuffled give; ties in ts (decided by the tie-breakers) included."""
    n = data.draw(st.integers(0, 50))
    ts = sorted(data.draw(st.lists(st.integers(0, 30), min_size=n, max_size=n)))
    keys = data.draw(st.lists(st.sampled_from(["a", "b", None]), min_size=n, max_size=n))
    xs = data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    table = pa.table({"p": pa.array(keys, pa.string()), "ts": pa.array(ts, pa.int64()),
                      "x": pa.array(xs, pa.int64())})
    shuffled = table.take(pa.array(data.draw(st.permutations(list(range(n)))), pa.int64()))
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
           "FIRST(A.x) AS a, LAST(B.ts) AS b, LAST(x) AS z, MATCH_NUMBER() AS mn "
           "PATTERN (A B+ C) DEFINE B AS B.x >= PREV(B.x), C AS C.x < PREV(C.x))")
    with cepsql.planner_options(threads=1):
        assert _same(run_local(sql, {"t": table}), run_local(sql, {"t": shuffled}))


@settings(**SETTINGS)
@given(cases())
def test_sequence_path_in_threads_equals_general_vm(monkeypatch, case):
    """Slices of a few partitions each on two threads (only the columns the path reads
    gathered) give the general VM's one-thread rows."""
    from cepsql.backends.local import threads as threads_module
    sql, table = case
    monkeypatch.setattr(threads_module, "MIN_SLICE_ROWS", 1)
    with cepsql.planner_options(threads=2):
        fast = run_local(sql, {"t": table})
    with cepsql.planner_options(threads=1, sequence_fast_path=False):
        assert _same(fast, run_local(sql, {"t": table})), sql
