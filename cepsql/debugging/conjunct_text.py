"""The user's own text of each DEFINE conjunct, for naming the one that failed.

The expression IR keeps where each node starts in the SQL text, not where it ends, so a
conjunct's text runs from its leftmost node to the end of its expression: the next
top-level AND (one inside BETWEEN ... AND or CASE ... END excepted), or the ',' or ')'
that ends the DEFINE item. Literals and comments are skipped by the one scanner.
"""
from __future__ import annotations

from cepsql.algebra.expressions import Expr, walk
from cepsql.parse.scanner import paren_end, read_word, skip_space, skip_token, word_at


def conjunct_text(sql: str, conjunct: Expr) -> str:
    """The conjunct as written in ``sql`` (a compact rendering when positions are missing)."""
    starts = [e.pos for e in walk(conjunct) if getattr(e, "pos", None) is not None]
    if not sql or not starts or min(starts) >= len(sql):
        return type(conjunct).__name__
    start = min(starts)
    return sql[start:_expression_end(sql, start)].strip()


def operand_text(sql: str, pos: int) -> str:
    """The column reference (``B.price``) or call (``PREV(B.price, 2)``) written at pos."""
    i, n = pos, len(sql)
    while True:
        word, i = read_word(sql, i)
        if not word or i >= n or sql[i] != ".":
            break
        i += 1
    j = skip_space(sql, i)
    if j < n and sql[j] == "(":
        i = paren_end(sql, j)
    return sql[pos:i]


def _expression_end(sql: str, i: int) -> int:
    depth, betweens, cases, n = 0, 0, 0, len(sql)
    while i < n:
        j = skip_space(sql, i)
        if j != i:
            i = j
            continue
        c = sql[i]
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                return i
            depth -= 1
        elif c == "," and depth == 0:
            return i
        elif c.isalpha() or c == "_":
            word = word_at(sql, i)
            upper = word.upper()
            if depth == 0:
                if upper == "BETWEEN":
                    betweens += 1
                elif upper == "CASE":
                    cases += 1
                elif upper == "END" and cases:
                    cases -= 1
                elif upper == "AND" and not cases:
                    if not betweens:
                        return i
                    betweens -= 1
            i += len(word)
            continue
        i = skip_token(sql, i)
    return n
