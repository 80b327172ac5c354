"""A small, vectorised evaluator of a documented subset of Spark SQL over Arrow tables: the
SQL *around* MATCH_RECOGNIZE on the in-process path (``cepsql.match_recognize``). Queries
outside the subset (OutsideSubset) run on DuckDB instead (backends/local/duck.py).

Why our own evaluator: the project never evaluates code derived from user text (sqlglot's
Python executor generates and ``eval``s Python source), and the clause already has a
vectorised Arrow evaluator of the expression IR with Spark semantics (``arrow_eval``).
Here queries are parsed by sqlglot (CepSpark dialect), expressions are converted with
``dialect.to_algebra`` and evaluated with ``evaluate_arrow``; relational steps use Arrow
compute (filter, group_by/aggregate, sort_indices, take, concat).

The subset (anything else raises CepUnsupportedError at its line:column, pointing to Spark):

    query   := [WITH name AS (query) [, ...]] select [UNION ALL select ...]
               [ORDER BY ...] [LIMIT n]
    select  := SELECT [DISTINCT] item [, ...] FROM source
               [WHERE cond] [GROUP BY expr [, ...]] [HAVING cond]
               [ORDER BY expr [ASC|DESC] [NULLS FIRST|LAST] [, ...]] [LIMIT n]
    item    := * | alias.* | expr [[AS] name]
    source  := table name | CTE name | MATCH_RECOGNIZE clause | (query)   [[AS] alias]

- Expressions: everything ``arrow_eval`` evaluates (arithmetic, comparisons, AND/OR/NOT,
  IS [NOT] NULL, [NOT] IN (list), BETWEEN, LIKE, CASE, CAST, and its scalar functions).
  Column references may be qualified by the source's alias (or table name).
- Aggregates (with or without GROUP BY, also in HAVING and ORDER BY): count(*), count(x),
  count(DISTINCT x), sum, avg, min, max; result types follow Spark (count/sum of integers
  BIGINT, avg DOUBLE, sum/avg of DECIMAL(p,s) DECIMAL(p+10,s)/DECIMAL(p+4,s+4)).
- GROUP BY and ORDER BY accept ordinals (``ORDER BY 2``) and select-list aliases, like
  Spark's defaults; ORDER BY defaults to NULLS FIRST for ASC and NULLS LAST for DESC.
- Output names: an unaliased column keeps its name as written; other unaliased expressions
  are named after their SQL text, which may differ from Spark's generated name — alias them.

Not supported: joins (also comma joins), window functions, subqueries inside expressions,
LATERAL VIEW, UNION [DISTINCT]/INTERSECT/EXCEPT, OFFSET, GROUPING SETS/ROLLUP/CUBE,
QUALIFY, SORT/CLUSTER/DISTRIBUTE BY, table-valued functions, recursive CTEs and column
lists on aliases.
"""
from __future__ import annotations

import dataclasses
import decimal
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from cepsql.algebra.expressions import (Aggregate, Classifier, ColumnRef, Expr, MatchNumber, Navigation,
                                  RowValue, walk)
from cepsql.algebra.limits import MAX_PAREN_NESTING, ensure_recursion_budget
from cepsql.parse.dialect import CepSpark, CepSparkParser, tokenize
from cepsql.parse.scanner import too_deep_paren
from cepsql.parse.to_algebra import ToAlgebra, sql_pos
from cepsql.errors import (CepAnalysisError, CepRuntimeError, CepSyntaxError,
                            CepUnsupportedError)
from cepsql.exprs.arrow_eval import cast_value, common_type, evaluate_arrow
from cepsql.compile.query_plan import SortColumn
from cepsql.runtime.ordering import sort_indices
from cepsql.backends.local.spark_checks import check_spark_accepts

__all__ = ["Scope", "Virtual", "run_sql", "unsupported", "OutsideSubset",
           "SUBSET_SUMMARY"]

SUBSET_SUMMARY = ("[WITH ...] SELECT [DISTINCT] items FROM <one table, MATCH_RECOGNIZE clause "
                  "or subquery> [WHERE] [GROUP BY [HAVING]] [ORDER BY] [LIMIT], UNION ALL")

# Select/Union arguments the subset handles; any other non-empty one is unsupported.
_SELECT_ARGS = frozenset({"with_", "expressions", "distinct", "from_", "where", "group",
                          "having", "order", "limit"})
_UNION_ARGS = frozenset({"with_", "this", "expression", "distinct", "order", "limit"})
_CLAUSE_NAMES = {
    "joins": "JOIN (including comma-separated FROM lists)", "laterals": "LATERAL VIEW",
    "windows": "the WINDOW clause", "qualify": "QUALIFY", "offset": "OFFSET",
    "sort": "SORT BY", "cluster": "CLUSTER BY", "distribute": "DISTRIBUTE BY",
    "hint": "query hints", "pivots": "PIVOT/UNPIVOT", "sample": "TABLESAMPLE",
    "into": "SELECT INTO", "match": "MATCH_RECOGNIZE in this position", "connect": "CONNECT BY",
    "by_name": "UNION BY NAME", "side": "outer UNION", "kind": "this set operation",
}

# keywords to point at for clauses whose nodes carry no position of their own
_CLAUSE_KEYWORDS = {"joins": frozenset({"JOIN", ","}), "laterals": frozenset({"LATERAL"}),
                    "offset": frozenset({"OFFSET"}), "qualify": frozenset({"QUALIFY"}),
                    "windows": frozenset({"WINDOW"})}
_SET_KEYWORDS = frozenset({"UNION", "INTERSECT", "EXCEPT", "MINUS"})


class OutsideSubset(CepUnsupportedError):
    """A construct outside this subset: cepsql.match_recognize then runs the query on
    DuckDB (backends/local/duck.py), and raises this only when DuckDB cannot run it."""


def unsupported(what: str, pos: int | None) -> CepUnsupportedError:
    """The error for a construct outside the subset: says what the subset is and where to go."""
    return OutsideSubset(f"{what}: {_ADVICE}", pos=pos)


_ADVICE = ("not supported by the in-process path (cepsql.match_recognize), which runs only a "
           f"subset of Spark SQL around MATCH_RECOGNIZE ({SUBSET_SUMMARY}); run the statement "
           "through Spark (spark.cep.sql) instead")


def _with_hint(err: CepUnsupportedError, pos: int | None = None) -> CepUnsupportedError:
    """An expression-level unsupported error from to_algebra/arrow_eval, with the advice
    (at pos, the expression's, when the error has no position of its own)."""
    message = err.message.replace(" in MATCH_RECOGNIZE", "").replace(
        " is not supported by the local evaluator", "")
    return OutsideSubset(f"{message}: {_ADVICE}", pos=err.pos if err.pos is not None else pos)


def evaluate(expr: Expr, table: pa.Table) -> pa.Array | pa.ChunkedArray:
    """evaluate_arrow, with the advice added to its unsupported-construct errors. Spark
    evaluates the SQL around a clause on every row it reads, so a zero divisor raises
    DIVIDE_BY_ZERO under ANSI (strict_division) where Spark's own evaluation reaches it.
    A run-time error that knows no position (an implicit cast of a string, e.g.) is
    located at the expression."""
    try:
        return evaluate_arrow(expr, table, strict_division=True)
    except CepUnsupportedError as err:
        raise _with_hint(err, getattr(expr, "pos", None)) from None
    except CepRuntimeError as err:
        if err.pos is not None or err.line is not None:
            raise
        raise CepRuntimeError(err.message, pos=getattr(expr, "pos", None)) from None


# --- scope ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Virtual:
    """A table computed when (and where) a query reads it, in that point's scope: a
    MATCH_RECOGNIZE clause replaced by a placeholder name, whose source may be a CTE."""
    compute: Callable[["Scope"], pa.Table]
    alias: str | None = None


@dataclass(frozen=True)
class Scope:
    """The names a query can read: given tables, visible CTEs, clause placeholders. Keys
    are normalised (lower-case, unquoted)."""
    tables: Mapping[str, pa.Table]
    ctes: Mapping[str, pa.Table] = field(default_factory=dict)
    virtual: Mapping[str, Virtual] = field(default_factory=dict)

    def with_ctes(self, more: Mapping[str, pa.Table]) -> "Scope":
        return dataclasses.replace(self, ctes={**self.ctes, **more})

    def with_virtual(self, more: Mapping[str, Virtual]) -> "Scope":
        return dataclasses.replace(self, virtual={**self.virtual, **more})

    def lookup(self, parts: list[str], written: str, pos: int | None
               ) -> tuple[pa.Table, str | None]:
        """(table, default qualifier) for a possibly dotted name; a placeholder runs here.
        Dotted names fall back to their last part (``db.t`` reads the table given as t)."""
        key = ".".join(p.lower() for p in parts)
        if key in self.virtual:
            v = self.virtual[key]
            return v.compute(self), v.alias
        if key in self.ctes:
            return self.ctes[key], parts[-1]
        for k in (key, parts[-1].lower()):
            if k in self.tables:
                return self.tables[k], parts[-1]
        raise CepAnalysisError(
            f"unknown table {written}: pass it as match_recognize(sql, {parts[-1].lower()}=...)",
            pos=pos)


# --- entry point ------------------------------------------------------------------------

class _QueryParser(CepSparkParser):
    """Whole-query parser with calls kept as written (exp.Anonymous), as inside the clause,
    so ``to_algebra`` converts them and ``arrow_eval`` decides what it supports."""
    _cep_active = True


def parse_query(text: str, base: int = 0) -> tuple[exp.Expr, list[Token]]:
    """The single query in text as a sqlglot tree (positions relative to text), and the
    tokens (to locate keywords sqlglot keeps no position for, such as JOIN)."""
    try:
        tokens = tokenize(text)
    except TokenError:
        raise CepSyntaxError("cannot tokenize the SQL text", pos=base) from None
    deep = too_deep_paren(tokens, MAX_PAREN_NESTING)
    if deep is not None:
        raise CepSyntaxError(f"parentheses nested more than {MAX_PAREN_NESTING} deep "
                             "(Spark's own limit is lower)", pos=base + deep.start)
    ensure_recursion_budget()
    try:
        trees = [t for t in _QueryParser(dialect=CepSpark).parse(tokens, text) if t is not None]
    except RecursionError:
        raise CepUnsupportedError("the query nests expressions or subqueries too deeply for "
                                  "the in-process path", pos=base) from None
    except ParseError as err:
        tok = getattr(err, "cep_token", None)
        message = getattr(err, "cep_message", None) or str(err).split(". Line")[0]
        raise CepSyntaxError(f"syntax error: {message}",
                             pos=base + (tok.start if tok is not None else 0)) from None
    if len(trees) != 1:
        raise CepSyntaxError("expected exactly one query", pos=base)
    return trees[0], tokens


def run_sql(text: str, scope: Scope, *, base: int = 0) -> pa.Table:
    """Result of the query ``text`` (which starts at offset ``base`` of the statement, so
    errors carry statement positions) over the names in ``scope``."""
    tree, tokens = parse_query(text, base)
    check_spark_accepts(tree, tokens, base)
    return _Runner(base, tokens).query(tree, scope)


# --- the evaluator ----------------------------------------------------------------------

@dataclass
class _Select:
    """A SELECT's parts converted to bound IR (columns resolved against its source)."""
    names: list[str]
    exprs: list[Expr]
    order: list[tuple[int | Expr, bool, bool]]  # output index or expression, asc, nulls first


class _Runner:
    """Evaluates query trees of one text; ``base`` shifts sqlglot offsets to the statement."""

    def __init__(self, base: int, tokens: list[Token]):
        self.base = base
        self.tokens = tokens

    def pos(self, node: exp.Expr | None) -> int | None:
        return None if node is None else sql_pos(node, self.base)

    def keyword_pos(self, pos: int | None, words: frozenset[str]) -> int | None:
        """Position of the last of words before pos (e.g. the JOIN before a joined table,
        whose node only records the table's position); pos when there is none."""
        if pos is None:
            return None
        before = [t for t in self.tokens if t.start < pos - self.base
                  and t.token_type != TokenType.IDENTIFIER and t.text.upper() in words]
        return self.base + before[-1].start if before else pos

    # queries ---------------------------------------------------------------------------
    def query(self, node: exp.Expr, scope: Scope) -> pa.Table:
        """Any query node of the subset: SELECT, UNION ALL, parenthesised query."""
        scope = self.ctes(node.args.get("with_"), scope)
        if isinstance(node, exp.Select):
            return self.select(node, scope)
        if type(node) is exp.Union and not node.args.get("distinct"):
            self.check_args(node, _UNION_ARGS)
            table = union_all([self.query(node.this, scope), self.query(node.expression, scope)],
                              self.pos(node.expression))
            return self.finish(table, node)
        if isinstance(node, exp.Subquery):  # a parenthesised query
            self.check_args(node, frozenset({"this", "with_", "order", "limit"}))
            return self.finish(self.query(node.this, scope), node)
        if isinstance(node, exp.SetOperation):
            at = self.keyword_pos(self.pos(node.expression), _SET_KEYWORDS)
            raise unsupported(f"{type(node).__name__.upper()}"
                              f"{' DISTINCT' if isinstance(node, exp.Union) else ''}", at)
        raise unsupported(f"the statement {node.key.upper()}", self.pos(node))

    def ctes(self, with_: exp.With | None, scope: Scope) -> Scope:
        """scope plus the WITH list, each CTE evaluated in order (seeing the earlier ones)."""
        if with_ is None:
            return scope
        if with_.args.get("recursive"):
            raise unsupported("WITH RECURSIVE",
                              self.keyword_pos(self.pos(with_), frozenset({"WITH"})))
        for cte in with_.expressions:
            alias = cte.args.get("alias")
            if alias is not None and alias.args.get("columns"):
                raise unsupported("column lists on CTE names", self.pos(alias))
            scope = scope.with_ctes({cte.alias.lower(): self.query(cte.this, scope)})
        return scope

    def finish(self, table: pa.Table, node: exp.Expr) -> pa.Table:
        """ORDER BY / LIMIT of a UNION or parenthesised query: over its output columns."""
        order = node.args.get("order")
        if order is not None:
            keys = []
            for item in order.expressions:
                index = self.output_index(item.this, table.schema.names)
                target = index if index is not None else \
                    self.expr(item.this, table, None, "ORDER BY")
                keys.append((target, not item.args.get("desc"), bool(item.args.get("nulls_first"))))
            table = self.sort(table, table, keys)
        return self.limit(table, node.args.get("limit"))

    def select(self, node: exp.Select, scope: Scope) -> pa.Table:
        """One SELECT block: FROM, WHERE, GROUP BY/HAVING, projection, DISTINCT, ORDER BY,
        LIMIT — in SQL's logical order."""
        self.check_args(node, _SELECT_ARGS)
        distinct = node.args.get("distinct")
        if distinct is not None and distinct.args.get("on"):
            raise unsupported("DISTINCT ON", self.pos(distinct))
        source, qualifier = self.source(node, scope)
        where = node.args.get("where")
        if where is not None:
            cond = self.expr(where.this, source, qualifier, "WHERE")
            no_aggregates(cond, "WHERE")
            source = filter_table(source, cond, "WHERE")
        sel = self.items(node.expressions, source, qualifier)
        aliases = {n.lower(): e for n, e in zip(sel.names, sel.exprs)}
        sel.order = self.order_keys(node.args.get("order"), sel, source, qualifier, aliases,
                                    distinct is not None)
        source = self.group(node, sel, source, qualifier, aliases)
        out = pa.Table.from_arrays([evaluate(e, source) for e in sel.exprs], names=sel.names)
        if distinct is not None:
            out = distinct_rows(out)
        out = self.sort(out, source, sel.order)
        return self.limit(out, node.args.get("limit"))

    def group(self, node: exp.Select, sel: _Select, source: pa.Table, qualifier: str | None,
              aliases: Mapping[str, Expr]) -> pa.Table:
        """GROUP BY / HAVING / aggregates (if any): the grouped rows, with sel's expressions
        and ORDER BY keys rewritten over them; else source unchanged."""
        group, having = node.args.get("group"), node.args.get("having")
        having_expr = None if having is None else \
            self.expr(having.this, source, qualifier, "HAVING", aliases)
        order_exprs = [t for t, _, _ in sel.order if not isinstance(t, int)]
        if group is None and having is None and not has_aggregate(sel.exprs + order_exprs):
            return source
        keys = self.group_keys(group, sel, source, qualifier, aliases)
        extra = [having_expr] if having_expr is not None else []
        grouped, substitute = aggregate(source, keys, sel.exprs + order_exprs + extra)
        sel.exprs = [substitute(e) for e in sel.exprs]
        sel.order = [(t if isinstance(t, int) else substitute(t), a, n) for t, a, n in sel.order]
        if having_expr is not None:
            grouped = filter_table(grouped, substitute(having_expr), "HAVING")
        return grouped

    def check_args(self, node: exp.Expr, allowed: frozenset[str]) -> None:
        """Reject any clause of node outside the subset, at its position."""
        for key, value in node.args.items():
            if key in allowed or value is None or value is False or value == []:
                continue
            first = value[0] if isinstance(value, list) else value
            where = self.pos(first) if isinstance(first, exp.Expr) else None
            if key in _CLAUSE_KEYWORDS:
                where = self.keyword_pos(where, _CLAUSE_KEYWORDS[key])
            raise unsupported(_CLAUSE_NAMES.get(key, key.upper().rstrip("_")),
                              where if where is not None else self.pos(node))

    # FROM ------------------------------------------------------------------------------
    def source(self, node: exp.Select, scope: Scope) -> tuple[pa.Table, str | None]:
        """(rows, qualifier) of the single FROM source."""
        from_ = node.args.get("from_")
        if from_ is None:
            raise unsupported("SELECT without FROM", self.pos(node))
        src = from_.this
        alias = src.args.get("alias")
        if alias is not None and alias.args.get("columns"):
            raise unsupported("column lists on a source alias", self.pos(alias))
        if isinstance(src, exp.Table):
            self.check_args(src, frozenset({"this", "alias", "db", "catalog"}))
            if not isinstance(src.this, exp.Identifier):
                raise unsupported("table-valued functions", self.pos(src))
            written = [p for p in (src.args.get("catalog"), src.args.get("db"), src.this)
                       if p is not None]
            if not all(isinstance(p, exp.Identifier) for p in written):  # `FROM ..t`
                raise CepSyntaxError("syntax error at or near '.': a table name part is "
                                     "missing", pos=self.pos(src))
            parts = [p.name for p in written]
            table, qualifier = scope.lookup(parts, ".".join(parts), self.pos(src))
        elif isinstance(src, exp.Subquery):
            self.check_args(src, frozenset({"this", "alias"}))
            table, qualifier = self.query(src.this, scope), None
        else:
            raise unsupported(f"{src.key.upper()} as a FROM source", self.pos(src))
        return table, (src.alias or qualifier) if alias is not None else qualifier

    # expressions -----------------------------------------------------------------------
    def expr(self, node: exp.Expr, table: pa.Table, qualifier: str | None, clause: str,
             aliases: Mapping[str, Expr] | None = None) -> Expr:
        """node as IR with its columns bound to table (qualifier stripped, names exact);
        unqualified names that are not columns may name select-list aliases."""
        for sub in node.walk():
            if isinstance(sub, exp.Window):
                raise unsupported("window functions (OVER)", self.pos(sub))
            if isinstance(sub, (exp.Query, exp.Exists)):
                raise unsupported(f"subqueries in {clause}",
                                  self.keyword_pos(self.pos(sub), frozenset({"("})))
        try:
            ir = ToAlgebra(self.base).convert(node)
        except CepUnsupportedError as err:
            raise _with_hint(err, self.pos(node)) from None
        for sub in walk(ir):
            if isinstance(sub, (Navigation, Classifier, MatchNumber, RowValue)):
                raise unsupported("pattern navigation (PREV/NEXT/FIRST/LAST, CLASSIFIER, "
                                  "MATCH_NUMBER) outside MATCH_RECOGNIZE", sub.pos)
        return bind_columns(ir, table.schema.names, qualifier, aliases)

    def items(self, nodes: list[exp.Expr], table: pa.Table, qualifier: str | None) -> _Select:
        """The select list as (names, bound expressions), stars expanded."""
        names: list[str] = []
        exprs: list[Expr] = []
        for node in nodes:
            star = node if isinstance(node, exp.Star) else \
                node.this if isinstance(node, exp.Column) and isinstance(node.this, exp.Star) \
                else None
            if star is not None:
                self.check_args(star, frozenset())
                if isinstance(node, exp.Column):
                    check_qualifier(node.args["table"].name, qualifier, "*", self.pos(node))
                names += table.schema.names
                exprs += [ColumnRef(None, n) for n in table.schema.names]
                continue
            inner = node.this if isinstance(node, exp.Alias) else node
            exprs.append(self.expr(inner, table, qualifier, "the select list"))
            names.append(output_name(node))
        return _Select(names, exprs, [])

    def output_index(self, node: exp.Expr, names: list[str]) -> int | None:
        """Index of the output column an ORDER BY item names (ordinal or plain name)."""
        if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
            n = int(node.this)
            if not 1 <= n <= len(names):
                raise CepAnalysisError(f"ORDER BY position {n} is not in the select list "
                                       f"(1..{len(names)})", pos=self.pos(node))
            return n - 1
        if isinstance(node, exp.Column) and node.args.get("table") is None and \
                isinstance(node.this, exp.Identifier):
            hits = [i for i, n in enumerate(names) if n.lower() == node.name.lower()]
            if len(hits) > 1:
                raise CepAnalysisError(f"ORDER BY {node.name} is ambiguous: several output "
                                       "columns have that name", pos=self.pos(node))
            return hits[0] if hits else None
        return None

    def order_keys(self, order: exp.Order | None, sel: _Select, source: pa.Table,
                   qualifier: str | None, aliases: Mapping[str, Expr], distinct: bool
                   ) -> list[tuple[int | Expr, bool, bool]]:
        """ORDER BY items: an output column (ordinal, alias) or an expression over the source."""
        keys: list[tuple[int | Expr, bool, bool]] = []
        for item in (order.expressions if order is not None else ()):
            target: int | Expr | None = self.output_index(item.this, sel.names)
            if target is None:
                target = self.expr(item.this, source, qualifier, "ORDER BY", aliases)
                if distinct:  # rows are deduplicated: only selected values exist
                    if target not in sel.exprs:
                        raise CepAnalysisError("with SELECT DISTINCT, ORDER BY items must be "
                                               "selected columns", pos=self.pos(item))
                    target = sel.exprs.index(target)
            keys.append((target, not item.args.get("desc"), bool(item.args.get("nulls_first"))))
        return keys

    def group_keys(self, group: exp.Group | None, sel: _Select, source: pa.Table,
                   qualifier: str | None, aliases: Mapping[str, Expr]) -> list[Expr]:
        """GROUP BY items (ordinals and select aliases allowed, as in Spark)."""
        if group is None:
            return []
        self.check_args(group, frozenset({"expressions"}))
        keys = []
        for node in group.expressions:
            if isinstance(node, (exp.Rollup, exp.Cube, exp.GroupingSets)):
                raise unsupported("GROUP BY ROLLUP/CUBE/GROUPING SETS", self.keyword_pos(
                    self.pos(node), frozenset({"ROLLUP", "CUBE", "GROUPING"})))
            if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
                n = int(node.this)
                if not 1 <= n <= len(sel.exprs):
                    raise CepAnalysisError(f"GROUP BY position {n} is not in the select list "
                                           f"(1..{len(sel.exprs)})", pos=self.pos(node))
                key = sel.exprs[n - 1]
            else:
                key = self.expr(node, source, qualifier, "GROUP BY", aliases)
            if has_aggregate([key]):
                raise CepAnalysisError("aggregate functions are not allowed in GROUP BY",
                                       pos=self.pos(node))
            keys.append(key)
        return keys

    # ORDER BY / LIMIT ------------------------------------------------------------------
    def sort(self, out: pa.Table, source: pa.Table,
             keys: list[tuple[int | Expr, bool, bool]]) -> pa.Table:
        """out ordered by keys; expression keys are evaluated over source (same rows)."""
        if not keys:
            return out
        arrays = [out.column(t) if isinstance(t, int) else evaluate(t, source)
                  for t, _, _ in keys]
        names = [f"k{i}" for i in range(len(keys))]
        key_table = pa.Table.from_arrays(arrays, names=names)
        order = [SortColumn(n, asc, nulls_first) for n, (_, asc, nulls_first) in zip(names, keys)]
        return out.take(sort_indices(key_table, order)) if out.num_rows else out

    def limit(self, table: pa.Table, limit: exp.Limit | None) -> pa.Table:
        if limit is None:
            return table
        self.check_args(limit, frozenset({"this", "expression"}))
        value = limit.expression
        if not (isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit()):
            raise unsupported("LIMIT with anything but a non-negative integer literal",
                              self.pos(value))
        return table.slice(0, int(value.this))


# --- helpers over IR and tables -------------------------------------------------------------

def map_children(expr: Expr, fn: Callable[[Expr], Expr]) -> Expr:
    """expr with fn applied to each direct sub-expression (IR nodes are frozen
    dataclasses; their sub-expressions sit in fields, tuples and CASE's pairs)."""
    changes = {}
    for f in dataclasses.fields(expr):
        value = getattr(expr, f.name)
        new = _map_value(value, fn)
        if new is not value:
            changes[f.name] = new
    return dataclasses.replace(expr, **changes) if changes else expr


def _map_value(value: object, fn: Callable[[Expr], Expr]) -> object:
    if isinstance(value, Expr):
        return fn(value)
    if isinstance(value, tuple):
        items = tuple(_map_value(v, fn) for v in value)
        return items if any(a is not b for a, b in zip(items, value)) else value
    return value


def check_qualifier(var: str, qualifier: str | None, column: str, pos: int | None) -> None:
    """var.column must name the single FROM source (by alias, else table name)."""
    if qualifier is None or var.lower() != qualifier.lower():
        known = f"named {qualifier}" if qualifier else "unnamed (give it an alias)"
        raise CepAnalysisError(f"unknown qualifier {var} in {var}.{column}: the FROM source "
                               f"is {known}", pos=pos)


def bind_columns(expr: Expr, names: list[str], qualifier: str | None,
                 aliases: Mapping[str, Expr] | None = None) -> Expr:
    """expr with each column reference checked against the source qualifier and resolved
    to the exact column name (Spark resolves names case-insensitively); so later steps
    compare expressions structurally and report unknown columns at their position."""
    def visit(e: Expr) -> Expr:
        if not isinstance(e, ColumnRef):
            return map_children(e, visit)
        if e.var is not None:
            check_qualifier(e.var, qualifier, e.column, e.pos)
        found = [n for n in names if n == e.column] or \
            [n for n in names if n.lower() == e.column.lower()]
        if len(found) == 1:
            return ColumnRef(None, found[0], e.pos)
        if found:
            raise CepAnalysisError(f"ambiguous column {e.column}", pos=e.pos)
        if e.var is None and aliases and e.column.lower() in aliases:
            return aliases[e.column.lower()]
        raise CepAnalysisError(f"unknown column {e.column} (columns: {', '.join(names)})",
                               pos=e.pos)
    return visit(expr)


def has_aggregate(exprs: Iterable[Expr]) -> bool:
    return any(isinstance(n, Aggregate) for e in exprs for n in walk(e))


def no_aggregates(expr: Expr, clause: str) -> None:
    for n in walk(expr):
        if isinstance(n, Aggregate):
            raise CepAnalysisError(f"aggregate functions are not allowed in {clause}", pos=n.pos)


def output_name(node: exp.Expr) -> str:
    """Spark's name for an aliased item or a column; the SQL text for other expressions."""
    if isinstance(node, exp.Alias):
        return node.alias
    if isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier):
        return node.name
    return node.sql(dialect="spark", normalize_functions="lower")


def filter_table(table: pa.Table, cond: Expr, clause: str) -> pa.Table:
    """Rows where cond is TRUE (NULL counts as false)."""
    mask = evaluate(cond, table)
    if pa.types.is_null(mask.type):
        return table.slice(0, 0)
    if not pa.types.is_boolean(mask.type):
        raise CepAnalysisError(f"the {clause} condition must be boolean, not {mask.type}",
                               pos=getattr(cond, "pos", None))
    return table.filter(pc.fill_null(mask, False))


def distinct_rows(table: pa.Table) -> pa.Table:
    """Each distinct row once, in order of first appearance (NULLs equal each other)."""
    names = [f"c{i}" for i in range(table.num_columns)]
    renamed = table.rename_columns(names)
    unique = renamed.group_by(names, use_threads=False).aggregate([])
    return unique.select(names).rename_columns(table.schema.names)


def union_all(tables: list[pa.Table], pos: int | None) -> pa.Table:
    """Concatenation by position, with the first input's names and common column types."""
    first = tables[0]
    for t in tables[1:]:
        if t.num_columns != first.num_columns:
            raise CepAnalysisError(f"UNION ALL inputs have {first.num_columns} and "
                                   f"{t.num_columns} columns", pos=pos)
    columns = []
    for i in range(first.num_columns):
        target = common_type([t.schema.field(i).type for t in tables])
        columns.append(pa.chunked_array(
            [chunk for t in tables for chunk in
             _as_chunked(cast_value(t.column(i), target)).chunks], type=target))
    return pa.Table.from_arrays(columns, names=first.schema.names)


def _as_chunked(v: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    return v if isinstance(v, pa.ChunkedArray) else pa.chunked_array([v])


# --- aggregation ------------------------------------------------------------------------

_AGG_FUNCS = {"count", "sum", "avg", "min", "max"}


def aggregate(table: pa.Table, keys: list[Expr], exprs: list[Expr]
              ) -> tuple[pa.Table, Callable[[Expr], Expr]]:
    """Group table by keys and compute every aggregate found in exprs with Arrow's
    group_by; returns the grouped table and the rewrite of expressions over it (aggregates
    and key expressions become its columns; other column references are errors)."""
    aggs: list[Aggregate] = []
    for e in exprs:
        for n in walk(e):
            if isinstance(n, Aggregate) and n not in aggs:
                check_aggregate(n)
                aggs.append(n)
    work = {f"__k{i}": evaluate(k, table) for i, k in enumerate(keys)}
    work["__rows"] = pa.nulls(table.num_rows, pa.bool_())  # count(*); keeps num_rows
    specs: list[tuple] = [("__rows", "count", pc.CountOptions(mode="all"))]
    for j, a in enumerate(aggs):
        arg = work["__rows"] if a.star_var is not None else evaluate(a.args[0], table)
        if a.distinct and pa.types.is_floating(arg.type):  # Spark: -0.0 is 0.0
            arg = pc.if_else(pc.equal(arg, 0), pa.scalar(0.0, arg.type), arg)
        work[f"__v{j}"] = arg
        specs += _agg_specs(a, f"__v{j}", arg.type)
    grouped = pa.table(work).group_by([f"__k{i}" for i in range(len(keys))],
                                      use_threads=False).aggregate(specs)
    columns = {f"__k{i}": grouped.column(f"__k{i}") for i in range(len(keys))}
    columns["__rows"] = grouped.column("__rows_count")  # a group always exists here
    for j, a in enumerate(aggs):
        columns[f"__a{j}"] = _agg_result(a, grouped, f"__v{j}", work[f"__v{j}"].type)
    result = pa.table(columns)

    def substitute(e: Expr) -> Expr:
        if isinstance(e, Aggregate):
            return ColumnRef(None, f"__a{aggs.index(e)}", e.pos)
        if e in keys:
            return ColumnRef(None, f"__k{keys.index(e)}", getattr(e, "pos", None))
        if isinstance(e, ColumnRef):
            raise CepAnalysisError(f"column {e.column} must be in GROUP BY or inside an "
                                   "aggregate function", pos=e.pos)
        return map_children(e, substitute)
    return result, substitute


def check_aggregate(a: Aggregate) -> None:
    """Only the aggregates the subset computes, without nesting."""
    if a.name not in _AGG_FUNCS:
        raise unsupported(f"the aggregate {a.name}()", a.pos)
    if a.semantics is not None:
        raise CepAnalysisError(f"{a.semantics} applies only inside MATCH_RECOGNIZE", pos=a.pos)
    if a.star_var:
        raise unsupported(f"count({a.star_var}.*)", a.pos)
    if a.star_var is None and len(a.args) != 1:
        raise CepAnalysisError(f"{a.name}() takes one argument", pos=a.pos)
    if has_aggregate(a.args):
        raise CepAnalysisError("aggregate functions cannot be nested", pos=a.pos)


def _agg_specs(a: Aggregate, column: str, arg_type: pa.DataType) -> list[tuple]:
    """Arrow hash aggregations computing a (avg of DECIMAL needs sum and count)."""
    if a.name in ("sum", "avg") and not _is_number(arg_type):
        raise CepAnalysisError(f"{a.name}() needs a numeric argument, got {arg_type}",
                               pos=a.pos)
    if a.distinct and a.name in ("sum", "avg"):  # folded per group by _distinct_fold
        return [(column, "distinct", pc.CountOptions(mode="only_valid"))]
    if a.name == "count":
        if a.star_var is not None:
            return [(column, "count", pc.CountOptions(mode="all"))]
        kind = "count_distinct" if a.distinct else "count"
        return [(column, kind, pc.CountOptions(mode="only_valid"))]
    if a.name == "avg" and pa.types.is_decimal(arg_type):
        return [(column, "sum"), (column, "count", pc.CountOptions(mode="only_valid"))]
    if a.name == "avg":
        return [(column, "mean")]
    return [(column, a.name)]  # sum, min, max


def _agg_result(a: Aggregate, grouped: pa.Table, column: str, arg_type: pa.DataType
                ) -> pa.ChunkedArray:
    """The aggregate's column with Spark's result type."""
    if a.distinct and a.name in ("sum", "avg"):
        return _distinct_fold(a, grouped.column(f"{column}_distinct"), arg_type)
    if a.name == "count":
        kind = "count_distinct" if a.distinct else "count"
        return grouped.column(f"{column}_{kind}")
    if a.name == "avg" and pa.types.is_decimal(arg_type):
        return _decimal_avg(grouped.column(f"{column}_sum"), grouped.column(f"{column}_count"),
                            arg_type)
    if a.name == "avg":
        return pc.cast(grouped.column(f"{column}_mean"), pa.float64())
    out = grouped.column(f"{column}_{a.name}")
    if a.name == "sum":
        if pa.types.is_integer(arg_type):
            return pc.cast(out, pa.int64())
        if pa.types.is_floating(arg_type):
            return pc.cast(out, pa.float64())
        return pc.cast(out, pa.decimal128(min(38, arg_type.precision + 10), arg_type.scale))
    return out


def _distinct_fold(a: Aggregate, lists: pa.ChunkedArray, arg_type: pa.DataType
                   ) -> pa.ChunkedArray:
    """sum/avg(DISTINCT x) per group from its list of distinct non-NULL values: the
    plain aggregate over the flattened lists, scattered back to the groups (NULL where a
    group has no value)."""
    lists = lists.combine_chunks()
    flat = pc.list_flatten(lists)
    parents = pc.list_parent_indices(lists)
    plain = dataclasses.replace(a, distinct=False)
    folded = pa.table({"g": parents, "v": flat}).group_by("g", use_threads=False).aggregate(
        _agg_specs(plain, "v", arg_type))
    where = np.full(len(lists), -1, dtype=np.int64)
    where[folded.column("g").to_numpy()] = np.arange(folded.num_rows)
    index = pa.array(where, mask=where < 0)
    scattered = pa.table({name: pc.take(folded.column(name), index)
                          for name in folded.schema.names if name != "g"})
    return _agg_result(plain, scattered, "v", arg_type)


def _decimal_avg(sums: pa.ChunkedArray, counts: pa.ChunkedArray, arg_type: pa.DataType
                 ) -> pa.Array:
    """Spark's avg(DECIMAL(p,s)): DECIMAL(p+4, s+4), rounded half up (one value per group)."""
    scale = min(38, arg_type.scale + 4)
    target = pa.decimal128(min(38, arg_type.precision + 4), scale)
    quantum = decimal.Decimal(1).scaleb(-scale)
    values = []
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        for s, n in zip(sums.to_pylist(), counts.to_pylist()):
            values.append(None if s is None or not n else
                          (s / n).quantize(quantum, rounding=decimal.ROUND_HALF_UP))
    return pa.array(values, type=target)


def _is_number(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
