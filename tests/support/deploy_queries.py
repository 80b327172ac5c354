"""The core queries every deployment must answer alike (in-process session, Spark
Connect, local-cluster): a SQL:2016 clause, a CEP pattern, a pattern view read back with
cep_view, a cep_match table function, and a run-time error. Shared by
tests/test_spark_deployments.py and the driver script tests/_deploy_driver.py."""
from __future__ import annotations

TICKS = [("a", t, p) for t, p in enumerate([5, 3, 4, 6, 2, 7, 8, 1, 9, 4])] + \
        [("b", t, p) for t, p in enumerate([1, 2, 3, 2, 5, 4, 6, 0])]
TICKS_SCHEMA = "sym string, ts int, price int"

RISE = ("PARTITION BY sym ORDER BY ts MEASURES FIRST(A.price) AS low, LAST(B.price) AS high, "
        "MATCH_NUMBER() AS mn ONE ROW PER MATCH PATTERN (A B+) "
        "DEFINE B AS B.price > PREV(B.price)")

SETUP = [
    f"CREATE OR REPLACE TEMPORARY VIEW dep_rises AS SELECT * FROM dep_ticks "
    f"MATCH_RECOGNIZE ({RISE})",
]

QUERIES = {
    "sql2016": f"SELECT * FROM dep_ticks MATCH_RECOGNIZE ({RISE})",
    "cep": ("SELECT * FROM dep_ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
            "MEASURES a.ts AS ta, b.ts AS tb STRATEGY SKIP_TILL_ANY_MATCH "
            "PATTERN (SEQ(a, b)) WITHIN 3 ROWS DEFINE a AS a.price < 3, b AS b.price > 5)"),
    "pattern_view": "SELECT sym, low, high FROM cep_view('dep_rises') WHERE mn = 1",
    "table_function": ("SELECT * FROM cep_match(TABLE(dep_ticks) PARTITION BY sym ORDER BY ts, "
                       "'MEASURES FIRST(A.price) AS low, LAST(B.price) AS high "
                       "ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS B.price > PREV(B.price)')"),
}

# AFTER MATCH SKIP TO FIRST A with A on a match's first row: an error only found by running
FAILING = ("SELECT * FROM dep_ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
           "MEASURES A.price AS p ONE ROW PER MATCH AFTER MATCH SKIP TO FIRST A "
           "PATTERN (A B) DEFINE B AS B.price > A.price)")
FAILING_AT = FAILING.index("FIRST A ") + len("FIRST ")  # where the error points


def load(spark) -> None:
    spark.createDataFrame(TICKS, TICKS_SCHEMA).createOrReplaceTempView("dep_ticks")
    for stmt in SETUP:
        spark.cep.sql(stmt)


def canonical(df) -> dict:
    """Columns, Spark types and sorted rows, as JSON-friendly values."""
    rows = sorted([list(r) for r in df.collect()], key=repr)
    return {"columns": df.columns, "types": [f.dataType.simpleString() for f in df.schema],
            "rows": rows}


def run_all(spark) -> dict:
    """Every query's canonical result, and what the failing query raised on collect."""
    from cepsql import CepError
    load(spark)
    out = {name: canonical(spark.cep.sql(sql)) for name, sql in QUERIES.items()}
    try:
        spark.cep.sql(FAILING).collect()
        out["failing"] = {"raised": None}
    except CepError as err:
        out["failing"] = {"raised": type(err).__name__, "message": err.message,
                          "line": err.line, "col": err.col}
    return out


# --- a streaming clause (a JSON file source in two increments, the second with a late row)
STREAM_SQL = ("SELECT * FROM dep_stream MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
              "MEASURES FIRST(a.price) AS p0, LAST(b.price) AS p1, count(b.*) AS n "
              "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (a b+) "
              "WITHIN INTERVAL '3' SECOND DEFINE b AS b.price > PREV(b.price))")
STREAM_INCREMENTS = [
    [("a", 1, 3), ("a", 2, 4), ("a", 3, 5), ("a", 4, 2), ("a", 5, 6), ("b", 1, 1), ("b", 2, 3)],
    [("a", 9, 1), ("a", 7, 4), ("a", 8, 6), ("a", 2, 9), ("b", 3, 4), ("z", 30, 0)],  # a 2: late
]
STREAM_LATE = 1
LATE_WAIT_S = 60  # Spark Connect lists a micro-batch's late rows once its progress arrives


def run_stream(spark, folder: str) -> dict:
    """The streaming clause's rows, each increment run with availableNow from one
    checkpoint into a parquet sink, and the late rows ``spark.cep.late_rows()`` gained."""
    import json
    import os
    import time
    source, sink, checkpoint = (os.path.join(folder, n) for n in ("in", "out", "ck"))
    os.makedirs(source)
    before = sum(spark.cep.late_rows().values())
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")  # one state store: fast micro-batches
    try:
        spark.readStream.schema("sym string, ts timestamp, price double").json(source) \
            .withWatermark("ts", "2 seconds").createOrReplaceTempView("dep_stream")
        for i, rows in enumerate(STREAM_INCREMENTS):
            with open(os.path.join(source, f"part-{i}.json"), "w") as f:
                for sym, second, price in rows:
                    f.write(json.dumps({"sym": sym, "ts": f"2024-01-01 00:00:{second:02d}",
                                        "price": price}) + "\n")
            spark.cep.sql(STREAM_SQL).writeStream.format("parquet").option("path", sink) \
                .option("checkpointLocation", checkpoint).trigger(availableNow=True) \
                .start().awaitTermination()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    deadline = time.monotonic() + LATE_WAIT_S
    late = sum(spark.cep.late_rows().values()) - before
    while late < STREAM_LATE and time.monotonic() < deadline:
        time.sleep(0.2)
        late = sum(spark.cep.late_rows().values()) - before
    return {**canonical(spark.read.parquet(sink)), "late": late}


def statement_requests(spark, sql: str) -> dict:
    """The Spark Connect requests one ``spark.cep.sql`` call makes before its job:
    {config: conf requests, analyze: schema/analysis requests}."""
    client = spark.client
    counts = {"config": 0, "analyze": 0}

    def counted(kind, call):
        def wrapper(*args, **kwargs):
            counts[kind] += 1
            return call(*args, **kwargs)
        return wrapper
    client.config = counted("config", client.config)
    client._analyze = counted("analyze", client._analyze)
    try:
        df = spark.cep.sql(sql)  # the statement only: no action, no job
    finally:
        del client.config, client._analyze
    assert df is not None
    return counts
