"""The fixed cost of a small in-process call (issue 25 point 4): conversions and work the
in-process path skips must leave every row as it was."""
import pickle

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import cepsql
import cepsql._ext.matcher as matcher_module
import cepsql.backends.local.engine as engine_module
import cepsql.backends.local.threads as threads_module
import cepsql.runtime.worker as worker_module
from cepsql.backends.local.engine import to_arrow
from cepsql.backends.local.plan_cache import PLANS
from cepsql.backends.local.threads import KnownEncodings, partition_ranks
from cepsql.compile.query_plan import SortColumn
from cepsql.runtime.ordering import sort_indices
from test_define_aggregate_labels import assert_reference_rows

QUERY = """
SELECT * FROM t MATCH_RECOGNIZE (
  PARTITION BY k ORDER BY ts
  MEASURES MATCH_NUMBER() AS mn, FIRST(A.ts) AS s, LAST(B.ts) AS e
  ONE ROW PER MATCH
  PATTERN (A B+)
  DEFINE B AS B.v > PREV(B.v)
)
"""


def _frame() -> pd.DataFrame:
    return pd.DataFrame({
        "k": ["x", "y", None, "x", "y", None, "x", "y", None, "x"],
        "ts": list(range(10)),
        "v": [1.0, 2.0, 3.0, 2.0, 3.0, 4.0, 3.0, 1.0, 5.0, 4.0],
    })


def test_plain_frames_convert_as_from_pandas_does():
    frame = pd.DataFrame({
        "s": ["a", None, "c"], "i": pd.array([1, None, 3], dtype="Int64"),
        "f": [1.5, np.nan, 3.0], "b": [True, False, True],
        "c": pd.Categorical(["u", "v", "u"]),
        "tz": pd.to_datetime(["2024-01-01", "2024-01-02", None]).tz_localize("UTC"),
        "ns": pd.to_datetime(["2024-01-01", "2024-01-02", "2024-01-03"]),
        "o": [b"x", None, b"z"],
        "i8": np.array([1, -2, 3], np.int8), "u": np.array([1, 2, 3], np.uint32),
        "f4": np.array([1.5, np.nan, -0.0], np.float32), "g": [0.5, -0.0, np.inf],
        "s_unit": pd.to_datetime(["2024-01-01", None, "2024-01-03"]).astype("datetime64[s]"),
        "td": pd.to_timedelta([1, None, 3], unit="ms"),
    }, index=[10, 20, 30])
    for df in (frame, frame.iloc[1:], frame.rename(columns={"s": 1})):
        want = pa.Table.from_pandas(df, preserve_index=False).replace_schema_metadata(None)
        got = to_arrow(df)
        assert got.schema.equals(want.schema) and got.equals(want)


@pytest.mark.parametrize("values", [
    ["b", "a", "b", "c"],            # strings only: factorized
    ["b", None, "a", np.nan],        # missing values: pa.array decides
    ["b", 1, "a"],                   # another type: pa.array decides (it refuses)
    ["\u00e9", "e", "\u00e9"],
])
def test_string_columns_factorized_on_the_way_convert_as_from_pandas_does(values):
    frame = pd.DataFrame({"s": pd.Series(values, dtype=object), "i": range(len(values))})
    try:
        want = pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(None)
    except (pa.ArrowException, TypeError, ValueError) as err:
        with pytest.raises(type(err)):
            to_arrow(frame, KnownEncodings(["S"]))
        return
    encodings = KnownEncodings(["s"])
    got = to_arrow(frame, encodings)
    assert got.schema.equals(want.schema) and got.equals(want)
    known = encodings.get(got.column("s"))
    assert (known is not None) == all(isinstance(v, str) for v in values)
    others = KnownEncodings(["i"])  # only the columns named (PARTITION BY keys)
    assert others.get(to_arrow(frame, others).column("s")) is None
    for ascending in (True, False):
        key = SortColumn("s", ascending, True)
        assert np.array_equal(partition_ranks(got, key, encodings=encodings),
                              partition_ranks(got, key))


def test_string_partition_keys_are_encoded_once(monkeypatch):
    """pandas' factorize encodes the string PARTITION BY column on its way to Arrow;
    partition_ranks uses that encoding instead of hashing the column again."""
    frame = _frame().fillna({"k": "z"})
    want = cepsql.match_recognize(QUERY, t=frame)
    assert len(want) > 0

    def refuse(col):
        raise AssertionError("the partition column encoded again")
    monkeypatch.setattr(threads_module, "_encode", refuse)
    pd.testing.assert_frame_equal(cepsql.match_recognize(QUERY, t=frame), want)


def test_an_input_in_time_order_is_checked_once_not_per_slice(monkeypatch):
    """ORDER BY ts rising over the whole input: every partition is in order, found once
    on the contiguous column; an input in order per partition only is still checked
    slice by slice and gives the same rows."""
    frame = _frame().fillna({"k": "z"})
    want = cepsql.match_recognize(QUERY, t=frame)
    shuffled = frame.iloc[[1, 0, 2, 4, 3, 5, 7, 6, 8, 9]]  # each key's rows still in ts order

    def refuse(*args):
        raise AssertionError("slice order checked again")
    with monkeypatch.context() as patch:
        patch.setattr(engine_module, "_in_input_order", refuse)
        with cepsql.planner_options(sequence_fast_path=False):
            pd.testing.assert_frame_equal(cepsql.match_recognize(QUERY, t=frame), want)
    with cepsql.planner_options(sequence_fast_path=False):
        pd.testing.assert_frame_equal(cepsql.match_recognize(QUERY, t=shuffled), want)


def test_duplicate_column_names_are_still_refused():
    with pytest.raises(ValueError):
        to_arrow(pd.DataFrame([[1, 2]], columns=["a", "a"]))


def test_partition_keys_are_not_compared_again_after_ranking(monkeypatch):
    """The ranks the rows were grouped by tell the worker where its groups change."""
    want = cepsql.match_recognize(QUERY, t=_frame())
    assert len(want) > 0

    def refuse(col):
        raise AssertionError("partition keys compared again")
    monkeypatch.setattr(worker_module, "row_changes", refuse)
    with cepsql.planner_options(sequence_fast_path=False):
        got = cepsql.match_recognize(QUERY, t=_frame())
    pd.testing.assert_frame_equal(got, want)


@pytest.mark.parametrize("column", [
    pa.array(["b", None, "a", "\u00e9", "e", "b", None, ""]),
    pa.array(["b", None, "a", "e", "b"], pa.large_string()),
    pa.array([3, None, -1, 7, 3, -1], pa.int64()),
    pa.array([True, None, False, True]),
    pa.array([19000, None, 18000, 19000], pa.date32()),
    pa.array([5, 1, None, 5], pa.timestamp("us", "UTC")),
])
def test_partition_ranks_follow_spark_order(column):
    """The ranks order the partitions as runtime.ordering.sort_indices orders the keys
    (strings by their bytes, NULL first or last as the key says), for every key type
    partition_ranks ranks."""
    table = pa.table({"k": column})
    for ascending in (True, False):
        for nulls_first in (True, False):
            key = SortColumn("k", ascending, nulls_first)
            ranks = partition_ranks(table, key)
            want = sort_indices(table, [key]).to_numpy()
            assert np.array_equal(np.argsort(ranks, kind="stable"), want)


def test_a_cached_plan_builds_its_matcher_spec_once(monkeypatch):
    """The worker of a cached plan derives its matcher's SqlSpec once (shared by the
    copies each run makes) and gives the same rows; a pickled worker (Spark tasks)
    derives it afresh."""
    PLANS.clear()
    built = []
    real = matcher_module.SqlSpec

    def counting(**kwargs):
        built.append(1)
        return real(**kwargs)
    monkeypatch.setattr(matcher_module, "SqlSpec", counting)
    with cepsql.planner_options(sequence_fast_path=False):
        first = cepsql.match_recognize(QUERY, t=_frame())
        assert len(built) == 1
        second = cepsql.match_recognize(QUERY, t=_frame())
    assert len(built) == 1 and len(first) > 0
    pd.testing.assert_frame_equal(first, second)
    (entry,) = PLANS._entries.values()
    worker = pickle.loads(pickle.dumps(entry.binding[1].worker))
    assert "_derived" not in worker.__dict__
    worker._new_matcher()
    assert len(built) == 2


SHARED = pa.table({
    "ts": list(range(1, 41)),
    "price": [float((i * 7) % 11) if i % 9 else None for i in range(40)],
    "d": pa.array([None if i % 13 == 5 else (i * 37) % 23 for i in range(40)],
                  pa.decimal128(6, 2)),
})


@pytest.mark.parametrize("define", [
    "B AS B.price >= AVG(B.price), C AS C.price < AVG(B.price)",
    "B AS B.price >= AVG(B.price) AND SUM(B.d) < 90, C AS C.price < AVG(B.price) "
    "OR SUM(B.d) > 40",
    "B AS AVG(B.price) > 3 AND AVG(price) > 2, C AS AVG(price) < AVG(B.price) + 1",
    "B AS count(B.price) < 4 AND count(B.*) < 5, C AS count(B.price) >= 1",
    "B AS max(B.price) - min(B.price) < 6, C AS max(B.price) > C.price",
])
@pytest.mark.parametrize("pattern", ["(A B+? C+?)", "(A B+ C)", "((A | B)+ C)"])
def test_identical_define_aggregates_share_one_state_and_equal_the_reference(define,
                                                                             pattern):
    """The matcher gives identical DEFINE aggregates one state slot (stepped once per
    row taken): the rows stay the reference evaluator's."""
    sql = f"""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts
        MEASURES FIRST(ts) AS f, LAST(ts) AS l, AVG(B.price) AS ab, SUM(B.d) AS sd
        ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN {pattern}
        DEFINE {define})"""
    assert_reference_rows(sql, SHARED, cep=False)


def test_the_order_checks_read_timestamps_as_their_values():
    """The in-order check and the tie check compare timestamps as int64 (numpy reads the
    valid Arrow value INT64_MIN as NaT, which compares false with everything: the input
    below would pass as in order, and two equal rows as no tie)."""
    low = -(2 ** 63)
    table = pa.table({"__cep_prank": pa.array([0, 0, 0], pa.int32()),
                      "ts": pa.array([0, low, 5], pa.timestamp("us"))})
    keys = [SortColumn("__cep_prank", True, True), SortColumn("ts", True, True)]

    class Plan:
        primary_sort_keys = 2
    assert not engine_module._ascending_throughout(table, keys, Plan())
    assert engine_module._ascending_throughout(table.take([1, 0, 2]), keys, Plan())
    ties = pa.table({"ts": pa.array([low, low], pa.timestamp("us"))})
    assert engine_module._has_ties(ties, ["ts"])
