"""The StatefulProcessor hosting the StreamEngine state of a bucket of keys in Spark's
state store (transformWithState, Row variant: no pandas on the way in or out).

Why buckets: every state get/update and timer call is a round trip between the Python
worker and the JVM's state server, and each ``handleInputRows`` call is one more. Keyed
by PARTITION BY these cost ~6 round trips per key and micro-batch; keyed by the bucket
(packing.py) they are paid once per bucket, whatever the number of keys in it."""
from __future__ import annotations

import json
import os
import struct
import time
from typing import Iterator

import pyarrow as pa
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, LongType, Row, StructField, StructType

from cepsql.errors import error_site, transported
from cepsql.backends.streaming.engine import (NO_TIMER, KeyState, StreamEngine,
                                              state_from_values, stored_values)
from cepsql.backends.streaming.replanning import stream_engine
from cepsql.backends.streaming.ipc import (check_layout, from_bytes, layout_header, stored_value,
                                            to_bytes)
from cepsql.backends.streaming.packing import DEFAULT_BUCKETS, LATE_COLUMN, OUT_COLUMN, ROWS_COLUMN  # noqa: F401  (re-exported)

STATE_NAME = "cep_bucket"
# keys: every key of the bucket (encode_keys); timer: the event-time timer registered
# for the bucket (the earliest of its keys' timers), so no call lists the timers
STATE_SCHEMA = StructType([StructField("keys", BinaryType()), StructField("timer", LongType())])
# what a stateful call emits: its late rows' count, its decided matches as Arrow IPC (the
# last column: packing.RowUnpacker)
OUTPUT_SCHEMA = StructType([StructField(LATE_COLUMN, LongType()),
                            StructField(OUT_COLUMN, BinaryType())])
# set to a folder: each worker process appends one JSON line of phase timings per call
PROFILE_ENV = "CEPSQL_STREAM_PROFILE"
_HEAD = struct.Struct("<I")
_KEY = struct.Struct("<4I8q")


class MatchProcessor(StatefulProcessor):
    """Per bucket: one state value holding each of its keys' KeyState (rows as Arrow
    IPC, the evaluator's carry-over as integers (SQL:2016 mode) or CepMatcher.export_state
    bytes (CEP mode)) and next timer; at most one event-time timer, the earliest of them."""

    def __init__(self, worker, event_column: str, sort_keys, late_counter=None,
                 buckets: int = DEFAULT_BUCKETS, spec=None, output_rows: bool = False):
        self.worker = worker
        # emit the matches as rows of the operator's output (late_rows_schema), not as
        # Arrow IPC blobs for a RowUnpacker stage: one Python hop less per task
        self.output_rows = output_rows
        self.spec = spec  # the clause (whether it reads NEXT: engine.new_engine)
        self.buckets = buckets  # stored with the state: a changed setting is refused
        self.event_column = event_column
        self.sort_keys = sort_keys
        self.late_counter = late_counter

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.value = handle.getValueState(STATE_NAME, STATE_SCHEMA)
        self.engine: StreamEngine | None = None  # init also runs on the driver: built lazily
        folder = os.environ.get(PROFILE_ENV)
        self.timer = PhaseTimer(folder) if folder else None

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        timer = self.timer
        if timer:
            timer.start()
        tables: dict[str, list[pa.Table]] = {}
        for row in rows:  # (bucket, kid, rows): one per key and packed input batch
            table = from_bytes(row[-1])
            if table is not None:
                tables.setdefault(row[-2], []).append(table)
        if timer:
            timer.lap("input")
        yield from self._reported(self._step(tables, timerValues.getCurrentWatermarkInMs(),
                                             False))

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[Row]:
        if self.timer:
            self.timer.start()
        yield from self._reported(self._step({}, timerValues.getCurrentWatermarkInMs(), True))

    def _reported(self, rows: Iterator[Row]) -> Iterator[Row]:
        """rows, a CepError on the way made to reach the driver as itself
        (errors.transported), raised when the query's failure is (awaitTermination...)."""
        with transported():
            yield from rows

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------
    def _step(self, tables: dict, watermark_ms: int, expired: bool) -> Iterator[Row]:
        """Advance the bucket's keys that got rows or whose timer is due."""
        timer = self.timer
        row = stored_value(self.value)  # None for a new bucket
        if timer:
            timer.lap("state_get")
        keys, registered = ({}, NO_TIMER) if row is None else (decode_keys(row[0], self.buckets), row[1])
        if expired:  # Spark deletes the timer that fired after this call
            registered = NO_TIMER
        watermark = max(int(watermark_ms), 0)
        due = {kid for kid, (_, timer_ms) in keys.items() if NO_TIMER != timer_ms <= watermark}
        if self.engine is None:
            self.engine = stream_engine(self.worker, self.event_column, self.sort_keys,
                                        self.spec)
        output: list[pa.RecordBatch] = []
        late = 0
        site = getattr(getattr(self.worker, "config", None), "error_site", None)
        for kid in sorted(due | set(tables)):
            record = keys.get(kid)
            state = KeyState() if record is None else state_from_row(record[0])
            parts = tables.get(kid)
            rows = None if not parts else parts[0] if len(parts) == 1 else pa.concat_tables(parts)
            if timer:
                timer.lap("decode")
            # the evaluator's errors carry the clause's error_site: the driver locates
            # them in the user's SQL (a stored state's layout error is no expression's)
            with error_site(site):
                step = self.engine.advance(state, rows, watermark)
            if timer:
                timer.lap("evaluate")
            keys[kid] = (state_to_row(state), step.timer_ms)
            output += step.output
            late += step.late
        wanted = min((t for _, t in keys.values() if t != NO_TIMER), default=NO_TIMER)
        if due or tables:
            blob = encode_keys(keys, self.buckets)
            if timer:
                timer.lap("encode")
                timer.count("state_bytes", len(blob))
            self.value.update((blob, wanted))
            if timer:
                timer.lap("state_put")
        if wanted != registered:
            if registered != NO_TIMER:
                self.handle.deleteTimer(registered)
            if wanted != NO_TIMER:
                self.handle.registerTimer(wanted)
            if timer:
                timer.lap("timers")
        if late and self.late_counter is not None:
            self.late_counter.add(late)
        if self.output_rows:
            yield from output_as_rows(output, late)
            if timer:
                timer.lap("output")
                timer.done(watermark, len(keys), sum(b.num_rows for b in output))
            return
        blob = None
        if output:
            blob = to_bytes(pa.Table.from_batches(output))
            if timer:
                timer.lap("output")
                timer.done(watermark, len(keys), sum(b.num_rows for b in output))
        elif timer:
            timer.done(watermark, len(keys), 0)
        if blob or late:  # the late count: where no accumulator can take it (late.py)
            yield Row(**{LATE_COLUMN: late, OUT_COLUMN: blob or None})


def output_as_rows(output: list[pa.RecordBatch], late: int) -> Iterator[Row]:
    """A call's decided matches as rows of late_rows_schema (LATE_COLUMN null), then
    its late count (if any) as a row of its own (the other columns null)."""
    for batch in output:
        for values in batch.to_pylist():
            yield Row(**{LATE_COLUMN: None, **values})
    if late:
        yield Row(**{LATE_COLUMN: late})


def late_rows_schema(rows: StructType) -> StructType:
    """The operator's output when it emits rows: the late count, then the rows' columns
    (nullable: a late-count row has none)."""
    return StructType([StructField(LATE_COLUMN, LongType()),
                       *[StructField(f.name, f.dataType, True) for f in rows.fields]])


class PhaseTimer:
    """Profiling switch (PROFILE_ENV, off by default): wall seconds per phase of one
    processor call, appended as a JSON line to <folder>/worker-<pid>.jsonl."""

    def __init__(self, folder: str):
        self.path = os.path.join(folder, f"worker-{os.getpid()}.jsonl")
        self.phases: dict[str, float] = {}
        self.t = 0.0

    def start(self) -> None:
        self.phases = {}
        self.t = time.perf_counter()

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self.t
        self.t = now

    def count(self, name: str, value: float) -> None:
        self.phases[name] = value

    def done(self, watermark: int, keys: int, out_rows: int) -> None:
        record = dict(self.phases, watermark=watermark, keys=keys, out_rows=out_rows,
                      wall=time.time())
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def encode_keys(keys: dict[str, tuple[tuple, int]], buckets: int = DEFAULT_BUCKETS) -> bytes:
    """{kid: (state_to_row(...), timer)} as one compact value (the layout header
    (ipc.layout_header: version, key buckets), lengths + integers, then the bytes: key
    identity, rows, pending rows, evaluator carry-over)."""
    parts = [layout_header(buckets), _HEAD.pack(len(keys))]
    for kid, (row, timer) in keys.items():
        held, pending, c0, c1, c2, c3, released, closed, late, evaluator = row
        name = kid.encode("utf-8")
        parts.append(_KEY.pack(len(name), len(held), len(pending), len(evaluator),
                               c0, c1, c2, c3, released, closed, late, timer))
        parts += [name, held, pending, evaluator]
    return b"".join(parts)


def decode_keys(data: bytes, buckets: int | None = None) -> dict[str, tuple[tuple, int]]:
    """encode_keys' inverse; CepRuntimeError when data has another layout version or
    was written with other than ``buckets`` key buckets (None: any)."""
    view = memoryview(data)
    pos = check_layout(data, buckets)
    (n,), pos = _HEAD.unpack_from(view, pos), pos + _HEAD.size
    keys = {}
    for _ in range(n):
        fields = _KEY.unpack_from(view, pos)
        pos += _KEY.size
        blobs = []
        for length in fields[:4]:
            blobs.append(bytes(view[pos:pos + length]))
            pos += length
        name, held, pending, evaluator = blobs
        c0, c1, c2, c3, released, closed, late, timer = fields[4:]
        keys[name.decode("utf-8")] = ((held, pending, c0, c1, c2, c3, released, closed, late,
                                       evaluator), timer)
    return keys


def state_to_row(s: KeyState) -> tuple:
    """A key's state as the tuple stored for it (rows as Arrow IPC)."""
    return stored_values(s)


def state_from_row(row) -> KeyState:
    return state_from_values(row)


def stored_bytes(row: tuple) -> int:
    """Bytes of a stored key state's binary fields (rows and evaluator carry-over)."""
    return sum(len(v) for v in row if isinstance(v, (bytes, bytearray)))
