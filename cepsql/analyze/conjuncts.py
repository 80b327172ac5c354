"""Split each DEFINE into conjuncts and classify them by the variables they read.

The planner's model has two kinds of conditions: single-row filters that decide which
rows are events of a variable's "type" (they set the arrival rate), and predicates
between two variables (they become JQPG join predicates). A top-level conjunct of a
DEFINE is one of those when every row it reads is the plain current row of a primary
variable (``v.col``, ``LAST(v.col)`` with offset 0, or an unqualified column meaning the
defined variable). Anything else — PREV/NEXT, FIRST, offsets, aggregates, CLASSIFIER,
subsets, three or more variables — is left out of the estimate (reported in notes):
the planner treats it as not filtering, which only makes costs conservative.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from cepsql.algebra.expressions import (
    Aggregate,
    AggregateValue,
    BinaryOp,
    Classifier,
    ColumnRef,
    Expr,
    FunctionCall,
    Literal,
    MatchNumber,
    Navigation,
    RowValue,
    children,
    walk,
)
from cepsql.algebra.rowrefs import bind_rows, rebuild
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.errors import CepError

COLUMN_PREFIX = "__cep_c"  # a raw input column in the prepared sample
LEFT_PREFIX = "__cep_l"    # the first variable's row of a pair
RIGHT_PREFIX = "__cep_r"   # the second variable's row of a pair


@dataclass
class ConditionSplit:
    """DEFINE conditions grouped for estimation.

    unary: per variable, row-local conjuncts over unqualified input columns.
    pairs: per (first, second) variable pair in pattern order, conjuncts whose columns
        are renamed to ``__cep_l<k>`` (first variable's row) / ``__cep_r<k>`` (second's),
        k indexing ``columns``.
    columns: input column names the pair conjuncts read (as written; resolved later).
    ignored: descriptions of conjuncts that take no part in the estimate.
    """
    variables: list[str]
    unary: dict[str, list[Expr]] = field(default_factory=dict)
    pairs: dict[tuple[str, str], list[Expr]] = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)

    def column_index(self, name: str) -> int:
        """Index of a pair column, interned case-insensitively (Spark's resolution)."""
        for k, existing in enumerate(self.columns):
            if existing.lower() == name.lower():
                return k
        self.columns.append(name)
        return len(self.columns) - 1


def split_conjuncts(expr: Expr) -> list[Expr]:
    """Top-level AND operands, left to right."""
    if isinstance(expr, BinaryOp) and expr.op.upper() == "AND":
        return split_conjuncts(expr.left) + split_conjuncts(expr.right)
    return [expr]


def analyze_defines(spec: MatchRecognizeSpec) -> ConditionSplit:
    """Classify every DEFINE conjunct of spec (see the module docstring)."""
    variables = spec.variables
    split = ConditionSplit(variables=list(variables),
                           unary={v: [] for v in variables})
    order = {v: i for i, v in enumerate(variables)}
    known = set(variables) | set(spec.subsets)
    for var, cond in spec.defines.items():
        if var not in order:
            continue  # a DEFINE of a variable the pattern never uses
        for conjunct in split_conjuncts(cond):
            _classify(var, conjunct, split, order, known)
    return split


def _classify(var: str, conjunct: Expr, split: ConditionSplit, order: dict[str, int],
              known: set[str]) -> None:
    label = f"{var}: {describe_conjunct(conjunct)}"
    try:
        bound = bind_rows(conjunct, in_define=True, final_default=False, known_vars=known)
    except CepError:
        split.ignored.append(label + " (not a plain row condition)")
        return
    reads = _plain_reads(var, bound, order)
    if reads is None:
        split.ignored.append(label + " (navigation, aggregate, CLASSIFIER or subset)")
        return
    if len(reads) <= 1:
        split.unary[var].append(strip_row_values(bound))
    elif len(reads) == 2:
        first, second = sorted(reads, key=order.__getitem__)
        prefix = {first: LEFT_PREFIX, second: RIGHT_PREFIX}
        split.pairs.setdefault((first, second), []).append(
            _rename(bound, var, prefix, split))
    else:
        split.ignored.append(label + " (references more than two variables)")


def _plain_reads(var: str, bound: Expr, order: dict[str, int]) -> set[str] | None:
    """Primary variables read at their current row, or None if any read is not plain."""
    reads: set[str] = set()
    for node in walk(bound):
        if isinstance(node, (Aggregate, AggregateValue, MatchNumber, Classifier)):
            return None
        if isinstance(node, RowValue):
            ref = node.ref
            if (ref.logical != "LAST" or ref.logical_offset or ref.physical_offset
                    or any(isinstance(n, Classifier) for n in walk(node.value))):
                return None
            target = var if ref.var is None else ref.var
            if target not in order:
                return None  # a SUBSET name: several variables at once
            reads.add(target)
    return reads


def strip_row_values(expr: Expr) -> Expr:
    """Replace each RowValue by its row-local value (unqualified columns)."""
    if isinstance(expr, RowValue):
        return expr.value
    kids = children(expr)
    return rebuild(expr, [strip_row_values(k) for k in kids]) if kids else expr


def _rename(expr: Expr, var: str, prefix: dict[str, str], split: ConditionSplit) -> Expr:
    """Pair form: each row read becomes a column of the left or right row of the pair."""
    if isinstance(expr, RowValue):
        side = prefix[var if expr.ref.var is None else expr.ref.var]
        return _columns_to(expr.value, side, split)
    kids = children(expr)
    return rebuild(expr, [_rename(k, var, prefix, split) for k in kids]) if kids else expr


def _columns_to(expr: Expr, side: str, split: ConditionSplit) -> Expr:
    if isinstance(expr, ColumnRef):
        return ColumnRef(None, f"{side}{split.column_index(expr.column)}", expr.pos)
    kids = children(expr)
    return rebuild(expr, [_columns_to(k, side, split) for k in kids]) if kids else expr


def describe_conjunct(expr: Expr) -> str:
    """Short SQL-like text of a conjunct for notes (EXPLAIN shows them)."""
    text = _text(expr)
    return text if len(text) <= 120 else text[:117] + "..."


def _text(e: Expr) -> str:
    if isinstance(e, ColumnRef):
        return e.column if e.var is None else f"{e.var}.{e.column}"
    if isinstance(e, Literal):
        return repr(e.value) if e.type == "string" else str(e.value)
    if isinstance(e, BinaryOp):
        return f"({_text(e.left)} {e.op} {_text(e.right)})"
    if isinstance(e, Navigation):
        return f"{e.kind}({_text(e.arg)}, {e.offset})"
    if isinstance(e, (FunctionCall, Aggregate)):
        return f"{e.name}({', '.join(_text(a) for a in e.args)})"
    if isinstance(e, Classifier):
        return f"CLASSIFIER({e.var or ''})"
    return type(e).__name__ + "(" + ", ".join(_text(k) for k in children(e)) + ")"
