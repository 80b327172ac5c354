"""Execution backends, side by side: ``spark`` (batch DataFrames), ``streaming``
(Structured Streaming state) and ``local`` (in-process, DuckDB). They never import each
other: what two need lives in a stage below them."""
