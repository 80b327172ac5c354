"""The one lexical scanner of SQL text in cepsql: Spark's rules for '...' and "..." strings
(backslash escapes), `...` identifiers (doubled backquotes), -- line comments and nested
/* */ comments; statement splitting, parenthesis matching and word reading built on them.

Character level where sqlglot's tokenizer cannot serve: on text it fails on (an
unterminated literal must be reported at its position), and where the caller works on
text offsets of a statement it does not parse (splicing clause results into it).
Token level (``closing_paren``, ``opening_paren``) over sqlglot tokens everywhere else.
Imports nothing of cepsql but sqlglot's token types.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot.tokens import Token, TokenType

__all__ = ["Lexed", "lex", "split_statements", "skip_space", "skip_token", "paren_end",
           "read_word", "word_at", "closing_paren", "opening_paren"]

_QUOTES = "'\"`"


@dataclass
class Lexed:
    """What one pass over a text found outside literals and comments."""
    semicolons: list[int] = field(default_factory=list)       # top-level ';' offsets
    comments: list[tuple[int, int]] = field(default_factory=list)  # (start, end) spans
    problem: tuple[int, str] | None = None  # first unterminated construct: (pos, message)


def _quoted_end(text: str, i: int) -> int:
    """Index just past the literal or quoted identifier opening at text[i]; -1 when it is
    not terminated."""
    q, j, n = text[i], i + 1, len(text)
    if q == "`":
        while True:
            j = text.find("`", j)
            if j < 0:
                return -1
            if not text.startswith("``", j):
                return j + 1
            j += 2
    while j < n and text[j] != q:
        j += 2 if text[j] == "\\" else 1
    return j + 1 if j < n else -1


def _comment_end(text: str, i: int) -> int:
    """Index after the comment starting at text[i] (a line comment ends before its
    newline), i when none starts there, -1 for an unterminated block comment."""
    if text.startswith("--", i):
        j = text.find("\n", i)
        return len(text) if j < 0 else j
    if not text.startswith("/*", i):
        return i
    depth, j, n = 1, i + 2, len(text)
    while j < n and depth:
        if text.startswith("/*", j):
            depth, j = depth + 1, j + 2
        elif text.startswith("*/", j):
            depth, j = depth - 1, j + 2
        else:
            j += 1
    return -1 if depth else j


_UNTERMINATED = {"'": "unterminated string literal", '"': "unterminated string literal",
                 "`": "unterminated quoted identifier"}


def lex(text: str) -> Lexed:
    """The top-level semicolons and the comments of text, and its first unterminated
    construct (scanning stops there)."""
    out = Lexed()
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in _QUOTES:
            j = _quoted_end(text, i)
            if j < 0:
                out.problem = (i, _UNTERMINATED[c])
                return out
            i = j
            continue
        j = _comment_end(text, i)
        if j < 0:
            out.problem = (i, "unterminated comment")
            return out
        if j != i:
            out.comments.append((i, j))
            i = j
            continue
        if c == ";":
            out.semicolons.append(i)
        i += 1
    return out


def split_statements(text: str) -> list[tuple[str, int]]:
    """Split a script on top-level semicolons; (statement text, its offset), statements
    that are only whitespace and comments dropped."""
    lexed = lex(text)
    out = []
    start = 0
    for end in lexed.semicolons + [len(text)]:
        chunk = text[start:end]
        code = list(chunk)
        for a, b in lexed.comments:
            for p in range(max(a, start), min(b, end)):
                code[p - start] = " "
        if "".join(code).strip():
            lead = len(chunk) - len(chunk.lstrip())
            out.append((chunk.strip(), start + lead))
        start = end + 1
    return out


def skip_space(sql: str, i: int) -> int:
    """Index of the next character that is not whitespace or inside a comment (the end
    of sql after an unterminated comment)."""
    n = len(sql)
    while i < n:
        if sql[i].isspace():
            i += 1
            continue
        j = _comment_end(sql, i)
        if j == i:
            break
        i = n if j < 0 else j
    return i


def skip_token(sql: str, i: int) -> int:
    """End of the quoted literal/identifier (the end of sql when unterminated) or the
    single character starting at i."""
    if sql[i] in _QUOTES:
        j = _quoted_end(sql, i)
        return len(sql) if j < 0 else j
    return i + 1


def paren_end(sql: str, i: int) -> int:
    """Index just past the ')' matching the '(' at sql[i] (or len(sql))."""
    depth, n = 0, len(sql)
    while i < n:
        j = skip_space(sql, i)
        if j != i:
            i = j
            continue
        c = sql[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i = skip_token(sql, i)
    return n


def word_at(text: str, i: int) -> str:
    """The run of letters, digits and underscores at text[i] ('' when none)."""
    j = i
    while j < len(text) and (text[j].isalnum() or text[j] == "_"):
        j += 1
    return text[i:j]


def read_word(sql: str, i: int) -> tuple[str, int]:
    """The identifier (plain or backquoted) at i and the index after it."""
    if i < len(sql) and sql[i] == "`":
        j = skip_token(sql, i)
        return sql[i:j], j
    word = word_at(sql, i)
    return word, i + len(word)


def closing_paren(tokens: list[Token], index: int) -> int | None:
    """Index of the ')' closing the '(' at tokens[index], or None when unbalanced."""
    depth = 0
    for i in range(index, len(tokens)):
        kind = tokens[i].token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return i
    return None


def opening_paren(tokens: list[Token], index: int) -> int | None:
    """Index of the '(' opened by the ')' at tokens[index], or None when unbalanced."""
    depth = 0
    for i in range(index, -1, -1):
        kind = tokens[i].token_type
        if kind == TokenType.R_PAREN:
            depth += 1
        elif kind == TokenType.L_PAREN:
            depth -= 1
            if depth == 0:
                return i
    return None


def too_deep_paren(tokens: list[Token], limit: int) -> Token | None:
    """The first '(' nested more than ``limit`` deep in tokens, or None."""
    depth = 0
    for tok in tokens:
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
            if depth > limit:
                return tok
        elif tok.token_type == TokenType.R_PAREN:
            depth -= 1
    return None
