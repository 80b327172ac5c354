"""backends/spark/local_pass.py: a small pass's tagged rows on the driver, cut into each
clause's frame -- the same rows, order and schema as Spark's filter by tag and
projection over the same rows (the frames of the persisted pass)."""
from __future__ import annotations

import decimal

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from cepsql.algebra.expressions import BinaryOp, ColumnRef, Literal
from cepsql.backends.spark.local_pass import LocalPass
from cepsql.runtime.one_pass import TAG

ROW = pa.struct([("a", pa.int64()), ("b", pa.decimal128(38, 10)), ("c", pa.string())])


def _tagged() -> pa.Table:
    tags = [2, 0, 2, 1, 2, 0]
    rows = [{"a": i * 10 ** 17, "b": decimal.Decimal(f"{i}.0000000001"), "c": f"r{i}"}
            for i in range(len(tags))]
    other = pa.array([None if t == 1 else {"a": 1, "b": None, "c": None} for t in tags], ROW)
    mine = pa.array([r if t != 1 else None for t, r in zip(tags, rows)], ROW)
    return pa.table({TAG: pa.array(tags, pa.int32()), "s0": mine, "s1": other})


def _over_spark(spark, table, schema, index, column, projection):
    """The frame as Spark builds it from one relation of every tag's rows (Columns: SQL
    text would lose a ``${...}`` in a name to Spark's variable substitution)."""
    rows = spark.createDataFrame(table, schema).filter(F.col(TAG) == index).select(f"{column}.*")
    return rows.select(*[(F.col(e.column) if isinstance(e, ColumnRef) else F.expr(e.sql)).alias(n)
                         for n, e in projection])


class _Sql:
    """A projection item given as Spark SQL for the reference frame."""

    def __init__(self, expr, sql):
        self.expr, self.sql = expr, sql


def test_each_clause_frame_is_its_own_rows_as_spark_selects_them(spark):
    table = _tagged()
    schema = from_arrow_schema(table.schema)
    local = LocalPass(spark, table, schema, TAG)
    assert list(local.rows(2)) == [0, 2, 4] and list(local.rows(5)) == []
    renamed = [("x", ColumnRef(None, "a")), ("y", ColumnRef(None, "b")),
               ("x2", ColumnRef(None, "a"))]
    for index in (0, 1, 2, 7):  # 7: no rows at all
        got = local.frame(index, "s0", renamed)
        want = _over_spark(spark, table, schema, index, "s0", renamed)
        assert got.schema == want.schema
        assert got.collect() == want.collect()
    plus = _Sql(BinaryOp("+", ColumnRef(None, "a"), Literal(1, "int")), "a + 1")
    # a name with ${...}: the projection is built with Columns (its SQL text would lose it)
    computed = [("n", plus), ("${odd} name", ColumnRef(None, "c"))]
    for items in (computed, computed[:1]):  # Columns, then one selectExpr
        got = local.frame(2, "s0", [(n, getattr(e, "expr", e)) for n, e in items])
        want = _over_spark(spark, table, schema, 2, "s0", items)
        assert got.schema == want.schema
        assert got.collect() == want.collect() != []
