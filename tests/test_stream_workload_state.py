"""Checkpoint safety: the stored streaming state names its layout version and the number
of key buckets (cepsql.streaming.keyBuckets) it was written with; a query reading a
state of another layout or bucket count stops with a CepRuntimeError saying what to do,
instead of silently starting keys afresh or misreading bytes."""
from __future__ import annotations

import struct

import pytest

from cepsql.backends.streaming.engine import NO_TIMER
from cepsql.backends.streaming.ipc import STATE_LAYOUT_VERSION, check_layout, layout_header
from cepsql.backends.streaming.processor import decode_keys, encode_keys
from cepsql.errors import CepRuntimeError

KEYS = {"('a',)": ((b"rows", b"", -1, 3, 5, 1, 1 << 40, 0, 2, b"\x00carry"), 1234),
        "('b',)": ((b"", b"p", 0, 0, 0, 0, -(1 << 62), 1, 0, b""), NO_TIMER)}


def test_bucket_state_names_its_layout_and_buckets():
    data = encode_keys(KEYS, 8)
    assert data.startswith(layout_header(8))
    assert decode_keys(data, 8) == KEYS
    assert decode_keys(data) == KEYS          # None: any bucket count
    with pytest.raises(CepRuntimeError, match=r"keyBuckets=8, but the query now runs "
                                              r"with 16: set cepsql.streaming.keyBuckets "
                                              r"back to 8, or start .* new checkpoint"):
        decode_keys(data, 16)


@pytest.mark.parametrize("old", [
    struct.pack("<I", 2) + b"\x00" * 40,                        # before any header
    b"CEPS" + struct.pack("<II", STATE_LAYOUT_VERSION - 1, 8),  # an older layout
    b"",
])
def test_state_of_another_layout_is_refused(old):
    with pytest.raises(CepRuntimeError, match="another state layout.*new checkpoint"):
        check_layout(old, 8)


def test_restart_with_other_key_buckets_is_refused(spark, tmp_path):
    """A query restarted from its checkpoint after cepsql.streaming.keyBuckets changed
    stops with the error (the stored buckets are read back when a key or a timer
    reaches them) instead of starting keys without their state."""
    import os

    try:
        from .test_streaming_spark import CEP_MODE, DELAY, FIRST, SCHEMA, SECOND, _run_once, \
            _write
    except ImportError:
        from test_streaming_spark import CEP_MODE, DELAY, FIRST, SCHEMA, SECOND, _run_once, \
            _write
    source = str(tmp_path / "in")
    os.makedirs(source)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "ck")
    spark.readStream.schema(SCHEMA).json(source).withWatermark("ts", DELAY) \
        .createOrReplaceTempView("ckb_ticks")
    sql = CEP_MODE.format(src="ckb_ticks")
    before = spark.conf.get("cepsql.streaming.keyBuckets", None)
    try:
        spark.conf.set("cepsql.streaming.keyBuckets", "1")
        _write(source, "part-0.json", FIRST)
        _run_once(spark, [sql], [out], [checkpoint])
        spark.conf.set("cepsql.streaming.keyBuckets", "2")
        _write(source, "part-1.json", SECOND)
        with pytest.raises(CepRuntimeError, match="keyBuckets=1, but the query now "
                                                  "runs with 2") as info:
            _run_once(spark, [sql], [out], [checkpoint])
        assert info.value.line is None  # a setting's error, not an expression's
    finally:
        spark.conf.unset("cepsql.streaming.keyBuckets") if before is None else \
            spark.conf.set("cepsql.streaming.keyBuckets", before)


def test_workload_state_of_another_layout_is_refused():
    """A workload key's state names the layout version in its fingerprint: a state
    written before (no version) or by another layout is refused."""
    from cepsql.backends.streaming.engine import KeyState
    from cepsql.backends.streaming.workload import (WorkloadKeyState, state_from_row,
                                                    state_to_row)
    current = f"v{STATE_LAYOUT_VERSION}:abc"
    row = state_to_row(WorkloadKeyState(KeyState(), [KeyState()], KeyState()), current)
    restored = state_from_row(row, 1, current, dag=True)
    assert restored.dag is not None and len(restored.patterns) == 1
    for stored in ("abc", f"v{STATE_LAYOUT_VERSION - 1}:abc"):
        old = row[:4] + (stored,)
        with pytest.raises(CepRuntimeError, match="another state layout.*new checkpoint"):
            state_from_row(old, 1, current, dag=True)


def test_one_key_state_encoding_keeps_both_stored_layouts():
    """A KeyState becomes stored values through engine.stored_values only: the single
    pattern processor's tuple (field order = checkpoint layout) and the workload's
    per-pattern table and shared fields round-trip every field they keep."""
    import pyarrow as pa

    from cepsql.backends.streaming.engine import KeyState
    from cepsql.backends.streaming.ipc import from_bytes
    from cepsql.backends.streaming.processor import state_from_row as key_from_row
    from cepsql.backends.streaming.processor import state_to_row as key_to_row
    from cepsql.backends.streaming.workload import (PATTERN_STATE, WorkloadKeyState,
                                                    state_from_row, state_to_row)
    rows = pa.table({"x": [1, 2]})
    s = KeyState(held=rows, evaluator=b"\x01ev", pending=rows.slice(1), carry=[5, 6, 7, 8],
                 released_us=1 << 40, closed=0, late=3)
    row = key_to_row(s)
    assert row[2:9] == (5, 6, 7, 8, 1 << 40, 0, 3) and row[9] == b"\x01ev"
    assert from_bytes(row[0]).equals(rows) and from_bytes(row[1]).equals(rows.slice(1))
    back = key_from_row(row)
    assert (back.carry, back.released_us, back.closed, back.late, back.evaluator) == \
        ([5, 6, 7, 8], 1 << 40, 0, 3, b"\x01ev")
    assert back.held.equals(rows) and back.pending.equals(rows.slice(1))

    current = f"v{STATE_LAYOUT_VERSION}:abc"
    stored = state_to_row(WorkloadKeyState(s, [s, KeyState()], None), current)
    assert stored[1:3] == (1 << 40, 3) and from_bytes(stored[0]).equals(rows.slice(1))
    assert from_bytes(stored[3]).schema == PATTERN_STATE
    w = state_from_row(stored, 2, current)
    assert w.shared.pending.equals(rows.slice(1)) and (w.shared.released_us, w.shared.late) == (1 << 40, 3)
    first, second = w.patterns
    assert first.held.equals(rows) and first.pending is None
    assert (first.carry, first.closed, first.evaluator) == ([5, 6, 7, 8], 0, b"\x01ev")
    assert (second.carry, second.closed, second.held) == (KeyState().carry, 1, None)
