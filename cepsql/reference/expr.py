"""Expression interpreter of the pure-Python reference evaluator (the test oracle).

It evaluates the expression IR *after* ``bind_rows``: every row read is a
``RowValue(RowRef, value)`` node, resolved here against the labelled match. It is
written for obviousness, not speed; the compiled evaluators are checked against it.
"""
from __future__ import annotations

import calendar
import datetime as _dt
import math
import re
from dataclasses import dataclass, field, replace
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation

from cepsql.algebra.expressions import (ARRAY_ELEMENT, FIELD_ACCESS, MAP_VALUE, SUBSCRIPT,
                                   Aggregate, Between, BinaryOp, Case, Cast, Classifier,
                                   ColumnRef, Expr, FunctionCall, InList, IsNull, Like,
                                   Literal, MatchNumber, Navigation, RowRef, RowValue,
                                   UnaryOp, walk)
from cepsql.algebra.rowrefs import bind_rows
from cepsql.errors import CepAnalysisError


@dataclass
class EvalContext:
    """The state an expression is evaluated in.

    rows: the ordered rows of the partition. start: absolute index of the match's
    first row. labels: variables of the match rows visible to this evaluation (DEFINE:
    up to the current row; measures: the whole match). current: absolute index of the
    current row, None for an empty match (or a row evaluated outside any match).
    final_default: whether navigation without RUNNING/FINAL reads the whole match.
    in_define: a DEFINE condition: list aggregates are Spark's collect_list (never NULL:
    [] over no non-NULL values); MEASURES keep NULL for an empty list.
    """
    rows: list[dict]
    start: int = 0
    labels: tuple[str, ...] = ()
    current: int | None = None
    final_default: bool = False
    match_number: int | None = None
    subsets: dict[str, frozenset[str]] = field(default_factory=dict)
    known_vars: frozenset[str] = frozenset()
    colmap: dict[str, str] = field(default_factory=dict)
    in_define: bool = False



class ReferenceUnsupported(Exception):
    """The test oracle has no rule for this construct (a limit of the oracle, not of
    cepsql: property tests reject such examples instead of comparing them)."""

def evaluate(expr: Expr, ctx: EvalContext, at: int | None = None) -> object:
    """Value of a bound expression; ``at`` is the row that unqualified columns and
    CLASSIFIER() read (set inside RowValue, or when evaluating PARTITION/ORDER keys)."""
    handler = _HANDLERS.get(type(expr))
    if handler is None:
        raise ReferenceUnsupported(f"reference evaluator cannot evaluate {type(expr).__name__}")
    return handler(expr, ctx, at)


def in_variable(label: str, var: str | None, subsets: dict[str, frozenset[str]]) -> bool:
    """Whether a row labelled ``label`` belongs to ``var`` (None = universal, or a SUBSET)."""
    if var is None:
        return True
    if var in subsets:
        return label in subsets[var]
    return label == var


def resolve_row(ref: RowRef, ctx: EvalContext) -> int | None:
    """Absolute row index a RowRef denotes, or None when there is no such row."""
    if ctx.current is None:
        return None
    last = len(ctx.labels) - 1 if ref.final else ctx.current - ctx.start
    candidates = [i for i in range(last + 1) if in_variable(ctx.labels[i], ref.var, ctx.subsets)]
    k = len(candidates) - 1 - ref.logical_offset if ref.logical == "LAST" else ref.logical_offset
    if not 0 <= k < len(candidates):
        return None
    target = ctx.start + candidates[k] + ref.physical_offset
    return target if 0 <= target < len(ctx.rows) else None


# --- leaves -------------------------------------------------------------------------

def _literal(expr: Literal, ctx: EvalContext, at: int | None) -> object:
    if expr.value is None:
        return None
    if expr.type == "decimal":
        return Decimal(str(expr.value))
    if expr.type == "date" and isinstance(expr.value, str):
        return _dt.date.fromisoformat(expr.value)
    if expr.type == "timestamp" and isinstance(expr.value, str):
        return _dt.datetime.fromisoformat(expr.value)
    if expr.type == "interval":
        return _dt.timedelta(microseconds=int(expr.value))
    if expr.type == "month_interval":
        return MonthInterval(int(expr.value))
    return expr.value


@dataclass(frozen=True)
class MonthInterval:
    """A year-month interval: calendar months, not a fixed length."""
    months: int


def _plus_months(value: object, months: int) -> object:
    """date/datetime moved by calendar months, the day clamped to the month's last day."""
    if not isinstance(value, _dt.date):
        raise ReferenceUnsupported("year-month interval added to a non-temporal value")
    index = value.year * 12 + value.month - 1 + months
    year, month = divmod(index, 12)
    last = calendar.monthrange(year, month + 1)[1]
    return value.replace(year=year, month=month + 1, day=min(value.day, last))


def _column(expr: ColumnRef, ctx: EvalContext, at: int | None) -> object:
    if at is None:
        raise ValueError(f"column {expr.column} read outside a row context (not bound?)")
    row = ctx.rows[at]
    if expr.column in row:
        return row[expr.column]
    name = ctx.colmap.get(expr.column.lower())
    if name is None:
        raise CepAnalysisError(f"unknown column {expr.column}", pos=expr.pos)
    return row[name]


def _classifier(expr: Classifier, ctx: EvalContext, at: int | None) -> object:
    if at is None:
        raise ValueError("CLASSIFIER() read outside a row context (not bound?)")
    rel = at - ctx.start
    return ctx.labels[rel] if 0 <= rel < len(ctx.labels) else None


def _row_value(expr: RowValue, ctx: EvalContext, at: int | None) -> object:
    row = resolve_row(expr.ref, ctx)
    return None if row is None else evaluate(expr.value, ctx, row)


def _match_number(expr: MatchNumber, ctx: EvalContext, at: int | None) -> object:
    return ctx.match_number


def _navigation(expr: Navigation, ctx: EvalContext, at: int | None) -> object:
    raise ValueError("navigation must be bound with bind_rows before evaluation")


# --- comparison and arithmetic helpers ----------------------------------------------

def _coerce(a: object, b: object) -> tuple[object, object]:
    """Bring two non-null operands to comparable Python types (Spark-like implicit casts)."""
    num = (int, float, Decimal)
    if isinstance(a, Decimal) and isinstance(b, float):
        return float(a), b
    if isinstance(a, float) and isinstance(b, Decimal):
        return a, float(b)
    if isinstance(a, str) and isinstance(b, num) and not isinstance(b, bool):
        return _cast_value(a, "double"), b
    if isinstance(b, str) and isinstance(a, num) and not isinstance(a, bool):
        return a, _cast_value(b, "double")
    if isinstance(a, str) and isinstance(b, (_dt.date, _dt.datetime)):
        return _cast_value(a, "timestamp" if isinstance(b, _dt.datetime) else "date"), b
    if isinstance(b, str) and isinstance(a, (_dt.date, _dt.datetime)):
        return a, _cast_value(b, "timestamp" if isinstance(a, _dt.datetime) else "date")
    return a, b


def compare(a: object, b: object) -> int:
    """-1/0/1 for two non-null values; NaN equals NaN and sorts above every number (Spark)."""
    a, b = _coerce(a, b)
    a_nan = isinstance(a, float) and math.isnan(a)
    b_nan = isinstance(b, float) and math.isnan(b)
    if a_nan or b_nan:
        return (a_nan > b_nan) - (a_nan < b_nan)
    if a is None or b is None:
        return 0 if a is b else (-1 if a is None else 1)
    return (a > b) - (a < b)


_COMPARISONS = {"=": lambda c: c == 0, "<>": lambda c: c != 0, "!=": lambda c: c != 0,
                "<": lambda c: c < 0, "<=": lambda c: c <= 0, ">": lambda c: c > 0,
                ">=": lambda c: c >= 0}


def _arith(op: str, a: object, b: object) -> object:
    if isinstance(b, MonthInterval) and op in ("+", "-"):
        return _plus_months(a, b.months if op == "+" else -b.months)
    if isinstance(a, MonthInterval) and op == "+":
        return _plus_months(b, a.months)
    a, b = _coerce(a, b)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return None if b == 0 else float(a) / float(b)
    if op == "%":
        if b == 0:
            return None
        if isinstance(a, int) and isinstance(b, int):
            r = abs(a) % abs(b)
            return r if a >= 0 else -r
        if isinstance(a, Decimal) and isinstance(b, Decimal):
            return a % b  # Decimal % keeps the dividend's sign, like Java
        return math.fmod(float(a), float(b))
    raise ReferenceUnsupported(f"operator {op}")


def _binary(expr: BinaryOp, ctx: EvalContext, at: int | None) -> object:
    op = expr.op.upper()
    if op == "AND":
        return _and(evaluate(expr.left, ctx, at), lambda: evaluate(expr.right, ctx, at))
    if op == "OR":
        return _or(evaluate(expr.left, ctx, at), lambda: evaluate(expr.right, ctx, at))
    a = evaluate(expr.left, ctx, at)
    b = evaluate(expr.right, ctx, at)
    if op == "<=>":
        if a is None or b is None:
            return a is None and b is None
        return compare(a, b) == 0
    if a is None or b is None:
        return None
    if op in _COMPARISONS:
        return _COMPARISONS[op](compare(a, b))
    if op == "||":
        return _to_string(a) + _to_string(b)
    return _arith(op, a, b)


def _and(a: object, b_thunk) -> object:
    if a is False:
        return False
    b = b_thunk()
    if b is False:
        return False
    return None if a is None or b is None else True


def _or(a: object, b_thunk) -> object:
    if a is True:
        return True
    b = b_thunk()
    if b is True:
        return True
    return None if a is None or b is None else False


def _unary(expr: UnaryOp, ctx: EvalContext, at: int | None) -> object:
    v = evaluate(expr.operand, ctx, at)
    if v is None:
        return None
    if expr.op.upper() == "NOT":
        return not v
    if expr.op == "-":
        return -v
    if expr.op == "+":
        return v
    raise ReferenceUnsupported(f"unary operator {expr.op}")


def _is_null(expr: IsNull, ctx: EvalContext, at: int | None) -> object:
    v = evaluate(expr.operand, ctx, at)
    return (v is not None) if expr.negated else (v is None)


def _negate(v: object, negated: bool) -> object:
    return (None if v is None else not v) if negated else v


def _in_list(expr: InList, ctx: EvalContext, at: int | None) -> object:
    v = evaluate(expr.operand, ctx, at)
    if v is None:
        return None
    saw_null = False
    for item in expr.items:
        w = evaluate(item, ctx, at)
        if w is None:
            saw_null = True
        elif compare(v, w) == 0:
            return _negate(True, expr.negated)
    return _negate(None if saw_null else False, expr.negated)


def _between(expr: Between, ctx: EvalContext, at: int | None) -> object:
    v = evaluate(expr.operand, ctx, at)
    lo = evaluate(expr.low, ctx, at)
    hi = evaluate(expr.high, ctx, at)
    ge = None if v is None or lo is None else compare(v, lo) >= 0
    le = None if v is None or hi is None else compare(v, hi) <= 0
    return _negate(_and(ge, lambda: le), expr.negated)


def like_regex(pattern: str) -> str:
    """SQL LIKE pattern (% and _, backslash escapes) as a Python regex."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return "".join(out)


def _like(expr: Like, ctx: EvalContext, at: int | None) -> object:
    v = evaluate(expr.operand, ctx, at)
    p = evaluate(expr.pattern, ctx, at)
    if v is None or p is None:
        return None
    hit = re.fullmatch(like_regex(str(p)), _to_string(v), flags=re.DOTALL) is not None
    return _negate(hit, expr.negated)


def _case(expr: Case, ctx: EvalContext, at: int | None) -> object:
    subject = None if expr.operand is None else evaluate(expr.operand, ctx, at)
    for cond, result in expr.whens:
        c = evaluate(cond, ctx, at)
        if expr.operand is not None:
            c = None if subject is None or c is None else compare(subject, c) == 0
        if c is True:
            return evaluate(result, ctx, at)
    return None if expr.default is None else evaluate(expr.default, ctx, at)


# --- CAST -------------------------------------------------------------------------

def _to_string(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if not v.is_integer() or abs(v) >= 1e16 else f"{v:.1f}"
    if isinstance(v, _dt.datetime):
        return v.isoformat(sep=" ")
    return str(v)


def _cast_value(v: object, to: str) -> object:
    """Spark-like CAST of a non-null value; an unconvertible string gives NULL."""
    t = to.strip().lower()
    try:
        if t in ("int", "integer", "bigint", "long", "smallint", "tinyint", "short", "byte"):
            if isinstance(v, str):
                v = Decimal(v.strip())
            return int(v)  # truncates toward zero like Spark
        if t in ("double", "float", "real"):
            return float(v)
        if t.startswith("decimal") or t.startswith("numeric"):
            scale = int(t.split(",")[1].rstrip(") ")) if "," in t else 0
            return Decimal(str(v)).quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
        if t in ("string", "text") or t.startswith("varchar") or t.startswith("char"):
            return _to_string(v)
        if t in ("boolean", "bool"):
            if isinstance(v, str):
                s = v.strip().lower()
                return True if s in ("true", "t", "1", "yes", "y") else (
                    False if s in ("false", "f", "0", "no", "n") else None)
            return bool(v)
        if t == "date":
            if isinstance(v, _dt.datetime):
                return v.date()
            return v if isinstance(v, _dt.date) else _dt.date.fromisoformat(str(v).strip()[:10])
        if t in ("timestamp", "timestamp_ntz"):
            if isinstance(v, _dt.datetime):
                return v
            if isinstance(v, _dt.date):
                return _dt.datetime(v.year, v.month, v.day)
            return _dt.datetime.fromisoformat(str(v).strip())
    except (ValueError, InvalidOperation, OverflowError):
        return None
    raise ReferenceUnsupported(f"CAST to {to}")


def _cast(expr: Cast, ctx: EvalContext, at: int | None) -> object:
    v = evaluate(expr.operand, ctx, at)
    return None if v is None else _cast_value(v, expr.to)


# --- scalar functions ---------------------------------------------------------------

def _round(x: object, digits: int = 0, rounding: str = ROUND_HALF_UP) -> object:
    """Spark's round/bround: a double is rounded as its shortest decimal text."""
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return x
    text = Decimal(repr(x) if isinstance(x, float) else str(x))
    if text.as_tuple().exponent >= -digits:
        return x
    q = text.quantize(Decimal(1).scaleb(-digits), rounding=rounding)
    if isinstance(x, int):
        return int(q)
    return q if isinstance(x, Decimal) else float(q)


def _to_long(x: object, direction) -> int:
    """floor/ceil as Spark's BIGINT: NaN -> 0, saturated at the BIGINT range."""
    if isinstance(x, float):
        if math.isnan(x):
            return 0
        if math.isinf(x):
            return 2 ** 63 - 1 if x > 0 else -2 ** 63
    return max(-2 ** 63, min(2 ** 63 - 1, int(direction(x))))


def _pmod(a: object, n: object) -> object:
    """Spark's pmod: r = a % n, then (r + n) % n when r is negative."""
    r = _arith("%", a, n)
    if r is not None and r < 0:
        return _arith("%", _arith("+", r, n), n)
    return r


def _sqrt(x: object) -> float:
    return math.sqrt(x) if x >= 0 else math.nan


def _power(a: object, b: object) -> float:
    try:
        return math.pow(float(a), float(b))
    except (ValueError, OverflowError):
        return math.nan


def _extreme(values: list, sign: int) -> object:
    present = [v for v in values if v is not None]
    if not present:
        return None
    best = present[0]
    for v in present[1:]:
        if compare(v, best) * sign > 0:
            best = v
    return best


# functions whose result is null when any argument is null
_STRICT_FUNCTIONS = {
    "abs": lambda x: abs(x),
    "round": _round,
    "bround": lambda x, d=0: _round(x, d, ROUND_HALF_EVEN),
    "pmod": _pmod,
    "floor": lambda x: _to_long(x, math.floor),
    "ceil": lambda x: _to_long(x, math.ceil),
    "ceiling": lambda x: _to_long(x, math.ceil),
    "sqrt": _sqrt,
    "power": _power,
    "pow": _power,
    "upper": lambda s: _to_string(s).upper(),
    "ucase": lambda s: _to_string(s).upper(),
    "lower": lambda s: _to_string(s).lower(),
    "lcase": lambda s: _to_string(s).lower(),
    "length": lambda s: len(_to_string(s)),
    "char_length": lambda s: len(_to_string(s)),
    "concat": lambda *xs: "".join(_to_string(x) for x in xs),
    # arrays (lists): Spark 4 (ANSI) gives NULL for the size of a NULL array
    "size": len,
    "cardinality": len,
    "array_size": len,
    "mod": lambda a, b: _arith("%", a, b),
}


def _array_contains(values: object, probe: object) -> object:
    """Spark's array_contains: NULL for a NULL array or probe; FALSE when absent, unless
    the array holds a NULL (then NULL)."""
    if values is None or probe is None:
        return None
    if any(v is not None and compare(v, probe) == 0 for v in values):
        return True
    return None if any(v is None for v in values) else False


def _element_at(values: list, index: object) -> object:
    """element_at/try_element_at of a list: 1-based, negative from the end; NULL out of
    range (the oracle has no ANSI errors; element_at raises there under ANSI)."""
    if index is None:
        return None
    if index == 0:
        raise CepAnalysisError("[INVALID_INDEX_OF_ZERO] element_at index starts at 1")
    i = index - 1 if index > 0 else len(values) + index
    return values[i] if 0 <= i < len(values) else None


def _nested(name: str, base: object, key: object) -> object:
    """Struct field / 0-based array element / map value; NULL when absent (Python rows:
    structs are dicts, arrays lists, maps lists of (key, value) pairs)."""
    if base is None or key is None:
        return None
    if name == FIELD_ACCESS:
        return base.get(key) if key in base else next(
            (v for k, v in base.items() if k.lower() == str(key).lower()), None)
    if isinstance(base, dict):  # a map given as a dict
        return base.get(key)
    if not base:
        return None
    is_map = name == MAP_VALUE or (name == SUBSCRIPT and
                                   all(isinstance(x, tuple) and len(x) == 2 for x in base))
    if is_map:
        return next((v for k, v in base if k == key), None)
    index = int(key)
    return base[index] if 0 <= index < len(base) else None


def _function(expr: FunctionCall, ctx: EvalContext, at: int | None) -> object:
    name = expr.name.lower()
    args = [evaluate(a, ctx, at) for a in expr.args]
    if name in ("coalesce", "nvl", "ifnull"):
        return next((a for a in args if a is not None), None)
    if name == "greatest":
        return _extreme(args, 1)
    if name == "least":
        return _extreme(args, -1)
    if name == "nullif":
        return None if args[0] is None or (args[1] is not None and compare(args[0], args[1]) == 0) \
            else args[0]
    if name == "if":
        return args[1] if args[0] is True else args[2]
    if name in ("element_at", "try_element_at") and isinstance(expr.args[0], Aggregate):
        return None if args[0] is None else _element_at(*args)  # a list aggregate
    if name in (FIELD_ACCESS, SUBSCRIPT, ARRAY_ELEMENT, MAP_VALUE):
        return _nested(name, *args)
    if name == "array_contains":
        return _array_contains(*args)
    fn = _STRICT_FUNCTIONS.get(name)
    if fn is None:
        raise ReferenceUnsupported(f"reference evaluator has no function {name}")
    if any(a is None for a in args):
        return None
    return fn(*args)


# --- aggregates ---------------------------------------------------------------------

def aggregate_variable(agg: Aggregate) -> str | None:
    """The variable an aggregate ranges over: its star variable, or the one variable
    its arguments qualify their columns with (None = every row of the match)."""
    if agg.star_var is not None:
        return agg.star_var or None
    found = {n.var for a in agg.args for n in walk(a)
             if isinstance(n, (ColumnRef, Classifier)) and n.var is not None}
    if len(found) > 1:
        raise CepAnalysisError(
            f"aggregate {agg.name} mixes pattern variables {', '.join(sorted(found))}", pos=agg.pos)
    return next(iter(found), None)


def _aggregate_rows(agg: Aggregate, ctx: EvalContext) -> list[int]:
    """Absolute indexes of the rows an aggregate reads (running or final, one variable)."""
    if ctx.current is None:
        return []
    final = ctx.final_default if agg.semantics is None else agg.semantics == "FINAL"
    last = len(ctx.labels) - 1 if final else ctx.current - ctx.start
    var = aggregate_variable(agg)
    return [ctx.start + i for i in range(last + 1) if in_variable(ctx.labels[i], var, ctx.subsets)]


def _aggregate(expr: Aggregate, ctx: EvalContext, at: int | None) -> object:
    name = expr.name.lower()
    rows = _aggregate_rows(expr, ctx)
    if expr.star_var is not None:
        if name != "count":
            raise CepAnalysisError(f"{name}(*) is not an aggregate", pos=expr.pos)
        return len(rows)
    # Each aggregated row is read as the current row of a running evaluation, so
    # A.price is that row, PREV(A.price) the row before it and CLASSIFIER() its label.
    columns = []
    for arg in expr.args:
        bound = bind_rows(arg, in_define=False, final_default=False,
                          known_vars=set(ctx.known_vars))
        columns.append([evaluate(bound, replace(ctx, current=r, final_default=False))
                        for r in rows])
    if name in ("max_by", "min_by"):
        return _by(columns[0], columns[1], 1 if name == "max_by" else -1)
    if len(columns) != 1 and name not in ("listagg", "string_agg"):
        raise ReferenceUnsupported(f"aggregate {name} with {len(columns)} arguments")
    values = [v for v in columns[0] if v is not None]
    if expr.distinct or name == "collect_set":
        values = _distinct(values)
    if name in ("listagg", "string_agg"):
        sep = evaluate(expr.args[1], ctx) if len(expr.args) > 1 else ""  # a constant
        texts = [_cast_value(v, "string") for v in values]
        return None if not texts else (sep or "").join(texts)
    if ctx.in_define and name in ("array_agg", "collect_list", "collect_set"):
        return values
    return _fold(name, values)


def _by(values: list, keys: list, sign: int) -> object:
    """max_by/min_by: the value of the last row holding the extreme non-null key."""
    best, best_key = None, None
    for v, k in zip(values, keys):
        if k is not None and (best_key is None or compare(k, best_key) * sign >= 0):
            best, best_key = v, k
    return best


def _distinct(values: list) -> list:
    out: list = []
    for v in values:
        if not any(compare(v, w) == 0 for w in out):
            out.append(v)
    return out


def _fold(name: str, values: list) -> object:
    """A Spark aggregate over the non-null values of its rows, in match order."""
    if name == "count":
        return len(values)
    if name == "count_if":
        return sum(1 for v in values if v is True)
    if not values:
        return None
    if name == "sum":
        total = values[0]
        for v in values[1:]:
            total = _arith("+", total, v)
        return total
    if name in ("avg", "mean"):
        return float(sum(float(v) for v in values)) / len(values)
    if name == "min":
        return _extreme(values, -1)
    if name == "max":
        return _extreme(values, 1)
    if name in ("array_agg", "collect_list", "collect_set"):
        return values
    if name in ("bool_and", "every"):
        return all(v is True for v in values)
    if name in ("bool_or", "some", "any"):
        return any(v is True for v in values)
    if name in ("stddev", "std", "stddev_samp", "stddev_pop", "variance", "var_samp",
                "var_pop"):
        return _variance_family(name, [float(v) for v in values])
    raise ReferenceUnsupported(f"reference evaluator has no aggregate {name}")


def _variance_family(name: str, xs: list[float]) -> float | None:
    """Spark's one-pass update: n, mean and the sum of squared deviations m2."""
    n = mean = m2 = 0.0
    for x in xs:
        n += 1.0
        delta = x - mean
        mean += delta / n
        m2 += delta * (delta - delta / n)
    sample = name not in ("stddev_pop", "var_pop")
    if sample and n == 1.0:
        return None
    variance = m2 / (n - 1.0) if sample else m2 / n
    return math.sqrt(variance) if name.startswith("std") else variance


_HANDLERS = {
    Literal: _literal, ColumnRef: _column, Classifier: _classifier, RowValue: _row_value,
    MatchNumber: _match_number, Navigation: _navigation, BinaryOp: _binary, UnaryOp: _unary,
    IsNull: _is_null, InList: _in_list, Between: _between, Like: _like, Case: _case,
    Cast: _cast, FunctionCall: _function, Aggregate: _aggregate,
}
