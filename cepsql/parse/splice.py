"""Backend-neutral statement rewriting: replace every MATCH_RECOGNIZE clause site by the
name of a view holding its result, so the rest of the statement is plain SQL.

The backend supplies ``run_clause(site, source) -> view name``; this module only does text
work (finding CTEs, building the SQL text of a clause's source, splicing), so the Spark
and the local backends rewrite identically. It never imports pyspark.
"""
from __future__ import annotations

import itertools
import re
import uuid
from dataclasses import dataclass
from typing import Callable, Sequence

from cepsql.algebra.identifiers import quote_identifier
from cepsql.parse.scanner import paren_end, read_word, skip_space

_counter = itertools.count(1)
_PROCESS_TAG = uuid.uuid4().hex[:8]
SOURCE_ALIAS = "`__cep_src`"


def new_view_name() -> str:
    """A unique name for the view holding one clause's result (ours, not the user's)."""
    return f"__cep_mr_{_PROCESS_TAG}_{next(_counter)}"


@dataclass(frozen=True)
class Source:
    """Where a clause reads its rows from: a table name as written (``sql`` None), or the
    SQL text of a query producing the rows (subqueries, CTE names)."""
    display: str
    table: str | None = None
    sql: str | None = None


@dataclass(frozen=True)
class CteContext:
    """The CTE definitions visible at a point of a statement (already rewritten)."""
    text: str              # "a AS (...), b AS (...)"
    names: frozenset[str]  # normalised names


RunClause = Callable[[object, Source], str]


def rewrite_text(sql: str, run_clause: RunClause, find: Callable, *, offset: int = 0,
                 full_sql: str | None = None,
                 outer: Sequence[CteContext] = ()) -> str:
    """sql with each clause site replaced by `view` [AS alias]; nested sites in source
    subqueries are rewritten first. ``offset`` is sql's position in ``full_sql``."""
    full = sql if full_sql is None else full_sql
    sites = sorted(find(sql, offset=offset, full_sql=full), key=lambda s: s.start)
    if not sites:
        return sql
    ctes = scan_ctes(sql)
    done: list[tuple[int, int, str]] = []
    for site in sites:
        start, end = site.start - offset, site.end - offset  # sites are absolute in full
        visible = [c for c in ctes if c[2] <= start]
        contexts = list(outer)
        if visible:
            text = ", ".join(apply_replacements(sql, lo, hi, done) for _, lo, hi in visible)
            contexts.append(CteContext(text, frozenset(n for n, _, _ in visible)))
        source = _source(site, run_clause, find, full, contexts)
        view = run_clause(site, source)
        done.append((start, end, _replacement(view, site.alias)))
    return apply_replacements(sql, 0, len(sql), done)


def _replacement(view: str, alias: str | None) -> str:
    """`view` AS `alias` (the alias arrives as the name itself, unquoted: quoting keeps
    keywords and odd characters legal, and Spark resolves quoted names
    case-insensitively too)."""
    text = quote_identifier(view)
    if alias:
        text += " AS " + quote_identifier(alias)
    return text


def _source(site, run_clause: RunClause, find: Callable, full: str,
            contexts: list[CteContext]) -> Source:
    if not site.source_is_query:
        name = site.source_text.strip()
        # a table-valued function call such as range(10), or a relation with Spark's
        # WATERMARK clause (`t WATERMARK ts DELAY OF INTERVAL 2 SECONDS`)
        if "(" in name or re.search(r"\sWATERMARK\s", name, re.I):
            return Source(name, sql=wrap_ctes(f"SELECT * FROM {name}", contexts))
        key = normalize_name(name)
        for level in range(len(contexts) - 1, -1, -1):
            if key in contexts[level].names:
                return Source(name, sql=wrap_ctes(f"SELECT * FROM {name}", contexts[:level + 1]))
        return Source(name, table=name)
    inner, shift = strip_parens(site.source_text)
    rewritten = rewrite_text(inner, run_clause, find, offset=site.source_offset + shift,
                             full_sql=full, outer=contexts)
    return Source("(subquery)", sql=wrap_ctes(f"SELECT * FROM ({rewritten}) AS {SOURCE_ALIAS}",
                                              contexts))


def wrap_ctes(query: str, contexts: Sequence[CteContext]) -> str:
    for ctx in reversed(contexts):
        query = f"WITH {ctx.text} SELECT * FROM ({query}) AS {SOURCE_ALIAS}"
    return query


def normalize_name(name: str) -> str:
    """Case-insensitive key of a (possibly backquoted) single identifier."""
    name = name.strip()
    if len(name) >= 2 and name[0] == "`" and name[-1] == "`":
        name = name[1:-1].replace("``", "`")
    return name.lower()


def apply_replacements(sql: str, lo: int, hi: int, reps: Sequence[tuple[int, int, str]]) -> str:
    """sql[lo:hi] with the replacements lying inside it applied."""
    out, cursor = [], lo
    for start, end, text in sorted(reps):
        if start >= lo and end <= hi:
            out += [sql[cursor:start], text]
            cursor = end
    out.append(sql[cursor:hi])
    return "".join(out)


def strip_parens(text: str) -> tuple[str, int]:
    """text without whitespace and enclosing parentheses, and how many leading characters
    were removed."""
    start, end = 0, len(text)
    while True:
        i = skip_space(text, start)
        e = end
        while e > i and text[e - 1].isspace():
            e -= 1
        if i < e and text[i] == "(" and paren_end(text, i) == e:
            start, end = i + 1, e - 1
            continue
        return text[i:e], i


def scan_ctes(sql: str) -> list[tuple[str, int, int]]:
    """The statement's leading WITH list as (normalised name, start, end) per definition
    ``name [(columns)] AS (query)``; [] when the statement has no WITH clause."""
    i = skip_space(sql, 0)
    word, j = read_word(sql, i)
    if word.upper() != "WITH":
        return []
    i = skip_space(sql, j)
    word, j = read_word(sql, i)
    if word.upper() == "RECURSIVE":
        i = skip_space(sql, j)
    out = []
    while True:
        start = i
        name, j = read_word(sql, i)
        if not name:
            return out
        i = skip_space(sql, j)
        if i < len(sql) and sql[i] == "(":
            i = skip_space(sql, paren_end(sql, i))
        word, j = read_word(sql, i)
        if word.upper() == "AS":
            i = skip_space(sql, j)
        if i >= len(sql) or sql[i] != "(":
            return out
        end = paren_end(sql, i)
        out.append((normalize_name(name), start, end))
        i = skip_space(sql, end)
        if i < len(sql) and sql[i] == ",":
            i = skip_space(sql, i + 1)
            continue
        return out


def is_select_star_from(sql: str, start: int, end: int) -> bool:
    """True when sql is exactly ``SELECT * FROM <sql[start:end]>`` (plus an optional ';')."""
    i = skip_space(sql, 0)
    for word in ("SELECT", "*", "FROM"):
        if word == "*":
            if not sql.startswith("*", i):
                return False
            j = i + 1
        else:
            w, j = read_word(sql, i)
            if w.upper() != word:
                return False
        i = skip_space(sql, j)
    if i != start:
        return False
    i = skip_space(sql, end)
    if i < len(sql) and sql[i] == ";":
        i = skip_space(sql, i + 1)
    return i == len(sql)
