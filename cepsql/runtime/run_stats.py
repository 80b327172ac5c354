"""What the evaluators counted while a statement ran (partial matches, runs, peak rows held,
plans chosen in the task, adaptive switches): the "actual" side of EXPLAIN ANALYZE.

Each worker keeps the counters of its own last run (``CepWorker.last_stats``); a caller
that wants them passes a ``RunStatistics`` down the call (in-process: ``run_local(...,
stats=RunStatistics())``), which receives one ``ClauseStatistics`` per MATCH_RECOGNIZE
clause run. No module state: concurrent runs each fill their own object, and the threads
of one run work on their own copies of the worker, merged once they are done
(``merge_counters``)."""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ClauseStatistics", "RunStatistics", "merge_counters"]

Counters = dict[str, object]


@dataclass
class ClauseStatistics:
    """One clause run: where the clause starts in the statement (None when its plan was
    run directly, as by ``execute_plan``) and its evaluator's counters (empty when the
    evaluator keeps none, as the SQL:2016 one and the sequence fast path)."""
    position: int | None = None
    counters: Counters = field(default_factory=dict)

    def record(self, runs: list[Counters | None]) -> None:
        """Set the counters from the runs of the clause's slices (see merge_counters)."""
        self.counters = merge_counters(runs)


@dataclass
class RunStatistics:
    """The clause runs of one statement, in the order they ran."""
    clauses: list[ClauseStatistics] = field(default_factory=list)

    def clause(self, position: int | None) -> ClauseStatistics:
        """A new entry for a clause about to run (filled as it runs)."""
        self.clauses.append(ClauseStatistics(position))
        return self.clauses[-1]

    @property
    def last(self) -> Counters:
        """The counters of the clause that ran last ({} when none ran)."""
        return self.clauses[-1].counters if self.clauses else {}


def merge_counters(runs: list[Counters | None]) -> Counters:
    """The counters of one clause run in several slices as one run's: peaks (``peak_*``)
    and the ``planned`` flag take the maximum, counts add up, texts (the plan chosen in a
    task) are listed once each."""
    merged: Counters = {}
    for counters in runs:
        for key, value in (counters or {}).items():
            if key not in merged:
                merged[key] = value
            elif isinstance(value, str):
                if value not in str(merged[key]).split("; "):
                    merged[key] = f"{merged[key]}; {value}"
            elif key.startswith("peak_") or key == "planned":
                merged[key] = max(merged[key], value)
            else:
                merged[key] = merged[key] + value
    return merged
