"""Plans to evaluators: the pattern program compiler, the condition compiler, the
executor that drives the Cython matcher, and the pure-Python reference evaluator."""
