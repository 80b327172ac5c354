"""Parsing: the CepSpark sqlglot dialect, our PATTERN grammar and statement helpers."""
