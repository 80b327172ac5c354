"""The ``cepsql`` command line: a spark-sql-like shell that understands MATCH_RECOGNIZE,
and a demo that runs the shipped examples over generated streams (stock ticks, RFID
readings, shipments).

    cepsql demo [--rows N] [--stream] [--master M] [--conf k=v ...]
    cepsql sql  [-e "<statements>" | -f file.sql] [--master M] [--conf k=v ...] [--no-header]
    cepsql trace (-e "<query>" | -f file.sql) [--table name=file ...] [--partition c=v ...]
                 [--rows FIRST:STOP] [--near-misses K]
    cepsql --version

``cepsql trace`` runs in-process (no JVM): the matcher's steps of the query's clause on a
slice, or its near misses, as an aligned table (docs/debugging.md).

Why a separate CLI: Spark's own ``spark-sql`` parses statements itself and rejects the
MATCH_RECOGNIZE clause; this one splits the script with cepsql's dialect-aware splitter
and runs every statement through ``spark.cep.sql``.

Output of ``cepsql sql``: like spark-sql, tab-separated rows on stdout (preceded by a
tab-separated header line unless --no-header; NULL for nulls), and
"Time taken: ..., Fetched N row(s)" on stderr. Errors go to stderr as
``Error: <message> (line L, column C)`` followed by the offending line of the script and
a caret; line and column count from the start of the -e text or the -f file. In -e/-f
mode the first error stops the script (exit 1); at the interactive prompt it does not.
Exit codes: 0 success, 1 a statement failed, 2 bad usage or missing Java.
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from cepsql.errors import CepEnvironmentError, CepError, position_of
from cepsql.datagen import generate_rfid, generate_shipments, generate_ticks
from cepsql.parse import split_statements
from cepsql.backends.spark.environment import require_java
from cepsql.backends.streaming.demo import run_stream_demo
from cepsql.debugging.local import near_misses, trace

PROMPT = "cepsql> "
CONTINUATION = "      > "
DEMO_ROWS = 200_000
SHOW_ROWS = 20


# --------------------------------------------------------------------------- arguments

def _conf_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value.strip()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (separate so docs and tests can inspect it)."""
    parser = argparse.ArgumentParser(
        prog="cepsql",
        description="SQL:2016 MATCH_RECOGNIZE and complex event processing on Apache Spark.",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="{demo,sql,trace}")

    spark_opts = argparse.ArgumentParser(add_help=False)
    spark_opts.add_argument("--master", default=None,
                            help="Spark master URL (default: a local session on all cores)")
    spark_opts.add_argument("--conf", action="append", type=_conf_pair, default=[],
                            metavar="KEY=VALUE", help="Spark configuration (repeatable)")

    demo = sub.add_parser("demo", parents=[spark_opts],
                          help="run the shipped example queries over generated event streams")
    demo.add_argument("--rows", type=int, default=DEMO_ROWS,
                      help=f"number of generated ticks (default {DEMO_ROWS})")
    demo.add_argument("--stream", action="store_true",
                      help="stream the ticks (file source, one file per micro-batch) and "
                           "print matches as they arrive")

    sql = sub.add_parser("sql", parents=[spark_opts],
                         help="run SQL statements (-e, -f, or an interactive prompt)")
    source = sql.add_mutually_exclusive_group()
    source.add_argument("-e", dest="execute", metavar="SQL", help="statements to run")
    source.add_argument("-f", dest="file", metavar="FILE", help="a .sql file to run")
    sql.add_argument("--no-header", action="store_true",
                     help="do not print the column names before the rows")
    _trace_parser(sub)
    return parser


def _trace_parser(sub) -> None:
    trace = sub.add_parser(
        "trace", help="print the matcher's steps (or the near misses) of a query on a slice, "
                      "in-process; tables from files or the demo data")
    source = trace.add_mutually_exclusive_group(required=True)
    source.add_argument("-e", dest="execute", metavar="SQL", help="the query")
    source.add_argument("-f", dest="file", metavar="FILE", help="a .sql file with the query")
    trace.add_argument("--table", action="append", type=_conf_pair, default=[],
                       metavar="NAME=FILE", help="a table from a .csv or .parquet file "
                       "(repeatable; default: the demo tables ticks, rfid, shipments)")
    trace.add_argument("--demo-rows", type=int, default=2_000,
                       help="rows of each generated demo table (default 2000)")
    trace.add_argument("--partition", action="append", type=_conf_pair, default=[],
                       metavar="COLUMN=VALUE", help="the PARTITION BY value to trace "
                       "(repeatable; numbers are read as numbers)")
    trace.add_argument("--rows", metavar="FIRST:STOP", default=None,
                       help="positions after ORDER BY, as a Python slice (e.g. 0:50)")
    trace.add_argument("--near-misses", type=int, metavar="K", default=None,
                       help="print the K longest attempts that did not complete instead")


# --------------------------------------------------------------------------- session

def _version() -> str:
    try:
        from importlib.metadata import version
        return version("cepsql")
    except Exception:  # not installed: running from a source tree
        import cepsql
        return getattr(cepsql, "__version__", "unknown")


def get_spark(master: str | None, conf: dict[str, str]) -> tuple[Any, bool]:
    """The SparkSession to use and whether this call created it.

    An active session (a notebook, the test suite) is reused so no second JVM starts;
    otherwise Java is checked first so a missing JDK is a clear message, not a
    Py4J traceback.
    """
    import cepsql  # noqa: F401  (attaches spark.cep)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        for key, value in conf.items():
            try:
                active.conf.set(key, value)
            except Exception:
                _err(f"Warning: cannot set {key} on the running session; ignored")
        return active, False
    require_java()
    # a progress bar would interleave with the results; the user's --conf still wins
    conf = {"spark.ui.showConsoleProgress": "false", **conf}
    return cepsql.get_session(master=master, conf=conf), True


# --------------------------------------------------------------------------- output

def _out(text: str = "") -> None:
    print(text, file=sys.stdout, flush=True)


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def format_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], max_width: int = 30) -> str:
    """An aligned text table like DataFrame.show(), cells cut at max_width."""
    def cut(s: str) -> str:
        return s if len(s) <= max_width else s[: max_width - 3] + "..."

    body = [[cut(_cell(v)) for v in row] for row in rows]
    head = [cut(c) for c in columns]
    widths = [max([len(head[i])] + [len(r[i]) for r in body]) for i in range(len(head))]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths)) + " |"

    return "\n".join([rule, line(head), rule] + [line(r) for r in body] + [rule])


def report_error(err: CepError, script: str, stmt: str, offset: int) -> None:
    """Print err to stderr located in the whole script (not just its statement).

    The engine reports positions inside the text it was given (the statement, or a
    part of it); the statement starts at ``offset`` of the script.
    """
    location = _script_position(err, script, stmt, offset)
    if location is None:
        _err(f"Error: {err}")
        snippet = err.caret_snippet()
        if snippet:
            _err(snippet)
        return
    line, col = location
    _err(f"Error: {err.message} (line {line}, column {col})")
    lines = script.splitlines() or [""]
    text = lines[min(line, len(lines)) - 1]
    _err(f"{text}\n{' ' * (col - 1)}^")


def _script_position(err: CepError, script: str, stmt: str, offset: int) -> tuple[int, int] | None:
    if err.line is None:
        return None
    if script[offset:offset + len(stmt)] != stmt:  # splitter normalized the text: find it
        found = script.find(stmt)
        if found < 0:
            return None
        offset = found
    inner = err.sql if err.sql is not None else stmt
    start = stmt.find(inner)
    if start < 0:
        return None
    if err.pos is not None:
        rel = err.pos
    else:  # line/col inside `inner` -> character offset
        inner_lines = inner.split("\n")
        rel = sum(len(x) + 1 for x in inner_lines[: err.line - 1]) + (err.col or 1) - 1
    return position_of(script, offset + start + min(rel, len(inner)))


_COMMENTS = re.compile(r"--[^\n]*|/\*.*?\*/", re.S)


def _is_blank(stmt: str) -> bool:
    """True for a chunk holding only comments, whitespace and semicolons."""
    return not _COMMENTS.sub("", stmt).strip().strip(";").strip()


def _result(df: Any) -> tuple[list[str], list[tuple]]:
    columns = list(df.columns)
    if not columns:
        return [], []
    return columns, [tuple(r) for r in df.collect()]


# --------------------------------------------------------------------------- sql

def _run_statement(spark: Any, stmt: str, header: bool) -> None:
    started = time.perf_counter()
    df = spark.cep.sql(stmt)
    columns, rows = _result(df)
    if columns:
        if header:
            _out("\t".join(columns))
        for row in rows:
            _out("\t".join(_cell(v) for v in row))
    elapsed = time.perf_counter() - started
    _err(f"Time taken: {elapsed:.3f} seconds, Fetched {len(rows)} row(s)")


def _spark_error_types() -> tuple[type, ...]:
    types: list[type] = []
    try:
        from pyspark.errors import PySparkException
        types.append(PySparkException)
    except ImportError:
        pass
    try:
        from py4j.protocol import Py4JError
        types.append(Py4JError)
    except ImportError:
        pass
    return tuple(types)


def run_script(spark: Any, script: str, header: bool = True) -> int:
    """Run every statement of script; stop at the first error. Returns the exit code."""
    try:
        statements = split_statements(script)
    except CepError as err:
        report_error(err, script, script, 0)
        return 1
    spark_errors = _spark_error_types()
    for stmt, offset in statements:
        if _is_blank(stmt):
            continue
        try:
            _run_statement(spark, stmt, header)
        except CepError as err:
            report_error(err, script, stmt, offset)
            return 1
        except spark_errors as err:
            _err(f"Error: {_first_lines(err)}")
            return 1
    return 0


def _first_lines(err: BaseException, limit: int = 6) -> str:
    """Spark messages can carry JVM stack traces; keep the head."""
    lines = str(err).strip().splitlines()
    return "\n".join(lines[:limit]) + ("\n..." if len(lines) > limit else "")


def interactive(spark: Any, header: bool = True) -> int:
    """A prompt that collects lines until a statement ends with ';' and runs it.

    ``quit;``, ``exit;`` or end of input leave; errors are printed and the prompt goes on.
    """
    buffer: list[str] = []
    prompts = sys.stdin.isatty()  # like spark-sql: no prompts echoed into piped output
    while True:
        try:
            line = input((CONTINUATION if buffer else PROMPT) if prompts else "")
        except EOFError:
            if prompts:
                _out()
            return 0
        except KeyboardInterrupt:
            _out()
            buffer = []
            continue
        if not buffer and line.strip().lower().rstrip(";").strip() in ("quit", "exit"):
            return 0
        buffer.append(line)
        text = "\n".join(buffer)
        if _is_blank(text):
            buffer = []
            continue
        if not (text.rstrip().endswith(";") or _COMMENTS.sub("", text).rstrip().endswith(";")):
            continue
        buffer = []
        try:
            statements = split_statements(text)
        except CepError as err:
            report_error(err, text, text, 0)
            continue
        for stmt, offset in statements:
            if _is_blank(stmt):
                continue
            if stmt.strip().rstrip(";").strip().lower() in ("quit", "exit"):
                return 0
            try:
                _run_statement(spark, stmt, header)
            except CepError as err:
                report_error(err, text, stmt, offset)
            except KeyboardInterrupt:
                spark.sparkContext.cancelAllJobs()
                _err("Interrupted.")
                break
            except Exception as err:  # the prompt survives anything a statement does
                _err(f"Error: {_first_lines(err)}")


def _cmd_sql(args: argparse.Namespace) -> int:
    if args.file is not None:
        try:
            with open(args.file, encoding="utf-8") as fh:
                script = fh.read()
        except OSError as err:
            _err(f"Error: cannot read {args.file}: {err.strerror}")
            return 2
    else:
        script = args.execute
    spark, created = get_spark(args.master, dict(args.conf))
    try:
        if script is None:
            return interactive(spark, header=not args.no_header)
        return run_script(spark, script, header=not args.no_header)
    finally:
        if created:
            spark.stop()


# --------------------------------------------------------------------------- trace

def _cmd_trace(args: argparse.Namespace) -> int:
    """``cepsql trace``: the trace or near misses of one query, as a text table."""
    query = args.execute
    if args.file is not None:
        try:
            with open(args.file, encoding="utf-8") as fh:
                query = fh.read()
        except OSError as err:
            _err(f"Error: cannot read {args.file}: {err.strerror}")
            return 2
    try:
        rows = _row_range(args.rows)
        tables = _trace_tables(args)
    except ValueError as err:
        _err(f"Error: {err}")
        return 2
    partition = {k: _number_or_text(v) for k, v in args.partition}
    try:
        if args.near_misses is not None:
            frame = near_misses(query, args.near_misses, partition=partition or None,
                                rows=rows, **tables)
        else:
            frame = trace(query, partition=partition or None, rows=rows, **tables)
    except CepError as err:
        report_error(err, query, query, 0)
        return 1
    _out(format_table(list(frame.columns), frame.astype(object).where(frame.notna(), None)
                      .itertuples(index=False), max_width=60))
    return 0


def _row_range(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    first, _, stop = text.partition(":")
    try:
        return int(first or 0), int(stop)
    except ValueError:
        raise ValueError(f"--rows {text}: give FIRST:STOP, two row positions") from None


def _trace_tables(args: argparse.Namespace) -> dict[str, Any]:
    if not args.table:
        return {name: table for name, table, _ in _demo_tables(args.demo_rows)}
    out = {}
    for name, path in args.table:
        if path.endswith(".parquet"):
            out[name] = pq.read_table(path)
        elif path.endswith(".csv"):
            out[name] = pa_csv.read_csv(path)
        else:
            raise ValueError(f"--table {name}={path}: give a .csv or .parquet file")
    return out


def _number_or_text(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


# --------------------------------------------------------------------------- demo

@dataclass(frozen=True)
class Example:
    """One shipped .sql example: its file name, text, first header line and demo flag."""
    name: str
    text: str
    title: str
    demo: bool


_DEMO_MARK = re.compile(r"^--\s*demo:\s*(yes|true)\s*$", re.I | re.M)


def load_examples(demo_only: bool = False) -> list[Example]:
    """The .sql examples shipped in the cepsql.examples package, in file-name order.

    A file is part of the demo when its header has a ``-- demo: yes`` line.
    """
    from importlib.resources import files

    examples = []
    for entry in sorted(files("cepsql.examples").iterdir(), key=lambda p: p.name):
        if not entry.name.endswith(".sql"):
            continue
        text = entry.read_text(encoding="utf-8")
        first = next((ln for ln in text.splitlines() if ln.startswith("--")), "-- " + entry.name)
        example = Example(entry.name, text, first.lstrip("-").strip(), bool(_DEMO_MARK.search(text)))
        if example.demo or not demo_only:
            examples.append(example)
    return examples


def _arrow(df: Any) -> Any:
    if hasattr(df, "toArrow"):
        return df.toArrow()
    import pyarrow as pa
    return pa.Table.from_pandas(df.toPandas(), preserve_index=False)


def _display_rows(table: Any, time_zone: str) -> list[tuple]:
    """Rows of table as Python values, timestamps shown in the session time zone
    (Spark hands them to Arrow in UTC) the way collect() would show them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = []
    for column in table.columns:
        if pa.types.is_timestamp(column.type) and column.type.tz is not None:
            try:
                column = pc.local_timestamp(column.cast(pa.timestamp(column.type.unit, time_zone)))
            except (pa.ArrowException, ValueError):
                pass  # unknown zone name for Arrow: keep UTC
        columns.append(column.to_pylist())
    return list(zip(*columns))


def _match_count(table: Any) -> int:
    """Matches, not rows: ALL ROWS PER MATCH gives several rows per (partition, match_num)."""
    if "match_num" not in table.column_names:
        return table.num_rows
    keys = [c for c in ("symbol", "tag_id", "match_num") if c in table.column_names]
    return table.group_by(keys).aggregate([]).num_rows


def _cmd_demo(args: argparse.Namespace) -> int:
    if args.rows < 1:
        _err("Error: --rows must be positive")
        return 2
    spark, created = get_spark(args.master, dict(args.conf))
    try:
        if args.stream:
            return run_stream_demo(spark, args.rows, out=_out)
        return _demo(spark, args.rows)
    finally:
        if created:
            spark.stop()


def _demo_tables(n_rows: int) -> list[tuple[str, Any, str]]:
    """(view name, Arrow table, description) of every stream the examples read."""
    n_shipments = max(n_rows // 10, 1)
    return [
        ("ticks", generate_ticks(n_rows), f"{n_rows:,} ticks (symbol, ts, price, volume) "
                                          "for 20 symbols"),
        ("rfid", generate_rfid(n_rows), f"{n_rows:,} RFID readings (ts, tag_id, reader)"),
        ("shipments", generate_shipments(n_shipments),
         f"{n_shipments:,} alerts and shipments (ts, kind, site, shipment_id, from_site, "
         "to_site)"),
    ]


def _input_rows(stmt: str, sizes: dict[str, int], default: int) -> int:
    """Rows of the demo tables a statement reads (for events/s); default if none."""
    names = {m.lower() for m in re.findall(r"\bFROM\s+(\w+)", stmt, re.I)}
    found = [n for name, n in sizes.items() if name in names]
    return sum(found) if found else default


def _from_slices(spark: Any, table: Any, scratch: str) -> Any:
    """A DataFrame of a generated Arrow table, read back from Parquet files so the
    executors load it in splits (createDataFrame would ship it inside one huge task)."""
    import os

    import pyarrow.parquet as pq
    folder = os.path.join(scratch, f"t{len(os.listdir(scratch))}")
    os.makedirs(folder)
    step = max(1, -(-table.num_rows // 8))
    for i, start in enumerate(range(0, max(table.num_rows, 1), step)):
        pq.write_table(table.slice(start, step), os.path.join(folder, f"part-{i:03d}.parquet"))
    return spark.read.parquet(folder)


def _demo(spark: Any, n_rows: int) -> int:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="cepsql-demo-") as scratch:
        return _demo_in(spark, n_rows, scratch)


def _demo_in(spark: Any, n_rows: int, scratch: str) -> int:
    cached = []
    sizes: dict[str, int] = {}
    for name, table, description in _demo_tables(n_rows):
        started = time.perf_counter()
        df = _from_slices(spark, table, scratch).cache()
        df.count()
        df.createOrReplaceTempView(name)
        cached.append(df)
        sizes[name] = table.num_rows
        _out(f"Generated {description} and cached them as view `{name}` in "
             f"{time.perf_counter() - started:.2f} s.")
    _out(f"(Spark {spark.version}, master {spark.sparkContext.master})")
    failures = 0
    spark_errors = _spark_error_types()
    time_zone = spark.conf.get("spark.sql.session.timeZone")
    try:
        for example in load_examples(demo_only=True):
            _out("\n" + "=" * 78)
            _out(example.name)
            _out("=" * 78)
            _out(example.text.rstrip())
            for stmt, offset in split_statements(example.text):
                if _is_blank(stmt):
                    continue
                t0 = time.perf_counter()
                try:
                    df = spark.cep.sql(stmt)
                    result = _arrow(df) if df.columns else None
                except CepError as err:
                    report_error(err, example.text, stmt, offset)
                    failures += 1
                    break
                except spark_errors as err:
                    _err(f"Error: {_first_lines(err)}")
                    failures += 1
                    break
                elapsed = time.perf_counter() - t0
                if result is None:
                    _out(f"\n-- OK ({elapsed:.2f} s)")
                    continue
                rows = _display_rows(result.slice(0, SHOW_ROWS), time_zone)
                _out(f"\nFirst {len(rows)} of {result.num_rows:,} result rows:")
                _out(format_table(result.column_names, rows))
                events = _input_rows(stmt, sizes, n_rows)
                rate = events / elapsed if elapsed > 0 else float("inf")
                _out(f"matches: {_match_count(result):,}   elapsed: {elapsed:.2f} s   "
                     f"events/s: {rate:,.0f}")
    finally:
        for df in cached:
            df.unpersist()
    _out("")
    if failures:
        _err(f"{failures} example(s) failed.")
        return 1
    return 0


# --------------------------------------------------------------------------- main

def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cepsql`` script and ``python -m cepsql``; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        _out(f"cepsql {_version()}")
        return 0
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        if args.command == "demo":
            return _cmd_demo(args)
        if args.command == "trace":
            return _cmd_trace(args)
        return _cmd_sql(args)
    except CepEnvironmentError as err:
        _err(f"Error: {err.message}")
        return 2
