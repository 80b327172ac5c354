"""The in-process backend (``cepsql.match_recognize``): the clauses' evaluators on all cores
in threads (threads.py) and the SQL around the clauses on DuckDB (duck.py)."""
