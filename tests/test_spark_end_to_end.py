"""spark.cep.sql with the real dialect and planner (one small query)."""
import pandas as pd

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
