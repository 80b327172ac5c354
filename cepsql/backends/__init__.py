"""Execution backends, side by side: ``spark`` (batch DataFrames), ``streaming``
(Structured Streaming state) and ``local`` (in-process, DuckDB).

Each may import every stage below it (explain, runtime, compile, ..., parse, exprs,
algebra, errors) and never another backend: what two need lives in a stage below them
(e.g. runtime/ordering.py sorts Arrow tables for all three, exprs/spark_arrow.py gives
Spark's Arrow schema to spark and streaming), and the choice between two (a stream
input on spark.cep) is made in api/."""
