"""Compiled Cython evaluators (built from cython_ext/)."""
