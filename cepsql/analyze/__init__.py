"""Analysis: what a parsed clause means, checked against the input schema, before any plan.

Type checks, aggregates, subqueries, nested values, measures, the split of DEFINE into
row-local and cross-row parts, partition-key inference and relevance. May import
``algebra``, ``exprs``, ``parse`` and ``errors``."""
