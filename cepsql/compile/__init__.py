"""Compilation (driver side): a planned clause to the programs the evaluators run.

``clause.plan_query`` is the entry and the clause skeleton both modes share (checks,
PARTITION BY / ORDER BY keys as prepared columns, sort keys, MEASURES, final projection,
bind); ``clause_parts`` holds the pieces it hands the mode builders: ``sql`` (SQL:2016
mode: DEFINE per variable and the regex VM program of ``program``) and ``cep`` (CEP
mode: the run NFA's sequences from ``cep_expand`` / ``cep_group_shapes`` /
``linear_seq``, DEFINE conjuncts, the plan choice and its arrays from
``cep_plan_arrays``). ``conditions`` compiles conditions to the condition VM's bytecode
(and holds the opcode tables the .pxd/.pxi follow), ``gathered`` binds the MEASURES
aggregates the workers fold, ``dag_arrays`` lays a workload's GlobalPlan out for the
shared DAG. The products are plain picklable data: the ``QueryPlan`` contract the
backends execute (``query_plan``, with what EXPLAIN renders) and the worker
configurations (``worker_config``) the runtime builds workers from. May import every
stage before it: ``algebra``, ``exprs``, ``parse``, ``analyze``, ``stats``,
``planning``, ``sharing``; never ``runtime`` or ``explain``."""
