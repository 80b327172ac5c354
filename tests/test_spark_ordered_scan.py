"""Ordered-scan slicing (cepsql/backends/spark/ordered_scan.py): input partitions with
disjoint, increasing time ranges are the slices, no shuffle; the result equals the
in-process one (which never slices), and other layouts fall back to grid slices."""
from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

import cepsql
from cepsql.backends.spark import ordered_scan, slicing
from cepsql.exprs.spark_arrow import arrow_schema
from cepsql.backends.spark.ordered_scan import PartitionRange, ordered_layout, sort_indices
from cepsql.backends.spark.slicing import slice_plan, slicing_blocker
from cepsql.parse import find_match_recognize
from cepsql.errors import CepRuntimeError
from cepsql.compile.clause import plan_query
from cepsql.explain.clause import explain_clause
from support.strategies import (DEFINE_TEMPLATES, MEASURE_AGGREGATE_TEMPLATES,
                                MEASURE_TEMPLATES, VARIABLES)
from support.strategies_cep import cep_queries, cep_streams
from test_spark_slicing import _null_normal, _unpartitioned_windowed

SCHEMA = "part string, ts long, price long, vol double, tag string"


ARROW_SCHEMA = pa.schema([("part", pa.string()), ("ts", pa.int64()), ("price", pa.int64()),
                          ("vol", pa.float64()), ("tag", pa.string())])


def _frame(spark, chunks: list[list[dict]], directory=None):
    """One input partition per chunk (no Exchange in the plan): in this order from a
    Python RDD, or with ``directory`` one Parquet file each (read by the JVM alone; Spark
    orders the files by size, so the partitions are not in time order)."""
    if directory is None:
        rdd = spark.sparkContext.parallelize(chunks, len(chunks)).flatMap(lambda c: c)
        return spark.createDataFrame(rdd, schema=SCHEMA)
    import os
    import tempfile
    where = tempfile.mkdtemp(dir=directory)
    for i, c in enumerate(chunks):
        pq.write_table(pa.Table.from_pylist(c, ARROW_SCHEMA), os.path.join(where, f"{i}.parquet"))
    return spark.read.parquet(where)


def _chunks(rows: list[dict], parts: int, layout: str, rnd) -> list[list[dict]]:
    """rows in ts order cut into up to ``parts`` at random places (moved to a change of
    ts: no time shared by two partitions), sometimes with an empty one; "unsorted"
    shuffles each chunk, "overlap" swaps two rows across a border (NULL times anywhere:
    they are dropped)."""
    timed = sorted((r for r in rows if r["ts"] is not None), key=lambda r: r["ts"])
    cuts = [rnd.randint(1, max(len(timed) - 1, 1)) for _ in range(parts - 1)]
    at = sorted({c for c in cuts if 0 < c < len(timed)})
    at = [c for c in at if timed[c - 1]["ts"] != timed[c]["ts"]]
    chunks = [timed[a:b] for a, b in zip([0] + at, at + [len(timed)])]
    if rnd.random() < 0.3:  # an empty input partition
        chunks.insert(rnd.randint(0, len(chunks)), [])
    for r in rows:
        if r["ts"] is None:
            rnd.choice(chunks).append(r)
    if layout == "unsorted":
        for c in chunks:
            rnd.shuffle(c)
    elif layout == "overlap":
        full = [c for c in chunks if c]
        if len(full) > 1:
            full[0][-1], full[1][0] = full[1][0], full[0][-1]
    return chunks


def _run(spark, frame, sql: str, bounds: str = "scan"):
    spec = find_match_recognize(sql)[0].spec
    plan = plan_query(spec, arrow_schema(frame), sql)
    sliced = slice_plan(spark, frame, plan, bounds=bounds, grid_windows=1.0)
    inner = plan_query(sliced.spec, arrow_schema(sliced.frame), sql)
    return sliced, plan, sliced.finish(sliced.run(sliced.frame, inner))


def _rows(out) -> Counter:
    return Counter(tuple(_null_normal(v) for v in r) for r in out.collect())


@pytest.fixture
def file_partitions(spark):
    """Each (small) Parquet file an input partition of its own."""
    spark.conf.set("spark.sql.files.openCostInBytes", str(1 << 30))
    yield
    spark.conf.unset("spark.sql.files.openCostInBytes")


@settings(max_examples=4, deadline=None, derandomize=True,
          phases=(Phase.explicit, Phase.reuse, Phase.generate),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data(), window=st.integers(1, 5), ties=st.booleans(),
       layout=st.sampled_from(["sorted", "sorted", "unsorted", "overlap"]),
       parts=st.integers(2, 5), seed=st.integers(0, 99))
def test_scan_equals_in_process_property(spark, file_partitions, monkeypatch, tmp_path, data,
                                         window, ties, layout, parts, seed):
    """Matches cross partition borders and whole partitions shorter than the window;
    partitions unsorted or empty; ties inside a partition; overlapping ranges fall back
    to grid slices. Sliced == in-process (== reference, test_spark_slicing)."""
    import random
    monkeypatch.setattr(ordered_scan, "OVERLAP_SHARE", 1e9)  # tiny data: overlap is large
    table = data.draw(cep_streams(unique_ts=not ties, with_nulls=ties))
    sql = _unpartitioned_windowed(data.draw(cep_queries()), window)
    spec = find_match_recognize(sql)[0].spec
    assume(slicing_blocker(spec) is None)
    want = cepsql.match_recognize(sql, t=table)
    chunks = _chunks(table.to_pylist(), parts, layout, random.Random(seed))
    prune = layout != "unsorted" or seed % 2 == 1  # column pruning when strictly ordered
    spark.conf.set(slicing.PRUNE_CONF, str(prune).lower())
    try:
        sliced, _, out = _run(spark, _frame(spark, chunks, tmp_path), sql)
    finally:
        spark.conf.unset(slicing.PRUNE_CONF)
    disjoint = ordered_layout([PartitionRange(i, 1, min(t), max(t)) for i, t in
                               enumerate([r["ts"] for r in c if r["ts"] is not None]
                                         for c in chunks) if t]) is not None
    assert (sliced.scan is not None) == disjoint
    expected = Counter(tuple(_null_normal(v) for v in r) for r in want.itertuples(index=False))
    got = _rows(out)
    assert got == expected, f"{sql}\n{chunks}\nmissing {expected - got}\nextra {got - expected}"


SQL = ("SELECT * FROM ev MATCH_RECOGNIZE (ORDER BY ts MEASURES a.ts AS ta, c.ts AS tc "
       "STRATEGY STRICT_CONTIGUITY PATTERN (a b c) WITHIN INTERVAL '3' SECOND "
       "DEFINE a AS tag = 'x', b AS tag = 'y', c AS tag = 'z')")


def _ticks(n: int) -> list[dict]:
    return [{"part": "p", "ts": i, "price": i % 10, "vol": 1.0,
             "tag": "xyz"[i % 3]} for i in range(n)]


def test_explain_no_shuffle_and_fallback(spark):
    rows = _ticks(60)
    sliced, plan, out = _run(spark, _frame(spark, [rows[:20], rows[20:41], rows[41:]]), SQL)
    assert sliced.scan is not None and sliced.slices == 3
    assert "an ordered scan: each of the 3 input partitions" in explain_clause(plan)
    assert "Exchange" not in out._jdf.queryExecution().executedPlan().toString()
    assert len(out.collect()) == 20
    crossed = [rows[:20] + rows[22:23], rows[20:22] + rows[23:40], rows[40:]]  # overlap
    sliced, plan, out = _run(spark, _frame(spark, crossed), SQL)
    assert sliced.scan is None and "a grid of slices" in explain_clause(plan)
    assert len(out.collect()) == 20


@pytest.mark.parametrize("gaps", [False, True])
def test_changed_partitions_fail_loudly(spark, monkeypatch, gaps):
    """A task whose rows differ from the planning job's (its count: with gap pushdown seen
    on its first and last rows, which the filter lets through) fails instead of
    answering."""
    if not gaps:
        monkeypatch.setattr(slicing, "_gap_sql", lambda df, spec: None)
    rows = _ticks(30)
    frame = _frame(spark, [rows[:15], rows[15:]])
    sliced, _, _ = _run(spark, frame, SQL)
    assert (sliced.scan.gaps is not None) == gaps
    first = sliced.scan.layout[0]
    sliced.scan.layout[0] = PartitionRange(first.pid, first.count + 1, first.lo, first.hi)
    inner = plan_query(sliced.spec, arrow_schema(sliced.frame), SQL)
    with pytest.raises(Exception) as info:
        sliced.run(sliced.frame, inner).collect()
    assert "changed between the ordered scan" in str(info.value)
    assert issubclass(CepRuntimeError, Exception)


@pytest.mark.parametrize("ties", [False, True])
def test_scan_prunes_columns_without_ties(spark, monkeypatch, ties):
    """Without gap pushdown, when the profile job finds every partition strictly in time
    order (no ties), only the key and the columns the worker reads reach the tasks and
    EXPLAIN says so; with ties (and a partition out of order) every column goes (the
    tie-breakers), and a pruned task meeting a tie fails as for a changed partition."""
    import random
    monkeypatch.setattr(slicing, "_gap_sql", lambda df, spec: None)
    rows = _ticks(60)
    middle = rows[20:40]
    if ties:
        rows = [dict(r, ts=r["ts"] // 2 * 2) for r in rows]
        middle = rows[20:40]
        random.Random(3).shuffle(middle)
    chunks = [rows[:20], middle, rows[40:]]
    seen = []
    init = ordered_scan._ScanTask.__init__
    monkeypatch.setattr(ordered_scan._ScanTask, "__init__",
                        lambda self, w, schema, *a: (seen.append(schema.names),
                                                     init(self, w, schema, *a))[1])
    spark.conf.set(slicing.PRUNE_CONF, "true")
    try:
        sliced, plan, out = _run(spark, _frame(spark, chunks), SQL)
    finally:
        spark.conf.unset(slicing.PRUNE_CONF)
    assert sliced.scan is not None and sliced.scan.untied == (not ties)
    assert ("column pruning" in explain_clause(plan)) == (not ties)
    want = cepsql.match_recognize(SQL, ev=pa.Table.from_pylist(rows, ARROW_SCHEMA))
    assert _rows(out) == Counter(tuple(_null_normal(v) for v in r)
                                 for r in want.itertuples(index=False))
    assert ("tag" in seen[-1] and "price" in seen[-1]) == ties
    assert "ts" in seen[-1]
    if ties:  # the planning job said untied: the pruned task meets the tie and fails
        sliced.scan.untied = True
        inner = plan_query(sliced.spec, arrow_schema(sliced.frame), SQL)
        with pytest.raises(Exception, match="changed between the ordered scan"):
            sliced.run(sliced.frame, inner).collect()


def test_auto_scans_time_ordered_parquet(spark, tmp_path):
    """``auto`` (the default) takes the scan path with gap pushdown for a strict clause
    on a Parquet source in time order; spark.cep.sql and its EXPLAIN (summary and plan)
    say so."""
    path = str(tmp_path / "ev.parquet")
    pq.write_table(pa.Table.from_pylist(_ticks(600)), path, row_group_size=100)
    spark.conf.set("spark.sql.files.maxPartitionBytes", "1500")
    spark.conf.set("cepsql.slicing.bounds", "auto")
    try:
        frame = spark.read.parquet(path)
        assert frame.rdd.getNumPartitions() > 1
        sliced, plan, out = _run(spark, frame, SQL, bounds="auto")
        assert sliced.scan is not None and "ordered scan" in explain_clause(plan)
        frame.createOrReplaceTempView("ev")
        assert len(spark.cep.sql(SQL).collect()) == 200 == len(out.collect())
        explained = spark.cep.explain(SQL)
        assert "Time slicing: an ordered scan" in explained
        assert "gap pushdown: rows satisfying no variable" in explained
        assert "each input partition is a time slice (no shuffle)" in explained
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
        spark.conf.unset("cepsql.slicing.bounds")


def test_in_task_sort_orders_as_spark(spark):
    """Ties on the time broken by the other columns as Spark sorts them: NULLs first,
    -0.0 = 0.0, NaN above +infinity, strings by bytes."""
    nan, inf = float("nan"), float("inf")
    rows = [(1, v, s) for v in (nan, inf, -0.0, 0.0, None, -inf, 2.5, nan)
            for s in ("b", None, "a", "é")]
    table = pa.table({"t": [r[0] for r in rows], "v": [r[1] for r in rows],
                      "s": [r[2] for r in rows]})
    keys = [(c, "ascending", "at_start") for c in ("t", "v", "s")]
    got = table.take(sort_indices(table, keys)).to_pylist()
    want = spark.createDataFrame(rows, "t int, v double, s string").orderBy(
        "t", "v", "s").collect()
    assert [(r["v"] if r["v"] == r["v"] else "nan", r["s"]) for r in got] == \
        [(r.v if r.v == r.v else "nan", r.s) for r in want]


def test_time_as_directory_partitions(spark, file_partitions, monkeypatch, tmp_path):
    """ts as a partition directory of the Parquet source: the overlap job's time filter
    would skip whole files (and renumber the partitions), so it reads them all."""
    monkeypatch.setattr(ordered_scan, "OVERLAP_SHARE", 1e9)
    rows = [dict(r, ts=r["ts"] // 2, price=r["ts"]) for r in _ticks(24)]
    path = str(tmp_path / "by_ts")
    spark.createDataFrame(rows, SCHEMA).coalesce(1).write.partitionBy("ts").parquet(path)
    frame = spark.read.parquet(path)
    sql = SQL.replace("STRICT_CONTIGUITY", "SKIP_TILL_NEXT_MATCH")
    sliced, plan, out = _run(spark, frame, sql)
    assert sliced.scan is not None and len(sliced.scan.layout) == 12
    want = cepsql.match_recognize(sql.replace(" ev ", " t "),
                                  t=pa.Table.from_pylist(rows, ARROW_SCHEMA))
    assert _rows(out) == Counter(tuple(_null_normal(v) for v in r)
                                 for r in want.itertuples(index=False))


def _all_defined(sql: str) -> str:
    """sql with a single-row DEFINE for every variable the drawn query left undefined (a
    variable without one may take any row: no gap pushdown)."""
    spec = find_match_recognize(sql)[0].spec
    missing = [f"{v} AS {v}.price > 3" for v in spec.variables if v not in spec.defines]
    if not missing:
        return sql
    if "DEFINE " in sql:
        return sql.replace("DEFINE ", "DEFINE " + ", ".join(missing) + ", ", 1)
    return sql[:sql.rindex(")")] + " DEFINE " + ", ".join(missing) + ")"


@settings(max_examples=3, deadline=None, derandomize=True,
          phases=(Phase.explicit, Phase.reuse, Phase.generate),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data(), window=st.integers(1, 5), ties=st.booleans(),
       layout=st.sampled_from(["sorted", "sorted", "sorted", "unsorted"]),
       parts=st.integers(2, 4), seed=st.integers(0, 99))
def test_gap_pushdown_equals_in_process_property(spark, file_partitions, monkeypatch,
                                                 tmp_path, data, window, ties, layout, parts,
                                                 seed):
    """Contiguity clauses (Kleene, NOT, rows no variable takes between the others): with
    the gap pushdown (every partition in file order, no NULL times) or its fallback
    (unsorted partitions, ties, NULL times) the result equals the in-process one."""
    import random
    from cepsql.analyze.relevance import gap_filter
    monkeypatch.setattr(ordered_scan, "OVERLAP_SHARE", 1e9)
    table = data.draw(cep_streams(unique_ts=not ties, with_nulls=ties))
    strategy = data.draw(st.sampled_from(["STRICT_CONTIGUITY", "PARTITION_CONTIGUITY"]))
    sql = _unpartitioned_windowed(data.draw(cep_queries(strategy=strategy)), window)
    sql = _all_defined(sql)
    spec = find_match_recognize(sql)[0].spec
    assume(slicing_blocker(spec) is None)
    want = cepsql.match_recognize(sql, t=table)
    chunks = _chunks(table.to_pylist(), parts, layout, random.Random(seed))
    sliced, _, out = _run(spark, _frame(spark, chunks, tmp_path), sql)
    assert sliced.scan is not None
    if layout == "sorted" and not ties:
        assert (sliced.scan.gaps is not None) == (gap_filter(spec) is not None)
    elif layout == "unsorted" and any(len(c) > 1 for c in chunks):
        assert sliced.scan.gaps is None or all(
            [r["ts"] for r in c] == sorted(r["ts"] for r in c) for c in chunks)
    expected = Counter(tuple(_null_normal(v) for v in r) for r in want.itertuples(index=False))
    got = _rows(out)
    assert got == expected, f"{sql}\n{chunks}\nmissing {expected - got}\nextra {got - expected}"


def test_gap_pushdown_kleene_and_not_over_dropped_rows(spark, file_partitions, tmp_path):
    """Three partitions in order, most rows taken by no variable: matches across the
    borders, Kleene runs broken by a dropped row, leading and trailing NOT; EXPLAIN says
    what was dropped; the in-process result is met."""
    import random
    rnd = random.Random(5)
    rows = [{"part": "p", "ts": i, "price": rnd.randint(0, 9), "vol": 1.0,
             "tag": rnd.choice("xxyyzqq")} for i in range(240)]
    frame = _frame(spark, [rows[:70], rows[70:150], rows[150:]], tmp_path)
    table = pa.Table.from_pylist(rows, ARROW_SCHEMA)
    for pattern in ("a b+ c", "NOT(n) a b", "a b NOT(n)"):
        sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(a.ts) AS ta, "
               "LAST(b.ts) AS tb, COUNT(*) AS k ONE ROW PER MATCH STRATEGY STRICT_CONTIGUITY "
               f"PATTERN ({pattern}) WITHIN INTERVAL '4' SECOND DEFINE a AS tag = 'x', "
               "b AS tag IN ('y', 'z') AND b.price >= a.price, c AS tag = 'x', "
               "n AS tag = 'q' AND price > 7)")
        if "c" not in pattern.split():
            sql = sql.replace(", c AS tag = 'x'", "")
        if "n" not in pattern.replace("NOT", "").replace("(", " ").replace(")", " ").split():
            sql = sql.replace(", n AS tag = 'q' AND price > 7", "")
        sliced, plan, out = _run(spark, frame, sql)
        assert sliced.scan is not None and sliced.scan.gaps is not None
        assert "gap pushdown: rows satisfying no variable" in explain_clause(plan)
        want = cepsql.match_recognize(sql, t=table)
        assert len(want) > 3
        assert _rows(out) == Counter(tuple(_null_normal(v) for v in r)
                                     for r in want.itertuples(index=False)), pattern


def _jobs(spark) -> int:
    """Spark jobs started so far in this session."""
    value = spark.sparkContext._jsc.sc().dagScheduler().nextJobId()
    return value if isinstance(value, int) else value.get()


def test_profile_cache_per_file_set(spark, tmp_path, monkeypatch):
    """The gap scan's profile job runs once per file set: a repeat query over a fresh
    read of the same files takes the profiles from the session's cache (EXPLAIN says so)
    with the same rows; a different filter, a rewritten file (same path, other rows) or
    the cache switched off run the job again, and the rows equal the in-process ones.
    (The footers' profiles, which spare the job for such files, are switched off here:
    test_spark_parquet_profile.py.)"""
    from cepsql.backends.spark import profile_cache
    monkeypatch.setattr(profile_cache, "footer_profiles", lambda frame, strict: None)
    calls = []
    profile = profile_cache.profile_rows
    monkeypatch.setattr(profile_cache, "profile_rows", lambda f: calls.append(f) or profile(f))
    path = str(tmp_path / "ev.parquet")
    rows = _ticks(300)
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=60)
    spark.conf.set("spark.sql.files.maxPartitionBytes", "1500")
    spark.cep.clear_cache()

    def source(where: str = "") -> None:
        frame = spark.read.parquet(path)  # a fresh read: a new plan over the same files
        (frame.where(where) if where else frame).createOrReplaceTempView("ev")

    def want(table_rows) -> Counter:
        got = cepsql.match_recognize(SQL, ev=pa.Table.from_pylist(table_rows, ARROW_SCHEMA))
        return Counter(tuple(_null_normal(v) for v in r) for r in got.itertuples(index=False))
    try:
        source()
        assert "from a profile job (kept" in spark.cep.explain(SQL) and len(calls) == 1
        assert _rows(spark.cep.sql(SQL)) == want(rows) and len(calls) == 1
        source()
        before = _jobs(spark)
        out = spark.cep.sql(SQL)  # profile and overlap rows from the cache: no job at all
        assert _jobs(spark) == before and len(calls) == 1
        assert _rows(out) == want(rows)
        assert "partition profiles from the session's cache" in spark.cep.explain(SQL)
        other = SQL.replace("c AS tag = 'z'", "c AS tag = 'x'")  # file facts: shared
        assert "from the session's cache" in spark.cep.explain(other) and len(calls) == 1
        source("price >= 0")  # another plan over the same files
        assert "from a profile job (kept" in spark.cep.explain(SQL) and len(calls) == 2
        changed = [dict(r, tag="xyzq"[r["ts"] % 4]) for r in rows]
        pq.write_table(pa.Table.from_pylist(changed), path, row_group_size=60)
        source()
        assert _rows(spark.cep.sql(SQL)) == want(changed) and len(calls) == 3
        spark.conf.set(profile_cache.PROFILE_CACHE_CONF, "false")
        assert "not cached" in spark.cep.explain(SQL) and len(calls) == 4
        assert "not cached" in spark.cep.explain(SQL) and len(calls) == 5
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
        spark.conf.unset(profile_cache.PROFILE_CACHE_CONF)
    assert len(spark.cep.profile_cache) > 0
    spark.cep.clear_cache()
    assert len(spark.cep.profile_cache) == 0


def test_gap_task_checks_and_drops_its_end_rows():
    """A gap task gets its partition's first and last rows (flagged in the break column
    when no variable takes them): it checks index 0 at the first time and count - 1 at
    the last, drops them, and flags the kept rows after a gap as breaks."""
    from cepsql.backends.spark.gap_scan import POSITION_COLUMN
    from cepsql.compile.cep import BREAK_COLUMN
    schema = pa.schema([("ts", pa.int64()), (POSITION_COLUMN, pa.int64()),
                        (BREAK_COLUMN, pa.bool_())])
    pid, offset = 3, 100

    def batch(indexes, checks):
        return pa.record_batch([pa.array([10 + i for i in indexes]),
                                pa.array([(pid << 33) + i for i in indexes]),
                                pa.array(checks)], schema=schema)
    task = ordered_scan._ScanTask(None, schema, "ts", [], "copy", {}, {}, gaps=True)
    rows = [batch([0, 2, 3], [True, False, False]), batch([4, 6], [False, True])]
    got = pa.Table.from_batches(list(task._gap_slice(iter(rows), pid,
                                                     (7, 10, 16, None, offset))))
    assert got.column(POSITION_COLUMN).to_pylist() == [102, 103, 104]
    assert got.column(BREAK_COLUMN).to_pylist() == [True, False, False]
    for changed in ((8, 10, 17), (7, 9, 16), (6, 10, 15)):  # rows or range moved
        with pytest.raises(CepRuntimeError, match="changed between"):
            list(task._gap_slice(iter(rows), pid, (*changed, None, offset)))


def test_gap_task_checks_the_rows_its_neighbours_read(spark, monkeypatch):
    """The overlap rows (possibly from the session's memo) must be the rows the partition
    they come from holds now: a task finding other kept rows there fails."""
    real = ordered_scan.memoized

    def stale(frame, kind, compute, nbytes=None):
        rows, origin = real(frame, kind, compute)
        keep = rows.column(ordered_scan._KEEP).to_pylist()
        keep[keep.index(True)] = False  # as if one of them was not kept when memoized
        at = rows.schema.get_field_index(ordered_scan._KEEP)
        return rows.set_column(at, rows.schema.field(at), pa.array(keep)), origin
    monkeypatch.setattr(ordered_scan, "memoized", stale)
    rows = _ticks(30)
    sliced, _, _ = _run(spark, _frame(spark, [rows[:15], rows[15:]]), SQL)
    assert sliced.scan.gaps is not None
    inner = plan_query(sliced.spec, arrow_schema(sliced.frame), SQL)
    with pytest.raises(Exception, match="changed between the ordered scan"):
        sliced.run(sliced.frame, inner).collect()


# --- SQL:2016 SKIP PAST LAST ROW: slices entered where the chain of matches enters them ---

CHAIN_QUANTIFIERS = ["", "", "", "?", "{1,2}", "{2}", "??", "{1,3}?", "{0,2}"]


@st.composite
def _chain_queries(draw) -> str:
    """Unpartitioned ONE ROW PER MATCH SKIP PAST LAST ROW queries over bounded patterns
    (what chain slicing takes), DEFINE and MEASURES from the SQL:2016 templates."""
    names = draw(st.lists(st.sampled_from(VARIABLES[:3]), min_size=1, max_size=3))
    items = [v + draw(st.sampled_from(CHAIN_QUANTIFIERS)) for v in names]
    if len(items) >= 2 and draw(st.booleans()):
        items = [f"({items[0]} | {items[1]})"] + items[2:]
    used = sorted(set(names))
    plain = [t for t in DEFINE_TEMPLATES if "MATCH_NUMBER" not in t]
    defines = ", ".join(f"{v} AS " + draw(st.sampled_from(plain)).format(
        v=v, o=draw(st.sampled_from(used))) for v in used)
    measures = [t for t in MEASURE_TEMPLATES + MEASURE_AGGREGATE_TEMPLATES
                if "MATCH_NUMBER" not in t]
    shown = ", ".join(draw(st.sampled_from(measures)).format(
        v=draw(st.sampled_from(used)), o=draw(st.sampled_from(used))) + f" AS m{i}"
        for i in range(draw(st.integers(1, 3))))
    return ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(ts) AS t0, "
            f"{shown} ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
            f"PATTERN ({' '.join(items)}) DEFINE {defines})")


def _dense_stream(rnd, n: int) -> list[dict]:
    """n rows in ts order whose few values make matches dense (they cross borders)."""
    return [{"part": "p", "ts": i, "price": rnd.choice([1, 2, 3, None]),
             "vol": rnd.choice([0.5, 2.0, None]), "tag": rnd.choice("xxyz")}
            for i in range(1, n + 1)]


def _chain_run(spark, chunks, sql: str, chain_rows: int):
    spark.conf.set(slicing.CHAIN_ROWS_CONF, str(chain_rows))
    try:
        return _run(spark, _frame(spark, chunks), sql)
    finally:
        spark.conf.unset(slicing.CHAIN_ROWS_CONF)


@settings(max_examples=6, deadline=None, derandomize=True,
          phases=(Phase.explicit, Phase.reuse, Phase.generate),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
@given(sql=_chain_queries(), n=st.integers(30, 90), parts=st.integers(2, 8),
       chain_rows=st.integers(1, 6), seed=st.integers(0, 999), gaps=st.booleans())
def test_chain_slices_equal_one_task_property(spark, monkeypatch, sql, n, parts, chain_rows,
                                              seed, gaps):
    """SQL:2016 SKIP PAST LAST ROW sliced by input partitions (tiny ones: many borders,
    matches crossing them, few rows around each border so chains often need widening
    or do not converge) == the one-task in-process result (== reference elsewhere),
    with gap pushdown (where the clause has a gap filter) or without."""
    import random
    from cepsql.analyze.relevance import chain_gap_filter
    from cepsql.backends.spark.execute import RELEVANCE_CONF
    spec = find_match_recognize(sql)[0].spec
    assume(slicing_blocker(spec) is None)
    monkeypatch.setattr(ordered_scan, "OVERLAP_SHARE", 1e9)  # tiny data: overlap is large
    rnd = random.Random(seed)
    rows = _dense_stream(rnd, n)
    chunks = [c for c in _chunks(rows, parts, "sorted", rnd) if c]
    spark.conf.set(RELEVANCE_CONF, str(gaps).lower())
    try:
        sliced, _, out = _chain_run(spark, chunks, sql, chain_rows)
    finally:
        spark.conf.unset(RELEVANCE_CONF)
    assert sliced is not None and sliced.scan is not None
    assert (sliced.scan.gaps is not None) == (gaps and chain_gap_filter(spec) is not None)
    want = cepsql.match_recognize(sql, t=pa.Table.from_pylist(rows, ARROW_SCHEMA))
    expected = Counter(tuple(_null_normal(v) for v in r) for r in want.itertuples(index=False))
    got = _rows(out)
    assert got == expected, f"{sql}\n{chunks}\nmissing {expected - got}\nextra {got - expected}"


CHAIN_SQL = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(A.ts) AS ta, "
             "LAST(C.ts) AS tc, C.price - PREV(A.price) AS d ONE ROW PER MATCH "
             "AFTER MATCH SKIP PAST LAST ROW PATTERN (A B C) "
             "DEFINE A AS tag IN ('x', 'y'), B AS tag IN ('y', 'z'), C AS true)")


def test_chain_slices_enter_after_a_crossing_match(spark, monkeypatch):
    """x y z repeating, partitions cut inside matches: each later slice's chain enters
    after the match crossing its first row (offsets 1 and 2; searched from its first
    row, the third slice would match y z x at 43-45 instead of x y z at 45-47), every
    match once; EXPLAIN says how; no shuffle."""
    monkeypatch.setattr(ordered_scan, "OVERLAP_SHARE", 1e9)
    rows = _ticks(60)
    sliced, plan, out = _chain_run(spark, [rows[:20], rows[20:43], rows[43:]], CHAIN_SQL, 4)
    assert len(out.collect()) == 20
    assert sliced.scan.entries == {1: 1, 2: 2}
    text = explain_clause(plan)
    assert "SKIP PAST LAST ROW chains across slices" in text
    assert "Exchange" not in out._jdf.queryExecution().executedPlan().toString()
    want = cepsql.match_recognize(CHAIN_SQL, t=pa.Table.from_pylist(rows, ARROW_SCHEMA))
    assert _rows(out) == Counter(tuple(_null_normal(v) for v in r)
                                 for r in want.itertuples(index=False))


@pytest.mark.parametrize("defines", ["A AS true, B AS true", "A AS vol > 0, B AS vol > 0"])
def test_chain_slices_that_never_converge_run_as_one_task(spark, monkeypatch, defines):
    """Every row an A and a B: the chains from neighbouring rows stay one row apart
    forever (pairs (0,1), (2,3) ... vs (1,2), (3,4) ...), so no slice's entry can be
    settled from the rows around it: the clause runs as one task, same rows (with a
    gap filter, over every row: the one task must not search the kept rows alone, where
    100 would pair with 102 across the dropped row 101)."""
    monkeypatch.setattr(ordered_scan, "OVERLAP_SHARE", 1e9)
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS ta ONE ROW PER "
           f"MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B) DEFINE {defines})")
    rows = _ticks(1201)  # (even the widest rows around a border miss the input's start)
    rows[101]["vol"] = 0.0
    sliced, _, out = _chain_run(spark, [rows[:601], rows[601:900], rows[900:]], sql, 2)
    assert sliced.scan is not None and sliced.scan.entries is None
    assert (sliced.scan.gaps is None) == ("true" in defines)
    want = list(range(0, 1200, 2)) if "true" in defines else \
        list(range(0, 100, 2)) + list(range(102, 1200, 2))
    assert sorted(r.ta for r in out.collect()) == want


def test_sql_mode_slicing_blockers():
    def blocker(body: str) -> str | None:
        return slicing_blocker(find_match_recognize(
            f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS x {body})")[0].spec)
    assert blocker("PATTERN (A B{1,3}) DEFINE A AS true") is None
    assert "unbounded" in blocker("PATTERN (A B+) DEFINE A AS true")
    assert "no rows" in blocker("PATTERN (A? B?) DEFINE A AS true")
    assert "anchor" in blocker("PATTERN (^ A B) DEFINE A AS true")
    assert "ALL ROWS" in blocker("ALL ROWS PER MATCH PATTERN (A B) DEFINE A AS true")
    assert "SKIP PAST LAST ROW" in blocker(
        "AFTER MATCH SKIP TO NEXT ROW PATTERN (A B) DEFINE A AS true")
    assert "MATCH_NUMBER" in blocker("PATTERN (A B) DEFINE A AS MATCH_NUMBER() < 3")


class _Task:
    """TaskContext.get() in-process: the partition a _ScanTask is called for."""
    pid = 0

    @classmethod
    def get(cls):
        return cls

    @classmethod
    def partitionId(cls):
        return cls.pid


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
@given(sql=_chain_queries(), n=st.integers(20, 120), parts=st.integers(2, 9),
       chain_rows=st.integers(0, 8), seed=st.integers(0, 9999), gaps=st.booleans())
def test_chain_entries_and_tasks_in_process_property(monkeypatch, sql, n, parts, chain_rows,
                                                     seed, gaps):
    """The driver's entries (ordered_scan.chain_entries, widened as OrderedScan.run
    does) and the scan tasks' resumed search, run in-process over generated bounded
    patterns and dense data cut into many partitions: the kept matches equal the
    one-task run of the same worker, whenever the chains converge (else the clause
    runs as one task anyway). gaps: with gap pushdown (the rows no variable can take
    dropped, as the JVM would: chain_gap_filter), where the clause allows it."""
    import random
    import pyspark
    from cepsql.analyze.relevance import chain_gap_filter
    from cepsql.backends.spark.chain_slicing import chain_rows as rows_of
    from cepsql.backends.spark.gap_scan import POSITION_COLUMN
    from cepsql.backends.spark.slice_columns import COPY_COLUMN, SLICE_COLUMN
    from cepsql.compile.cep import BREAK_COLUMN
    from cepsql.exprs.arrow_eval import evaluate_arrow
    from cepsql.runtime.workers import bind_worker
    spec = find_match_recognize(sql)[0].spec
    assume(slicing_blocker(spec) is None)
    gap = chain_gap_filter(spec) if gaps else None
    assume(gap is not None or not gaps)
    monkeypatch.setattr(pyspark, "TaskContext", _Task)
    rnd = random.Random(seed)
    rows = [dict(r, **{SLICE_COLUMN: 0, COPY_COLUMN: False, POSITION_COLUMN: i,
                       BREAK_COLUMN: False})
            for i, r in enumerate(_dense_stream(rnd, n))]
    schema = ARROW_SCHEMA.append(pa.field(SLICE_COLUMN, pa.int64())).append(
        pa.field(COPY_COLUMN, pa.bool_())).append(pa.field(POSITION_COLUMN, pa.int64())).append(
        pa.field(BREAK_COLUMN, pa.bool_()))
    plan = plan_query(slicing.chain_sliced_spec(spec), schema, sql)
    prepared = pa.Table.from_pylist(rows, schema)
    for name, expr in plan.prepare_columns:  # (Spark's prepared_input)
        prepared = prepared.append_column(name, evaluate_arrow(expr, prepared))
    kept = [True] * n if gap is None else \
        evaluate_arrow(gap, prepared).fill_null(False).to_pylist()
    rows, schema = prepared.to_pylist(), prepared.schema
    chunks = [c for c in _chunks(rows, parts, "sorted", rnd) if c]
    layout = [PartitionRange(i, len(c), c[0]["ts"], c[-1]["ts"]) for i, c in enumerate(chunks)]
    offsets = {r.pid: chunks[r.pid][0][POSITION_COLUMN] for r in layout} if gaps else None
    bound = bind_worker(plan, schema)
    keys = [(k.column, "ascending", "at_start") for k in plan.sort_keys
            if k.column not in plan.partition_columns]
    if gaps:
        keys = [(POSITION_COLUMN, "ascending", "at_start")]
    chain = rows_of(spec, chain_rows)
    a, b = (ordered_scan._rows_time(layout, k) for k in (chain.after_rows, chain.before_rows))
    every = pa.Table.from_pylist([r for r in rows if kept[r[POSITION_COLUMN]]], schema)
    every = every.append_column(ordered_scan._PID, pa.array(
        [i for i, c in enumerate(chunks) for r in c if kept[r[POSITION_COLUMN]]], pa.int32()))
    for _ in range(ordered_scan.CHAIN_TRIES):
        overlaps = ordered_scan._overlaps(layout, a, b)
        neighbours = ordered_scan._neighbours(layout, overlaps, every, schema, "ts", keys)
        entries = ordered_scan.chain_entries(layout, overlaps, neighbours, schema, chain, bound,
                                             offsets)
        if entries is not None:
            break
        a, b = a * ordered_scan.CHAIN_WIDEN + 1, b * ordered_scan.CHAIN_WIDEN + 1
    assume(entries is not None)
    first = dict(bound.final_projection)[slicing.FIRST_MEASURE].column
    got = []
    for r in layout:
        _Task.pid = r.pid
        own, expected = chunks[r.pid], (r.count, r.lo, r.hi)
        if gaps:  # the frame gap_scan.numbered gives: kept rows and the end rows, flagged
            own = [dict(row, **{POSITION_COLUMN: (r.pid << 33) + j,
                                BREAK_COLUMN: not kept[row[POSITION_COLUMN]]})
                   for j, row in enumerate(own)
                   if kept[row[POSITION_COLUMN]] or j in (0, r.count - 1)]
            expected = (*expected, None, offsets[r.pid])
        task = ordered_scan._ScanTask(bound.worker, schema, "ts", keys, COPY_COLUMN,
                                      {r.pid: expected}, neighbours, gaps=gaps,
                                      entries=entries)
        for batch in task(iter(pa.Table.from_pylist(own, schema).to_batches(max_chunksize=7))):
            got += [row for row in batch.to_pylist() if not row[first]]
    want = [row for batch in bound.worker(iter(pa.Table.from_pylist(rows, schema).to_batches()))
            for row in batch.to_pylist()]
    # (the worker's own match numbers count per slice: MATCH_NUMBER() is not sliced; with
    # gaps each run of kept rows is a slice group of its own)
    def key(row: dict) -> str:
        return repr(sorted((k, v) for k, v in row.items() if k not in ("__cep_mn", SLICE_COLUMN)))
    assert sorted(map(key, got)) == sorted(map(key, want)), f"{sql}\n{entries}"


def test_slice_entry_from_speculative_chains():
    """Chains over a region searched from each place the true chain can stand: equal
    entries at the border settle it, different ones (or a candidate past the border
    that the others do not reach) do not."""
    from cepsql.backends.spark.chain_slicing import entry_at, slice_entry

    def chains(match_at):  # match_at: start -> last row; the chain from c, greedy
        def run(c):
            out, s = [], 0 if c is None else c  # (None: from the input's first row)
            while s < 20:
                if s in match_at:
                    out.append((s, match_at[s]))
                    s = match_at[s] + 1
                else:
                    s += 1
            return out
        return run
    assert entry_at([(2, 4), (6, 8)], 7) == 9 and entry_at([(2, 4)], 5) == 5
    sparse = chains({5: 7, 12: 14})  # every chain meets the match at 5
    assert slice_entry(sparse, 6, 0, 3, False) == 8 and slice_entry(sparse, 10, 0, 3, False) == 10
    dense = chains({s: s + 1 for s in range(20)})  # pairs from any row: parity never settles
    assert slice_entry(dense, 10, 0, 2, False) is None
    assert slice_entry(dense, 11, 0, 2, True) == 12  # from the input's first row: known
    assert slice_entry(sparse, 1, 0, 3, False) is None  # candidates 1, 2 past the border
    assert slice_entry(lambda c: None, 10, 0, 2, False) is None
