"""spark.cep.sql with the real dialect and planner (one small query)."""
import pandas as pd
import pytest

QUERY = """SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY sym ORDER BY ts
  MEASURES FIRST(A.price) AS start_price, LAST(B.price) AS top, MATCH_NUMBER() AS mn
  PATTERN (A B+)
  DEFINE B AS B.price > PREV(B.price)
) AS m"""

TICKS = pd.DataFrame({"sym": ["a"] * 6 + ["b"] * 4, "ts": list(range(6)) + list(range(4)),
                      "price": [5, 4, 3, 4, 5, 6, 1, 2, 1, 2]})
EXPECTED = [("a", 3, 6, 1), ("b", 1, 2, 1), ("b", 1, 2, 2)]


def test_spark_and_local_agree(spark):
    import cepsql
    spark.createDataFrame(TICKS).createOrReplaceTempView("ticks")
    got = spark.cep.sql(f"SELECT sym, start_price, top, mn FROM ({QUERY}) ORDER BY sym, mn")
    assert [tuple(r) for r in got.collect()] == EXPECTED
    local = cepsql.match_recognize(QUERY, ticks=TICKS)
    assert sorted(local.itertuples(index=False, name=None)) == EXPECTED


COMPOSITE = """SELECT * FROM readings MATCH_RECOGNIZE (
  PARTITION BY tag ORDER BY ts
  MEASURES s.ts AS picked, FIRST(m.ts) AS first_move, count(m.*) AS moves, e.ts AS left_at
  STRATEGY SKIP_TILL_ANY_MATCH
  PATTERN (SEQ(s, NOT(SEQ(p, q)), KL(SEQ(m, n)), AND(NOT(f), e)))
  WITHIN 8 ROWS
  DEFINE s AS s.reader = 'shelf', p AS p.reader = 'pay', q AS q.reader = 'bag',
         m AS m.reader = 'aisle', n AS n.reader = 'cart', f AS f.reader = 'pay',
         e AS e.reader = 'exit'
)"""

READINGS = pd.DataFrame({
    "tag": ["t1"] * 8 + ["t2"] * 7,
    "ts": list(range(8)) + list(range(7)),
    "reader": ["shelf", "aisle", "cart", "aisle", "cart", "exit", "bag", "bag",
               "shelf", "pay", "bag", "aisle", "cart", "pay", "exit"]})


def test_spark_composite_not_and_kleene_match_the_reference(spark):
    # t1: one or two aisle/cart iterations, no pay+bag before them, no pay between the
    # last cart and the exit (the AND's slot); t2: pay then bag after the shelf blocks it,
    # and pay at 13 lies in the exit's slot
    from cepsql.parse import find_match_recognize
    from cepsql.reference.cep import evaluate_reference_cep
    import pyarrow as pa
    spark.createDataFrame(READINGS).createOrReplaceTempView("readings")
    got = sorted(tuple(r) for r in spark.cep.sql(COMPOSITE).collect())
    _, want = evaluate_reference_cep(find_match_recognize(COMPOSITE)[0].spec,
                                     pa.Table.from_pandas(READINGS, preserve_index=False))
    assert got == sorted(want)
    assert got == [("t1", 0, 1, 1, 5), ("t1", 0, 1, 1, 5), ("t1", 0, 1, 2, 5),
                   ("t1", 0, 3, 1, 5)]


@pytest.mark.parametrize("source, rows", [
    ("VALUES (1, 10), (2, 8), (3, 9) AS t(id, x)", [(10, 8)]),
    ("VALUES (1, 10), (2, 8), (3, 9) t(id, x)", [(10, 8)]),
    ("(SELECT id, 10 - id AS x FROM range(1, 4))", [(9, 8)]),
])
def test_table_expressions_as_clause_input(spark, source, rows):
    """An inline VALUES list with its alias column list, and a table function, are read
    as written (the alias list belongs to the input, not to a function call)."""
    out = spark.cep.sql(f"SELECT * FROM {source} MATCH_RECOGNIZE (ORDER BY id "
                        "MEASURES A.x AS top, B.x AS dip PATTERN (A B) DEFINE B AS B.x < A.x) m")
    assert [tuple(r) for r in out.collect()] == rows


def test_table_function_call_as_clause_input(spark):
    out = spark.cep.sql("SELECT * FROM range(4) MATCH_RECOGNIZE (ORDER BY id "
                        "MEASURES A.id AS a, B.id AS b PATTERN (A B) DEFINE B AS B.id > A.id) m")
    assert [tuple(r) for r in out.collect()] == [(0, 1), (2, 3)]
