"""Why didn't it match? The matcher's steps on a small slice (``trace``) and the longest
attempts that did not complete (``near_misses``).

Not a pipeline stage: these tools replay the definition itself, step by step, on a slice
capped in size (the reference evaluators' search, instrumented), so what they show is
what the standard says should happen; the property tests tie the engine to the same
definition, and tests/test_trace.py checks the trace's matches against the engine's.
"""
