"""Execution backends beyond the batch Spark path (see DESIGN.md's target layout)."""
