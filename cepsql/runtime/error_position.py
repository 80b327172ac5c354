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

from dataclasses import is_dataclass, replace

from cepsql.algebra.expressions import BinaryOp, Cast, Expr, FunctionCall, walk
from cepsql.errors import CepError

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
    plan.bind = sited_bind
    return plan


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
