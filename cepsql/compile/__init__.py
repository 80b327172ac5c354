"""Compilation (driver side): a clause to the programs the evaluators run.

``clause.plan_query`` is the entry: the clause skeleton, then the SQL:2016 regex program
(``program``) or the CEP program (``cep``), the condition VM's bytecode (``conditions``),
and the ``QueryPlan`` contract the backends execute (``query_plan``). May import every
stage before it: ``algebra``, ``exprs``, ``parse``, ``analyze``, ``stats``, ``planning``,
``sharing``."""
