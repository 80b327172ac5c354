"""Wall and CPU time per stage of an in-process cepsql call, for bench_inprocess.py: on a
loaded machine the CPU time shows where the work goes, the wall time what a user waits.

The package is not instrumented: ``record_stages()`` wraps the functions the in-process
engine calls by module attribute (its public stage functions, see STAGES) with timers for
the duration of the block. On the main thread the CPU time is the process's (Arrow's
thread pool works for it there); in worker threads it is the thread's own, so the CPU
column of a stage run in threads is the sum over threads."""
from __future__ import annotations

import functools
import importlib
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

__all__ = ["STAGES", "StageTimes", "record_stages"]

#: (module, function, stage name, kind): "main" stages run on the calling thread, "wait"
#: stages on the calling thread around the worker threads (their CPU is everything's),
#: "worker" stages in the worker threads, "detail" stages inside a worker stage.
STAGES = [
    ("cepsql.backends.local.engine", "to_arrow", "pandas -> Arrow", "main"),
    ("cepsql.parse", "find_match_recognize", "parse (cached per statement)", "main"),
    ("cepsql.compile.clause", "plan_query", "plan", "main"),
    ("cepsql.backends.local.engine", "partition_ranks", "partition ranks", "main"),
    ("cepsql.backends.local.engine", "run_by_partition",
     "sort + match by partition (all below)", "wait"),
    ("cepsql.backends.local.engine", "run_worker", "match the sorted input (all below)",
     "wait"),
    ("cepsql.backends.local.threads", "run_sequence", "sequence fast path per slice",
     "worker"),
    ("cepsql.backends.local.sequence", "define_masks", "  DEFINE masks", "detail"),
    ("cepsql._ext.sequence", "match_sequences", "  sequence search", "detail"),
    ("cepsql._ext.sequence", "sequence_leaves", "  MEASURES row references", "detail"),
    ("cepsql.backends.local.engine", "to_pandas", "Arrow -> pandas", "main"),
]


class StageTimes:
    """name -> [wall seconds, CPU seconds, calls], plus the whole call's wall and CPU time
    (``total``) once the block ends."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}
        self.kinds: dict[str, str] = {}
        self.total = (0.0, 0.0)
        self._lock = threading.Lock()

    def add(self, name: str, kind: str, wall: float, cpu: float) -> None:
        with self._lock:
            entry = self.times.setdefault(name, [0.0, 0.0, 0])
            entry[0] += wall
            entry[1] += cpu
            entry[2] += 1
            self.kinds[name] = kind

    def cpu_split(self) -> tuple[float, float]:
        """(CPU seconds on the calling thread, in the worker threads): the whole call's
        CPU less what the worker stages took, and the worker stages' sum."""
        parallel = sum(cpu for name, (_, cpu, _) in self.times.items()
                       if self.kinds[name] == "worker")
        return max(0.0, self.total[1] - parallel), parallel

    def table(self, rows: int | None = None) -> str:
        """The breakdown as text lines (per 1M rows too when rows is given); "other" is
        the calling thread's time outside the timed stages (preparing columns, binding,
        the final projection)."""
        lines = [f"    {'stage':<40} {'wall s':>8} {'CPU s':>8}"
                 + ("   CPU s per 1M rows" if rows else "")]
        order = {name: i for i, (_, _, name, _) in enumerate(STAGES)}
        entries = sorted(self.times.items(), key=lambda item: order[item[0]])
        main = [(w, c) for name, (w, c, _) in entries if self.kinds[name] in ("main", "wait")]
        other = (self.total[0] - sum(w for w, _ in main), self.total[1] - sum(c for _, c in main))
        for name, (wall, cpu, calls) in entries + [("other", [*other, 1])]:
            tail = f"   {cpu / rows * 1e6:8.3f}" if rows else ""
            label = name if calls == 1 else f"{name} (x{calls})"
            lines.append(f"    {label:<40} {wall:8.3f} {cpu:8.3f}{tail}")
        return "\n".join(lines)


def _cpu_clock() -> Callable[[], float]:
    if threading.current_thread() is threading.main_thread():
        return time.process_time
    return time.thread_time


def _timed(fn: Callable, name: str, kind: str, times: StageTimes) -> Callable:
    @functools.wraps(fn)
    def call(*args, **kwargs):
        clock = _cpu_clock()
        wall, cpu = time.perf_counter(), clock()
        try:
            return fn(*args, **kwargs)
        finally:
            times.add(name, kind, time.perf_counter() - wall, clock() - cpu)
    return call


@contextmanager
def record_stages() -> Iterator[StageTimes]:
    """Time the STAGES of the in-process calls made inside the block (not thread-safe:
    one benchmark call at a time)."""
    times = StageTimes()
    saved = []
    for module_name, attr, name, kind in STAGES:
        module = importlib.import_module(module_name)
        original = getattr(module, attr)
        saved.append((module, attr, original))
        setattr(module, attr, _timed(original, name, kind, times))
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield times
    finally:
        times.total = (time.perf_counter() - wall, time.process_time() - cpu)
        for module, attr, original in reversed(saved):
            setattr(module, attr, original)
