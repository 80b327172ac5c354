"""The runnable SQL examples, shipped as package data (``cepsql demo`` runs them).

These files are the canonical copies; ``sql_examples/`` at the repository root holds
links to them for browsing and ``cepsql sql -f`` (tests/test_cli.py checks they match).
"""
