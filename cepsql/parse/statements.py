"""Statement-level helpers: locate MATCH_RECOGNIZE clauses and recognise the few
statements cepsql handles itself (temporary views, EXPLAIN); the lexical work is
scanner.py's.

Clause location is token-based rather than a full-statement parse so that any Spark
SQL around the clause (which sqlglot may not fully understand) keeps working: the
caller replaces each clause's text span and hands the rest to Spark unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.errors import CepAnalysisError, CepSyntaxError, CepUnsupportedError
from cepsql.algebra.identifiers import quote_name
from cepsql.parse.dialect import CepSpark, CepSparkParser, tokenize
from cepsql.parse.scanner import (closing_paren, lex, opening_paren, skip_space, skip_token,
                                  word_at)
from cepsql.parse.tf_calls import MATCH_FUNCTION, VIEW_FUNCTION

__all__ = ["ClauseSite", "CreateView", "find_match_recognize", "needs_rewrite",
           "parse_create_view", "changed_view", "parse_drop_view", "parse_explain",
           "explain_format", "explain_analyze", "parse_clause_body"]

# words that follow a clause but are never a bare alias
_NOT_ALIAS = frozenset("""
WHERE JOIN ON USING GROUP ORDER LIMIT OFFSET UNION INTERSECT EXCEPT MINUS WINDOW LATERAL
INNER LEFT RIGHT FULL CROSS NATURAL OUTER SEMI ANTI HAVING QUALIFY CLUSTER DISTRIBUTE SORT
FETCH FOR TABLESAMPLE PIVOT UNPIVOT MATCH_RECOGNIZE SELECT FROM WITH AS INTO VALUES
""".split())
_EXPLAIN_MODES = frozenset({"EXTENDED", "CODEGEN", "COST", "FORMATTED"})
_EXPLAIN_FORMATS = frozenset({"TEXT", "SVG"})


@dataclass
class ClauseSite:
    """Where one MATCH_RECOGNIZE clause (with its source and alias) sits in the SQL text."""
    start: int
    end: int
    source_text: str
    source_offset: int
    source_is_query: bool
    alias: str | None
    spec: MatchRecognizeSpec
    column_aliases: tuple[str, ...] = ()  # ``AS m(a, b)``: the output columns renamed
    column_aliases_pos: int | None = None

    def output_names(self, names: list[str]) -> list[str]:
        """The clause's output column names after ``AS m(a, b, ...)`` (Trino: one alias
        per output column, in order)."""
        if not self.column_aliases:
            return names
        lowered = [n.lower() for n in self.column_aliases]
        for j, name in enumerate(lowered):
            if name in lowered[:j]:
                raise CepAnalysisError(f"column alias {self.column_aliases[j]} is given twice",
                                       pos=self.column_aliases_pos)
        if len(self.column_aliases) != len(names):
            raise CepAnalysisError(
                f"column alias list has {len(self.column_aliases)} names but MATCH_RECOGNIZE "
                f"returns {len(names)} columns ({', '.join(names)})",
                pos=self.column_aliases_pos)
        return list(self.column_aliases)


def clause_output_names(site, names: list[str]) -> list[str]:
    """Output names of a clause site (any object with the ClauseSite fields it uses)."""
    return site.output_names(names) if isinstance(site, ClauseSite) else list(names)


@dataclass
class CreateView:
    """``CREATE [OR REPLACE] TEMP[ORARY] VIEW [IF NOT EXISTS] name [(columns)] AS query``."""
    name: str        # the name parts joined by '.', quotes removed (the registry's key)
    or_replace: bool
    if_not_exists: bool
    query_text: str
    query_offset: int
    parts: tuple[str, ...] = ()     # the name's parts as written, unquoted
    columns: tuple[str, ...] = ()   # ``v (a, b) AS ...``: the query's columns renamed

    @property
    def quoted(self) -> str:
        """The view's name as Spark SQL text (every part quoted)."""
        return quote_name(self.parts or (self.name,))


# --- tokens -----------------------------------------------------------------------------
def _tokens(sql: str, offset: int = 0, full_sql: str | None = None) -> list[Token]:
    """Tokenize, turning tokenizer failures into positioned CepSyntaxErrors."""
    try:
        return tokenize(sql)
    except TokenError:
        problem = lex(sql).problem
        pos, message = problem if problem else (0, "cannot tokenize the SQL text")
        raise CepSyntaxError(message, sql=full_sql if full_sql is not None else sql,
                             pos=offset + pos) from None


def _is_name(tok: Token, strict: bool = False) -> bool:
    if tok.token_type in (TokenType.VAR, TokenType.IDENTIFIER):
        return True
    return not strict and tok.token_type in CepSparkParser.ID_VAR_TOKENS


def _is_alias_word(tok: Token) -> bool:
    if tok.token_type == TokenType.IDENTIFIER:
        return True
    return tok.token_type == TokenType.VAR and tok.text.upper() not in _NOT_ALIAS


# --- MATCH_RECOGNIZE sites --------------------------------------------------------------
def find_match_recognize(sql: str, *, offset: int = 0,
                         full_sql: str | None = None) -> list[ClauseSite]:
    """All outermost MATCH_RECOGNIZE clauses of a statement, in text order.

    Positions are absolute in full_sql (= sql when None): sql starts at ``offset``.
    A clause inside another clause's source subquery is not returned; recurse on
    ``site.source_text`` with ``offset=site.source_offset``.
    """
    full = sql if full_sql is None else full_sql
    toks = _tokens(sql, offset, full)
    located = [_locate(toks, i, sql, offset, full) + (_input_name(toks, i),)
               for i, tok in enumerate(toks) if tok.token_type == TokenType.MATCH_RECOGNIZE]
    outer = [site for site in located
             if not any(o is not site and o[0] <= site[0] and site[1] <= o[1] for o in located)]
    sites = []
    for start, end, src_text, src_off, is_query, alias, body, columns, columns_pos, \
            input_name in outer:
        spec = CepSparkParser(dialect=CepSpark).parse_clause(
            body, sql, base=offset, full_sql=full, wrapped=True, input_name=input_name)
        sites.append(ClauseSite(start, end, src_text, src_off, is_query, alias, spec,
                                columns, columns_pos))
    return sites


def _input_name(toks: list[Token], i: int) -> str | None:
    """The name that qualifies the input's columns (``ORDER BY t.ts``): the source's alias
    or the table's own (last) name, written right before MATCH_RECOGNIZE (toks[i])."""
    return toks[i - 1].text if i > 0 and _is_name(toks[i - 1], strict=True) else None


_AFTER_PATTERN = frozenset(("SUBSET", "DEFINE"))


def _unclosed_pattern_paren(toks: list[Token], open_idx: int) -> Token | None:
    """The '(' after PATTERN when the clause's closing ')' was taken by it: a SUBSET or
    DEFINE keyword at its depth shows the pattern text ran into the next subclause."""
    for j in range(open_idx + 1, len(toks) - 1):
        if toks[j].text.upper() == "PATTERN" and toks[j + 1].token_type == TokenType.L_PAREN:
            depth = 0
            for tok in toks[j + 1:]:
                kind = tok.token_type
                depth += (kind == TokenType.L_PAREN) - (kind == TokenType.R_PAREN)
                if depth <= 0:
                    return None
                if depth == 1 and tok.text.upper() in _AFTER_PATTERN:
                    return toks[j + 1]
            return None
    return None


def _locate(toks: list[Token], i: int, sql: str, offset: int, full: str):
    """(start, end, source_text, source_offset, is_query, alias, body tokens) of one clause."""
    def error(message: str, tok: Token | None) -> CepSyntaxError:
        pos = tok.start if tok is not None else len(sql)
        return CepSyntaxError(message, sql=full, pos=offset + pos)

    if i + 1 >= len(toks) or toks[i + 1].token_type != TokenType.L_PAREN:
        raise error("expected '(' after MATCH_RECOGNIZE", toks[i + 1] if i + 1 < len(toks) else None)
    close = closing_paren(toks, i + 1)
    if close is None:
        unclosed = _unclosed_pattern_paren(toks, i + 1)
        if unclosed is not None:
            raise error("PATTERN ( is not closed: missing ')'", unclosed)
        raise error("MATCH_RECOGNIZE clause is not terminated: missing ')'", toks[i + 1])
    start, src_text, src_off, is_query = _source(toks, i, sql, error)
    end, alias, k = toks[close].end + 1, None, close + 1
    alias_at = None
    if k < len(toks) and toks[k].token_type == TokenType.ALIAS:
        if k + 1 >= len(toks) or not _is_name(toks[k + 1]):
            raise error("expected an alias after AS", toks[k + 1] if k + 1 < len(toks) else None)
        alias_at = k + 1
    elif k < len(toks) and _is_alias_word(toks[k]):
        alias_at = k
    columns: tuple[str, ...] = ()
    columns_pos = None
    if alias_at is not None:
        alias, end = toks[alias_at].text, toks[alias_at].end + 1
        if alias_at + 1 < len(toks) and toks[alias_at + 1].token_type == TokenType.L_PAREN:
            columns, last = _column_list(toks, alias_at + 1, error)
            columns_pos, end = offset + toks[alias_at + 1].start, toks[last].end + 1
    return (offset + start, offset + end, src_text, offset + src_off, is_query, alias,
            toks[i + 2:close + 1], columns, columns_pos)


def _column_list(toks: list[Token], lp: int, error) -> tuple[tuple[str, ...], int]:
    """``(a, b, ...)`` after a clause alias: (names, index of the closing parenthesis)."""
    names: list[str] = []
    k = lp + 1
    while True:
        if k >= len(toks) or not _is_name(toks[k]):
            raise error("expected a column name in the alias column list",
                        toks[k] if k < len(toks) else None)
        names.append(toks[k].text)
        k += 1
        if k < len(toks) and toks[k].token_type == TokenType.COMMA:
            k += 1
            continue
        if k < len(toks) and toks[k].token_type == TokenType.R_PAREN:
            break
        raise error("expected ',' or ')' in the alias column list",
                    toks[k] if k < len(toks) else None)
    return tuple(names), k


def _source(toks: list[Token], i: int, sql: str, error):
    """The table / subquery before MATCH_RECOGNIZE: (start, text, text offset, is_query)."""
    j = i - 1
    if j < 0:
        raise error("MATCH_RECOGNIZE must follow a table or a subquery", toks[i])
    watermark = _watermark_at(toks, i)
    if watermark is not None:   # `src WATERMARK ts DELAY OF INTERVAL ... [AS w]`: one relation
        start = _source(toks, watermark, sql, error)[0]
        return start, sql[start:toks[j].end + 1], start, False
    # skip a source alias: `t AS x MATCH_RECOGNIZE` / `t x MATCH_RECOGNIZE` / `(...) x ...`
    if _is_name(toks[j], strict=True) and j >= 1:
        before = toks[j - 1]
        if before.token_type == TokenType.ALIAS:
            j -= 2
        elif before.token_type == TokenType.R_PAREN or _is_name(before, strict=True):
            j -= 1
    if j < 0:
        raise error("MATCH_RECOGNIZE must follow a table or a subquery", toks[i])
    aliased = _aliased_with_columns(toks, j)
    if aliased is not None:  # `VALUES (...) AS t(a, b)`, `tbl AS t(a, b)`: a table expression
        first = toks[aliased]
        return first.start, sql[first.start:toks[j].end + 1], first.start, False
    last = toks[j]
    if last.token_type == TokenType.R_PAREN:
        open_ = opening_paren(toks, j)
        if open_ is None:
            raise error("unbalanced ')' before MATCH_RECOGNIZE", last)
        k = open_ - 1
        if k >= 0 and _is_name(toks[k]):  # table function call, e.g. range(10)
            while k >= 2 and toks[k - 1].token_type == TokenType.DOT and _is_name(toks[k - 2]):
                k -= 2
            return toks[k].start, sql[toks[k].start:last.end + 1], toks[k].start, False
        lp = toks[open_]
        return lp.start, sql[lp.end + 1:last.start], lp.end + 1, True
    if not _is_name(last):
        raise error("MATCH_RECOGNIZE must follow a table or a subquery", toks[i])
    k = j
    while k >= 2 and toks[k - 1].token_type == TokenType.DOT and _is_name(toks[k - 2]):
        k -= 2
    return toks[k].start, sql[toks[k].start:last.end + 1], toks[k].start, False


def _watermark_at(toks: list[Token], i: int) -> int | None:
    """Index of the WATERMARK keyword of Spark's ``relation WATERMARK col DELAY OF
    INTERVAL ... [[AS] alias]`` clause right before MATCH_RECOGNIZE (toks[i]), if any."""
    depth = 0
    for k in range(i - 1, max(i - 16, 0) - 1, -1):
        kind = toks[k].token_type
        depth += (kind == TokenType.R_PAREN) - (kind == TokenType.L_PAREN)
        if depth < 0:
            return None
        if depth == 0 and toks[k].text.upper() == "WATERMARK" and k + 3 < i \
                and toks[k + 2].text.upper() == "DELAY" and toks[k + 3].text.upper() == "OF":
            return k
    return None


def _aliased_with_columns(toks: list[Token], j: int) -> int | None:
    """When toks[j] closes a source alias with a column list (``... [AS] t(a, b)``), the
    index of the FROM item's first token (after FROM / JOIN / a top-level comma that is
    not between VALUES rows); otherwise None. ``name(...)`` right after FROM, JOIN or a
    comma is a table function call instead."""
    if toks[j].token_type != TokenType.R_PAREN:
        return None
    open_ = opening_paren(toks, j)
    if open_ is None or open_ < 2 or not _is_name(toks[open_ - 1], strict=True):
        return None
    k = open_ - 2
    if toks[k].token_type == TokenType.ALIAS:
        k -= 1
    elif toks[k].token_type != TokenType.R_PAREN and not _is_name(toks[k], strict=True):
        return None
    depth, first = 0, None
    while k >= 0:
        t = toks[k].token_type
        if t == TokenType.R_PAREN:
            depth += 1
        elif t == TokenType.L_PAREN:
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and t in (TokenType.FROM, TokenType.JOIN):
            break
        elif depth == 0 and t == TokenType.COMMA and not _inside_values(toks, k):
            break
        first = k
        k -= 1
    return first


def _inside_values(toks: list[Token], comma: int) -> bool:
    """Whether a top-level comma separates the rows of a VALUES list."""
    depth = 0
    for k in range(comma - 1, -1, -1):
        t = toks[k].token_type
        if t == TokenType.R_PAREN:
            depth += 1
        elif t == TokenType.L_PAREN:
            if depth == 0:
                return False
            depth -= 1
        elif depth == 0:
            return t == TokenType.VALUES or (t == TokenType.COMMA and _inside_values(toks, k))
    return False


# --- statements cepsql handles ------------------------------------------------------------
def _words(toks: list[Token], i: int, *words: str) -> bool:
    if i + len(words) > len(toks):
        return False
    return all(toks[i + k].token_type not in (TokenType.STRING, TokenType.IDENTIFIER)
               and toks[i + k].text.upper() == w for k, w in enumerate(words))


def _dotted_name(toks: list[Token], i: int, stmt: str) -> tuple[str, int]:
    """Name (parts joined by '.', quotes removed) starting at toks[i]; index after it."""
    parts, i = _name_parts(toks, i, stmt)
    return ".".join(parts), i


def _name_parts(toks: list[Token], i: int, stmt: str) -> tuple[tuple[str, ...], int]:
    """The parts (quotes removed) of the multipart name starting at toks[i]; index after."""
    if i >= len(toks) or not _is_name(toks[i]):
        tok = toks[i] if i < len(toks) else None
        raise CepSyntaxError("expected a view name", sql=stmt,
                             pos=tok.start if tok else len(stmt))
    parts = [toks[i].text]
    i += 1
    while i + 1 < len(toks) and toks[i].token_type == TokenType.DOT and _is_name(toks[i + 1]):
        parts.append(toks[i + 1].text)
        i += 2
    return tuple(parts), i


_REWRITTEN_WORDS = frozenset({"match_recognize", MATCH_FUNCTION, VIEW_FUNCTION, "cep_workload"})


def needs_rewrite(stmt: str) -> bool:
    """Whether stmt holds a MATCH_RECOGNIZE clause or a call of one of cepsql's table
    functions (the word outside literals and comments). Only such statements are
    cepsql's to rewrite: any other goes to Spark exactly as written, with Spark's own
    result and errors."""
    i, n = 0, len(stmt)
    while True:
        i = skip_space(stmt, i)
        if i >= n:
            return False
        word = word_at(stmt, i)
        if word.lower() in _REWRITTEN_WORDS:
            return True
        i += len(word) if word else skip_token(stmt, i) - i


def _view_header(toks: list[Token], stmt: str):
    """``CREATE [OR REPLACE] TEMP[ORARY] VIEW [IF NOT EXISTS] name``: (name parts,
    or_replace, if_not_exists, index after the name), else None."""
    if not _words(toks, 0, "CREATE"):
        return None
    i = 1
    or_replace = _words(toks, i, "OR", "REPLACE")
    i += 2 if or_replace else 0
    if not (_words(toks, i, "TEMPORARY") or _words(toks, i, "TEMP")):
        return None
    i += 1
    if not _words(toks, i, "VIEW"):
        return None
    i += 1
    if_not_exists = _words(toks, i, "IF", "NOT", "EXISTS")
    i += 3 if if_not_exists else 0
    parts, i = _name_parts(toks, i, stmt)
    return parts, or_replace, if_not_exists, i


_VIEW_OPTIONS = frozenset({"COMMENT", "TBLPROPERTIES", "WITH", "DEFAULT"})


def parse_create_view(stmt: str) -> CreateView | None:
    """``CREATE [OR REPLACE] TEMP[ORARY] VIEW [IF NOT EXISTS] name [(columns)] AS query``,
    else None (also for Spark's ``... VIEW name [(schema)] USING source``, which holds
    no query)."""
    toks = _tokens(stmt)
    header = _view_header(toks, stmt)
    if header is None:
        return None
    parts, or_replace, if_not_exists, i = header
    columns: tuple[str, ...] = ()
    if i < len(toks) and toks[i].token_type == TokenType.L_PAREN:
        close = closing_paren(toks, i)
        if close is None:
            raise CepSyntaxError("the column list is not closed: missing ')'", sql=stmt,
                                 pos=toks[i].start)
        after = toks[close + 1] if close + 1 < len(toks) else None
        if after is not None and after.token_type == TokenType.USING:
            return None
        names = toks[i + 1:close:2]
        commas = toks[i + 2:close:2]
        if not names or not all(_is_name(t) for t in names) or \
                not all(t.token_type == TokenType.COMMA for t in commas):
            raise CepUnsupportedError("a column list in CREATE TEMPORARY VIEW of a "
                                      "MATCH_RECOGNIZE query takes plain names only",
                                      sql=stmt, pos=toks[i].start)
        columns, i = tuple(t.text for t in names), close + 1
    if i < len(toks) and toks[i].token_type == TokenType.USING:
        return None
    if i < len(toks) and toks[i].token_type != TokenType.ALIAS and \
            toks[i].text.upper() in _VIEW_OPTIONS:
        raise CepUnsupportedError(f"{toks[i].text.upper()} in CREATE TEMPORARY VIEW of a "
                                  "MATCH_RECOGNIZE query is not supported", sql=stmt,
                                  pos=toks[i].start)
    if i >= len(toks) or toks[i].token_type != TokenType.ALIAS:
        tok = toks[i] if i < len(toks) else None
        raise CepSyntaxError("expected AS after the view name", sql=stmt,
                             pos=tok.start if tok else len(stmt))
    if i + 1 >= len(toks):
        raise CepSyntaxError("expected a query after AS", sql=stmt, pos=len(stmt))
    q = toks[i + 1].start
    return CreateView(".".join(parts), or_replace, if_not_exists, stmt[q:].rstrip(), q,
                      parts, columns)


def changed_view(stmt: str) -> str | None:
    """The temporary view a statement Spark ran without cepsql may have replaced or
    dropped (``CREATE [OR REPLACE] TEMP VIEW v ...`` in any form, ``DROP VIEW|TABLE
    [IF EXISTS] v``): its name (parts joined by '.', quotes removed), else None. For the
    pattern-view registry, after Spark accepted the statement."""
    try:
        toks = _tokens(stmt)
        header = _view_header(toks, stmt)
        if header is not None:
            return ".".join(header[0])
        if _words(toks, 0, "DROP", "VIEW") or _words(toks, 0, "DROP", "TABLE"):
            at = 4 if _words(toks, 2, "IF", "EXISTS") else 2
            return _dotted_name(toks, at, stmt)[0]
    except CepSyntaxError:  # a statement sqlglot cannot tokenize: no view of ours
        return None
    return None


def parse_drop_view(stmt: str) -> tuple[str, bool] | None:
    """``DROP VIEW [IF EXISTS] name`` -> (name, if_exists), else None."""
    toks = _tokens(stmt)
    if not _words(toks, 0, "DROP", "VIEW"):
        return None
    if_exists = _words(toks, 2, "IF", "EXISTS")
    name, i = _dotted_name(toks, 4 if if_exists else 2, stmt)
    return (name, if_exists) if i == len(toks) else None


def explain_format(stmt: str) -> str:
    """'SVG' for ``EXPLAIN [ANALYZE] FORMAT SVG query`` (the plan drawn), else 'TEXT'."""
    head = _explain_head(stmt)
    return head[1] if head is not None else "TEXT"


def explain_analyze(stmt: str) -> bool:
    """Whether stmt is ``EXPLAIN ANALYZE ...`` (run the query and report what it did)."""
    head = _explain_head(stmt)
    return head is not None and head[0]


def parse_explain(stmt: str) -> tuple[str, int] | None:
    """``EXPLAIN [ANALYZE] [EXTENDED|CODEGEN|COST|FORMATTED | FORMAT TEXT|SVG] query`` ->
    (query text, its offset). Spark's mode words are skipped: cepsql's text EXPLAIN has
    a single format; FORMAT SVG draws the plans instead (see explain_format); ANALYZE
    runs the query (explain_analyze). (Text-based: sqlglot tokenizes EXPLAIN as a
    command whose rest is one opaque token.)"""
    head = _explain_head(stmt)
    if head is None:
        return None
    i = head[2]
    return stmt[i:].rstrip(), i


def _explain_head(stmt: str) -> tuple[bool, str, int] | None:
    """(ANALYZE given, format, offset of the query) of an EXPLAIN statement, else None."""
    i = skip_space(stmt, 0)
    word = word_at(stmt, i)
    if word.upper() != "EXPLAIN":
        return None
    i = skip_space(stmt, i + len(word))
    analyze = word_at(stmt, i).upper() == "ANALYZE"
    if analyze:
        i = skip_space(stmt, i + len("ANALYZE"))
    mode, fmt = word_at(stmt, i), "TEXT"
    if mode.upper() in _EXPLAIN_MODES:
        i = skip_space(stmt, i + len(mode))
    elif mode.upper() == "FORMAT":
        j = skip_space(stmt, i + len(mode))
        fmt = word_at(stmt, j).upper()
        if fmt not in _EXPLAIN_FORMATS:
            raise CepSyntaxError(f"EXPLAIN FORMAT takes {' or '.join(sorted(_EXPLAIN_FORMATS))}"
                                 f", not {word_at(stmt, j) or 'nothing'}", sql=stmt, pos=j)
        i = skip_space(stmt, j + len(fmt))
    if i >= len(stmt):
        raise CepSyntaxError("expected a query after EXPLAIN", sql=stmt, pos=len(stmt))
    return analyze, fmt, i


def parse_explain_workload(stmt: str) -> tuple[str | list[str], int] | None:
    """``EXPLAIN [ANALYZE] WORKLOAD source`` (also ``'source'``) or ``EXPLAIN [ANALYZE]
    WORKLOAD (v1, v2)`` -> (source name or list of view names, offset of the name), else
    None (explain_analyze tells whether ANALYZE was written)."""
    i = skip_space(stmt, 0)
    if word_at(stmt, i).upper() != "EXPLAIN":
        return None
    i = skip_space(stmt, i + len("EXPLAIN"))
    if word_at(stmt, i).upper() == "ANALYZE":
        i = skip_space(stmt, i + len("ANALYZE"))
    if word_at(stmt, i).upper() != "WORKLOAD":
        return None
    at = skip_space(stmt, i + len("WORKLOAD"))
    toks = _tokens(stmt[at:], offset=at, full_sql=stmt)
    if toks and toks[0].token_type == TokenType.L_PAREN:
        names, k = [], 1
        while k < len(toks) and (toks[k].token_type == TokenType.STRING or _is_name(toks[k])):
            name, k = _dotted_name(toks, k, stmt[at:]) if toks[k].token_type != \
                TokenType.STRING else (toks[k].text, k + 1)
            names.append(name)
            if k < len(toks) and toks[k].token_type == TokenType.COMMA:
                k += 1
        if names and k == len(toks) - 1 and toks[k].token_type == TokenType.R_PAREN:
            return names, at
    elif len(toks) == 1 and toks[0].token_type == TokenType.STRING:
        return toks[0].text, at
    elif toks and _is_name(toks[0]):
        name, k = _dotted_name(toks, 0, stmt[at:])
        if k == len(toks):
            return name, at
    raise CepSyntaxError("expected EXPLAIN WORKLOAD <source> or EXPLAIN WORKLOAD (view, ...)",
                         sql=stmt, pos=at)


def find_workload_calls(stmt: str) -> list[tuple[int, int, str, int]]:
    """``cep_workload('source')`` table function calls in stmt: (start, end, source, offset
    of the source literal), in text order."""
    toks = _tokens(stmt)
    out = []
    for k in range(len(toks) - 3):
        if toks[k].text.lower() == "cep_workload" and _is_name(toks[k]) \
                and toks[k + 1].token_type == TokenType.L_PAREN:
            if toks[k + 2].token_type != TokenType.STRING or \
                    toks[k + 3].token_type != TokenType.R_PAREN:
                raise CepSyntaxError("cep_workload takes one string: the source whose pattern "
                                     "views form the workload, e.g. cep_workload('ticks')",
                                     sql=stmt, pos=toks[k + 1].start)
            out.append((toks[k].start, toks[k + 3].end + 1, toks[k + 2].text,
                        toks[k + 2].start))
    return out


# --- table-function form --------------------------------------------------------------------
def parse_clause_body(body: str, partition_by=(), order_by=()) -> MatchRecognizeSpec:
    """Parse ``MEASURES ... PATTERN (...) DEFINE ...`` (no MATCH_RECOGNIZE keyword, no
    parentheses) with PARTITION BY / ORDER BY items given as separate texts (order
    items may end in ASC/DESC [NULLS FIRST|LAST]). Errors are located in ``body`` (or in
    the partition/order text they come from)."""
    keys = []
    for kind, texts in (("partition", partition_by), ("order", order_by)):
        keys.append([CepSparkParser(dialect=CepSpark).parse_key(_tokens(t), t, kind)
                     for t in texts])
    return CepSparkParser(dialect=CepSpark).parse_clause(
        _tokens(body), body, wrapped=False, partition_by=keys[0] or None,
        order_by=keys[1] or None)
