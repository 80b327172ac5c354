"""Helpers for the tests and benchmarks that never ship in the package: synthetic
workloads and planning instances, exhaustive enumerators, validators, the in-process
workload runner used as a baseline."""
