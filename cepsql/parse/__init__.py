"""Parsing: SQL text to the algebra (a MatchRecognizeSpec per clause site).

The CepSpark sqlglot dialect (dialect.py, clause grammar; to_algebra.py, expressions),
the PATTERN grammar (pattern_parser.py), the one lexical scanner of SQL text
(scanner.py: literals, comments, parentheses, statement splitting) and what is built on
it: clause sites and cepsql's own statements (statements.py), table-function calls
(tf_calls.py) and backend-neutral splicing of clause results into a statement
(splice.py). Imports only ``algebra`` and ``errors`` of cepsql (never ``exprs``, its
sibling in the layer), and never pyspark."""
from cepsql.parse.dialect import CepSpark, CepSparkParser
from cepsql.parse.pattern_parser import parse_pattern, pattern_to_text
from cepsql.parse.scanner import split_statements
from cepsql.parse.statements import (ClauseSite, CreateView, changed_view, find_match_recognize,
                                     needs_rewrite, parse_clause_body, parse_create_view,
                                     parse_drop_view, parse_explain, explain_format, explain_analyze,
                                     find_workload_calls, parse_explain_workload)

__all__ = ["CepSpark", "CepSparkParser", "parse_pattern", "pattern_to_text", "ClauseSite",
           "CreateView", "find_match_recognize", "parse_clause_body", "parse_create_view",
           "parse_drop_view", "parse_explain", "split_statements", "explain_format", "explain_analyze",
           "find_workload_calls", "parse_explain_workload", "needs_rewrite", "changed_view"]
