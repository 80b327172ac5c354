"""Helpers shared by the DEFINE aggregate tests that compare cepsql's running values
with Spark's window functions over the same rows."""
from __future__ import annotations

from typing import Iterator

RUNNING = "OVER (PARTITION BY k ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"


def running_window_view(spark, rows, schema: str, exprs: list[str],
                        name: str) -> Iterator[tuple[str, object]]:
    """Temp view ``name`` of rows plus e<i> = exprs[i] with ``{w}`` the running window;
    yields (view, its rows as Arrow ordered by k, id) and drops what it made."""
    raw = f"{name}_raw"
    spark.createDataFrame(rows, schema).createOrReplaceTempView(raw)
    cols = ", ".join(f"{e.format(w=RUNNING)} AS e{i}" for i, e in enumerate(exprs))
    spark.sql(f"SELECT *, {cols} FROM {raw}").createOrReplaceTempView(name)
    try:
        yield name, spark.sql(f"SELECT * FROM {name} ORDER BY k, id").toArrow()
    finally:
        spark.catalog.dropTempView(name)
        spark.catalog.dropTempView(raw)


def longest_from_first_row(rows) -> dict[int, int]:
    """Per partition k: the longest match count c among matches starting at row 1."""
    out: dict[int, int] = {}
    for k, s, c in rows:
        if s == 1:
            out[int(k)] = max(out.get(int(k), 0), int(c))
    return out
