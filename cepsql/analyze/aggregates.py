"""Aggregates over pattern variables, normalized for the evaluators.

``count(A.*)``, ``sum(A.price * A.volume)``, ``avg(price)``... become AggregateValue
nodes: which rows (a variable or the whole match), which function, and which row-local
column (the argument, computed vectorised as a derived column like other row-local
expressions). ``first_value``/``last_value`` are FIRST/LAST navigation in disguise.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from cepsql.algebra.expressions import (Aggregate, AggregateValue, BinaryOp, Case, Cast, Classifier,
                                   ColumnRef, Expr, FunctionCall, GatheredAggregate, Literal,
                                   MatchNumber, Navigation, UnaryOp, children, walk)
from cepsql.algebra.rowrefs import bind_rows, rebuild, transform
from cepsql.errors import CepAnalysisError, CepUnsupportedError
from cepsql.analyze.decompose import DerivedColumns, localize

_NAMES = {"count": "COUNT", "sum": "SUM", "avg": "AVG", "mean": "AVG", "min": "MIN",
          "max": "MAX", "array_agg": "LIST", "collect_list": "LIST"}
# aggregates computed over gathered row lists (MEASURES): name -> canonical function
GATHERED = {
    "count": "count", "sum": "sum", "avg": "avg", "mean": "avg", "min": "min", "max": "max",
    "array_agg": "array_agg", "collect_list": "array_agg", "collect_set": "collect_set",
    "stddev": "stddev_samp", "std": "stddev_samp", "stddev_samp": "stddev_samp",
    "stddev_pop": "stddev_pop", "variance": "var_samp", "var_samp": "var_samp",
    "var_pop": "var_pop", "count_if": "count_if", "bool_and": "bool_and", "every": "bool_and",
    "bool_or": "bool_or", "some": "bool_or", "any": "bool_or", "max_by": "max_by",
    "min_by": "min_by", "listagg": "listagg", "string_agg": "listagg",
}
_ARITY = {"max_by": (2, 2), "min_by": (2, 2), "listagg": (1, 2)}
# DEFINE runs aggregates incrementally inside the matcher
DEFINE_AGGREGATES = ("count", "sum", "avg", "mean", "min", "max", "count_if", "bool_and",
                     "every", "bool_or", "some", "any", "stddev", "std", "stddev_samp",
                     "stddev_pop", "variance", "var_samp", "var_pop", "max_by", "min_by")
MATCH_NUMBER_COLUMN = "__cep_mn"
# aggregates whose value over the distinct values equals their value over all values
_DISTINCT_IRRELEVANT = ("min", "max", "bool_and", "bool_or", "max_by", "min_by")
# list aggregates DEFINE reads through a function of the list (_list_function)
LIST_AGGREGATES = ("array_agg", "collect_list", "collect_set", "listagg", "string_agg")
_SIZE_FUNCS = ("size", "cardinality", "array_size")
_LENGTH_FUNCS = ("length", "char_length", "character_length", "len")
_ELEMENT_FUNCS = ("element_at", "try_element_at")
LIST_FUNCTIONS_TEXT = ("size(), cardinality(), array_size(), array_contains(list, constant), "
                       "element_at/try_element_at(list, constant integer) "
                       "(array_agg/collect_list/collect_set) and length()/char_length() "
                       "(listagg/string_agg, without DISTINCT)")


def value_navigation(expr: Expr) -> Expr:
    """Rewrite first_value(x)/last_value(x) as FIRST(x)/LAST(x) (before bind_rows)."""
    if isinstance(expr, (FunctionCall, Aggregate)) and expr.name.lower() in (
            "first_value", "last_value") and len(expr.args) == 1:
        kind = "FIRST" if expr.name.lower() == "first_value" else "LAST"
        semantics = getattr(expr, "semantics", None)
        return Navigation(kind, value_navigation(expr.args[0]), 0, semantics, expr.pos)
    kids = children(expr)
    return rebuild(expr, [value_navigation(k) for k in kids]) if kids else expr


def supported_aggregates() -> str:
    """The aggregate names MEASURES accept, for error messages."""
    return ", ".join(sorted(GATHERED))


def normalize_aggregates(expr: Expr, derived: DerivedColumns, *, final_default: bool,
                         known_vars: set[str], in_define: bool,
                         members: Callable[[str | None], set[str]] | None = None) -> Expr:
    """Replace every Aggregate by an AggregateValue over a derived column, or (MEASURES)
    by a GatheredAggregate when the matcher's running accumulators cannot compute it.
    ``members(var)``: the primary variables of a variable, subset or (None) the match;
    needed where CLASSIFIER() in an argument splits the rows per primary variable."""
    if isinstance(expr, Aggregate):
        if in_define:
            return _normalize_define(expr, derived, known_vars, members)
        return _normalize(expr, derived, final_default, known_vars, members)
    if in_define and isinstance(expr, FunctionCall) and expr.args and \
            isinstance(expr.args[0], Aggregate) and expr.args[0].name.lower() in LIST_AGGREGATES:
        if expr.name.lower() in _ELEMENT_FUNCS and len(expr.args) == 2:
            return _element(expr, derived, known_vars, members)
        return normalize_aggregates(_list_function(expr), derived, final_default=final_default,
                                    known_vars=known_vars, in_define=True, members=members)
    kids = children(expr)
    if not kids:
        return expr
    return rebuild(expr, [normalize_aggregates(k, derived, final_default=final_default,
                                               known_vars=known_vars, in_define=in_define,
                                               members=members)
                          for k in kids])


def _normalize(agg: Aggregate, derived: DerivedColumns, final_default: bool,
               known: set[str], members: Callable[[str | None], set[str]] | None) -> Expr:
    name = agg.name.lower()
    if name not in GATHERED:
        raise CepUnsupportedError(f"aggregate {agg.name}() is not supported; supported: "
                                  f"{supported_aggregates()}", pos=agg.pos)
    final = final_default if agg.semantics is None else agg.semantics == "FINAL"
    if agg.star_var is not None:
        var = agg.star_var or None
        _check_var(var, known, agg)
        return AggregateValue("COUNT_STAR", var, None, final, agg.pos)
    lo, hi = _ARITY.get(GATHERED[name], (1, 1))
    if not lo <= len(agg.args) <= hi:
        count = f"{lo}" if lo == hi else f"{lo} or {hi}"
        raise CepAnalysisError(f"{agg.name}() takes {count} argument{'s' if hi > 1 else ''}",
                               pos=agg.pos)
    var = _aggregate_variable(agg, known)
    row_local = not any(isinstance(n, (Classifier, MatchNumber)) for a in agg.args
                        for n in walk(a))
    if name in _NAMES and not agg.distinct and row_local:
        column = derived.name_for(_strip(agg.args[0]))
        return AggregateValue(_NAMES[name], var, column, final, agg.pos)
    func = GATHERED[name]
    if func == "listagg" and len(agg.args) == 2 and not (
            isinstance(agg.args[1], Literal) and agg.args[1].type in ("string", "null")):
        raise CepAnalysisError("listagg() delimiter must be a string constant",
                               pos=getattr(agg.args[1], "pos", agg.pos))
    if func == "listagg":  # Spark casts the values to STRING
        agg = replace(agg, args=(Cast(agg.args[0], "string", agg.pos),) + agg.args[1:])
    uses_label = any(isinstance(n, Classifier) for a in agg.args for n in walk(a))
    labels = sorted(members(var)) if uses_label else [var]
    parts = []
    for label in labels:
        args = tuple(_residual(_with_label(a, label) if uses_label else a, derived)
                     for a in agg.args)
        parts.append((label, args))
    rows_column = derived.name_for(Literal(True, "bool"))
    return GatheredAggregate(func, agg.distinct, tuple(parts), rows_column, final, agg.pos)


def _normalize_define(agg: Aggregate, derived: DerivedColumns, known: set[str],
                      members: Callable[[str | None], set[str]]) -> Expr:
    """DEFINE aggregates: the matcher's running accumulators, with count_if and
    bool_and/bool_or rewritten over counts of derived indicator columns. CLASSIFIER() in
    an argument gives one derived column per primary variable (the label is a constant
    on that variable's rows) and the accumulator reads the column of each row's label;
    MATCH_NUMBER() in a larger argument leaves the argument to the condition VM, computed
    at each aggregated row (alone, count/sum/avg/min/max of it fold)."""
    name = agg.name.lower()
    if name in LIST_AGGREGATES:
        raise CepUnsupportedError(
            f"{agg.name}() in DEFINE is supported only as the list argument of "
            f"{LIST_FUNCTIONS_TEXT}", pos=agg.pos)
    if name not in DEFINE_AGGREGATES:
        raise CepUnsupportedError(
            f"{agg.name}() is not supported in DEFINE; DEFINE supports "
            f"{', '.join(DEFINE_AGGREGATES)} (with or without DISTINCT), and lists in "
            f"{LIST_FUNCTIONS_TEXT}", pos=agg.pos)
    if agg.distinct and GATHERED[name] in _DISTINCT_IRRELEVANT:
        agg = replace(agg, distinct=False)  # the same value over the distinct values
    if agg.semantics == "FINAL":
        raise CepAnalysisError("FINAL semantics are not allowed in DEFINE", pos=agg.pos)
    if agg.star_var is not None:
        var = agg.star_var or None
        _check_var(var, known, agg)
        return AggregateValue("COUNT_STAR", var, None, False, agg.pos)
    arity = 2 if name in ("max_by", "min_by") else 1
    if len(agg.args) != arity:
        raise CepAnalysisError(
            f"{agg.name}() takes {'two arguments' if arity == 2 else 'one argument'}",
            pos=agg.pos)
    var = _aggregate_variable(agg, known)
    if isinstance(agg.args[0], MatchNumber) and name in _CONSTANT_FOLDS:
        return _match_number_fold(agg, name, var)
    _check_define_argument(agg)
    args = tuple(_strip(a) for a in agg.args)
    labels = sorted(members(var)) if any(isinstance(n, Classifier) for a in args
                                         for n in walk(a)) else []

    def over(func: str, make=lambda a: a) -> AggregateValue:
        """func over make(argument) (max_by/min_by: over both arguments)."""
        if any(isinstance(n, MatchNumber) for a in args for n in walk(a)):
            computed = tuple(_at_row(make(a), derived, known) for a in args)
            names = [None if c is not None else derived.name_for(make(a))
                     for a, c in zip(args, computed)]
            return AggregateValue(func, var, names[0], False, agg.pos,
                                  by=names[1] if len(names) > 1 else None, computed=computed)
        per_label = _label_columns(args, labels, derived, make)
        _, column, by = per_label[0] if per_label else _label_columns(args, [var], derived,
                                                                      make)[0]
        return AggregateValue(func, var, column, False, agg.pos, by=by, distinct=agg.distinct,
                              per_label=per_label if labels else ())

    if name in ("max_by", "min_by"):  # Spark's MaxBy/MinBy: aggregates.pxd _agg_step_by
        return over(name.upper())
    if GATHERED[name].startswith(("stddev", "var")):
        return over(GATHERED[name].upper())
    if name in _NAMES:
        return over(_NAMES[name])

    def indicator(cond: Expr) -> Expr:
        return Case(None, ((cond, Literal(1, "int")),), None)

    if name == "count_if":  # DISTINCT: count(DISTINCT 1 or NULL), as Spark's rewrite
        return over("COUNT", indicator)
    zero = Literal(0, "int")
    if name in ("bool_and", "every"):  # TRUE when no non-null row is FALSE
        decided = BinaryOp("=", over("COUNT", lambda a: indicator(UnaryOp("NOT", a))), zero,
                           agg.pos)
    else:  # bool_or: some non-null row is TRUE
        decided = BinaryOp(">", over("COUNT", indicator), zero, agg.pos)
    no_rows = BinaryOp("=", over("COUNT"), zero, agg.pos)
    return Case(None, ((no_rows, Literal(None, "null")),), decided, agg.pos)


def _label_columns(args: tuple[Expr, ...], labels: list, derived: DerivedColumns,
                   make: Callable[[Expr], Expr] = lambda a: a) -> tuple:
    """(label, column, ordering column) of make(each argument) on the rows of each label,
    CLASSIFIER() read as that label (a constant there: the columns are row-local)."""
    def columns(label) -> tuple:
        named = [derived.name_for(make(_with_label(a, label))) for a in args]
        return (label, named[0], named[1] if len(named) > 1 else None)
    return tuple(columns(label) for label in labels)


def _check_define_argument(agg: Aggregate) -> None:
    """A DEFINE aggregate's argument may not read MATCH_NUMBER() under DISTINCT: the
    listed rows are compared by precomputed columns."""
    numbers = [n for arg in agg.args for n in walk(arg) if isinstance(n, MatchNumber)]
    if agg.distinct and numbers:
        raise CepUnsupportedError(
            f"{agg.name}(DISTINCT ...) in DEFINE cannot read MATCH_NUMBER() in its argument; "
            "without DISTINCT it can, and MEASURES take DISTINCT over MATCH_NUMBER()",
            pos=numbers[0].pos)


def _at_row(arg: Expr, derived: DerivedColumns, known: set[str]) -> Expr | None:
    """An argument reading MATCH_NUMBER() (SQL:2016 mode: the attempt's number, known
    only while matching) as the expression the condition VM computes at each aggregated
    row: its row-local parts derived columns of that row, CLASSIFIER() (of any variable:
    the aggregated row is one of its rows) that row's label. None: a row-local argument
    (neither of them), read as a derived column."""
    if not any(isinstance(n, (MatchNumber, Classifier)) for n in walk(arg)):
        return None
    own = transform(arg, lambda e: Classifier(None, e.pos) if isinstance(e, Classifier)
                    else None)
    bound = bind_rows(own, in_define=True, final_default=False, known_vars=known)
    return localize(bound, derived)


def null_match_number_in_aggregates(expr: Expr) -> Expr:
    """CEP mode: MATCH_NUMBER() is NULL in DEFINE (reference rule R2), so inside an
    aggregate's arguments it is a BIGINT NULL and the argument stays row-local."""
    def null(e: Expr) -> Expr | None:
        return Cast(Literal(None, "null", e.pos), "bigint", e.pos) \
            if isinstance(e, MatchNumber) else None

    if isinstance(expr, Aggregate):
        return transform(expr, null)
    kids = children(expr)
    return rebuild(expr, [null_match_number_in_aggregates(k) for k in kids]) if kids else expr


_CONSTANT_FOLDS = ("count", "sum", "avg", "mean", "min", "max")


def _match_number_fold(agg: Aggregate, name: str, var: str | None) -> Expr:
    """count / sum / avg / min / max of MATCH_NUMBER() in DEFINE. The number is the same on
    every row of one attempt (the match it would be), so the aggregate is a function of
    it and of the row count (never NULL: count counts every row; sum is the number times
    the count; avg, min and max are the number itself; NULL over no rows, as Spark's)."""
    number, pos = agg.args[0], agg.pos
    rows = AggregateValue("COUNT_STAR", var, None, False, pos)
    zero, one = Literal(0, "int", pos), Literal(1, "int", pos)
    none = BinaryOp("=", rows, zero, pos)
    if name == "count":
        return Case(None, ((none, zero),), one, pos) if agg.distinct else rows
    if name == "sum" and not agg.distinct:
        value: Expr = BinaryOp("*", number, rows, pos)
    elif name in ("avg", "mean"):
        value = Cast(number, "double", pos)
    else:
        value = number
    return Case(None, ((none, Literal(None, "null", pos)),), value, pos)


def _list_function(call: FunctionCall) -> Expr:
    """A function of a list aggregate in DEFINE, as running aggregates over the same rows
    (collect_list skips NULLs and is [] over no rows, so Spark's size/array_contains of it
    are counts; listagg is NULL over no non-NULL values)."""
    name, agg = call.name.lower(), call.args[0]
    distinct = agg.distinct or agg.name.lower() == "collect_set"
    is_text = agg.name.lower() in ("listagg", "string_agg")
    pos = call.pos

    def unsupported() -> CepUnsupportedError:
        return CepUnsupportedError(
            f"{call.name}({agg.name}(...)) is not supported in DEFINE; DEFINE reads a list "
            f"aggregate through {LIST_FUNCTIONS_TEXT}; MEASURES take the list itself",
            pos=pos)

    if agg.star_var is not None or not agg.args:
        raise unsupported()
    value = agg.args[0]

    def over(func: str, arg: Expr, distinct_: bool = False) -> Aggregate:
        return Aggregate(func, (arg,), agg.semantics, distinct_, None, agg.pos)

    if not is_text and name in _SIZE_FUNCS and len(call.args) == 1:
        return over("count", value, distinct)
    if not is_text and name == "array_contains" and len(call.args) == 2:
        probe = call.args[1]
        if not isinstance(probe, Literal):
            raise CepUnsupportedError(
                "array_contains(array_agg(...), v) in DEFINE needs a constant v",
                pos=getattr(probe, "pos", pos))
        if probe.value is None:
            return Literal(None, "null", pos)
        hits = over("count_if", BinaryOp("=", value, probe, pos))
        return BinaryOp(">", hits, Literal(0, "int", pos), pos)
    if is_text and name in _LENGTH_FUNCS and len(call.args) == 1 and not distinct:
        sep = agg.args[1] if len(agg.args) > 1 else Literal("", "string", pos)
        if not (isinstance(sep, Literal) and sep.type in ("string", "null")):
            raise CepAnalysisError("listagg() delimiter must be a string constant",
                                   pos=getattr(sep, "pos", agg.pos))
        n = over("count", value)
        chars = over("sum", FunctionCall("length", (Cast(value, "string", pos),), pos))
        seps = BinaryOp("*", BinaryOp("-", n, Literal(1, "int", pos), pos),  # NULL: none
                        Literal(len(sep.value or ""), "int", pos), pos)
        return Case(None, ((BinaryOp("=", n, Literal(0, "int", pos), pos),
                            Literal(None, "null", pos)),), BinaryOp("+", chars, seps, pos), pos)
    raise unsupported()


def _element(call: FunctionCall, derived: DerivedColumns, known: set[str],
             members: Callable[[str | None], set[str]]) -> Expr:
    """element_at(list, i) (1-based, negative from the end; out of range an error under
    ANSI, else NULL) and try_element_at (NULL): the evaluators list the rows matched so
    far and pick the i-th non-NULL (distinct) value."""
    agg = call.args[0]
    distinct = agg.distinct or agg.name.lower() == "collect_set"
    if agg.name.lower() in ("listagg", "string_agg") or agg.star_var is not None:
        raise CepUnsupportedError(f"{call.name}() of {agg.name}() is not supported in DEFINE",
                                  pos=call.pos)
    index = call.args[1]
    if isinstance(index, UnaryOp) and index.op == "-" and isinstance(index.operand, Literal) \
            and isinstance(index.operand.value, int):
        index = Literal(-index.operand.value, "int", index.pos)
    if not (isinstance(index, Literal) and index.type == "int"):
        raise CepUnsupportedError(
            f"{call.name}(array_agg(...), i) in DEFINE needs a constant integer i",
            pos=getattr(index, "pos", call.pos))
    i = index.value
    if i == 0:
        raise CepAnalysisError("[INVALID_INDEX_OF_ZERO] element_at index starts at 1",
                               pos=index.pos)
    if agg.semantics == "FINAL":
        raise CepAnalysisError("FINAL semantics are not allowed in DEFINE", pos=agg.pos)
    var = _aggregate_variable(agg, known)
    for node in walk(agg.args[0]):
        if isinstance(node, MatchNumber):
            raise CepUnsupportedError(
                f"{call.name}({agg.name}(...)) in DEFINE cannot read MATCH_NUMBER() in its "
                "argument (MEASURES can; size() and array_contains() of the list can)",
                pos=node.pos)
    arg = _strip(agg.args[0])
    labels = sorted(members(var)) if any(isinstance(n, Classifier) for n in walk(arg)) else []
    per_label = _label_columns((arg,), labels, derived)
    column = per_label[0][1] if per_label else derived.name_for(arg)
    return AggregateValue("ELEMENT", var, column, False, call.pos, distinct=distinct, index=i,
                          null_out_of_range=call.name != "element_at", per_label=per_label)


def _aggregate_variable(agg: Aggregate, known: set[str]) -> str | None:
    """The one variable the arguments qualify columns (or CLASSIFIER) with, else None."""
    qualified = set()
    for arg in agg.args:
        for node in walk(arg):
            if isinstance(node, (Navigation, Aggregate)):
                raise CepUnsupportedError(
                    f"{agg.name}() argument must be a row expression (columns, CLASSIFIER(), "
                    "MATCH_NUMBER()), not navigation or another aggregate",
                    pos=getattr(node, "pos", agg.pos))
            if isinstance(node, (ColumnRef, Classifier)) and node.var is not None:
                qualified.add(node.var)
    if len(qualified) > 1:
        raise CepAnalysisError(
            f"{agg.name}() argument must reference a single pattern variable, found "
            f"{', '.join(sorted(qualified))}", pos=agg.pos)
    var = next(iter(qualified)) if qualified else None
    _check_var(var, known, agg)
    return var


def _with_label(expr: Expr, label: str | None) -> Expr:
    """CLASSIFIER() of an aggregated row, on the row list of one primary variable, is
    that variable's name (a constant): the argument becomes row-local again."""
    if isinstance(expr, Classifier):
        return Literal(label, "string", expr.pos)
    kids = children(expr)
    return rebuild(expr, [_with_label(k, label) for k in kids]) if kids else expr


def _residual(expr: Expr, derived: DerivedColumns) -> Expr:
    """The argument over derived row-local columns and the match-number column."""
    if isinstance(expr, MatchNumber):
        return ColumnRef(None, MATCH_NUMBER_COLUMN, expr.pos)
    if isinstance(expr, Literal):
        return expr
    if not any(isinstance(n, MatchNumber) for n in walk(expr)):
        return ColumnRef(None, derived.name_for(_strip(expr)), getattr(expr, "pos", None))
    kids = children(expr)
    return rebuild(expr, [_residual(k, derived) for k in kids])


def _strip(expr: Expr) -> Expr:
    if isinstance(expr, ColumnRef):
        return ColumnRef(None, expr.column, expr.pos)
    kids = children(expr)
    return rebuild(expr, [_strip(k) for k in kids]) if kids else expr


def _check_var(var: str | None, known: set[str], agg: Aggregate) -> None:
    if var is not None and var not in known:
        raise CepAnalysisError(f"unknown pattern variable {var}", pos=agg.pos)
