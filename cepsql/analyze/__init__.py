"""Analysis: what a parsed clause means, checked against the input schema, before any plan.

Column resolution, type checks, aggregates (and their codes and result types),
subqueries, nested values, measures, the split of DEFINE into row-local and cross-row
parts and into the conjuncts the evaluators number, partition-key inference and
relevance. May import ``parse``, ``exprs``, ``algebra`` and ``errors``."""
