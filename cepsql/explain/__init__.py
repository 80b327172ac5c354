"""EXPLAIN: a planned clause or workload as text, a plain-language summary and SVG.

May import every stage before it (through ``runtime``); the backends call it."""
