"""Locate ``cep_match(...)`` and ``cep_view(...)`` table-function calls in statement text.

Token-based, like the MATCH_RECOGNIZE finder: the statement around a call may be any
Spark SQL, and only the call's own span is replaced. ``spark.cep.sql`` accepts the
form the issue asks for, ``cep_match(TABLE(t) PARTITION BY k ORDER BY ts, '<body>')``,
even though Spark's own parser rejects an unparenthesised ORDER BY list followed by a
comma: the call is re-emitted with parenthesised lists. Never imports pyspark.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from cepsql.parse.dialect import tokenize
from cepsql.parse.scanner import closing_paren
from cepsql.errors import CepSyntaxError

MATCH_FUNCTION = "cep_match"
VIEW_FUNCTION = "cep_view"
_QUERY_STARTS = frozenset({TokenType.SELECT, TokenType.WITH, TokenType.FROM, TokenType.VALUES,
                           TokenType.L_PAREN})
_USAGE = ("expected cep_match(TABLE(<table or query>) [WITH SINGLE PARTITION] "
          "[PARTITION BY ...] [ORDER BY ...], '<MEASURES ... PATTERN (...) DEFINE ...>')")


@dataclass(frozen=True)
class Piece:
    """A span of the statement: its text and absolute offset."""
    text: str
    pos: int


@dataclass
class TableArg:
    """``TABLE(x) [WITH SINGLE PARTITION] [PARTITION BY ...] [ORDER BY ...]`` as written."""
    source: Piece           # the table name or the query inside TABLE(...)
    is_query: bool
    single_partition: bool = False
    partition_by: list[Piece] = field(default_factory=list)
    order_by: list[Piece] = field(default_factory=list)


@dataclass
class MatchCall:
    start: int              # absolute span of ``cep_match(...)``
    end: int
    table: TableArg
    body: str               # the decoded string literal
    body_offsets: list[int]  # absolute offset of each body character, plus one past the end


@dataclass
class ViewCall:
    start: int
    end: int
    name: str
    name_pos: int


def find_calls(sql: str, *, offset: int = 0,
               full_sql: str | None = None) -> list[MatchCall | ViewCall]:
    """Outermost cep_match / cep_view calls of sql (which starts at ``offset`` in
    ``full_sql``), in text order; calls nested in a TABLE(query) argument are left to
    the caller's recursion on that query."""
    full = sql if full_sql is None else full_sql
    try:
        toks = tokenize(sql)
    except TokenError:
        return []  # the MATCH_RECOGNIZE finder reports unterminated literals with a position
    calls: list[MatchCall | ViewCall] = []
    i, n = 0, len(toks)
    while i < n:
        tok = toks[i]
        name = tok.text.lower() if tok.token_type == TokenType.VAR else ""
        if (name in (MATCH_FUNCTION, VIEW_FUNCTION) and i + 1 < n
                and toks[i + 1].token_type == TokenType.L_PAREN
                and not (i > 0 and toks[i - 1].token_type == TokenType.DOT)):
            close = closing_paren(toks, i + 1)
            if close is None:
                raise CepSyntaxError(f"{name}( is missing its closing ')'", sql=full,
                                     pos=offset + toks[i + 1].start)
            parse = _match_call if name == MATCH_FUNCTION else _view_call
            calls.append(parse(sql, toks, i, close, offset, full))
            i = close + 1
            continue
        i += 1
    return calls


def _error(message: str, tok: Token | None, sql: str, offset: int, full: str) -> CepSyntaxError:
    return CepSyntaxError(message, sql=full, pos=offset + (tok.start if tok else len(sql)))


def _view_call(sql, toks, i, close, offset, full) -> ViewCall:
    args = toks[i + 2:close]
    if len(args) != 1 or args[0].token_type != TokenType.STRING:
        raise _error("expected cep_view('<pattern view name>')", args[0] if args else toks[close],
                     sql, offset, full)
    text, offsets = decode_string(sql, args[0].start, args[0].end + 1)
    return ViewCall(offset + toks[i].start, offset + toks[close].end + 1, text.strip(),
                    offset + offsets[0])


def _match_call(sql, toks, i, close, offset, full) -> MatchCall:
    args = toks[i + 2:close]
    if len(args) < 3 or args[-1].token_type != TokenType.STRING \
            or args[-2].token_type != TokenType.COMMA:
        raise _error(_USAGE, args[-1] if args else toks[close], sql, offset, full)
    body_tok = args[-1]
    body, offsets = decode_string(sql, body_tok.start, body_tok.end + 1)
    table = _table_arg(sql, args[:-2], toks[close], offset, full)
    return MatchCall(offset + toks[i].start, offset + toks[close].end + 1, table, body,
                     [offset + p for p in offsets])


def _table_arg(sql: str, toks: list[Token], close: Token, offset: int, full: str) -> TableArg:
    if not toks or toks[0].token_type != TokenType.TABLE:
        raise _error(_USAGE + ": the first argument must be TABLE(...)",
                     toks[0] if toks else close, sql, offset, full)
    k = 1
    if k < len(toks) and toks[k].token_type == TokenType.L_PAREN:
        end = closing_paren(toks, k)
        inner = toks[k + 1:end]
        if not inner:
            raise _error("TABLE() needs a table name or a query", toks[k], sql, offset, full)
        text = sql[inner[0].start:inner[-1].end + 1]
        source = Piece(text, offset + inner[0].start)
        is_query = inner[0].token_type in _QUERY_STARTS
        k = end + 1
    else:
        j = k
        while j + 2 < len(toks) and toks[j + 1].token_type == TokenType.DOT:
            j += 2
        if k >= len(toks):
            raise _error("expected a table after TABLE", close, sql, offset, full)
        source = Piece(sql[toks[k].start:toks[j].end + 1], offset + toks[k].start)
        is_query, k = False, j + 1
    arg = TableArg(source, is_query)
    if k + 2 < len(toks) and toks[k].token_type == TokenType.WITH \
            and toks[k + 1].text.upper() == "SINGLE" and toks[k + 2].text.upper() == "PARTITION":
        arg.single_partition, k = True, k + 3
    order_at = next((j for j in range(k, len(toks)) if toks[j].token_type == TokenType.ORDER_BY
                     and _depth(toks, k, j) == 0), len(toks))
    if k < len(toks) and toks[k].token_type == TokenType.PARTITION_BY:
        if arg.single_partition:
            raise _error("WITH SINGLE PARTITION and PARTITION BY exclude each other",
                         toks[k], sql, offset, full)
        arg.partition_by = _items(sql, toks[k + 1:order_at], toks[k], offset, full)
        k = order_at
    if k < len(toks) and toks[k].token_type == TokenType.ORDER_BY:
        arg.order_by = _items(sql, toks[k + 1:], toks[k], offset, full)
        k = len(toks)
    if k < len(toks):
        raise _error(_USAGE, toks[k], sql, offset, full)
    return arg


def _depth(toks: list[Token], start: int, stop: int) -> int:
    depth = 0
    for t in toks[start:stop]:
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(t.token_type, 0)
    return depth


def _items(sql: str, toks: list[Token], keyword: Token, offset: int, full: str) -> list[Piece]:
    """Comma-separated items (one enclosing pair of parentheses removed)."""
    if not toks:
        raise _error(f"expected an expression after {keyword.text}", None, sql, offset, full)
    if toks[0].token_type == TokenType.L_PAREN and closing_paren(toks, 0) == len(toks) - 1:
        toks = toks[1:-1]
    items, current, depth = [], [], 0
    for t in toks + [None]:
        if t is None or (t.token_type == TokenType.COMMA and depth == 0):
            if not current:
                raise _error(f"empty item in {keyword.text}", t, sql, offset, full)
            items.append(Piece(sql[current[0].start:current[-1].end + 1],
                               offset + current[0].start))
            current = []
            continue
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(t.token_type, 0)
        current.append(t)
    return items


_ESCAPES = {"b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "0": "\0"}


def decode_string(sql: str, start: int, end: int) -> tuple[str, list[int]]:
    """Value of the Spark string literal sql[start:end] and, for each character of the
    value, its offset in sql (plus one past the end) — so errors inside the literal can
    point into the statement. Follows Spark's unescaping: backslash escapes (\\n, \\t,
    \\uXXXX, \\% and \\_ kept as written, others drop the backslash) and doubled quotes."""
    quote = sql[start]
    if quote not in "'\"":
        raise CepSyntaxError("expected a string literal", sql=sql, pos=start)
    chars: list[str] = []
    offsets: list[int] = []
    i = start + 1
    stop = end - 1
    while i < stop:
        c = sql[i]
        if c == "\\" and i + 1 < stop:
            nxt = sql[i + 1]
            if nxt == "u" and i + 6 <= stop:
                try:
                    chars.append(chr(int(sql[i + 2:i + 6], 16)))
                    offsets.append(i)
                    i += 6
                    continue
                except ValueError:
                    pass
            chars.append("\\" + nxt if nxt in "%_" else _ESCAPES.get(nxt, nxt))
            offsets.append(i)
            if nxt in "%_":
                offsets.append(i + 1)
            i += 2
        elif c == quote and i + 1 < stop and sql[i + 1] == quote:
            chars.append(quote)
            offsets.append(i)
            i += 2
        else:
            chars.append(c)
            offsets.append(i)
            i += 1
    offsets.append(stop)
    return "".join(chars), offsets


def map_body_pos(call: MatchCall, pos: int | None) -> int | None:
    """Absolute statement offset of a position inside the decoded body."""
    if pos is None:
        return None
    return call.body_offsets[max(0, min(pos, len(call.body_offsets) - 1))]
