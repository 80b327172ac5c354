"""Wall and CPU time per stage of in-process calls, for benchmarks/bench_inprocess.py: on
a loaded machine the CPU time shows where the work goes, the wall time what a user waits.
Off unless a ``record_stages()`` block is active in the calling context (then each
``stage(name)`` block adds its times; on the main thread the CPU time is the process's,
Arrow's thread pool included; in worker threads it is the thread's own, so the CPU column
of a threaded stage is the sum over threads)."""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar, copy_context
from typing import Callable, Iterator, TypeVar

__all__ = ["StageTimes", "record_stages", "stage", "in_context", "WAIT_FOR_WORKERS"]

T = TypeVar("T")
WAIT_FOR_WORKERS = "worker threads (all of the above)"


class StageTimes:
    """name -> [wall seconds, CPU seconds, calls], in first-seen order."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}
        self.in_workers: set[str] = set()  # stages timed in worker threads
        self._lock = threading.Lock()

    def add(self, name: str, wall: float, cpu: float) -> None:
        with self._lock:
            entry = self.times.setdefault(name, [0.0, 0.0, 0])
            entry[0] += wall
            entry[1] += cpu
            entry[2] += 1
            if threading.current_thread() is not threading.main_thread():
                self.in_workers.add(name)

    def cpu_split(self) -> tuple[float, float]:
        """(CPU seconds of the stages on the main thread, of those in worker threads);
        a main-thread stage that only waits for the workers is left out of both."""
        serial = sum(cpu for name, (_, cpu, _) in self.times.items()
                     if name not in self.in_workers and name != WAIT_FOR_WORKERS)
        parallel = sum(self.times[name][1] for name in self.in_workers)
        return serial, parallel

    def table(self, rows: int | None = None) -> str:
        """The breakdown as text lines (per 1M rows too when rows is given)."""
        lines = [f"    {'stage':<34} {'wall s':>8} {'CPU s':>8}"
                 + ("   CPU s per 1M rows" if rows else "")]
        for name, (wall, cpu, calls) in self.times.items():
            tail = f"   {cpu / rows * 1e6:8.3f}" if rows else ""
            label = name if calls == 1 else f"{name} (x{calls})"
            lines.append(f"    {label:<34} {wall:8.3f} {cpu:8.3f}{tail}")
        return "\n".join(lines)


_current: ContextVar[StageTimes | None] = ContextVar("cepsql_local_stages", default=None)


@contextmanager
def record_stages() -> Iterator[StageTimes]:
    """Collect the stage times of the in-process calls made inside the block."""
    times = StageTimes()
    token = _current.set(times)
    try:
        yield times
    finally:
        _current.reset(token)


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Time the block as stage ``name`` when recording (nothing otherwise)."""
    times = _current.get()
    if times is None:
        yield
        return
    clock = _cpu_clock()
    wall, cpu = time.perf_counter(), clock()
    try:
        yield
    finally:
        times.add(name, time.perf_counter() - wall, clock() - cpu)


def _cpu_clock() -> Callable[[], float]:
    """The process's CPU time on the main thread (Arrow's own thread pool works for it
    there), the thread's in the evaluators' worker threads (which run side by side)."""
    if threading.current_thread() is threading.main_thread():
        return time.process_time
    return time.thread_time


def in_context(fn: Callable[..., T]) -> Callable[..., T]:
    """fn run in a copy of the caller's context (so worker threads record stages too)."""
    ctx = copy_context()
    return lambda *args: ctx.copy().run(fn, *args)
