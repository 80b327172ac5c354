"""The matcher's steps on a slice of one clause's input, as rows of a table.

SQL:2016 mode: the reference search (``reference/pattern.py``: the standard's preference
order, failed states remembered) with an instrumented acceptor. Every row a variable is
tried on becomes a step: ``extended`` (its DEFINE held), ``failed`` (the first conjunct
that was not TRUE, with the values its navigations, aggregates and columns had at that
step), ``window`` (WITHIN cut the row), then ``pruned`` (a state already known to fail,
not explored again), ``end`` (the attempt needed ``row``, past the slice's last row),
``match`` (one per emitted match, on its last row) and ``skipped`` (a start row the AFTER
MATCH rule jumped over). An attempt is the search from one start row; it is named by that row.

The trace answers "what happened"; its matches are exactly the definition's, which the
engine is tested to produce (tests/test_trace.py compares them with the engine's).
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass

import pandas as pd

from cepsql.algebra.expressions import Aggregate, Expr, RowValue, walk
from cepsql.algebra.pattern import Var
from cepsql.algebra.spec import MatchRecognizeSpec, Window
from cepsql.analyze.conjuncts import split_conjuncts
from cepsql.debugging.conjunct_text import conjunct_text, operand_text
from cepsql.debugging.slice import PartitionSlice, partition_names
from cepsql.errors import CepRuntimeError, CepUnsupportedError
from cepsql.reference.cep import Span, time_micros
from cepsql.reference.expr import ReferenceUnsupported, evaluate
from cepsql.reference.pattern import Labels, PatternMatcher, SearchBudgetExceeded
from cepsql.reference.sql import ReferenceQuery, next_start

MAX_STEPS = 20_000  # a trace longer than this cannot be read: narrow the slice

#: what a step did (the ``event`` column)
EXTENDED, FAILED, WINDOW, PRUNED, END, MATCH, SKIPPED = (
    "extended", "failed", "window", "pruned", "end", "match", "skipped")


@dataclass(frozen=True)
class Step:
    """One step of the trace (``row``: position in the ordered partition)."""
    partition: tuple
    row: int
    attempt: int
    variable: str | None
    event: str
    path: str            # variables of the attempt's rows so far, this row's included
    conjunct: str | None = None  # the first conjunct that was not TRUE
    values: str | None = None    # its operands' values at this step
    match_number: int | None = None
    path_rows: tuple[int, ...] = ()  # the rows of ``path``


class Recorder:
    """Collects steps up to the cap."""

    def __init__(self, max_steps: int):
        self.max_steps = max_steps
        self.steps: list[Step] = []

    def add(self, step: Step) -> None:
        if len(self.steps) >= self.max_steps:
            raise CepRuntimeError(
                f"the trace has more than {self.max_steps} steps: narrow the slice "
                "(partition=..., rows=(first, stop)) or raise max_steps")
        self.steps.append(step)


class TracingMatcher(PatternMatcher):
    """The reference matcher, reporting states it skips as known failures and attempts
    that need a row past the slice."""

    def __init__(self, pattern, n_rows: int, accept, on_state, max_steps: int):
        super().__init__(pattern, n_rows, accept, max_steps)
        self.on_state = on_state

    def _run(self, node, pos: int, labels: Labels, excl: bool, cont):
        if isinstance(node, Var):
            if self.failed_before(node, pos, labels, excl, cont):
                self.on_state(PRUNED, node.name, pos, labels)
            elif pos >= self.n_rows:
                self.on_state(END, node.name, pos, labels)
        return super()._run(node, pos, labels, excl, cont)


def define_conjuncts(query: ReferenceQuery, sql: str
                     ) -> dict[str, list[tuple[Expr, str, list[tuple[str, Expr]]]]]:
    """Each variable's DEFINE as bound conjuncts with their user text and operands."""
    return {var: [(c, conjunct_text(sql, c), conjunct_operands(sql, c))
                  for c in split_conjuncts(bound)]
            for var, bound in query.defines.items()}


def conjunct_operands(sql: str, conjunct: Expr) -> list[tuple[str, Expr]]:
    """The navigations, aggregates and columns a conjunct reads, by their text (once each)."""
    seen: dict[str, Expr] = {}
    for e in walk(conjunct):
        if isinstance(e, (RowValue, Aggregate)) and e.pos is not None and sql:
            seen.setdefault(operand_text(sql, e.pos), e)
    return list(seen.items())


def trace_partition(query: ReferenceQuery, part: PartitionSlice, sql: str,
                    recorder: Recorder) -> None:
    """Every step of the SQL:2016 search over one partition's slice, into recorder."""
    spec = query.spec
    rows, first = part.rows, part.first
    conjuncts = define_conjuncts(query, sql)
    window = _Window(spec, query, rows)
    state = {"start": 0, "number": 0}

    def record(event: str, variable: str | None, row: int, names: tuple[str, ...],
               **kw) -> None:
        begin = first + state["start"]
        recorder.add(Step(part.key, first + row, begin, variable, event, " ".join(names),
                          path_rows=tuple(range(begin, begin + len(names))), **kw))

    def accept(start: int, row: int, labels: tuple[str, ...]) -> bool:
        var = labels[-1]
        if not window.fits(start, row):
            record(WINDOW, var, row, labels, conjunct=window.text)
            return False
        ctx = query.context(rows, start=start, labels=labels, current=row,
                            match_number=state["number"] + 1, in_define=True)
        shown: list[str] = []
        for cond, text, operands in conjuncts.get(var, ()):
            result = show_values(shown, operands, ctx, cond)
            if result is not True:
                record(FAILED, var, row, labels, conjunct=text,
                       values=", ".join(shown + [f"result = {format_value(result)}"]))
                return False
        record(EXTENDED, var, row, labels, values=", ".join(shown) or None)
        return True

    def on_state(event: str, var: str, pos: int, labels: Labels) -> None:
        record(event, var, pos, tuple(v for v, _ in labels) + (var,))

    matcher = TracingMatcher(spec.pattern, len(rows), accept, on_state,
                             max_steps=recorder.max_steps * 10)
    pos = 0
    while pos < len(rows):
        state["start"] = pos
        labels = matcher.match(pos)
        if labels is None:
            pos += 1
            continue
        state["number"] += 1
        last = pos + max(len(labels), 1) - 1
        names = tuple(v for v, _ in labels)
        record(MATCH, names[-1] if names else None, last, names,
               match_number=state["number"])
        resume = next_start(spec, pos, labels)
        for skipped in range(pos + 1, min(resume, len(rows))):
            state["start"] = skipped
            record(SKIPPED, None, skipped, (), conjunct=_skip_text(spec))
        pos = resume


class _Window:
    """SQL:2016 mode with WITHIN (rule R8): a row joins only while the match still fits."""

    def __init__(self, spec: MatchRecognizeSpec, query: ReferenceQuery, rows: list[dict]):
        self.window = spec.window
        self.text = None
        self.ts: list[object] = []
        if self.window is None:
            return
        self.text = window_text(self.window)
        if self.window.kind == "time":
            ctx = query.context(rows)
            self.ts = [time_micros(evaluate(spec.order_by[0].expr, ctx, i))
                       for i in range(len(rows))]

    def fits(self, lo: int, hi: int) -> bool:
        """The reference's window test (reference/cep.py Span) on the slice's rows."""
        return Span(self.window, self.ts).fits(lo, hi)


def window_text(window: Window) -> str:
    """How a WITHIN cut is named in the trace (a time window in microseconds)."""
    return f"WITHIN {window.size} {'ROWS' if window.kind == 'rows' else 'microseconds'}"


def _skip_text(spec: MatchRecognizeSpec) -> str:
    skip = spec.after_match_skip
    target = {"PAST_LAST_ROW": "PAST LAST ROW", "TO_NEXT_ROW": "TO NEXT ROW",
              "TO_FIRST": f"TO FIRST {skip.var}", "TO_LAST": f"TO LAST {skip.var}"}
    return "AFTER MATCH SKIP " + target[skip.kind]


def show_values(shown: list[str], operands: list[tuple[str, Expr]], ctx, cond: Expr) -> object:
    """Add the operands' values at ctx to shown (each text once); the conjunct's value."""
    shown += [f"{name} = {format_value(evaluate(e, ctx))}" for name, e in operands
              if not any(seen.startswith(name + " = ") for seen in shown)]
    return evaluate(cond, ctx)


def format_value(v: object) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def trace_slices(spec: MatchRecognizeSpec, columns: list[str], parts: list[PartitionSlice],
                 sql: str, max_steps: int = MAX_STEPS) -> list[Step]:
    """The SQL:2016-mode steps over every partition slice, in partition then step order."""
    query = ReferenceQuery(spec, columns)
    recorder = Recorder(max_steps)
    with replaying(parts, max_steps):
        for part in parts:
            trace_partition(query, part, sql, recorder)
    return recorder.steps


@contextmanager
def replaying(parts: list[PartitionSlice], max_steps: int):
    """Room for the reference search's recursion; its limits and gaps as cepsql errors."""
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 20_000 + 50 * sum(len(p.rows) for p in parts)))
    try:
        yield
    except SearchBudgetExceeded:
        raise CepRuntimeError(
            f"the trace's search took too many steps (more than {10 * max_steps}): narrow "
            "the slice (partition=..., rows=(first, stop))") from None
    except ReferenceUnsupported as err:
        raise CepUnsupportedError(f"trace cannot evaluate {err}") from None
    finally:
        sys.setrecursionlimit(old_limit)


def steps_frame(spec: MatchRecognizeSpec, steps: list[Step], parts: list[PartitionSlice]):
    """The steps as a pandas DataFrame: PARTITION BY columns, ``row``, the ORDER BY
    columns' values at that row, then what the step did."""
    names = partition_names(spec)
    order = order_columns(spec, parts)
    values = {(p.key, p.first + i): tuple(r[c] for c in order)
              for p in parts for i, r in enumerate(p.rows)}
    records = []
    for n, s in enumerate(steps):
        at = values.get((s.partition, s.row), (None,) * len(order))
        records.append(dict(zip(names, s.partition)) | {"step": n, "row": s.row}
                       | dict(zip(order, at))
                       | {"attempt": s.attempt, "variable": s.variable, "event": s.event,
                          "path": s.path, "path_rows": ", ".join(map(str, s.path_rows)),
                          "conjunct": s.conjunct, "values": s.values,
                          "match_number": s.match_number})
    columns = names + ["step", "row"] + order + ["attempt", "variable", "event", "path",
                                                 "path_rows", "conjunct", "values",
                                                 "match_number"]
    frame = pd.DataFrame.from_records(records, columns=columns)
    frame["match_number"] = frame["match_number"].astype("Int64")
    return frame


def order_columns(spec: MatchRecognizeSpec, parts: list[PartitionSlice]) -> list[str]:
    """The input columns the ORDER BY names plainly (the x axis of a picture)."""
    present = {c.lower(): c for p in parts[:1] for c in (p.rows[0] if p.rows else {})}
    out = []
    for key in spec.order_by:
        name = getattr(key.expr, "column", None)
        if getattr(key.expr, "var", None) is None and name and name.lower() in present:
            column = present[name.lower()]
            if column not in out:
                out.append(column)
    return out
