"""Where a run-time error points when the evaluator that raised it knows no position.

Why: the condition VM and Arrow's kernels report what went wrong (DIVIDE_BY_ZERO,
CAST_INVALID_INPUT, overflow) but not which expression; the clause's spec knows where each
DEFINE and MEASURES expression is written, so the error points at the first expression
of the kind that can raise it (a division, a cast), else at the first DEFINE condition.
Workers run far from the spec and the text (Spark tasks, a workload's shared pass): a
plan marked with ``sited_plan`` makes its workers tag such errors with an id
(errors.error_site) under which the caller keeps how to locate them.
"""
from __future__ import annotations

import re
from dataclasses import is_dataclass, replace

from cepsql.algebra.expressions import BinaryOp, Cast, Expr, FunctionCall, Literal, UnaryOp, walk
from cepsql.errors import CepError
from cepsql.exprs.spark_errors import TRY_FUNCTION

def _sum_or_avg(e: Expr) -> bool:
    """An aggregate whose running sum can overflow (the VM knows no offset for those)."""
    return isinstance(e, FunctionCall) and e.name.lower() in ("sum", "avg")


_RAISERS = {"DIVIDE_BY_ZERO": lambda e: isinstance(e, BinaryOp) and e.op in ("/", "%", "div"),
            "CAST_INVALID_INPUT": lambda e: isinstance(e, Cast),
            "CAST_OVERFLOW": lambda e: isinstance(e, Cast),
            "ARITHMETIC_OVERFLOW": _sum_or_avg,
            "NUMERIC_VALUE_OUT_OF_RANGE.WITH_SUGGESTION": _sum_or_avg,
            "INTERVAL_ARITHMETIC_OVERFLOW.WITH_SUGGESTION": _sum_or_avg}


def run_error_pos(message: str, spec) -> int | None:
    """The position of the expression in spec most likely to have raised message."""
    exprs: list[Expr] = list(spec.defines.values()) + [m.expr for m in spec.measures]
    for tag, raises in _RAISERS.items():
        if f"[{tag}]" in message:
            found = [n.pos for e in exprs for n in walk(e) if raises(n) and n.pos is not None]
            if found:
                return min(found)
    positions = [e.pos for e in spec.defines.values() if e.pos is not None]
    return min(positions) if positions else None


_BINARY_OPERATOR = re.compile(r"\] \S+ ([-+*]) \S+ caused overflow")
_CAST_TARGET = re.compile(r'cannot be cast to "([A-Z]+)')
_SMALL_TYPES = ("SMALLINT", "TINYINT", "SHORT", "BYTE")
_TYPE_ALIASES = {"INTEGER": "INT", "LONG": "BIGINT", "SHORT": "SMALLINT", "BYTE": "TINYINT"}


def _operator(op: str):
    return lambda e: isinstance(e, BinaryOp) and e.op.upper() == op


def _small_operator(op: str):
    """a SMALLINT / TINYINT op: no operand is a literal of a wider type (it would widen)."""
    def raises(e: Expr) -> bool:
        return _operator(op)(e) and not any(
            isinstance(x, Literal) and str(x.type).upper() not in _SMALL_TYPES
            for x in (e.left, e.right))
    return raises


def _negation(e: Expr) -> bool:
    return (isinstance(e, UnaryOp) and e.op == "-") or \
        (isinstance(e, FunctionCall) and e.name.lower() in ("abs", "negative"))


def _cast_to(target: str):
    def raises(e: Expr) -> bool:
        if not isinstance(e, Cast):
            return False
        to = re.split(r"[\s(]", str(e.to).strip().upper(), maxsplit=1)[0]
        return _TYPE_ALIASES.get(to, to) == _TYPE_ALIASES.get(target, target)
    return raises


def _message_raiser(message: str):
    """What kind of expression raised Spark's error message, told by its class and the
    operator or type it names; None for a message no expression kind is known to raise."""
    if "[BINARY_ARITHMETIC_OVERFLOW]" in message:
        found = _BINARY_OPERATOR.search(message)
        return _small_operator(found.group(1)) if found else None
    if "[ARITHMETIC_OVERFLOW]" in message:
        ops = [op for op, fn in TRY_FUNCTION.items() if f"'{fn}'" in message]
        return _operator(ops[0]) if ops else _negation
    if "[CAST_OVERFLOW]" in message:
        found = _CAST_TARGET.search(message)
        return _cast_to(found.group(1)) if found else None
    if "[DIVIDE_BY_ZERO]" in message:
        return lambda e: _operator("/")(e) or _operator("DIV")(e) or (
            isinstance(e, FunctionCall) and e.name.lower() == "div")
    if "[REMAINDER_BY_ZERO]" in message:
        return lambda e: _operator("%")(e) or (
            isinstance(e, FunctionCall) and e.name.lower() in ("mod", "pmod"))
    if "[NUMERIC_VALUE_OUT_OF_RANGE" in message:
        return lambda e: any(_operator(op)(e) for op in "+-*/%") or _cast_to("DECIMAL")(e)
    return None


def message_culprits(message: str, exprs) -> list[Expr]:
    """The sub-expressions of exprs, in order, that can have raised Spark's run-time error
    message. Why: Spark gives some errors (SMALLINT overflow, unary minus, CAST overflow)
    no query context; the message's class, operator and type are all there is to tell
    which expression of the user's it came from."""
    raises = _message_raiser(message)
    if raises is None:
        return []
    return [n for e in exprs for n in walk(e) if n.pos is not None and raises(n)]


def located_run_error(err: CepError, spec, sql: str) -> CepError:
    """err located in sql (its own position if it has one, else run_error_pos's)."""
    if err.line is not None or err.pos is not None:
        return err.with_sql(sql)
    return type(err)(err.message, sql=sql, pos=run_error_pos(err.message, spec))


def sited_plan(plan, site: str):
    """plan (changed in place: callers such as a workload's clause runner hold it) whose
    bind marks every worker config with ``error_site=site``, so the workers' CepErrors
    without a position carry site (errors.error_site). A plan that is no dataclass (a
    backend test's fake) is returned as it is."""
    bind = getattr(plan, "bind", None)
    if bind is None or not is_dataclass(plan):
        return plan
    bind = getattr(bind, "__wrapped__", bind)   # a plan sited again (a workload's replay)

    def sited_bind(schema):
        bound = bind(schema)
        if hasattr(bound.config, "error_site"):
            bound.config = replace(bound.config, error_site=site)
        return bound

    sited_bind.__wrapped__ = bind
    sited_bind.site = site
    plan.bind = sited_bind
    return plan


def plan_site(plan) -> str | None:
    """The error_site ``sited_plan`` gave plan (None: none): a plan derived from it (a
    workload's time-sliced clause) reports its errors at the same place."""
    return getattr(getattr(plan, "bind", None), "site", None)


def shared_column_sites(patterns, views: list[str]) -> dict[str, tuple[str | None, str]]:
    """Where the errors of a shared pass's prepared columns point: shared column name ->
    (error_site of the first view, in registration order, whose pattern reads it; a note
    naming the views that share it). patterns: a pass group's bound patterns (index into
    ``views``, inputs as (shared name, own name) pairs)."""
    readers: dict[str, list] = {}
    for p in sorted(patterns, key=lambda p: p.index):
        for shared, own in p.inputs:
            if shared != own:  # a prepared column (source columns keep their names)
                readers.setdefault(shared, []).append(p)
    sites = {}
    for name, ps in readers.items():
        bound = getattr(ps[0], "bound", None)
        site = getattr(getattr(bound, "config", None), "error_site", None)
        names = [views[p.index] for p in ps if p.index < len(views)]
        note = "" if len(names) < 2 else (
            f" (in a row-local column computed once for the views {', '.join(names)}; "
            f"located in {names[0]})")
        sites[name] = (site, note)
    return sites


def sited_column_error(err: CepError, site: str | None, note: str) -> CepError:
    """err, raised computing a shared prepared column, marked with that column's site
    (errors.error_site) and its note."""
    if err.line is not None or getattr(err, "site", None) is not None:
        return err
    found = type(err)(err.message + note, pos=err.pos)
    if site is not None:
        found.site = site
    return found
