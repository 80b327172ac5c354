"""A bounded, time-boxed row sample of a Spark DataFrame, prepared for estimation.

Statistics must never cost more than a small, known amount of cluster time, because
they are computed before every planned query on data of any size. So: one count, one
Bernoulli sample sized to return about ``sample_rows`` rows (``sample().limit()``, the
limit only a cap), collected as Arrow. Every Spark job runs in its own job group on a
helper thread and is cancelled when the budget runs out; the caller then gets whatever
arrived (a smaller pilot sample, or nothing) together with ``truncated=True``.

The single-row DEFINE conjuncts, PARTITION BY and ORDER BY expressions are computed by
Spark itself inside the sampled query (exact Spark semantics, every Spark function),
so only their results travel to the driver.
"""
from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pyarrow as pa

from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.errors import CepAnalysisError, CepRuntimeError, CepUnsupportedError
from cepsql.exprs.spark_sql import quote_identifier, to_spark_sql
from cepsql.analyze.conjuncts import COLUMN_PREFIX, ConditionSplit
from cepsql.stats.prepare import ORDER_COLUMN, partition_column, unary_column

_TIMED_OUT = object()
_PILOT_SHARE = 0.2  # a slow count (> this share of the budget) warns of a big input


@dataclass
class SparkSample:
    """What the Spark side delivered: the prepared sample (None if nothing arrived)."""
    table: pa.Table | None
    fraction: float
    input_rows: int | None
    truncated: bool
    notes: list[str] = field(default_factory=list)


def prepared_select(spec: MatchRecognizeSpec, split: ConditionSplit,
                    notes: list[str]) -> list[str]:
    """Spark SQL select list producing the prepared-sample columns."""
    exprs = [f"{to_spark_sql(k.expr)} AS {quote_identifier(partition_column(i))}"
             for i, k in enumerate(spec.partition_by)]
    if spec.order_by:
        exprs.append(f"{to_spark_sql(spec.order_by[0].expr)} AS {quote_identifier(ORDER_COLUMN)}")
    for idx, var in enumerate(split.variables):
        parts = []
        for conjunct in split.unary[var]:
            try:
                parts.append(to_spark_sql(conjunct))
            except CepUnsupportedError as exc:
                notes.append(f"{var}: single-row condition left out ({exc})")
        flag = "coalesce(" + " AND ".join(parts) + ", false)" if parts else "true"
        exprs.append(f"{flag} AS {quote_identifier(unary_column(idx))}")
    exprs += [f"{quote_identifier(c)} AS {quote_identifier(f'{COLUMN_PREFIX}{k}')}"
              for k, c in enumerate(split.columns)]
    return exprs


def collect_sample(spec: MatchRecognizeSpec, split: ConditionSplit, df: Any, *,
                   sample_rows: int, time_budget_s: float, seed: int) -> SparkSample:
    """Count df, then collect about sample_rows prepared rows, within time_budget_s."""
    deadline = time.monotonic() + time_budget_s
    notes: list[str] = []
    try:
        prepared = df.selectExpr(*prepared_select(spec, split, notes))
    except Exception as exc:  # AnalysisException: unknown column, type mismatch ...
        raise CepAnalysisError(f"cannot prepare the statistics sample: {exc}") from exc
    runner = _BoundedRunner(df.sparkSession)
    started = time.monotonic()
    count = runner.run(prepared.count, deadline - time.monotonic())
    if count is _TIMED_OUT:
        notes.append(f"time budget {time_budget_s:g}s ran out while counting the input; "
                     "no rows sampled, defaults used")
        return SparkSample(None, 0.0, None, True, notes)
    count = int(count)
    if count == 0:
        return SparkSample(None, 0.0, 0, False, notes)
    # fraction = target/count (no head-room): limit() then only trims the binomial
    # overshoot of the last partition read, so the sample covers the whole input
    fraction = min(1.0, sample_rows / count)
    sampled = prepared if fraction >= 1.0 else prepared.sample(False, fraction, seed)
    targets = [sample_rows]
    if time.monotonic() - started > _PILOT_SHARE * time_budget_s and sample_rows > 2000:
        # Same fraction, smaller limit: Spark's limit scans input partitions a few at
        # a time and stops early, so the pilot costs about a tenth of a full pass
        # (but only covers the first partitions read).
        targets = [max(1000, sample_rows // 10), sample_rows]
    best: SparkSample | None = None
    for target in targets:
        table = runner.run(partial(_to_arrow, sampled.limit(target)),
                           deadline - time.monotonic())
        if table is _TIMED_OUT:
            got = "the pilot sample" if best is not None else "no rows"
            notes.append(f"time budget {time_budget_s:g}s ran out while sampling "
                         f"{target} rows; using {got}")
            if best is None:
                return SparkSample(None, 0.0, count, True, notes)
            best.truncated = True
            best.notes = notes
            return best
        best = SparkSample(table, fraction, count, False, notes)
    assert best is not None
    return best


def _to_arrow(df: Any) -> pa.Table:
    """Collect as Arrow (toArrow in Spark 4; the private collector before it)."""
    if hasattr(df, "toArrow"):
        return df.toArrow()
    return pa.Table.from_batches(df._collect_as_arrow())


class _BoundedRunner:
    """Runs one Spark action on a helper thread in a fresh job group and cancels the
    group if it is not done in time (the action's thread then ends on its own)."""

    def __init__(self, session: Any):
        self.session = session
        try:
            sc = session.sparkContext
            self._tag: Callable[[str], None] = lambda g: sc.setJobGroup(
                g, "cepsql statistics sample", interruptOnCancel=True)
            self._cancel: Callable[[str], None] = sc.cancelJobGroup
        except Exception:  # noqa: BLE001  (Spark Connect: no SparkContext, tags instead)
            self._tag, self._cancel = session.addTag, session.interruptTag

    def run(self, action: Callable[[], Any], timeout: float) -> Any:
        if timeout <= 0:
            return _TIMED_OUT
        group = f"cepsql-stats-{uuid.uuid4().hex}"
        box: dict[str, Any] = {}
        abandoned = threading.Event()

        def target() -> None:
            try:
                self._tag(group)
                if not abandoned.is_set():
                    box["value"] = action()
            except BaseException as exc:  # noqa: BLE001  (re-raised on the caller's thread)
                box["error"] = exc

        thread = _thread(target, self.session)
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            abandoned.set()
            self._cancel(group)
            return _TIMED_OUT
        if "error" in box:
            exc = box["error"]
            raise CepRuntimeError(f"statistics sample failed: {exc}") from exc
        return box["value"]


def _thread(target: Callable[[], None], session: Any) -> threading.Thread:
    """A daemon thread that carries the session's thread-local Spark properties."""
    try:
        from pyspark import InheritableThread
        thread: threading.Thread = InheritableThread(target, session=session)
    except Exception:  # noqa: BLE001  (no active SparkContext: plain thread)
        thread = threading.Thread(target=target)
    thread.daemon = True
    return thread
