"""Structured Streaming backend: MATCH_RECOGNIZE over a streaming DataFrame.

``run_streaming_plan`` (frames.py) for one clause and ``streaming_pass`` /
``streaming_matches`` (workload.py) for a workload are its entry points, handed to the
Spark backend by api/session.py; the per-key logic (engine.py, shared_key.py) is plain
Arrow + the batch workers, testable without Spark. May import every stage below the
backends; never ``backends.spark`` or ``backends.local``."""
from cepsql.backends.streaming.engine import KeyState, StreamEngine, new_engine
from cepsql.backends.streaming.frames import run_streaming_plan

__all__ = ["KeyState", "StreamEngine", "new_engine", "run_streaming_plan"]
