"""sqlglot expression trees -> cepsql expression IR.

Later stages must never see sqlglot objects, so the conversion is total: every
construct either maps to an IR node or raises a CepError naming it, at its position.
Positions: sqlglot records token offsets in ``meta['start']`` of leaves and function
calls; other nodes take the leftmost position below them. ``base`` shifts the offsets
of the tokenized text to the full SQL statement.
"""
from __future__ import annotations

from dataclasses import replace
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from cepsql.algebra.expressions import (AGGREGATES, FIELD_ACCESS, SUBSCRIPT, Aggregate, Between, BinaryOp,
                                   Case, Cast, Classifier, ColumnRef, Expr, FunctionCall,
                                   InList, IsNull, Like, Literal, MatchNumber, Navigation,
                                   ScalarSubquery, UnaryOp)
from cepsql.algebra.limits import MAX_EXPRESSION_DEPTH, MAX_NAVIGATION_OFFSET
from cepsql.errors import CepAnalysisError, CepSyntaxError, CepUnsupportedError
from cepsql.parse.cep_clauses import unit_micros
from cepsql.parse.pattern_parser import canonical_name

# Spark aggregates MATCH_RECOGNIZE does not compute: a clear error instead of Spark's
# MISSING_GROUP_BY on the projected measures
OTHER_SPARK_AGGREGATES = frozenset({
    "approx_count_distinct", "approx_percentile", "percentile", "percentile_approx",
    "percentile_cont", "percentile_disc", "median", "mode", "corr", "covar_pop", "covar_samp",
    "kurtosis", "skewness", "regr_avgx", "regr_avgy", "regr_count", "regr_intercept",
    "regr_r2", "regr_slope", "regr_sxx", "regr_sxy", "regr_syy", "bit_and", "bit_or",
    "bit_xor", "bitmap_construct_agg", "bitmap_or_agg", "histogram_numeric", "try_sum",
    "try_avg", "product", "any_value", "first", "last", "hll_sketch_agg", "hll_union_agg",
    "count_min_sketch", "grouping", "grouping_id", "kll_sketch_agg_bigint",
    "kll_sketch_agg_double", "kll_sketch_agg_float", "theta_sketch_agg"})
NAVIGATION = {"PREV": 1, "NEXT": 1, "FIRST": 0, "LAST": 0}  # kind -> default offset

# meta keys set by the CepSpark parser
SEMANTICS_KEY = "cep_semantics"
SEMANTICS_POS_KEY = "cep_semantics_start"

_BINARY = {
    exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%",
    exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">=",
    exp.And: "AND", exp.Or: "OR", exp.DPipe: "||",
}
_BINARY_FUNCS = {exp.NullSafeEQ: "equal_null", exp.ILike: "ilike", exp.RegexpLike: "rlike"}
# FLOAT literals (1.1F) stay casts: the condition VM rounds them to float32 as Spark does;
# so do SMALLINT / TINYINT ones (10S, CAST(10 AS SMALLINT)): an "int" literal would widen
# x * CAST(30000 AS SMALLINT) to INT, where Spark keeps SMALLINT and overflows; and BIGINT
# ones (10L): an "int" literal would keep int_col + 10L at 32 bits, where Spark widens
_LITERAL_TYPES = {"DOUBLE": "double", "INT": "int", "DECIMAL": "decimal"}
_INTEGER_CASTS = frozenset({"bigint", "smallint", "tinyint"})


def sql_pos(node: exp.Expr, base: int = 0) -> int | None:
    """Absolute offset of a sqlglot node (leftmost recorded token below it)."""
    prefix = node.meta_get(SEMANTICS_POS_KEY)
    if prefix is not None:
        return prefix + base
    if isinstance(node, exp.Column) and node.args.get("table") is not None:
        return sql_pos(node.args["table"], base)
    start = node.meta_get("start")
    if start is not None:
        return start + base
    best = None
    for child in node.iter_expressions():
        p = sql_pos(child, base)
        if p is not None and (best is None or p < best):
            best = p
    return best


def check_depth(node: exp.Expr, base: int = 0) -> None:
    """CepSyntaxError at the first operator nested more than MAX_EXPRESSION_DEPTH deep
    (parentheses do not count: they are limited on their own). An explicit-stack walk, so
    it works on exactly the trees too deep for the recursive passes."""
    stack = [(node, 0)]
    while stack:
        current, depth = stack.pop()
        if not isinstance(current, exp.Paren):
            depth += 1
        if depth > MAX_EXPRESSION_DEPTH:
            raise CepSyntaxError(
                f"expression nested more than {MAX_EXPRESSION_DEPTH} operators deep (Spark's "
                "own limit is lower); split it, e.g. into several DEFINE variables or measures",
                pos=_leftmost_start(current, base))
        stack.extend((child, depth) for child in current.iter_expressions(reverse=True))


def _leftmost_start(node: exp.Expr, base: int) -> int | None:
    """sql_pos without recursion: the smallest recorded token start below node."""
    starts = [n.meta_get("start") for n in node.walk()]
    known = [s for s in starts if s is not None]
    return min(known) + base if known else None


def _year_to_month(text: str, pos: int | None) -> int:
    """``'[-]y-m'`` of ``INTERVAL '1-2' YEAR TO MONTH`` as a signed count of months."""
    body = text.strip()
    sign = -1 if body.startswith("-") else 1
    years, _, months = body.lstrip("+-").partition("-")
    if not (years.isdigit() and months.isdigit()) or int(months) > 11:
        raise CepAnalysisError(
            f"invalid YEAR TO MONTH interval {text!r}: expected 'y-m' with m from 0 to 11",
            pos=pos)
    return sign * (int(years) * 12 + int(months))


class ToAlgebra:
    """Converts one clause's sqlglot expressions; ``base`` = offset of the tokenized text."""

    def __init__(self, base: int = 0):
        self.base = base

    def pos(self, node: exp.Expr) -> int | None:
        """The node's offset, else its nearest positioned ancestor's: sqlglot builds some
        nodes from no token of their own (``INTERVAL '1' DAY 2`` adds an INTERVAL '2')."""
        while node is not None:
            found = sql_pos(node, self.base)
            if found is not None:
                return found
            node = node.parent
        return None

    def convert(self, node: exp.Expr) -> Expr:
        result = self._convert(node)
        if node.args.get("negate"):  # e.g. `x NOT LIKE y` is Like(negate=True)
            if isinstance(result, (IsNull, InList, Between, Like)):
                return replace(result, negated=not result.negated)
            return UnaryOp("NOT", result, result.pos if hasattr(result, "pos") else None)
        return result

    def _convert(self, node: exp.Expr) -> Expr:
        semantics = node.meta_get(SEMANTICS_KEY)
        if semantics is not None and not isinstance(node, exp.Anonymous):
            raise CepAnalysisError(
                f"{semantics} applies to FIRST/LAST navigation or an aggregate", pos=self.pos(node))
        for kind, op in _BINARY.items():
            if type(node) is kind:
                return BinaryOp(op, self.convert(node.this), self.convert(node.expression),
                                self.pos(node))
        for kind, name in _BINARY_FUNCS.items():
            if type(node) is kind:
                return FunctionCall(name, (self.convert(node.this), self.convert(node.expression)),
                                    self.pos(node))
        method = getattr(self, "_" + type(node).__name__.lower(), None)
        if method is None:
            raise CepUnsupportedError(
                f"unsupported expression in MATCH_RECOGNIZE: {node.sql(dialect='spark')}",
                pos=self.pos(node))
        return method(node)

    # --- leaves -----------------------------------------------------------------------
    def _column(self, node: exp.Column) -> Expr:
        if node.args.get("db") is not None:
            # var.column.field[.field]: the first part names the pattern variable
            parts = [node.args.get(k) for k in ("catalog", "db", "table")] + [node.this]
            parts = [p for p in parts if p is not None]
            if any(not isinstance(p, exp.Identifier) for p in parts):
                raise CepUnsupportedError(
                    f"unsupported column reference {node.sql(dialect='spark')}",
                    pos=self.pos(node))
            var, column = parts[0], parts[1]
            pos = self.pos(var)
            result: Expr = ColumnRef(canonical_name(var.name, bool(var.quoted)), column.name,
                                     pos)
            for part in parts[2:]:
                result = FunctionCall(FIELD_ACCESS, (result, Literal(part.name, "string")),
                                      pos)
            return result
        if isinstance(node.this, exp.Star):
            raise CepAnalysisError(f"{node.sql(dialect='spark')} is only allowed in count()",
                                   pos=self.pos(node))
        table = node.args.get("table")
        var = None if table is None else canonical_name(table.name, bool(table.quoted))
        return ColumnRef(var, node.this.name, self.pos(node))

    def _dot(self, node: exp.Dot) -> Expr:
        # Spark reads "A".price as a string followed by a field: treat it as a quoted variable.
        left, right = node.this, node.expression
        if isinstance(left, exp.Literal) and left.is_string and isinstance(right, exp.Identifier):
            return ColumnRef(left.this, right.name, self.pos(node))
        if isinstance(right, exp.Identifier):  # a struct field of a subscript: A.arr[0].f
            return FunctionCall(FIELD_ACCESS, (self.convert(left),
                                               Literal(right.name, "string")), self.pos(node))
        raise CepUnsupportedError(
            f"nested field access is not supported: {node.sql(dialect='spark')}", pos=self.pos(node))

    def _bracket(self, node: exp.Bracket) -> Expr:
        """``A.arr[0]`` (0-based, like Spark) / ``A.m['k']``; the planner resolves which."""
        if len(node.expressions) != 1 or node.args.get("safe") or node.args.get("offset"):
            raise CepUnsupportedError(
                f"unsupported subscript {node.sql(dialect='spark')}", pos=self.pos(node))
        return FunctionCall(SUBSCRIPT, (self.convert(node.this),
                                        self.convert(node.expressions[0])), self.pos(node))

    def _star(self, node: exp.Star) -> Expr:
        raise CepAnalysisError("* is only allowed in count(*)", pos=self.pos(node))

    def _literal(self, node: exp.Literal) -> Expr:
        pos = self.pos(node)
        if node.is_string:
            return Literal(node.this, "string", pos)
        text = node.this
        if text.isdigit():
            return Literal(int(text), "int", pos)
        if "e" in text.lower():
            return Literal(float(text), "double", pos)
        return Literal(text, "decimal", pos)  # Spark: 1.5 is a DECIMAL literal

    def _interval(self, node: exp.Interval) -> Expr:
        """A day-time interval literal as microseconds (``INTERVAL '5' MINUTE``)."""
        pos = self.pos(node)
        amount, unit = node.this, node.args.get("unit")
        if not isinstance(amount, exp.Literal) or unit is None:
            raise CepUnsupportedError(
                f"unsupported interval {node.sql(dialect='spark')}: write INTERVAL '<n>' <unit>",
                pos=pos)
        if isinstance(unit, exp.IntervalSpan):
            span = f"{unit.this.name.upper()} TO {unit.expression.name.upper()}"
            if span != "YEAR TO MONTH":
                raise CepUnsupportedError(
                    f"INTERVAL ... {span} is not supported; use YEAR TO MONTH or one unit",
                    pos=pos)
            return Literal(_year_to_month(str(amount.this), pos), "month_interval", pos)
        unit_text = unit.name.upper()
        if unit_text.rstrip("S") in ("YEAR", "MONTH"):
            try:
                count = int(str(amount.this).strip())
            except ValueError:
                raise CepAnalysisError(
                    f"invalid {unit_text} interval amount {amount.this!r}: a whole number",
                    pos=pos) from None
            factor = 12 if unit_text.rstrip("S") == "YEAR" else 1
            return Literal(count * factor, "month_interval", pos)
        if unit_text.rstrip("S") == "WEEK":
            raise CepUnsupportedError(
                f"{unit_text} intervals are not supported; use DAY, HOUR, MINUTE, SECOND, "
                "MILLISECOND or MICROSECOND", pos=pos)
        try:
            micros = Decimal(str(amount.this).strip()) * unit_micros(unit_text, pos)
        except InvalidOperation:
            raise CepAnalysisError(f"invalid interval amount {amount.this!r}", pos=pos) from None
        if micros != micros.to_integral_value():
            raise CepAnalysisError("interval must be a whole number of microseconds", pos=pos)
        return Literal(int(micros), "interval", pos)

    def _boolean(self, node: exp.Boolean) -> Expr:
        return Literal(bool(node.this), "bool", self.pos(node))

    def _null(self, node: exp.Null) -> Expr:
        return Literal(None, "null", self.pos(node))

    # --- operators --------------------------------------------------------------------
    def _paren(self, node: exp.Paren) -> Expr:
        return self.convert(node.this)

    def _neg(self, node: exp.Neg) -> Expr:
        inner = self.convert(node.this)
        if isinstance(inner, Literal) and inner.type in ("int", "double"):
            return Literal(-inner.value, inner.type, self.pos(node))
        if isinstance(inner, Literal) and inner.type == "decimal":
            return Literal("-" + inner.value, "decimal", self.pos(node))
        return UnaryOp("-", inner, self.pos(node))

    def _not(self, node: exp.Not) -> Expr:
        inner = node.this
        if isinstance(inner, (exp.Is, exp.In, exp.Between, exp.Like)):
            converted = self.convert(inner)
            if isinstance(converted, (IsNull, InList, Between, Like)):
                return replace(converted, negated=not converted.negated)
            return UnaryOp("NOT", converted, self.pos(node))
        return UnaryOp("NOT", self.convert(inner), self.pos(node))

    def _is(self, node: exp.Is) -> Expr:
        if isinstance(node.expression, exp.Null):
            return IsNull(self.convert(node.this), False, self.pos(node))
        raise CepUnsupportedError(
            f"unsupported IS predicate: {node.sql(dialect='spark')} (only IS [NOT] NULL)",
            pos=self.pos(node))

    def _in(self, node: exp.In) -> Expr:
        if node.args.get("query") is not None or node.args.get("unnest") is not None:
            raise CepUnsupportedError("subqueries are not allowed in MATCH_RECOGNIZE",
                                      pos=self.pos(node))
        items = tuple(self.convert(e) for e in node.expressions)
        return InList(self.convert(node.this), items, False, self.pos(node))

    def _between(self, node: exp.Between) -> Expr:
        return Between(self.convert(node.this), self.convert(node.args["low"]),
                       self.convert(node.args["high"]), False, self.pos(node))

    def _like(self, node: exp.Like) -> Expr:
        return Like(self.convert(node.this), self.convert(node.expression), False, self.pos(node))

    def _case(self, node: exp.Case) -> Expr:
        operand = node.this
        whens = tuple((self.convert(w.this), self.convert(w.args["true"]))
                      for w in node.args.get("ifs") or ())
        default = node.args.get("default")
        return Case(None if operand is None else self.convert(operand), whens,
                    None if default is None else self.convert(default), self.pos(node))

    def _if(self, node: exp.If) -> Expr:
        args = [node.this, node.args.get("true"), node.args.get("false")]
        return FunctionCall("if", tuple(self.convert(a) for a in args if a is not None),
                            self.pos(node))

    def _cast(self, node: exp.Cast) -> Expr:
        to: exp.DataType = node.to
        operand = node.this
        type_name = to.this.name
        pos = self.pos(node)
        if isinstance(operand, exp.Literal):
            # typed literals (1.5D, 10L, DATE '...') arrive as casts of literals
            if not operand.is_string and type_name in _LITERAL_TYPES:
                kind = _LITERAL_TYPES[type_name]
                value = (float(operand.this) if kind == "double" else
                         int(operand.this) if kind == "int" and operand.this.isdigit() else None)
                if kind == "decimal" and not to.expressions:
                    return Literal(operand.this, "decimal", pos)
                if value is not None:
                    return Literal(value, kind, pos)
            if operand.is_string and type_name == "DATE":
                return Literal(operand.this, "date", pos)
            if operand.is_string and type_name in ("TIMESTAMP", "TIMESTAMPTZ", "TIMESTAMPLTZ"):
                return Literal(operand.this, "timestamp", pos)
            if operand.is_string and type_name == "DECIMAL" and _is_number(operand.this):
                return Literal(operand.this, "decimal", pos)
        return Cast(self.convert(operand), to.sql(dialect="spark").lower(), pos)

    _trycast = _cast

    def _extract(self, node: exp.Extract) -> Expr:
        unit = node.this.name.upper()
        return FunctionCall("date_part", (Literal(unit, "string", self.pos(node.this)),
                                          self.convert(node.expression)), self.pos(node))

    def _substring(self, node: exp.Substring) -> Expr:
        args = [node.this, node.args.get("start"), node.args.get("length")]
        return FunctionCall("substring", tuple(self.convert(a) for a in args if a is not None),
                            self.pos(node))

    def _trim(self, node: exp.Trim) -> Expr:
        if node.args.get("expression") is not None or node.args.get("position") is not None:
            raise CepUnsupportedError("TRIM(... FROM ...) is not supported; use trim(x)",
                                      pos=self.pos(node))
        return FunctionCall("trim", (self.convert(node.this),), self.pos(node))

    def _window(self, node: exp.Window) -> Expr:
        raise CepAnalysisError("window functions (OVER) are not allowed in MATCH_RECOGNIZE",
                               pos=self.pos(node))

    def _subquery(self, node: exp.Expr) -> Expr:
        """``(SELECT ...)``: an uncorrelated scalar subquery (a constant per statement);
        EXISTS and set subqueries stay unsupported."""
        if isinstance(node, exp.Subquery) and isinstance(node.this, exp.Query) \
                and not node.args.get("alias"):
            # Spark's generator: CepSpark (dialect.py, which imports this module) only
            # adds MATCH_RECOGNIZE to the tokenizer and the parser
            return ScalarSubquery(node.this.sql(dialect="spark"), self.pos(node))
        raise CepUnsupportedError("only scalar subqueries (SELECT ...) are allowed in "
                                  "MATCH_RECOGNIZE", pos=self.pos(node))

    _exists = _select = _subquery

    # --- function calls ---------------------------------------------------------------
    def _any(self, node: exp.Any) -> Expr:
        """``any(cond)``, Spark's bool_or (a quantified ``= ANY (...)`` is not supported)."""
        if isinstance(node.this, (exp.Subquery, exp.Select)):
            return self._subquery(node)
        return self._aggregate("any", [node.this], node.meta_get(SEMANTICS_KEY), self.pos(node))

    def _withingroup(self, node: exp.Expr) -> Expr:
        raise CepUnsupportedError(
            "WITHIN GROUP (ORDER BY ...) is not supported in MATCH_RECOGNIZE; listagg/"
            "string_agg concatenate in match order", pos=self.pos(node))

    def _anonymous(self, node: exp.Anonymous) -> Expr:
        this = node.this
        written = this.name if isinstance(this, exp.Identifier) else str(this)
        name = written.upper()
        pos = self.pos(node)
        semantics = node.meta_get(SEMANTICS_KEY)
        raw_args = list(node.expressions)
        if name in NAVIGATION:
            return self._navigation(name, raw_args, semantics, pos)
        if written.lower() in AGGREGATES:
            return self._aggregate(written.lower(), raw_args, semantics, pos)
        if written.lower() in OTHER_SPARK_AGGREGATES:
            raise CepUnsupportedError(
                f"aggregate {written}() is not supported in MATCH_RECOGNIZE; supported: "
                f"{', '.join(sorted(AGGREGATES))}", pos=pos)
        if semantics is not None:
            raise CepAnalysisError(
                f"{semantics} applies to FIRST/LAST navigation or an aggregate, not {written}()",
                pos=pos)
        if any(isinstance(a, exp.Distinct) for a in raw_args):
            raise CepUnsupportedError(f"DISTINCT is only supported in aggregates, not {written}()",
                                      pos=pos)
        if name == "CLASSIFIER":
            if len(raw_args) > 1:
                raise CepAnalysisError("CLASSIFIER takes at most one pattern variable", pos=pos)
            if not raw_args:
                return Classifier(None, pos)
            return Classifier(self._var_arg(raw_args[0], "CLASSIFIER"), pos)
        if name == "MATCH_NUMBER":
            if raw_args:
                raise CepAnalysisError("MATCH_NUMBER takes no arguments", pos=pos)
            return MatchNumber(pos)
        return FunctionCall(written.lower(), tuple(self.convert(a) for a in raw_args), pos)

    def _var_arg(self, arg: exp.Expr, func: str) -> str:
        if isinstance(arg, exp.Column) and arg.args.get("table") is None and \
                isinstance(arg.this, exp.Identifier):
            return canonical_name(arg.this.name, bool(arg.this.quoted))
        if isinstance(arg, exp.Literal) and arg.is_string:  # Spark's "A"
            return arg.this
        raise CepAnalysisError(f"{func} argument must be a pattern variable", pos=self.pos(arg))

    def _navigation(self, kind: str, args: list[exp.Expr], semantics: str | None,
                    pos: int | None) -> Expr:
        if not 1 <= len(args) <= 2:
            raise CepAnalysisError(f"{kind} takes one or two arguments", pos=pos)
        if semantics is not None and kind in ("PREV", "NEXT"):
            inner = args[0]
            if not (isinstance(inner, exp.Anonymous) and str(inner.name).upper() in
                    ("FIRST", "LAST")):
                raise CepAnalysisError(
                    f"{semantics} applies to FIRST/LAST navigation, not to {kind}", pos=pos)
        offset = NAVIGATION[kind]
        if len(args) == 2:
            offset = self._int_constant(args[1], kind)
        return Navigation(kind, self.convert(args[0]), offset, semantics, pos)

    def _int_constant(self, node: exp.Expr, kind: str) -> int:
        value = self.convert(node)
        if isinstance(value, Cast) and value.to in _INTEGER_CASTS:
            value = value.operand  # 1L, 1S, 1Y: typed integer literals are constants too
        if isinstance(value, Literal) and value.type == "int":
            if value.value < 0:
                raise CepAnalysisError(f"{kind} offset must not be negative", pos=value.pos)
            if value.value > MAX_NAVIGATION_OFFSET:
                raise CepAnalysisError(
                    f"{kind} offset {value.value} is too large (at most {MAX_NAVIGATION_OFFSET})",
                    pos=value.pos)
            return value.value
        raise CepAnalysisError(f"{kind} offset must be a non-negative integer constant",
                               pos=self.pos(node))

    def _aggregate(self, name: str, args: list[exp.Expr], semantics: str | None,
                   pos: int | None) -> Expr:
        distinct = False
        if len(args) == 1 and isinstance(args[0], exp.Distinct):
            distinct = True
            args = list(args[0].expressions)
        star_var = None
        if len(args) == 1 and isinstance(args[0], exp.Star):
            star_var = ""
            args = []
        elif len(args) == 1 and isinstance(args[0], exp.Column) and \
                isinstance(args[0].this, exp.Star) and args[0].args.get("table") is not None:
            table = args[0].args["table"]
            star_var = canonical_name(table.name, bool(table.quoted))
            args = []
        if star_var is not None and (name != "count" or distinct):
            raise CepAnalysisError(f"{name}(*) is not allowed; only count(*) and count(A.*)",
                                   pos=pos)
        if star_var is None and not args:
            raise CepAnalysisError(f"{name}() needs an argument", pos=pos)
        return Aggregate(name, tuple(self.convert(a) for a in args), semantics, distinct,
                         star_var, pos)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
