"""Runtime: what runs inside tasks (Spark Python workers or in-process threads).

``workers`` builds a worker from a bound plan's configuration (``compile.worker_config``)
and is what backends call (``bind_worker``). The push-style workers over sorted Arrow
batches: ``worker`` (SQL:2016 mode, and the column lanes every worker loads) and
``cep_worker`` (CEP mode); rows held between calls (``pending``); MEASURES aggregates
folded over listed rows (``gathered``, by Spark's definitions in ``spark_folds``);
planning inside a task from its first rows (``task_planning``) and adaptive re-planning
as its statistics drift (``adaptive``); the shared workload evaluator
(``shared_evaluator`` over ``shared_columns``), its re-planning as the statistics drift
(``shared_adaptive``) and the workload's one pass
(``one_pass``: laid out on the driver, run in tasks); the evaluators' counters of a run,
returned to the caller (``run_stats``). Drives the Cython evaluators in ``cepsql._ext``
(imported where a task builds its matcher). May import every stage before it
(``compile`` and below)."""
