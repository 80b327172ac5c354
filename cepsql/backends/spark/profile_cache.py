"""The ordered scan's profile job, once per file set: a per-session memo of
``gap_scan.partition_profiles``.

The profile (per input partition: rows, NULL times, range, strict file order, and the
kept rows of the query's relevance flag) is a fact about the FILES and how Spark cuts
them into input partitions, not about the query: a user re-running a query every minute
over unchanged event files need not pay the job each time (1.2 s of a 3.7 s query at 5M
rows). Exact or nothing, the key holds everything the profile could depend on:

* the source's plan (``semanticHash``, then ``sameSemantics`` against the stored frame,
  so a hash collision cannot hit), deterministic only;
* every leaf a file relation whose files Spark listed (``InMemoryFileIndex.allFiles``):
  each file's path and size as the scan splits it, and its size and modification time
  now (``os.stat`` for ``file:``, Hadoop's FileSystem otherwise) -- a listing whose
  sizes differ from the files now is a stale frame: no cache;
* the input partitions each scan cuts (their number) and every Spark conf set in the
  session (split sizes, parallelism, time zone, ANSI ...) plus the default parallelism;
* the ORDER BY column and the relevance SQL (the kept facts depend on the query).

Anything else (not a file source, Spark Connect, a listing that cannot be read): no
cache, the job runs as before. The tasks still check their rows against the profile
(ordered_scan._ScanTask) and fail loudly when a file changed under the same size and
modification time. Off with ``cepsql.slicing.profileCache=false``; ``spark.cep.clear_cache()``
empties it.
"""
from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

from pyspark.sql import DataFrame

from .gap_scan import partition_profiles

PROFILE_CACHE_CONF = "cepsql.slicing.profileCache"
ENTRIES = 32  # profiles kept per session (least recently used dropped first)
_STATUS = re.compile(r"FileStatus\{path=(.*?); isDirectory=(?:true|false); length=(\d+);")


@dataclass
class _Entry:
    frame: object       # the JVM Dataset profiled (for sameSemantics)
    profiles: list      # gap_scan.PartitionProfile


class ProfileCache:
    """A size-bounded LRU of partition profiles, one per SparkSession (thread-safe)."""

    def __init__(self, entries: int = ENTRIES):
        self.entries = entries
        self._items: OrderedDict[tuple, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: tuple, df: DataFrame) -> list | None:
        with self._lock:
            entry = self._items.get(key)
            if entry is not None:
                self._items.move_to_end(key)
        if entry is None or not _same_plan(entry.frame, df):
            return None
        return entry.profiles

    def put(self, key: tuple, df: DataFrame, profiles: list) -> None:
        with self._lock:
            self._items[key] = _Entry(df._jdf, list(profiles))
            self._items.move_to_end(key)
            while len(self._items) > self.entries:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


def session_cache(df: DataFrame) -> ProfileCache | None:
    """The profile cache of df's session (``spark.cep``), or None: switched off by
    ``cepsql.slicing.profileCache=false`` or no ``spark.cep`` on this session."""
    try:
        spark = df.sparkSession
        if (spark.conf.get(PROFILE_CACHE_CONF, "true") or "").strip().lower() == "false":
            return None
        if not isinstance(getattr(type(spark), "cep", None), property):
            return None
        return spark.cep.profile_cache
    except Exception:  # noqa: BLE001  (Spark Connect, a session without cepsql attached)
        return None


def cached_profiles(df: DataFrame, key: str, relevant_sql: str) -> tuple[list, str]:
    """df's partition profiles (gap_scan.partition_profiles) and where they came from:
    "cache" (an earlier query over the same files), "job" (run now and kept) or
    "uncached" (run now; no cache, or no exact identity for this source)."""
    cache = session_cache(df)
    identity = None if cache is None else profile_key(df, key, relevant_sql)
    if identity is not None:
        found = cache.get(identity, df)
        if found is not None:
            return found, "cache"
    profiles = partition_profiles(df, key, relevant_sql)
    if identity is None:
        return profiles, "uncached"
    cache.put(identity, df, profiles)
    return profiles, "job"


def profile_key(df: DataFrame, key: str, relevant_sql: str) -> tuple | None:
    """Everything df's partition profile for (key, relevant_sql) depends on, or None when
    that cannot be established (then no cache)."""
    try:
        return _profile_key(df, key, relevant_sql)
    except Exception:  # noqa: BLE001  (no JVM plan, an unreadable listing, a vanished file)
        return None


def _profile_key(df: DataFrame, key: str, relevant_sql: str) -> tuple | None:
    execution = df._jdf.queryExecution()
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
    now = _file_states(df, [p for p, _ in files])
    if now is None or any(size != state[0] for (_, size), state in zip(files, now)):
        return None  # the frame's listing is stale: Spark cuts it by the old sizes
    scans = []
    physical = execution.executedPlan().collectLeaves()
    for i in range(physical.size()):
        leaf = physical.apply(i)
        if not leaf.getClass().getName().endswith(".FileSourceScanExec"):
            return None
        scans.append(int(leaf.inputRDD().getNumPartitions()))
    spark = df.sparkSession
    confs = tuple(sorted((k, v) for k, v in spark.conf.getAll.items()
                         if not k.startswith("cepsql.")))
    return (int(df.semanticHash()), tuple(zip((p for p, _ in files), now)), tuple(scans),
            confs, spark.sparkContext.defaultParallelism, key, relevant_sql)


def _file_states(df: DataFrame, paths: list[str]) -> list[tuple[int, int]] | None:
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
            spark = df.sparkSession
            jvm, conf = spark._jvm, spark._jsc.hadoopConfiguration()
        hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
        status = hadoop_path.getFileSystem(conf).getFileStatus(hadoop_path)
        states.append((int(status.getLen()), int(status.getModificationTime())))
    return states


def _same_plan(stored, df: DataFrame) -> bool:
    try:
        return bool(df._jdf.sameSemantics(stored))
    except Exception:  # noqa: BLE001
        return False
