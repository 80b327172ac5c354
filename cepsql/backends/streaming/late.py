"""Rows dropped as late (behind the watermark), counted per streaming clause or workload
pass and listed by ``spark.cep.late_rows()``.

A classic session counts them in a Spark accumulator the stateful processor adds to.
Spark Connect has no SparkContext and so no accumulators: there the stateful operator's
output carries each call's count (packing.LATE_COLUMN, on both kinds of session), the
stream observes its sum per micro-batch (``DataFrame.observe``, reported in the query's
progress) and a client-side StreamingQueryListener adds the micro-batches' sums up."""
from __future__ import annotations

import threading

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQueryListener

from cepsql.backends.streaming.packing import LATE_COLUMN

__all__ = ["LateRows", "ObservedCount", "late_counter", "observe_late", "task_counter"]


class ObservedCount:
    """A late-row total fed by the progress of the micro-batches (Spark Connect)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value = 0

    def add(self, rows: int) -> None:
        with self._lock:
            self._value += rows

    @property
    def value(self) -> int:
        with self._lock:
            return self._value


class _ProgressListener(StreamingQueryListener):
    """Adds each micro-batch's observed late-row sums to the session's counters."""

    def __init__(self, counters: dict[str, object]):
        self.counters = counters

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        for name, row in (event.progress.observedMetrics or {}).items():
            counter = self.counters.get(name)
            if isinstance(counter, ObservedCount) and row[0]:
                counter.add(int(row[0]))

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass


class LateRows:
    """One session's late-row counters by name (an accumulator on a classic session, an
    ObservedCount on Spark Connect, whose listener is added on first use)."""

    def __init__(self) -> None:
        self._counters: dict[str, object] = {}
        self._listener: _ProgressListener | None = None

    def counter(self, spark, name: str):
        """A new counter listed under ``name``."""
        context = getattr(spark, "sparkContext", None)  # None on Spark Connect
        if context is not None:
            counter = context.accumulator(0)
        else:
            counter = ObservedCount()
            if self._listener is None:
                self._listener = _ProgressListener(self._counters)
                spark.streams.addListener(self._listener)
        self._counters[name] = counter
        return counter

    def counts(self) -> dict[str, int]:
        return {name: int(c.value) for name, c in self._counters.items()}


def late_counter(spark, name: str):
    """The counter of a stream's late rows listed as ``name`` by ``spark.cep.late_rows()``
    (None without ``spark.cep``: nothing would read it)."""
    rows = getattr(getattr(spark, "_cepsql_session", None), "_late_rows", None)
    return None if rows is None else rows.counter(spark, name)


def task_counter(counter):
    """What the stateful processor adds its late rows to in the tasks: the accumulator,
    or None where the stream's progress carries the count."""
    return None if isinstance(counter, ObservedCount) else counter


def observe_late(out: DataFrame, name: str, counter) -> DataFrame:
    """The stateful operator's output ``out``, observing the late rows of each
    micro-batch under ``name`` where ``counter`` is fed by progress (Spark Connect)."""
    if not isinstance(counter, ObservedCount):
        return out
    return out.observe(name, F.coalesce(F.sum(F.col(LATE_COLUMN)), F.lit(0)).alias("late"))
