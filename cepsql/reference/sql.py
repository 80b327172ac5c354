"""Pure-Python reference evaluator of SQL:2016 MATCH_RECOGNIZE: the test oracle.

Small and obviously correct, not fast. Every compiled evaluator, plan and backend
must produce the same rows as ``evaluate_reference`` (as a multiset).

Steps: partition the rows, order each partition, then at each start row find the
preferred match with a backtracking matcher (``reference_pattern``), compute the
measures with an IR interpreter (``reference_expr``) and lay out the output rows.
"""
from __future__ import annotations

import math
import sys
from functools import cmp_to_key

import pyarrow as pa

from cepsql.algebra.expressions import ColumnRef, Expr
from cepsql.algebra.rowrefs import bind_rows
from cepsql.algebra.spec import MatchRecognizeSpec, SortKey
from cepsql.errors import CepRuntimeError, CepUnsupportedError
from cepsql.reference.expr import EvalContext, compare, evaluate, in_variable
from cepsql.reference.pattern import Labels, PatternMatcher, SearchBudgetExceeded

__all__ = ["evaluate_reference", "SearchBudgetExceeded", "DEFAULT_MAX_STEPS"]

DEFAULT_MAX_STEPS = 2_000_000


def evaluate_reference(spec: MatchRecognizeSpec, table: pa.Table, *,
                       max_steps: int | None = DEFAULT_MAX_STEPS) -> tuple[list[str], list[tuple]]:
    """(output column names, output rows) of ``spec`` over ``table`` (SQL:2016 mode).

    Partitions come out in no particular order; callers compare multisets of rows.
    ``max_steps`` bounds the backtracking search per partition (SearchBudgetExceeded).
    """
    if spec.strategy is not None:
        raise CepUnsupportedError(
            f"the reference evaluator covers SQL:2016 mode only, not STRATEGY {spec.strategy}")
    rows = table.to_pylist()
    columns = list(table.column_names)
    query = ReferenceQuery(spec, columns)
    out: list[tuple] = []
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 20_000 + 50 * len(rows)))
    try:
        for partition in partitioned_rows(spec, rows, query.colmap):
            out.extend(_evaluate_partition(query, partition, max_steps))
    finally:
        sys.setrecursionlimit(old_limit)
    return query.output_names, out


# --- the query, prepared once ------------------------------------------------------

class ReferenceQuery:
    """The spec with DEFINE/MEASURES bound to row references and the output layout."""

    def __init__(self, spec: MatchRecognizeSpec, columns: list[str]):
        self.spec = spec
        self.columns = columns
        self.colmap = {c.lower(): c for c in columns}
        self.subsets = {name: frozenset(vs) for name, vs in spec.subsets.items()}
        self.known = frozenset(spec.variables) | frozenset(spec.subsets) | frozenset(spec.defines)
        one_row = spec.rows_per_match == "ONE"
        self.defines = {v: bind_rows(e, in_define=True, final_default=False,
                                     known_vars=set(self.known))
                        for v, e in spec.defines.items()}
        self.measures = [(m.name, bind_rows(m.expr, in_define=False, final_default=one_row,
                                            known_vars=set(self.known)))
                         for m in spec.measures]
        self._layout(spec, columns)

    def _layout(self, spec: MatchRecognizeSpec, columns: list[str]) -> None:
        """Output columns: partition keys, [order-by columns], measures, [other input columns].
        A key column written twice is shown twice (Trino: ``ORDER BY id ASC, id DESC``)."""
        used = {self._input_name(k.expr) for k in spec.partition_by} - {None}
        self.order_columns: list[str] = []
        for key in spec.order_by:
            name = self._input_name(key.expr)
            if name is not None:
                used.add(name)
                self.order_columns.append(name)
        self.rest_columns = [c for c in columns if c not in used]
        names = [k.name for k in spec.partition_by]
        if spec.rows_per_match == "ALL":
            names += self.order_columns
        names += [m.name for m in spec.measures]
        if spec.rows_per_match == "ALL":
            names += self.rest_columns
        self.output_names = names

    def _input_name(self, expr: Expr) -> str | None:
        """The input column a plain column reference names (None for an expression)."""
        if isinstance(expr, ColumnRef):
            return self.colmap.get(expr.column.lower(), expr.column)
        return None

    def context(self, rows: list[dict], **kw) -> EvalContext:
        return EvalContext(rows=rows, subsets=self.subsets, known_vars=self.known,
                           colmap=self.colmap, **kw)


# --- partitioning and ordering -----------------------------------------------------

def _key_value(v: object) -> object:
    """A dict-safe partition key component (every NaN is the same key)."""
    return ("NaN",) if isinstance(v, float) and math.isnan(v) else v


def partitioned_rows(spec: MatchRecognizeSpec, rows: list[dict], colmap: dict[str, str]) -> list[list[dict]]:
    """Rows grouped by the PARTITION BY values (nulls form their own group), each ordered."""
    ctx = EvalContext(rows=rows, colmap=colmap)
    groups: dict[tuple, list[dict]] = {}
    for i, row in enumerate(rows):
        key = tuple(_key_value(evaluate(k.expr, ctx, i)) for k in spec.partition_by)
        groups.setdefault(key, []).append(row)
    columns = list(colmap.values())
    return [ordered_rows(spec.order_by, part, columns, colmap) for part in groups.values()]


def _compare_nullable(a: object, b: object, ascending: bool, nulls_first: bool) -> int:
    if a is None or b is None:
        if a is None and b is None:
            return 0
        return (-1 if a is None else 1) * (1 if nulls_first else -1)
    c = compare(a, b)
    return c if ascending else -c


def ordered_rows(order_by: tuple[SortKey, ...], part: list[dict], columns: list[str],
                 colmap: dict[str, str]) -> list[dict]:
    """The partition sorted by ORDER BY, ties broken by every input column (ASC, NULLS FIRST)."""
    ctx = EvalContext(rows=part, colmap=colmap)
    keys = [tuple(evaluate(k.expr, ctx, i) for k in order_by) for i in range(len(part))]

    def cmp(i: int, j: int) -> int:
        for key, a, b in zip(order_by, keys[i], keys[j]):
            c = _compare_nullable(a, b, key.ascending, key.effective_nulls_first)
            if c:
                return c
        for col in columns:
            c = _compare_nullable(part[i][col], part[j][col], True, True)
            if c:
                return c
        return 0

    return [part[i] for i in sorted(range(len(part)), key=cmp_to_key(cmp))]


# --- matching and output -------------------------------------------------------------

def _evaluate_partition(q: ReferenceQuery, rows: list[dict], max_steps: int | None) -> list[tuple]:
    """All output rows of one ordered partition."""
    spec = q.spec

    def accept(start: int, row: int, labels: tuple[str, ...]) -> bool:
        cond = q.defines.get(labels[-1])
        if cond is None:
            return True
        ctx = q.context(rows, start=start, labels=labels, current=row,
                        match_number=match_number + 1, in_define=True)
        return evaluate(cond, ctx) is True

    matcher = PatternMatcher(spec.pattern, len(rows), accept, max_steps)
    keys = partition_values(q, rows)
    out: list[tuple] = []
    pos, match_number, covered = 0, 0, -1  # covered: last row of any match so far
    while pos < len(rows):
        labels = matcher.match(pos)
        if labels is None:
            if spec.rows_per_match == "ALL" and spec.all_rows_option == "WITH_UNMATCHED" \
                    and pos > covered:
                out.append(unmatched_row(q, rows, keys, pos))
            pos += 1
            continue
        match_number += 1
        out.extend(match_rows(q, rows, keys, pos, labels, match_number))
        covered = max(covered, pos + len(labels) - 1)
        pos = next_start(spec, pos, labels)
    return out


def partition_values(q: ReferenceQuery, rows: list[dict]) -> tuple:
    if not rows:
        return ()
    ctx = q.context(rows)
    return tuple(evaluate(k.expr, ctx, 0) for k in q.spec.partition_by)


def next_start(spec: MatchRecognizeSpec, start: int, labels: Labels) -> int:
    """Where matching resumes after a match (AFTER MATCH SKIP)."""
    if not labels:
        return start + 1  # an empty match resumes at the next row, whatever the SKIP
    skip = spec.after_match_skip
    if skip.kind == "PAST_LAST_ROW":
        return start + len(labels)
    if skip.kind == "TO_NEXT_ROW":
        return start + 1
    subsets = {n: frozenset(vs) for n, vs in spec.subsets.items()}
    what = f"AFTER MATCH SKIP TO {'FIRST' if skip.kind == 'TO_FIRST' else 'LAST'} {skip.var}"
    hits = [i for i, (v, _) in enumerate(labels) if in_variable(v, skip.var, subsets)]
    if not hits:
        raise CepRuntimeError(
            f"{what}: variable {skip.var} is not present in the match",
            pos=skip.pos)
    target = hits[0] if skip.kind == "TO_FIRST" else hits[-1]
    if target == 0:
        raise CepRuntimeError(
            f"{what}: cannot skip to the first row of the match "
            "(it would loop forever)", pos=skip.pos)
    return start + target


def _measures(q: ReferenceQuery, rows: list[dict], start: int, labels: tuple[str, ...],
              current: int | None, match_number: int | None) -> list[object]:
    ctx = q.context(rows, start=start, labels=labels, current=current,
                    final_default=q.spec.rows_per_match == "ONE", match_number=match_number)
    return [evaluate(expr, ctx) for _, expr in q.measures]


def match_rows(q: ReferenceQuery, rows: list[dict], keys: tuple, start: int, labels: Labels,
                match_number: int) -> list[tuple]:
    """Output rows of one match (ONE ROW: one row; ALL ROWS: one per non-excluded row)."""
    variables = tuple(v for v, _ in labels)
    if q.spec.rows_per_match == "ONE":
        current = start + len(labels) - 1 if labels else None
        return [keys + tuple(_measures(q, rows, start, variables, current, match_number))]
    if not labels:
        if q.spec.all_rows_option == "OMIT_EMPTY":
            return []
        measures = _measures(q, rows, start, (), None, match_number)
        return [all_rows_row(q, rows[start], keys, measures)]
    out = []
    for i, (_, excluded) in enumerate(labels):
        if not excluded:
            measures = _measures(q, rows, start, variables, start + i, match_number)
            out.append(all_rows_row(q, rows[start + i], keys, measures))
    return out


def unmatched_row(q: ReferenceQuery, rows: list[dict], keys: tuple, pos: int) -> tuple:
    return all_rows_row(q, rows[pos], keys, [None] * len(q.measures))


def all_rows_row(q: ReferenceQuery, row: dict, keys: tuple, measures: list[object]) -> tuple:
    return (keys + tuple(row[c] for c in q.order_columns) + tuple(measures)
            + tuple(row[c] for c in q.rest_columns))
