"""Where a run-time error points when the evaluator that raised it knows no position.

Why: the condition VM and Arrow's kernels report what went wrong (DIVIDE_BY_ZERO,
CAST_INVALID_INPUT, overflow) but not which expression; the clause's spec knows where each
DEFINE and MEASURES expression is written, so the error points at the first expression
of the kind that can raise it (a division, a cast), else at the first DEFINE condition.
"""
from __future__ import annotations

from cepsql.algebra.expressions import BinaryOp, Cast, Expr, walk
from cepsql.errors import CepError

_RAISERS = {"DIVIDE_BY_ZERO": lambda e: isinstance(e, BinaryOp) and e.op in ("/", "%", "div"),
            "CAST_INVALID_INPUT": lambda e: isinstance(e, Cast),
            "CAST_OVERFLOW": lambda e: isinstance(e, Cast)}


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
