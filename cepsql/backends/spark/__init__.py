"""Spark backend (batch DataFrames): statement rewriting (rewrite.py), plan execution with
mapInArrow (execute.py), slicing of unpartitioned clauses (slicing.py, ordered_scan.py,
gap_scan.py), STRICT_CONTIGUITY breaks, the ``cep_match`` / ``cep_view`` table
functions and the shared-pass workload (workload.py).

May import every stage below the backends; never ``backends.streaming`` or
``backends.local``: a stream input is run through the StreamRunner (streams.py) that
api/ passes in. Modules whose objects Spark Python workers unpickle (execute.TaskWorker,
the scan tasks, tf_plan) keep sqlglot out of their imports. Importing this package does
not import pyspark."""
