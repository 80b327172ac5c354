"""A Spark session's conf, read once per statement. On Spark Connect every
``spark.conf.get`` is a round trip to the server, and one ``spark.cep.sql`` statement
reads ~20 keys (planner options, statistics, the time zone, ...). Inside
``conf_snapshot()`` the first read fetches every conf set in the session in one request
(``spark.conf.getAll``) and later reads answer from it; outside, each read asks Spark.

``conf.getAll`` holds exactly the keys set in the session (its SparkConf included), so
``getAll.get(key, default)`` is what ``spark.conf.get(key, default)`` answers for every
key cepsql reads (none of them falls back to another key). Keys whose unset value is
Spark's registered default (the session time zone) are read once per snapshot."""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator

from pyspark.sql import SparkSession

__all__ = ["conf_snapshot", "conf_value", "conf_reader", "spark_default", "snapshot_memo"]

_SNAPSHOT: ContextVar[dict | None] = ContextVar("cepsql_conf_snapshot", default=None)


@contextmanager
def conf_snapshot() -> Iterator[None]:
    """Inside the block, the conf of each session is fetched once (on its first read) and
    reads answer from that copy; a nested block shares the outer one's copy."""
    if _SNAPSHOT.get() is not None:
        yield
        return
    token = _SNAPSHOT.set({})
    try:
        yield
    finally:
        _SNAPSHOT.reset(token)


def snapshot_memo() -> dict | None:
    """The open snapshot's memo (callers may keep other per-statement facts in it under
    tuple keys of their own), or None outside ``conf_snapshot``."""
    return _SNAPSHOT.get()


def _session_confs(spark: SparkSession, memo: dict) -> dict[str, str]:
    key = ("confs", id(spark))
    if key not in memo:  # the entry keeps spark alive: its id is not reused meanwhile
        memo[key] = (spark, dict(spark.conf.getAll))
    return memo[key][1]


def conf_value(spark: SparkSession, key: str, default: str | None = None) -> str | None:
    """``spark.conf.get(key, default)``: from the snapshot inside ``conf_snapshot``."""
    memo = _SNAPSHOT.get()
    if memo is None:
        return spark.conf.get(key, default)
    return _session_confs(spark, memo).get(key, default)


def conf_reader(spark: SparkSession) -> Callable[[str], str | None]:
    """``key -> spark.conf.get(key, None)`` (the getter planner options are read with)."""
    return lambda key: conf_value(spark, key)


def spark_default(spark: SparkSession, key: str) -> str | None:
    """``spark.conf.get(key)``: the value set, else Spark's registered default for the key
    (one request per snapshot when unset, e.g. the session time zone)."""
    memo = _SNAPSHOT.get()
    if memo is None:
        return spark.conf.get(key)
    confs = _session_confs(spark, memo)
    if key in confs:
        return confs[key]
    entry = ("default", id(spark), key)
    if entry not in memo:
        memo[entry] = spark.conf.get(key)
    return memo[entry]
