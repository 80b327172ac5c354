"""Parsing: the CepSpark sqlglot dialect, our PATTERN grammar and statement helpers."""
from cepsql.parse.dialect import CepSpark, CepSparkParser
from cepsql.parse.pattern_parser import parse_pattern, pattern_to_text
from cepsql.parse.statements import (ClauseSite, CreateView, find_match_recognize, parse_clause_body,
                         parse_create_view, parse_drop_view, parse_explain, split_statements,
                         explain_format, find_workload_calls, parse_explain_workload)

__all__ = ["CepSpark", "CepSparkParser", "parse_pattern", "pattern_to_text", "ClauseSite",
           "CreateView", "find_match_recognize", "parse_clause_body", "parse_create_view",
           "parse_drop_view", "parse_explain", "split_statements", "explain_format",
           "find_workload_calls", "parse_explain_workload"]
