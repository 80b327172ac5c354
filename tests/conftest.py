"""Shared fixtures: one local SparkSession for the whole run, and fakes of the dialect and
the planner so the backends can be tested without them."""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ["PYTHONPATH"] = os.pathsep.join(  # Spark's Python workers must import cepsql
    p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import re  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import pyarrow as pa  # noqa: E402
import pytest  # noqa: E402

from cepsql.algebra.expressions import BinaryOp, ColumnRef, Literal  # noqa: E402
from cepsql.errors import CepAnalysisError  # noqa: E402
from cepsql.compile.query_plan import BoundPlan, QueryPlan, SortColumn  # noqa: E402
from cepsql.parse.scanner import paren_end, skip_space, skip_token  # noqa: E402


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test run (local[2], 4 shuffle partitions, UTC)."""
    from pyspark.sql import SparkSession

    import cepsql  # noqa: F401  (attaches SparkSession.cep)
    session = (SparkSession.builder.master("local[2]").appName("cepsql-tests")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.default.parallelism", "2")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "1g")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


# --- programs run in fresh processes, started with the session (tests/support/background.py) ---

_JOBS = pytest.StashKey()


@pytest.hookimpl(trylast=True)  # after -k / -m deselection: only what will run
def pytest_collection_modifyitems(session, config, items):
    """Start the BACKGROUND jobs of the modules with selected tests; run those tests last."""
    from support.background import BackgroundJobs
    modules = {item.module for item in items if getattr(item.module, "BACKGROUND", None)}
    if not modules:
        return
    jobs = config.stash.setdefault(_JOBS, BackgroundJobs())
    for module in sorted(modules, key=lambda m: m.__name__):
        for name, job in module.BACKGROUND.items():
            jobs.start(name, job)
    items[:] = [i for i in items if i.module not in modules] + \
        [i for i in items if i.module in modules]


def pytest_unconfigure(config):
    jobs = config.stash.get(_JOBS, None)
    if jobs is not None:
        jobs.close()


@pytest.fixture(scope="session")
def background(pytestconfig):
    """The session's background jobs: ``background.result(name)`` waits for one."""
    from support.background import BackgroundJobs
    return pytestconfig.stash.setdefault(_JOBS, BackgroundJobs())


@pytest.fixture(scope="session")
def spark_session(spark):
    """Overrides pytest-spark's fixture so it never starts a second session."""
    return spark


@pytest.fixture(scope="session")
def spark_context(spark):
    """Overrides pytest-spark's fixture (same reason)."""
    return spark.sparkContext


# --- fakes of the dialect and the planner ---------------------------------------------

@dataclass(frozen=True)
class FakeSite:
    start: int
    end: int
    source_text: str
    source_offset: int
    source_is_query: bool
    alias: str | None
    spec: object


_STOP = {"WHERE", "JOIN", "ON", "GROUP", "ORDER", "LIMIT", "UNION", "INNER", "LEFT", "RIGHT",
         "FULL", "CROSS", "HAVING", "WINDOW", "EXCEPT", "INTERSECT", "USING", "SELECT"}


def fake_find(sql: str, *, offset: int = 0, full_sql: str | None = None) -> list[FakeSite]:
    """Finds `source MATCH_RECOGNIZE (body) [AS] [alias]`; the fake spec is the body text.
    Like cepsql.parse: positions absolute (sql starts at offset in the full text), a query
    source's text is inside its parentheses, the alias comes without AS. Sites nested in another site's source are left for the recursive call."""
    sites, i = [], 0
    while i < len(sql):
        j = skip_space(sql, i)
        if j != i:
            i = j
            continue
        if sql[i] in "'\"`":
            i = skip_token(sql, i)
            continue
        m = re.compile(r"MATCH_RECOGNIZE\b", re.I).match(sql, i)
        if not m or (i and (sql[i - 1].isalnum() or sql[i - 1] == "_")):
            i += 1
            continue
        k = i - 1
        while sql[k].isspace():
            k -= 1
        if sql[k] == ")":
            depth, s = 0, k
            while True:
                depth += {")": 1, "(": -1}.get(sql[s], 0)
                if depth == 0:
                    break
                s -= 1
            is_query = True
        elif sql[k] == "`":
            s = sql.rindex("`", 0, k)
            is_query = False
        else:
            s = k
            while s > 0 and (sql[s - 1].isalnum() or sql[s - 1] in "_.`"):
                s -= 1
            is_query = False
        p = skip_space(sql, m.end())
        end = paren_end(sql, p)
        body = sql[p + 1:end - 1].strip()
        alias = None
        a = skip_space(sql, end)
        w = re.compile(r"(AS\s+)?([A-Za-z_]\w*)", re.I).match(sql, a)
        if w and w.group(2).upper() not in _STOP:
            alias, end = w.group(0), w.end()
        spec = SimpleNamespace(body=body, pattern_text=body, pos=offset + p + 1)
        src = sql[s:k + 1]
        src_off = offset + s
        if is_query:
            src, src_off = src[1:-1], src_off + 1
        if alias:
            alias = re.sub(r"^AS\s+", "", alias, flags=re.I)
        sites.append(FakeSite(offset + s, offset + end, src, src_off, is_query, alias, spec))
        i = end
    return [x for x in sites
            if not any(o is not x and o.start <= x.start and x.end <= o.end for o in sites)]


def fake_plan(spec, schema: pa.Schema, sql: str, **planning) -> QueryPlan:
    """Body mini-language: `PARTITION BY c`, `ORDER BY c [DESC]`, `DOUBLE c` (prepare c2 =
    c * 2), `FAIL`. The worker appends rn = row number within the partition and checks that
    the batches have the bound schema and arrive in order."""
    body = spec.body
    if "FAIL" in body:
        raise CepAnalysisError("unknown column nope", pos=spec.pos)
    part = re.search(r"PARTITION BY (\w+)", body)
    order = re.search(r"ORDER BY (\w+)( DESC)?", body)
    double = re.search(r"DOUBLE (\w+)", body)
    part_col = part.group(1) if part else None
    prepare = []
    if double:
        prepare.append((double.group(1) + "2",
                        BinaryOp("*", ColumnRef(None, double.group(1)), Literal(2, "int"))))
    sort = [SortColumn(order.group(1), not order.group(2), False)] if order else []
    order_col = order.group(1) if order else None
    descending = bool(order and order.group(2))

    def bind(prepared: pa.Schema) -> BoundPlan:
        out_schema = prepared.append(pa.field("rn", pa.int64()))

        def worker(batches):
            state = {"key": object(), "n": 0, "last": None}
            for b in batches:
                if not b.schema.equals(prepared):
                    raise AssertionError(f"batch schema {b.schema} != bound {prepared}")
                keys = b.column(part_col).to_pylist() if part_col else [None] * b.num_rows
                vals = b.column(order_col).to_pylist() if order_col else [None] * b.num_rows
                rn = []
                for key, val in zip(keys, vals):
                    if state["n"] and key == state["key"]:
                        last = state["last"]
                        if val is not None and last is not None and (
                                val < last if not descending else val > last):
                            raise AssertionError("rows out of order")
                        state["n"] += 1
                    else:
                        state["key"], state["n"] = key, 1
                    state["last"] = val
                    rn.append(state["n"])
                yield pa.RecordBatch.from_arrays([*b.columns, pa.array(rn, pa.int64())],
                                                 schema=out_schema)
        final = [(n, ColumnRef(None, n)) for n in out_schema.names]
        return BoundPlan(worker, out_schema, final)

    return QueryPlan(prepare, [part_col] if part_col else [], sort, bind)


@pytest.fixture(scope="session")
def fake_finder():
    return fake_find


@pytest.fixture(scope="session")
def fake_planner():
    return fake_plan


try:  # Spark's workers cannot import this file: ship its functions by value
    from pyspark import cloudpickle as _cloudpickle
    _cloudpickle.register_pickle_by_value(sys.modules[__name__])
except Exception:  # pragma: no cover
    pass
