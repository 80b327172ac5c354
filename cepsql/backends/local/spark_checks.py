"""What Spark refuses in the SQL around MATCH_RECOGNIZE but sqlglot parses and DuckDB
would run: checked before the in-process path evaluates a query, so it accepts only what
Spark accepts (issue 24 D11), with Spark's error class at the user's line:column.

- a call to a name that is not one of Spark's functions (``ROW(a, 1)``: DuckDB has it);
- a SELECT with an empty select list (``SELECT DISTINCT FROM t``: Spark reads FROM as a
  column name);
- ``+*`` / ``-*`` in a select list (sqlglot drops the unary plus);
- empty parentheses as an expression (``SELECT ()``, ``x IN ()``): a Spark syntax error.
"""
from __future__ import annotations

from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from cepsql.backends.local.spark_functions import SPARK_FUNCTIONS
from cepsql.errors import CepAnalysisError, CepSyntaxError
from cepsql.parse.to_algebra import sql_pos

__all__ = ["check_spark_accepts"]

_SELECT_ITEM_START = frozenset({TokenType.SELECT, TokenType.DISTINCT, TokenType.ALL,
                                TokenType.COMMA})
# tokens after which "(" starts an expression (not a call's or OVER's argument list)
_EXPRESSION_START = _SELECT_ITEM_START | frozenset({
    TokenType.IN, TokenType.WHERE, TokenType.HAVING, TokenType.AND, TokenType.OR,
    TokenType.NOT, TokenType.WHEN, TokenType.THEN, TokenType.ELSE, TokenType.EQ,
    TokenType.NEQ, TokenType.GT, TokenType.GTE, TokenType.LT, TokenType.LTE, TokenType.PLUS,
    TokenType.DASH, TokenType.STAR, TokenType.SLASH, TokenType.L_PAREN})


def check_spark_accepts(tree: exp.Expr, tokens: list[Token], base: int = 0) -> None:
    """Raise CepAnalysisError where Spark's analyzer would refuse tree (parsed from
    tokens; positions shifted by base)."""
    _star_signs(tokens, base)
    _empty_parens(tokens, base)
    for node in tree.walk():
        if isinstance(node, exp.Anonymous) and str(node.name).lower() not in SPARK_FUNCTIONS:
            raise CepAnalysisError(
                f"[UNRESOLVED_ROUTINE] cannot resolve the function `{node.name}`: it is not "
                "one of Spark's built-in functions", pos=sql_pos(node, base))
        if isinstance(node, exp.Select) and not node.expressions:
            at = _last_token_before(tokens, sql_pos(node, base), base, TokenType.FROM)
            if at is None:  # no FROM either (``(SELECT) * 1 t``): at the SELECT
                at = next((base + t.start for t in tokens
                           if t.token_type == TokenType.SELECT), None)
            raise CepAnalysisError("the select list is empty (Spark reads the next word as "
                                   "a column name)", pos=at)


def _star_signs(tokens: list[Token], base: int) -> None:
    for before, sign, star in zip(tokens, tokens[1:], tokens[2:]):
        if (sign.token_type in (TokenType.PLUS, TokenType.DASH)
                and star.token_type == TokenType.STAR
                and before.token_type in _SELECT_ITEM_START):
            raise CepAnalysisError(f"[INVALID_USAGE_OF_STAR_OR_REGEX] invalid usage of '*' "
                                   f"after a unary '{sign.text}'", pos=base + sign.start)


def _empty_parens(tokens: list[Token], base: int) -> None:
    for before, opening, closing in zip(tokens, tokens[1:], tokens[2:]):
        if (opening.token_type == TokenType.L_PAREN and closing.token_type == TokenType.R_PAREN
                and before.token_type in _EXPRESSION_START):
            raise CepSyntaxError("syntax error: empty parentheses are not an expression",
                                 pos=base + opening.start)


def _last_token_before(tokens: list[Token], pos: int | None, base: int,
                       kind: TokenType) -> int | None:
    """Position of the last token of kind before pos (pos when there is none): the FROM
    of a SELECT whose leftmost recorded token is its source."""
    end = len(tokens) if pos is None else pos - base
    found = [base + t.start for t in tokens if t.start < end and t.token_type == kind]
    return found[-1] if found else pos
