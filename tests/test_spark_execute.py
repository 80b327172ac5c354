"""run_plan: prepare columns, co-locate and sort partitions, stream through the worker."""
import pyarrow as pa
from types import SimpleNamespace

from cepsql.backends.spark.execute import run_plan

TICKS = pa.table({
    "sym": ["a", "b", "a", "b", "a", None, "c"],
    "ts": pa.array([3, 1, 1, 2, 2, 5, None], pa.int32()),
    "price": [1.0, 2.0, 3.0, None, 5.0, 6.0, 7.0],
    # the fake worker checks that Spark's batches have exactly the schema given to bind()
    "at": pa.array([1, 2, 3, 4, 5, 6, None], pa.timestamp("us", tz="UTC")),
    "day": pa.array([1, 2, 3, 4, 5, 6, None], pa.date32()),
    "amount": pa.array([1, 2, 3, 4, 5, 6, None], pa.decimal128(10, 2)),
})


def _plan(fake_planner, body, schema):
    return fake_planner(SimpleNamespace(body=body, pos=0), schema, "")


def test_partitioned_run(spark, fake_planner):
    df = spark.createDataFrame(TICKS)
    out = run_plan(df, _plan(fake_planner, "PARTITION BY sym ORDER BY ts DOUBLE price", None))
    assert out.columns == ["sym", "ts", "price", "at", "day", "amount", "price2", "rn"]
    rows = sorted((r.sym or "", r.ts or 0, r.rn, r.price2) for r in out.collect())
    assert rows == [("", 5, 1, 12.0), ("a", 1, 1, 6.0), ("a", 2, 2, 10.0), ("a", 3, 3, 2.0),
                    ("b", 1, 1, 4.0), ("b", 2, 2, None), ("c", 0, 1, 14.0)]


def test_single_partition_descending(spark, fake_planner):
    df = spark.createDataFrame(TICKS)
    out = run_plan(df, _plan(fake_planner, "ORDER BY ts DESC", None))
    got = sorted((r.rn, r.ts) for r in out.collect())
    # descending, nulls last (the fake plan's SortColumn has nulls_first=False)
    assert got == [(1, 5), (2, 3), (3, 2), (4, 2), (5, 1), (6, 1), (7, None)]
