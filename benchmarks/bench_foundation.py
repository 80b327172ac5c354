"""Foundation benchmark: what does MATCH_RECOGNIZE cost on Spark beyond the data movement
it cannot avoid, and how fast is the in-process evaluator?

Spark part (same session, same cached input, same forcing of execution):
  1. pass-through: repartition by symbol, sort within partitions by (symbol, ts) and a
     mapInArrow that returns one tiny batch per input batch. This is the floor for any
     engine that ships sorted partitions to Python as Arrow batches.
  2. cepsql: spark.cep.sql(<A B+ C query>) on the same input.
Both are forced with the ``noop`` write format (runs the whole plan, writes nothing);
each is repeated and the best time is kept. The ratio cepsql / pass-through is the
overhead of parsing, planning and evaluating the pattern.

Local part: the same query through cepsql.match_recognize on a pandas DataFrame.

    python benchmarks/bench_foundation.py [--rows 2000000] [--local-rows 1000000] [--skip-spark]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import cepsql  # noqa: E402  (attaches spark.cep)
from cepsql.datagen import generate_ticks, ticks_to_pandas  # noqa: E402
from cepsql.runtime.workers import bind_worker  # noqa: E402

QUERY = """
SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol
  ORDER BY ts
  MEASURES MATCH_NUMBER() AS match_num, FIRST(A.ts) AS start_ts, LAST(C.ts) AS end_ts,
           A.price AS start_price, LAST(B.price) AS top_price, C.price AS drop_price
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C)
  DEFINE B AS B.price > PREV(B.price),
         C AS C.price < PREV(C.price)
) m
"""

_TINY = pa.schema([("n", pa.int64())])


def _one_row_per_batch(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Touch every input batch, return almost nothing: the cost is the data movement."""
    for batch in batches:
        yield pa.RecordBatch.from_arrays([pa.array([batch.num_rows], pa.int64())], schema=_TINY)


def best_of(repeat: int, run: Callable[[], object]) -> float:
    """Best wall time of repeat runs (the least disturbed by the machine)."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def _force(df) -> None:
    df.write.format("noop").mode("overwrite").save()


def _row(step: str, seconds: float | None, rows: int | None, note: str = "") -> str:
    if seconds is None:
        return f"{step:<44} {'-':>9} {'-':>14}  {note}"
    rate = f"{rows / seconds:,.0f}" if rows and seconds > 0 else "-"
    return f"{step:<44} {seconds:>9.3f} {rate:>14}  {note}"


def bench_spark(n_rows: int, repeat: int, master: str | None, conf: dict[str, str]) -> list[str]:
    """The Spark rows of the report."""
    spark = cepsql.get_session(master=master, conf={"spark.ui.showConsoleProgress": "false", **conf})
    lines = [f"Spark {spark.version}, master {spark.sparkContext.master}, "
             f"default parallelism {spark.sparkContext.defaultParallelism}, "
             f"shuffle partitions {spark.conf.get('spark.sql.shuffle.partitions')}"]
    spark.range(100_000).selectExpr("sum(id)").collect()  # JVM warm-up, not measured
    with tempfile.TemporaryDirectory(prefix="cepsql-bench-") as tmp:
        started = time.perf_counter()
        table = generate_ticks(n_rows)
        gen_s = time.perf_counter() - started
        # Parquet, not createDataFrame: the load is a plain columnar scan, as in production,
        # and much faster than shipping 2M rows through the Python -> JVM Arrow path.
        path = os.path.join(tmp, "ticks.parquet")
        pq.write_table(table, path)
        started = time.perf_counter()
        ticks = spark.read.parquet(path).cache()
        ticks.count()
        load_s = time.perf_counter() - started
        ticks.createOrReplaceTempView("ticks")

        passthrough = (ticks.repartition("symbol")
                       .sortWithinPartitions("symbol", "ts")
                       .mapInArrow(_one_row_per_batch, "n long"))
        pass_s = best_of(repeat, lambda: _force(passthrough))
        cep_s = best_of(repeat, lambda: _force(spark.cep.sql(QUERY)))
        matches = spark.cep.sql(QUERY).count()
        ticks.unpersist()

    lines += [
        _row("generate ticks (numpy)", gen_s, n_rows),
        _row("load parquet + cache + count", load_s, n_rows),
        _row("pass-through: shuffle+sort+mapInArrow", pass_s, n_rows, f"best of {repeat}"),
        _row("cepsql.sql: A B+ C", cep_s, n_rows, f"best of {repeat}, {matches:,} matches"),
        f"{'ratio cepsql / pass-through':<44} {cep_s / pass_s:>9.2f}",
    ]
    return lines


def bench_local(n_rows: int, repeat: int) -> list[str]:
    """The in-process rows of the report."""
    df = ticks_to_pandas(generate_ticks(n_rows))
    result = {}

    def run() -> None:
        result["out"] = cepsql.match_recognize(QUERY, ticks=df)

    seconds = best_of(repeat, run)
    rows = [_row("cepsql.match_recognize: A B+ C (local)", seconds, n_rows,
                 f"best of {repeat}, {len(result['out']):,} matches")]
    worker_s, matches = bench_evaluator(generate_ticks(n_rows), repeat)
    rows.append(_row("evaluator only (sorted batches -> matches)", worker_s, n_rows,
                     f"best of {repeat}, {matches:,} matches, one core"))
    return rows


def bench_evaluator(table: pa.Table, repeat: int) -> tuple[float, int]:
    """The Cython matcher alone: the same plan over already prepared and sorted batches
    (what each Spark task does after the shuffle), without parsing, sorting or pandas."""
    from cepsql.parse import find_match_recognize
    from cepsql.exprs.arrow_eval import evaluate_arrow
    from cepsql.runtime.ordering import sort_table
    from cepsql.compile.clause import plan_query
    spec = find_match_recognize(QUERY)[0].spec
    plan = plan_query(spec, table.schema, QUERY)
    for name, expr in plan.prepare_columns:
        table = table.append_column(name, evaluate_arrow(expr, table))
    bound = bind_worker(plan, table.schema)
    batches = sort_table(table, plan.sort_keys).combine_chunks().to_batches(10_000)
    out = {}

    def run() -> None:
        out["n"] = sum(b.num_rows for b in bound.worker(iter(batches)))

    return best_of(repeat, run), out["n"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000, help="ticks for the Spark part")
    parser.add_argument("--local-rows", type=int, default=1_000_000, help="ticks for the local part")
    parser.add_argument("--skip-spark", action="store_true", help="run only the local part")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (best kept)")
    parser.add_argument("--master", default=None, help="Spark master (default local[*])")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark configuration (repeatable)")
    args = parser.parse_args(argv)
    conf = dict(item.split("=", 1) for item in args.conf)

    print(f"cepsql foundation benchmark: 20 symbols, {os.cpu_count()} CPUs, "
          f"Python {sys.version.split()[0]}")
    print(f"{'step':<44} {'best s':>9} {'events/s':>14}  note")
    print("-" * 90)
    if not args.skip_spark:
        from cepsql.backends.spark.environment import require_java
        require_java()
        header, *rows = bench_spark(args.rows, args.repeat, args.master, conf)
        print(f"[{header}]")
        print("\n".join(rows))
    if args.local_rows > 0:
        print("\n".join(bench_local(args.local_rows, args.repeat)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
