"""The runnable SQL examples, shipped as package data (``cepsql demo`` runs them).

These files are the canonical copies; ``sql_examples/`` at the repository root holds
byte-identical copies for browsing (tests/test_cli.py checks that they match).
"""
