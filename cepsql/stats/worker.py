"""Statistics without a separate job: each Spark task estimates rates and selectivities
from its own first rows and plans with them (runtime/task_planning.py).

Why: driver-side sampling (spark_sample.py) costs a count and a sample job before every
new query, seconds on a small cluster even for small inputs. Under SKIP_TILL_ANY_MATCH
every plan gives the same matches, so tasks may plan differently; each one pays a few
milliseconds on rows it reads anyway. ``cepsql.stats.mode`` picks the source: ``worker``
(default) or ``driver`` (the sampling job, also what EXPLAIN uses to show estimates).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from cepsql.errors import CepAnalysisError

MODE_CONF = "cepsql.stats.mode"                    # worker | driver
WORKER_ROWS_CONF = "cepsql.stats.workerSampleRows"  # rows each task estimates from
DEFAULT_WORKER_ROWS = 10_000
MODES = ("worker", "driver")


@dataclass(frozen=True)
class InWorkerStatistics:
    """The statistics source "estimate inside each task from its first sample_rows rows".
    Called on the driver it has no numbers (None): the planner then plans with uniform
    estimates and hands the workers what they need to re-plan (compile.cep.plan_cep)."""
    sample_rows: int = DEFAULT_WORKER_ROWS
    in_worker: bool = True
    adaptive: object | None = None   # runtime/adaptive.AdaptiveSettings (None: off)

    def __call__(self, spec) -> None:
        return None


@dataclass(frozen=True)
class DriverSampleForExplain:
    """EXPLAIN under cepsql.stats.mode=worker: the driver-side sample (``estimate``) shows
    the numbers, and ``note`` says that the query itself plans in its tasks."""
    estimate: Callable
    sample_rows: int = DEFAULT_WORKER_ROWS

    @property
    def note(self) -> str:
        return (f"run by spark.cep.sql, each Spark task re-plans from its own first "
                f"{self.sample_rows} rows (cepsql.stats.mode=worker); shown: the plan for "
                "a driver-side sample")

    def __call__(self, spec):
        return self.estimate(spec)


def stats_mode(get: Callable[[str], str | None]) -> str:
    """The configured statistics source (a conf getter, e.g. spark.conf.get)."""
    mode = (get(MODE_CONF) or "worker").strip().lower()
    if mode not in MODES:
        raise CepAnalysisError(f"invalid value {mode!r} for {MODE_CONF}: expected "
                               f"{' or '.join(MODES)}")
    return mode


def worker_sample_rows(get: Callable[[str], str | None]) -> int:
    text = get(WORKER_ROWS_CONF)
    try:
        rows = DEFAULT_WORKER_ROWS if text is None else int(str(text).strip())
    except ValueError:
        rows = -1
    if rows < 1:
        raise CepAnalysisError(f"invalid value {text!r} for {WORKER_ROWS_CONF}: expected a "
                               "positive number of rows")
    return rows


def is_in_worker(statistics: object) -> bool:
    return bool(getattr(statistics, "in_worker", False))
