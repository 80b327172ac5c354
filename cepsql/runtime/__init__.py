"""Runtime: only what runs inside tasks (Spark Python workers or in-process threads).

The push-style workers over sorted Arrow batches (``worker`` for SQL:2016 mode,
``cep_worker`` for CEP mode), rows held between calls (``pending``), Spark's aggregate
folds (``spark_folds``), the shared workload evaluator (``shared_evaluator``,
``shared_columns``, ``one_pass``), planning inside a task (``task_planning``) and adaptive
re-planning (``adaptive``); the evaluators' counters of a run, returned to the caller
(``run_stats``). Drives the Cython evaluators in ``cepsql._ext``. May import
every stage before it (``compile`` and below)."""
