"""Sharing stage: workloads of pattern views planned together (SIGMOD 2019, MOTTO).

planning (one pattern) -> **sharing** (many patterns over one source) -> runtime.
``global_plan`` is the contract between this stage and the runtime's shared evaluator.
"""
