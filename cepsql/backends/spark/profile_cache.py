"""The ordered scan's planning jobs, once per file set: a per-session memo of the
partition profiles (``gap_scan.profile_rows``) and, with gap pushdown, the overlap
rows (``OrderedScan._overlap_rows``).

Both are facts about the FILES and how Spark cuts them into input partitions, read
through the query's own projection: a user re-running a query every minute over
unchanged event files need not pay them each time (the profile job was 1.2 s of a 3.7 s
query at 5M rows). Exact or nothing, the key holds everything the result could depend
on (``frame_key``):

* the plan of the frame the job reads (``semanticHash``, then ``sameSemantics`` against
  the stored frame, so a hash collision cannot hit), deterministic only: for the profile,
  the source's ORDER BY column alone (``gap_scan.profile_input``: the profile holds file
  facts only, so every query over the same source shares it); for the overlap rows, the
  query's prepared columns and relevance flag over the overlap's time ranges;
* every leaf a file relation whose files Spark listed (``InMemoryFileIndex.allFiles``):
  each file's path and size as the scan splits it, and its size and modification time
  now (``os.stat`` for ``file:``, Hadoop's FileSystem otherwise) -- a listing whose
  sizes differ from the files now is a stale frame: no memo;
* the input partitions each scan cuts (their number), every conf set in the session
  (split sizes, parallelism, time zone, ANSI ...; not cepsql's own) and the default
  parallelism.

Anything else (not a file source, Spark Connect, a listing that cannot be read): no
memo, the job runs as before. Over Parquet files the profile usually comes from their
footers (parquet_profile.py) rather than a job, and is kept the same way. The tasks still check their rows against the profile
(ordered_scan._ScanTask: count, range, order) and fail loudly when a file changed under
the same size and modification time that way, and a task compares its own kept rows
in the time ranges its neighbours read with the (memoized) overlap rows they got
(ordered_scan._lent_rows), values included. So overlap rows are memoized with gap
pushdown only: without it no task checks them. Bounded: ENTRIES entries and MAX_BYTES of overlap rows (least
recently used dropped first). Off with ``cepsql.slicing.profileCache=false``;
``spark.cep.clear_cache()`` empties it.
"""
from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame

from cepsql.exprs.spark_conf import conf_value
from cepsql.backends.spark.gap_scan import profile_input, profile_rows
from cepsql.backends.spark.parquet_profile import footer_profiles

PROFILE_CACHE_CONF = "cepsql.slicing.profileCache"
ENTRIES = 32                 # memo entries per session
MAX_BYTES = 64 << 20         # overlap rows kept per session (Arrow bytes)
MAX_ENTRY_BYTES = 16 << 20   # larger overlap tables are not kept
_STATUS = re.compile(r"FileStatus\{path=(.*?); isDirectory=(?:true|false); length=(\d+);")
_OWN_CONF = re.compile(r"cepsql\.[\w.]+ -> [^,)]*")


@dataclass
class _Entry:
    frame: object   # the JVM Dataset the job read (for sameSemantics)
    value: object
    nbytes: int


class ProfileCache:
    """A size-bounded LRU of planning-job results, one per SparkSession (thread-safe)."""

    def __init__(self, entries: int = ENTRIES, max_bytes: int = MAX_BYTES):
        self.entries, self.max_bytes = entries, max_bytes
        self._items: OrderedDict[tuple, _Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: tuple, frame: DataFrame):
        """The value kept for key when ``frame`` has the same plan as the one it was
        computed from, else None."""
        with self._lock:
            entry = self._items.get(key)
            if entry is not None:
                self._items.move_to_end(key)
        if entry is None or not _same_plan(entry.frame, frame):
            return None
        return entry.value

    def put(self, key: tuple, frame: DataFrame, value, nbytes: int = 0) -> None:
        if nbytes > min(MAX_ENTRY_BYTES, self.max_bytes):
            return
        with self._lock:
            old = self._items.pop(key, None)
            self._bytes -= 0 if old is None else old.nbytes
            self._items[key] = _Entry(frame._jdf, value, nbytes)
            self._bytes += nbytes
            while len(self._items) > self.entries or self._bytes > self.max_bytes:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= dropped.nbytes

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0


def session_cache(df: DataFrame) -> ProfileCache | None:
    """The memo of df's session (``spark.cep``), or None: switched off by
    ``cepsql.slicing.profileCache=false`` or no ``spark.cep`` on this session."""
    try:
        spark = df.sparkSession
        if (conf_value(spark, PROFILE_CACHE_CONF, "true") or "").strip().lower() == "false":
            return None
        if not isinstance(getattr(type(spark), "cep", None), property):
            return None
        return spark.cep.profile_cache
    except Exception:  # noqa: BLE001  (Spark Connect, a session without cepsql attached)
        return None


def memoized(frame: DataFrame, kind: tuple, compute: Callable[[], object],
             nbytes: Callable[[object], int] = lambda value: 0) -> tuple[object, str]:
    """compute()'s result over ``frame`` (which it must read alone, besides each row's
    input partition) and where it came from: "cache" (an earlier query over the same
    files and plan), "job" (run now and kept) or "uncached" (run now: no memo, or no
    exact identity for this frame). ``kind`` names the job and its parameters."""
    cache = session_cache(frame)
    identity = None if cache is None else frame_key(frame)
    if identity is not None:
        identity = kind + identity
        found = cache.get(identity, frame)
        if found is not None:
            return found, "cache"
    value = compute()
    if identity is None:
        return value, "uncached"
    cache.put(identity, frame, value, nbytes(value))
    return value, "job"


def cached_profiles(df: DataFrame, key: str) -> tuple[list, str]:
    """df's partition profiles (gap_scan.profile_rows: facts about the files, the
    same for every query reading ``key`` from them) and where they came from
    (``memoized``; "footer" / "footer uncached" when the Parquet footers gave them
    without a job: parquet_profile.py)."""
    frame = profile_input(df, key)
    answered = []

    def compute() -> list:
        found = footer_profiles(frame, strict=True)
        answered.append(found is not None)
        return profile_rows(frame) if found is None else found
    value, origin = memoized(frame, ("profile", key), compute)
    if answered and answered[0]:
        origin = "footer" if origin == "job" else "footer uncached"
    return value, origin


def frame_key(frame: DataFrame) -> tuple | None:
    """Everything a job reading ``frame`` (and each row's input partition) depends on,
    or None when that cannot be established."""
    try:
        return _frame_key(frame)
    except Exception:  # noqa: BLE001  (no JVM plan, an unreadable listing, a vanished file)
        return None


def _frame_key(frame: DataFrame) -> tuple | None:
    execution = frame._jdf.queryExecution()
    if not execution.analyzed().deterministic():
        return None
    files = []
    leaves = execution.optimizedPlan().collectLeaves()
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        if not leaf.getClass().getName().endswith(".LogicalRelation"):
            return None
        relation = leaf.relation()
        if not relation.getClass().getName().endswith(".HadoopFsRelation"):
            return None
        listed = relation.location().allFiles()
        statuses = _STATUS.findall(listed.toString())
        if len(statuses) != listed.size():
            return None
        files.extend((path, int(size)) for path, size in statuses)
    if not files:
        return None
    now = _file_states(frame, [p for p, _ in files])
    if any(size != state[0] for (_, size), state in zip(files, now)):
        return None  # the frame's listing is stale: Spark cuts it by the old sizes
    scans = []
    physical = execution.executedPlan().collectLeaves()
    for i in range(physical.size()):
        leaf = physical.apply(i)
        if not leaf.getClass().getName().endswith(".FileSourceScanExec"):
            return None
        scans.append(int(leaf.inputRDD().getNumPartitions()))
    spark = frame.sparkSession
    confs = _OWN_CONF.sub("", spark._jsparkSession.conf().getAll().toString())
    return (int(frame.semanticHash()), tuple(zip((p for p, _ in files), now)),
            tuple(scans), confs, spark.sparkContext.defaultParallelism)


def _file_states(frame: DataFrame, paths: list[str]) -> list[tuple[int, int]]:
    """(size, modification time) of each file now: os.stat (ns) for local paths, Hadoop's
    FileSystem (ms) otherwise."""
    states, jvm, conf = [], None, None
    for path in paths:
        if path.startswith("file:"):
            local = re.sub(r"^file:(//)?", "", path)
            st = os.stat(local if local.startswith("/") else "/" + local)
            states.append((st.st_size, st.st_mtime_ns))
            continue
        if jvm is None:
            spark = frame.sparkSession
            jvm, conf = spark._jvm, spark._jsc.hadoopConfiguration()
        hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
        status = hadoop_path.getFileSystem(conf).getFileStatus(hadoop_path)
        states.append((int(status.getLen()), int(status.getModificationTime())))
    return states


def _same_plan(stored, frame: DataFrame) -> bool:
    try:
        return bool(frame._jdf.sameSemantics(stored))
    except Exception:  # noqa: BLE001
        return False
