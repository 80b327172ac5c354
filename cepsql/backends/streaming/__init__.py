"""Structured Streaming backend: MATCH_RECOGNIZE over a streaming DataFrame.

``run_streaming_plan`` (frames.py) is the only entry point the Spark session uses; the
per-key logic (engine.py) is plain Arrow + the batch workers, testable without Spark."""
from cepsql.backends.streaming.engine import KeyState, StreamEngine, new_engine
from cepsql.backends.streaming.frames import run_streaming_plan

__all__ = ["KeyState", "StreamEngine", "new_engine", "run_streaming_plan"]
