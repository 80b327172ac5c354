"""The stateful processors read a key's stored state without making Spark's state server
warn: ``ValueState.get()`` on an empty state logs "WARN TransformWithStateInPySpark
StateServer: Value state cep_bucket doesn't contain a value." once per new key (17 lines
in ``cepsql demo --stream``), so they ask ``exists()`` first (ipc.stored_value)."""
from __future__ import annotations

from types import SimpleNamespace

from cepsql.backends.streaming import processor
from cepsql.backends.streaming.ipc import stored_value
from cepsql.backends.streaming.processor import MatchProcessor

WARNING = "Value state cep_bucket doesn't contain a value."


class SparkLikeValueState:
    """A ValueState that, like Spark's state server, warns when get() finds no value."""

    def __init__(self, row=None):
        self.row = row
        self.warnings: list[str] = []

    def exists(self) -> bool:
        return self.row is not None

    def get(self):
        if self.row is None:
            self.warnings.append(WARNING)
        return self.row

    def update(self, row) -> None:
        self.row = row


class Handle:
    def __init__(self, state: SparkLikeValueState):
        self.state = state

    def getValueState(self, name, schema):
        return self.state


def test_stored_value_reads_a_present_value_and_none_without_a_warning():
    empty, full = SparkLikeValueState(), SparkLikeValueState((b"keys", 5))
    assert stored_value(empty) is None and empty.warnings == []
    assert stored_value(full) == (b"keys", 5) and full.warnings == []


def test_a_new_bucket_is_read_without_the_state_servers_warning(monkeypatch):
    monkeypatch.setattr(processor, "stream_engine", lambda *args: object())  # no rows to run
    state = SparkLikeValueState()
    proc = MatchProcessor(worker=None, event_column="ts", sort_keys=[])
    proc.init(Handle(state))
    timer = SimpleNamespace(getCurrentWatermarkInMs=lambda: 0)
    assert list(proc.handleExpiredTimer(None, timer, None)) == []
    assert state.warnings == []
