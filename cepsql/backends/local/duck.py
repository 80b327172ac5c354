"""The SQL around MATCH_RECOGNIZE on DuckDB, for statements outside sql.py's subset.

``cepsql.match_recognize`` runs the SQL around the clauses on two engines:

- sql.py (Arrow compute, expressions through ``arrow_eval``) for its documented subset
  (one FROM source, WHERE, GROUP BY/HAVING, ORDER BY, LIMIT, UNION ALL, CTEs): its results
  and types are Spark's, tested construct by construct, so it stays the first choice;
- DuckDB (this module) for everything else Spark accepts there: joins, window functions,
  subqueries in expressions, set operations, OFFSET, ROLLUP/CUBE, more functions and
  aggregates. The statement's text, with the clauses replaced by placeholder names, is parsed
  by sqlglot as Spark SQL; the input tables and the clauses' Arrow results are registered in
  a DuckDB connection (zero-copy) and the tree is generated as DuckDB SQL.

Differences between DuckDB and Spark (ANSI mode) that change results are fixed on the
sqlglot tree before generation (never on the text):

- CAST: Spark's CAST fails on bad input (ANSI), so sqlglot's TRY_CAST rendering of it
  becomes CAST (try_cast stays TRY_CAST); a cast of a fractional value to an integer type
  truncates in Spark and rounds in DuckDB: the operand is wrapped in TRUNC.
- ``/`` and ``%`` by zero fail in Spark: the divisor is wrapped in
  ``CASE WHEN d = 0 THEN error(...) ELSE d END`` (DuckDB gives inf/NULL otherwise).
- result types: sum of integers is BIGINT (DuckDB: HUGEINT), sum of DECIMAL(p,s) is
  DECIMAL(p+10,s), avg of DECIMAL(p,s) is DECIMAL(p+4,s+4) (DuckDB: DOUBLE), DECIMAL * and /
  follow Spark's precision/scale rules (DuckDB: narrower product, DOUBLE quotient);
  row_number/rank/dense_rank/ntile, length, instr/locate, size and the date parts (year,
  month, day, hour, ...) are INT (DuckDB: BIGINT), dayofweek counts from Sunday = 1;
  ``div`` is BIGINT. Operand types are known for
  columns, casts and literals; for other operands DuckDB's type stays.
- substring/substr with start 0 starts at the first character as in Spark.
- percentile (DuckDB: QUANTILE, discrete) is quantile_cont as a DOUBLE; floor/ceil of a
  DOUBLE are BIGINT; date_add/date_sub are DATEs (DuckDB: TIMESTAMP).
- table-valued functions (range, explode in FROM, ...) differ in column names: not run.
- output names: unaliased expressions get the names the Arrow path gives them.

Same in both engines (checked): NULLS FIRST for ASC / LAST for DESC (sqlglot writes the
Spark default explicitly), NaN = NaN and NaN greater than any number, ``||``/concat with a
NULL is NULL, integer ``/`` is DOUBLE, overflow and bad string casts fail.

  A DECIMAL quotient is computed exactly as Spark does (unscaled HUGEINTs, rounded half
  up, by fixed macros).

Known remaining differences: avg of DECIMAL is computed through DOUBLE before the cast
to Spark's type (exact to about 15 significant digits); errors
carry the position of the query, not of the construct; Spark's implicit string/number
coercions in comparisons follow DuckDB's rules.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from cepsql.errors import CepAnalysisError, CepRuntimeError, CepSyntaxError
from cepsql.parse.splice import normalize_name
from cepsql.backends.local.sql import output_name

__all__ = ["run_duckdb", "spark_to_duckdb"]

_names = itertools.count(1)
_INTEGRAL = {exp.DataType.Type.TINYINT: 3, exp.DataType.Type.SMALLINT: 5,
             exp.DataType.Type.INT: 10, exp.DataType.Type.BIGINT: 20}
_FRACTIONAL = {exp.DataType.Type.FLOAT, exp.DataType.Type.DOUBLE, exp.DataType.Type.DECIMAL}
_RANKING = (exp.RowNumber, exp.Rank, exp.DenseRank, exp.Ntile)
# functions whose result is INT in Spark and BIGINT in DuckDB
_INT_RESULTS = (exp.Length, exp.StrPosition, exp.ArraySize, exp.Year, exp.Month,
                exp.DayOfMonth, exp.Day, exp.Hour, exp.Minute, exp.Second, exp.Quarter,
                exp.DayOfWeek, exp.DayOfYear, exp.WeekOfYear)


def run_duckdb(text: str, lookup: Callable[[list[str], str, int | None], pa.Table], *,
               base: int = 0, threads: int | None = None) -> pa.Table:
    """Result of the Spark SQL query ``text`` (at offset base of the statement) on DuckDB.
    ``lookup(parts, written, pos)`` returns the Arrow table a (dotted) table name reads —
    an input table, an outer CTE, or a MATCH_RECOGNIZE clause's result for a placeholder;
    it is called with ``ctes`` bound to a mapping of this query's own WITH names (see
    DuckQuery.cte_table), so a clause whose source is one of them can read it."""
    query = DuckQuery(_parse(text, base), base, threads)
    return query.run(lookup)


def spark_to_duckdb(tree: exp.Expr, types: Mapping[str, Mapping[str, exp.DataType]]) -> str:
    """DuckDB SQL for a Spark SQL tree whose tables are registered relations with the given
    column types (relation -> column -> type), with Spark's semantics (module docstring)."""
    tree = tree.copy()
    _name_outputs(tree)
    resolve = _TypeResolver(tree, types)
    for node in reversed(list(tree.walk(bfs=False))):  # children before their parents
        parent, key, index = node.parent, node.arg_key, node.index
        new = _spark_semantics(node, resolve)  # may wrap node (which then moves under new)
        if new is not node:
            if parent is None:
                tree = new
            else:
                parent.set(key, new, index)
    return tree.sql(dialect="duckdb")


@dataclass
class DuckQuery:
    """One query tree on its way to DuckDB: its tables become registered relations."""
    tree: exp.Expr
    base: int
    threads: int | None
    relations: dict[str, pa.Table] = field(default_factory=dict)

    def run(self, lookup: Callable) -> pa.Table:
        pristine = self.tree.copy()  # CTE bodies as written, for DuckCtes
        own_ctes = {cte.alias.lower(): cte for cte in pristine.find_all(exp.CTE)}
        for table in list(self.tree.find_all(exp.Table)):
            if not isinstance(table.this, exp.Identifier):  # Spark's and DuckDB's differ
                raise CepAnalysisError("DuckDB cannot run table-valued functions with "
                                       "Spark's semantics", pos=self.pos(table))
            parts = [p.name for p in (table.args.get("catalog"), table.args.get("db"),
                                      table.this) if p is not None]
            key = normalize_name(".".join(parts))
            if len(parts) == 1 and key in own_ctes:
                continue  # DuckDB resolves the statement's own WITH names
            written = ".".join(parts)
            arrow = lookup(parts, written, self.pos(table), DuckCtes(self, own_ctes, lookup))
            self.register(table, arrow[0], arrow[1])
        return self.execute(self.tree)

    def register(self, table: exp.Table, arrow: pa.Table, qualifier: str | None) -> None:
        """Point the table node at a fresh relation name for arrow, keeping the name the
        query qualifies its columns with."""
        name = f"__cep_rel{next(_names)}"
        self.relations[name] = arrow
        alias = table.alias or qualifier or table.name
        table.set("this", exp.to_identifier(name, quoted=True))
        table.set("db", None)
        table.set("catalog", None)
        table.set("alias", exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))

    def execute(self, tree: exp.Expr) -> pa.Table:
        import duckdb  # only statements outside sql.py's subset pay for the import
        types = {name: _column_types(t.schema) for name, t in self.relations.items()}
        sql = spark_to_duckdb(tree, types)
        con = duckdb.connect()
        try:
            if self.threads:
                con.execute(f"SET threads TO {int(self.threads)}")
            for macro in _MACROS:
                con.execute(macro)
            for name, t in self.relations.items():
                con.register(name, t)
            result = con.sql(sql)
            fetch = getattr(result, "to_arrow_table", None) or result.fetch_arrow_table
            return fetch()  # to_arrow_table since DuckDB 1.4; fetch_arrow_table before
        except (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException,
                duckdb.NotImplementedException) as err:
            raise CepAnalysisError(f"DuckDB cannot run this query: {_first_line(err)}",
                                   pos=self.base) from None
        except duckdb.Error as err:
            raise CepRuntimeError(f"the query failed: {_first_line(err)}",
                                  pos=self.base) from None
        finally:
            con.close()

    def pos(self, node: exp.Expr) -> int | None:
        meta = getattr(node.this, "meta", None) or {}
        start = meta.get("start")
        return None if start is None else self.base + start


class DuckCtes(Mapping):
    """The query's own WITH names as tables, computed only when a clause reads one (by
    running ``WITH <names up to it> SELECT * FROM name`` on DuckDB)."""

    def __init__(self, query: DuckQuery, ctes: Mapping[str, exp.CTE], lookup: Callable):
        self.query, self.ctes, self.lookup = query, ctes, lookup
        self.cache: dict[str, pa.Table] = {}

    def __getitem__(self, key: str) -> pa.Table:
        if key not in self.ctes:
            raise KeyError(key)
        if key not in self.cache:
            with_ = self.ctes[key].parent
            upto = list(with_.expressions)
            upto = upto[:upto.index(self.ctes[key]) + 1]
            select = exp.select("*").from_(exp.to_identifier(self.ctes[key].alias, quoted=True))
            select.set("with_", exp.With(expressions=[c.copy() for c in upto]))
            sub = DuckQuery(select, self.query.base, self.query.threads)
            self.cache[key] = sub.run(self.lookup)
        return self.cache[key]

    def __contains__(self, key: object) -> bool:
        return key in self.ctes

    def __iter__(self) -> Iterator[str]:
        return iter(self.ctes)

    def __len__(self) -> int:
        return len(self.ctes)


def _parse(text: str, base: int) -> exp.Expr:
    try:
        trees = [t for t in sqlglot.parse(text, read="spark") if t is not None]
    except (ParseError, TokenError) as err:
        raise CepSyntaxError(f"syntax error: {str(err).splitlines()[0]}", pos=base) from None
    if len(trees) != 1:
        raise CepSyntaxError("expected exactly one query", pos=base)
    return trees[0]


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0]


# --- types ------------------------------------------------------------------------------

def _column_types(schema: pa.Schema) -> dict[str, exp.DataType]:
    return {f.name.lower(): _sql_type(f.type) for f in schema}


def _sql_type(t: pa.DataType) -> exp.DataType:
    if pa.types.is_decimal(t):
        return exp.DataType.build(f"DECIMAL({t.precision}, {t.scale})")
    for test, name in ((pa.types.is_int8, "TINYINT"), (pa.types.is_int16, "SMALLINT"),
                       (pa.types.is_int32, "INT"), (pa.types.is_int64, "BIGINT"),
                       (pa.types.is_float32, "FLOAT"), (pa.types.is_float64, "DOUBLE")):
        if test(t):
            return exp.DataType.build(name)
    return exp.DataType.build("UNKNOWN")


class _TypeResolver:
    """Spark types of the operands the transforms care about: columns (by qualifier, or
    by a name unique among the query's relations), casts, numeric literals, integer
    arithmetic and the functions whose result is always DOUBLE in Spark."""

    def __init__(self, tree: exp.Expr, types: Mapping[str, Mapping[str, exp.DataType]]):
        self.by_alias: dict[str, Mapping[str, exp.DataType]] = {}
        self.by_name: dict[str, exp.DataType | None] = {}
        for table in tree.find_all(exp.Table):
            cols = types.get(table.name)
            if cols is None:
                continue
            self.by_alias[(table.alias or table.name).lower()] = cols
            for col, t in cols.items():
                seen = self.by_name.get(col, t)
                self.by_name[col] = t if seen == t else None  # ambiguous types: unknown

    def __call__(self, node: exp.Expr) -> exp.DataType | None:
        if isinstance(node, exp.Paren):
            return self(node.this)
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return node.to
        if isinstance(node, (exp.Div, exp.Avg, exp.Sqrt, exp.Exp, exp.Ln, exp.Pow)):
            return exp.DataType.build("DOUBLE")  # DECIMAL ones are casts by now
        if isinstance(node, exp.Literal) and not node.is_string:
            text = node.this
            if text.isdigit():
                return exp.DataType.build("INT" if int(text) < 2 ** 31 else "BIGINT")
            if "e" not in text.lower():  # 1.25 is DECIMAL(3,2) in Spark
                digits = text.replace(".", "").lstrip("0") or "0"
                scale = len(text.split(".")[1]) if "." in text else 0
                return exp.DataType.build(f"DECIMAL({max(len(digits), scale, 1)}, {scale})")
            return exp.DataType.build("DOUBLE")
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Mod)):  # integers: the wider
            a, b = self(node.this), self(node.expression)
            if a is not None and b is not None and a.this in _INTEGRAL and b.this in _INTEGRAL:
                return a if _INTEGRAL[a.this] >= _INTEGRAL[b.this] else b
            return None
        if isinstance(node, exp.Column):
            if node.table:
                return self.by_alias.get(node.table.lower(), {}).get(node.name.lower())
            return self.by_name.get(node.name.lower())
        return None


def _decimal_of(t: exp.DataType | None) -> tuple[int, int] | None:
    """(precision, scale) of a DECIMAL, or of the DECIMAL Spark widens an integer to."""
    if t is None:
        return None
    if t.this in _INTEGRAL:
        return _INTEGRAL[t.this], 0
    if t.this == exp.DataType.Type.DECIMAL:
        params = [int(p.this.this) if isinstance(p.this, exp.Literal) else int(p.name)
                  for p in t.expressions]
        return (params + [10, 0][len(params):])[0], (params + [10, 0][len(params):])[1]
    return None


def _bounded(precision: int, scale: int) -> exp.DataType:
    """Spark's adjustPrecisionScale: over 38 digits, scale gives way down to min(scale, 6)."""
    if precision > 38:
        scale = max(scale - (precision - 38), min(scale, 6))
        precision = 38
    return exp.DataType.build(f"DECIMAL({precision}, {scale})")


def _cast(node: exp.Expr, to: exp.DataType) -> exp.Cast:
    return exp.Cast(this=node, to=to)


# --- transforms -------------------------------------------------------------------------

def _spark_semantics(node: exp.Expr, types: _TypeResolver) -> exp.Expr:
    """One node with the Spark-vs-DuckDB fixes of the module docstring applied; its
    operands are already fixed (so their added casts carry Spark's types upwards)."""
    if isinstance(node, exp.TryCast) and not node.args.get("safe"):
        node = exp.Cast(this=node.this, to=node.to)
    if isinstance(node, exp.Cast) and node.to.this in _INTEGRAL:
        source = types(node.this)
        if source is not None and source.this in _FRACTIONAL:
            node.set("this", exp.func("trunc", node.this))
        return node
    if isinstance(node, (exp.Div, exp.Mod)):
        return _checked_division(node, types)
    if isinstance(node, exp.Mul):
        return _decimal_product(node, types)
    if isinstance(node, exp.Sum) and not isinstance(node.parent, exp.Window):
        return _typed_sum(node, types)
    if isinstance(node, exp.Window) and isinstance(node.this, exp.Sum):
        return _typed_sum(node, types, node.this.this)
    if isinstance(node, exp.Avg) and not isinstance(node.parent, exp.Window):
        return _typed_avg(node, types, node.this)
    if isinstance(node, exp.Window) and isinstance(node.this, exp.Avg):
        return _typed_avg(node, types, node.this.this)
    if isinstance(node, exp.Window) and isinstance(node.this, _RANKING):
        return _cast(node, exp.DataType.build("INT"))
    if isinstance(node, exp.DayOfWeek):  # Spark: Sunday 1 .. Saturday 7 (DuckDB: 0 .. 6)
        return _cast(exp.Paren(this=exp.Add(this=node, expression=exp.Literal.number(1))),
                     exp.DataType.build("INT"))
    if isinstance(node, _INT_RESULTS) and not isinstance(node.parent, exp.Cast):
        return _cast(node, exp.DataType.build("INT"))
    if isinstance(node, exp.IntDiv):  # div is BIGINT in Spark (DuckDB: the operands' type)
        return _cast(node, exp.DataType.build("BIGINT"))
    if isinstance(node, exp.Quantile):  # Spark's percentile interpolates: DOUBLE
        return _cast(exp.func("quantile_cont", node.this, node.args["quantile"]),
                     exp.DataType.build("DOUBLE"))
    if isinstance(node, (exp.Floor, exp.Ceil)) and node.args.get("decimals") is None:
        source = types(node.this)
        if source is not None and source.this in _FRACTIONAL - {exp.DataType.Type.DECIMAL}:
            return _cast(node, exp.DataType.build("BIGINT"))
        return node
    if isinstance(node, exp.TsOrDsAdd):  # date_add/date_sub give a DATE in Spark
        return _cast(node, exp.DataType.build("DATE"))
    if isinstance(node, exp.Substring):
        start = node.args.get("start")
        if isinstance(start, exp.Literal) and start.this == "0":
            node.set("start", exp.Literal.number(1))
        elif start is not None and not isinstance(start, exp.Literal):
            node.set("start", exp.If(this=exp.EQ(this=start.copy(), expression=exp.Literal.number(0)),
                                     true=exp.Literal.number(1), false=start))
    return node


def _checked_division(node: exp.Div | exp.Mod, types: _TypeResolver) -> exp.Expr:
    """Division by zero fails as in Spark (ANSI); a DECIMAL quotient gets Spark's type."""
    divisor = node.expression
    zero = exp.EQ(this=divisor.copy(), expression=exp.Literal.number(0))
    message = exp.Literal.string("[DIVIDE_BY_ZERO] Division by zero")
    left, right = _decimal_of(types(node.this)), _decimal_of(types(divisor))
    decimal = _is_decimal(types, node)
    node.set("expression", exp.Case(ifs=[exp.If(this=zero, true=exp.func("error", message))],
                                    default=divisor))
    if isinstance(node, exp.Div):
        node.set("safe", None)
        node.set("typed", None)
        if left and right and decimal:
            (p1, s1), (p2, s2) = left, right
            scale = max(6, s1 + p2 + 1)
            return _exact_quotient(node, (s1, s2), _bounded(p1 - s1 + s2 + scale, scale))
    return node


# DuckDB divides DECIMALs in DOUBLE; Spark's quotient is exact, rounded half up. The
# macros (fixed text, not user input) divide unscaled HUGEINTs and place the point.
_MACROS = (  # parameter names that no query's column or alias can shadow
    "CREATE MACRO __cep_qdiv(__n, __d) AS "
    "(abs(__n) * 2 + abs(__d)) // (2 * abs(__d)) * sign(__n) * sign(__d)",
    "CREATE MACRO __cep_point(__p, __s) AS "
    "__p[1:length(__p) - __s] || '.' || __p[length(__p) - __s + 1:]",  # || keeps NULL
    "CREATE MACRO __cep_digits(__t, __s) AS "
    "lpad(__t, CAST(greatest(length(__t), __s + 1) AS INTEGER), '0')",
    "CREATE MACRO __cep_decimal_text(__q, __s) AS (CASE WHEN __q < 0 THEN '-' ELSE '' END) "
    "|| __cep_point(__cep_digits(CAST(abs(__q) AS VARCHAR), __s), __s)",
)


def _exact_quotient(node: exp.Div, scales: tuple[int, int], to: exp.DataType) -> exp.Expr:
    """a / b as Spark computes DECIMAL division: unscaled a * 10^e / unscaled b, rounded
    half up, as DECIMAL(P, S) (e = S - s1 + s2, moved to the divisor when negative)."""
    s1, s2 = scales
    target = _decimal_of(to)[1]

    def unscaled(e: exp.Expr, scale: int) -> exp.Expr:
        shifted = exp.Mul(this=exp.Paren(this=e), expression=exp.Literal.number(10 ** scale))
        return _cast(exp.Paren(this=shifted), exp.DataType.build("HUGEINT"))

    def times(e: exp.Expr, power: int) -> exp.Expr:
        factor = _cast(exp.Literal.string(str(10 ** power)), exp.DataType.build("HUGEINT"))
        return exp.Mul(this=e, expression=factor)

    shift = target - s1 + s2
    num, den = unscaled(node.this, s1), unscaled(node.expression, s2)
    num, den = (times(num, shift), den) if shift >= 0 else (num, times(den, -shift))
    text = exp.func("__cep_decimal_text", exp.func("__cep_qdiv", num, den),
                    exp.Literal.number(target))
    return _cast(text, to)


def _is_decimal(types: _TypeResolver, node: exp.Binary) -> bool:
    """Whether Spark's arithmetic on node is DECIMAL: a DECIMAL operand and no float."""
    a, b = types(node.this), types(node.expression)
    if a is None or b is None:
        return False
    kinds = {a.this, b.this}
    return exp.DataType.Type.DECIMAL in kinds and not kinds & {exp.DataType.Type.FLOAT,
                                                                  exp.DataType.Type.DOUBLE}


def _decimal_product(node: exp.Mul, types: _TypeResolver) -> exp.Expr:
    left, right = _decimal_of(types(node.this)), _decimal_of(types(node.expression))
    if left and right and _is_decimal(types, node):
        return _cast(node, _bounded(left[0] + right[0] + 1, left[1] + right[1]))
    return node


def _typed_sum(node: exp.Expr, types: _TypeResolver, arg: exp.Expr | None = None) -> exp.Expr:
    t = types(node.this if arg is None else arg)
    if t is None:
        return node
    if t.this in _INTEGRAL:
        return _cast(node, exp.DataType.build("BIGINT"))
    if t.this == exp.DataType.Type.DECIMAL:
        p, s = _decimal_of(t)
        return _cast(node, exp.DataType.build(f"DECIMAL({min(38, p + 10)}, {s})"))
    return node


def _typed_avg(node: exp.Expr, types: _TypeResolver, arg: exp.Expr) -> exp.Expr:
    t = types(arg)
    if t is not None and t.this == exp.DataType.Type.DECIMAL:
        p, s = _decimal_of(t)
        return _cast(node, exp.DataType.build(f"DECIMAL({min(38, p + 4)}, {min(38, s + 4)})"))
    return node


def _name_outputs(tree: exp.Expr) -> None:
    """Unaliased select-list expressions of the outermost query get the Arrow path's
    names (sql.output_name), so both engines name columns alike (named before the
    transforms, so the names are the user's expressions)."""
    selects = [tree] if isinstance(tree, exp.Select) else \
        [s for s in tree.find_all(exp.Select) if s.parent_select is None]
    for select in selects[:1]:
        items = []
        for item in select.expressions:
            if isinstance(item, (exp.Alias, exp.Column, exp.Star)):
                items.append(item)
            else:
                items.append(exp.alias_(item, output_name(item), quoted=True))
        select.set("expressions", items)
