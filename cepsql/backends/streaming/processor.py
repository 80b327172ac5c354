"""The StatefulProcessor hosting one key's StreamEngine state in Spark's state store."""
from __future__ import annotations

from typing import Iterator

import pandas as pd
import pyarrow as pa
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from .engine import NO_TIMER, KeyState, new_engine
from .ipc import from_bytes, to_bytes

ROWS_COLUMN = "__cep_rows"
OUT_COLUMN = "__cep_out"
STATE_SCHEMA = StructType(
    [StructField("held", BinaryType()), StructField("pending", BinaryType())]
    + [StructField(name, LongType()) for name in
       ("c0", "c1", "c2", "c3", "released_us", "closed", "late")]
    + [StructField("evaluator", BinaryType())])


class MatchProcessor(StatefulProcessor):
    """Per key: one state value (rows as Arrow IPC, the evaluator's carry-over as
    integers (SQL:2016 mode) or CepMatcher.export_state bytes (CEP mode))
    and at most one event-time timer (the next time the watermark can decide something)."""

    def __init__(self, worker, event_column: str, sort_keys, late_counter=None):
        self.worker = worker
        self.event_column = event_column
        self.sort_keys = sort_keys
        self.late_counter = late_counter

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.value = handle.getValueState("cep_key", STATE_SCHEMA)
        self.engine = new_engine(self.worker, self.event_column, self.sort_keys)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        # the packed rows are the last column (Spark may not keep the column names)
        tables = [from_bytes(blob) for frame in rows for blob in frame.iloc[:, -1]]
        tables = [t for t in tables if t is not None]
        table = pa.concat_tables(tables) if tables else None
        yield from self._step(table, timerValues.getCurrentWatermarkInMs())

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[pd.DataFrame]:
        yield from self._step(None, timerValues.getCurrentWatermarkInMs())

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------
    def _step(self, table, watermark_ms: int) -> Iterator[pd.DataFrame]:
        state = self._load()
        step = self.engine.advance(state, table, max(int(watermark_ms), 0))
        self._save(state)
        wanted = [] if step.timer_ms == NO_TIMER else [step.timer_ms]
        current = [int(t) for t in self.handle.listTimers()]
        if current != wanted:  # each call is a round trip to the JVM's state server
            for timer in current:
                self.handle.deleteTimer(timer)
            for timer in wanted:
                self.handle.registerTimer(timer)
        if step.late and self.late_counter is not None:
            self.late_counter.add(step.late)
        if step.output:
            blob = to_bytes(pa.Table.from_batches(step.output))
            if blob:
                yield pd.DataFrame({OUT_COLUMN: [blob]})

    def _load(self) -> KeyState:
        row = self.value.get()  # None for a new key
        return KeyState() if row is None else state_from_row(row)

    def _save(self, state: KeyState) -> None:
        self.value.update(state_to_row(state))


def state_to_row(s: KeyState) -> tuple:
    """A key's state as the one STATE_SCHEMA value stored for it (rows as Arrow IPC)."""
    return (to_bytes(s.held), to_bytes(s.pending), *[int(c) for c in s.carry],
            int(s.released_us), int(s.closed), int(s.late), s.evaluator)


def state_from_row(row) -> KeyState:
    held, pending, c0, c1, c2, c3, released, closed, late, evaluator = row
    return KeyState(held=from_bytes(held), evaluator=bytes(evaluator or b""),
                    pending=from_bytes(pending), carry=[c0, c1, c2, c3],
                    released_us=released, closed=closed, late=late)


def stored_bytes(row: tuple) -> int:
    """Bytes of a stored state value's binary fields (rows and evaluator carry-over)."""
    return sum(len(v) for v in row if isinstance(v, (bytes, bytearray)))
