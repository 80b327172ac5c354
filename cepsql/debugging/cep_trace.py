"""The trace in CEP mode (a STRATEGY clause): the CEP reference evaluator
(``reference/cep.py``, rules R1-R8) run with an observer that turns what it checks into
steps.

Under the run-based strategies (STRICT/PARTITION_CONTIGUITY, SKIP_TILL_NEXT_MATCH) every
take a run tries is a step: ``extended`` when the take conditions held (the conjuncts of
the variable's DEFINE whose variables the run has bound, rule R5), ``failed`` with the
first one that did not. Every complete candidate (also each structural assignment of
SKIP_TILL_ANY_MATCH, which has no partial runs) is then checked whole: a ``window`` cut
(R3), a ``failed`` DEFINE on the complete match (R2, its row and conjunct), a ``failed``
NOT (R6, conjunct ``NOT(...)``), or accepted; an accepted candidate is a ``match`` when it
is output, ``skipped`` when the non-overlap selection (AFTER MATCH SKIP PAST LAST ROW,
R7) drops it. An attempt is named by its first row; ``path`` lists the variables of its
rows in position order (``path_rows``: which rows).
"""
from __future__ import annotations

import pyarrow as pa

from cepsql.algebra.pattern import Var, walk as walk_pattern
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.debugging.conjunct_text import conjunct_text
from cepsql.debugging.slice import PartitionSlice
from cepsql.debugging.trace import (EXTENDED, FAILED, MATCH, SKIPPED, WINDOW, Recorder, Step,
                                    conjunct_operands, format_value, replaying, show_values,
                                    window_text)
from cepsql.reference.cep import evaluate_reference_cep
from cepsql.reference.sql import ReferenceQuery, partition_values


class CepTraceObserver:
    """Receives the CEP reference evaluator's checks (see its ``observer`` argument)."""

    def __init__(self, query: ReferenceQuery, sql: str, parts: list[PartitionSlice],
                 recorder: Recorder):
        self.query, self.sql, self.recorder = query, sql, recorder
        self.first = {p.key: p.first for p in parts}
        self.seen: set = set()
        self.accepted: dict[tuple, list] = {}
        self.texts: dict[int, tuple[str, list]] = {}
        self.keys: dict[int, tuple[list, tuple]] = {}  # id(partition rows) -> (rows, key)

    # --- the evaluator's calls ---------------------------------------------------
    def take(self, conds, rows: list[dict], var: str, pos: int, labels: dict[int, str],
             verdict: bool) -> None:
        key = self._key(rows)
        path = tuple(sorted(labels.items()))
        if (key, var, pos, path) in self.seen:
            return  # the same run prefix tried again through another branch
        self.seen.add((key, var, pos, path))
        bound = set(labels.values())
        ctx = conds.context(rows, labels, pos, in_define=True)
        shown: list[str] = []
        for cond, refs in conds.conjuncts.get(var, ()):
            if not refs <= bound:
                continue  # waits for variables the run has not bound (R5)
            text, operands = self._text(cond)
            result = show_values(shown, operands, ctx, cond)
            if result is not True:
                self._add(key, FAILED, var, pos, path, conjunct=text,
                          values=", ".join(shown + [f"result = {format_value(result)}"]))
                return
        self._add(key, EXTENDED, var, pos, path, values=", ".join(shown) or None)

    def checked(self, part, match: tuple, checks: tuple, verdict: bool) -> None:
        key = self._key(part.rows)
        path = tuple((p, v) for p, v, _ in match)
        if (key, "whole", path) in self.seen:
            return
        self.seen.add((key, "whole", path))
        last, last_var = path[-1]
        if verdict:
            self.accepted.setdefault(key, []).append(match)
            self._enumerated(key, part, path, len(path))
        elif not part.fits(match):
            self._add(key, WINDOW, last_var, last, path,
                      conjunct=window_text(self.query.spec.window))
        else:
            labels = dict(path)
            for i, (p, v) in enumerate(path):
                if not part.conds.holds(part.rows, v, p, labels):
                    self._enumerated(key, part, path, i)
                    self._whole_define(key, part, v, p, labels, path[:i + 1])
                    return
            self._enumerated(key, part, path, len(path))
            for check in checks:
                if not part.negation_ok(match, check):
                    names = sorted({n.name for n in walk_pattern(check.child)
                                    if isinstance(n, Var)})
                    self._add(key, FAILED, last_var, last, path,
                              conjunct=f"NOT({', '.join(names)})")
                    return

    def output(self, rows: list[dict], matches: list) -> None:
        key = self._key(rows)
        numbers = {m: i for i, m in enumerate(matches, 1)}
        for match in self.accepted.get(key, []):
            path = tuple((p, v) for p, v, _ in match)
            last, last_var = path[-1]
            if match in numbers:
                self._add(key, MATCH, last_var, last, path, match_number=numbers[match])
            else:
                self._add(key, SKIPPED, last_var, last, path,
                          conjunct="AFTER MATCH SKIP PAST LAST ROW (overlaps a match kept "
                                   "before it)")

    # --- helpers -----------------------------------------------------------------
    def _enumerated(self, key, part, path: tuple, held: int) -> None:
        """SKIP_TILL_ANY_MATCH has no runs to observe: the first ``held`` rows of a
        candidate, whose DEFINEs held on it, are its ``extended`` steps."""
        if self.query.spec.strategy != "SKIP_TILL_ANY_MATCH":
            return
        for i in range(held):
            if (key, "held", path[:i + 1]) not in self.seen:
                self.seen.add((key, "held", path[:i + 1]))
                self._add(key, EXTENDED, path[i][1], path[i][0], path[:i + 1])

    def _whole_define(self, key, part, var: str, pos: int, labels: dict, path) -> None:
        """The first conjunct of var's DEFINE not TRUE on the complete match (R2); path:
        the candidate's rows up to this one."""
        ctx = part.conds.context(part.rows, labels, pos, in_define=True)
        shown: list[str] = []
        for cond, _ in part.conds.conjuncts.get(var, ()):
            text, operands = self._text(cond)
            result = show_values(shown, operands, ctx, cond)
            if result is not True:
                self._add(key, FAILED, var, pos, path, conjunct=text,
                          values=", ".join(shown + [f"result = {format_value(result)}"]))
                return

    def _text(self, cond) -> tuple[str, list]:
        if id(cond) not in self.texts:
            self.texts[id(cond)] = (conjunct_text(self.sql, cond),
                                    conjunct_operands(self.sql, cond))
        return self.texts[id(cond)]

    def _key(self, rows: list[dict]) -> tuple:
        if id(rows) not in self.keys:
            self.keys[id(rows)] = (rows, partition_values(self.query, rows))
        return self.keys[id(rows)][1]

    def _add(self, key: tuple, event: str, var: str, pos: int, path: tuple, **kw) -> None:
        first = self.first.get(key, 0)
        self.recorder.add(Step(key, first + pos, first + path[0][0], var, event,
                               " ".join(v for _, v in path), path_rows=tuple(
                                   first + p for p, _ in path), **kw))


def trace_cep_slices(spec: MatchRecognizeSpec, schema: pa.Schema,
                     parts: list[PartitionSlice], sql: str, max_steps: int) -> list[Step]:
    """The CEP-mode steps over the partition slices (each slice evaluated as its whole
    partition), in partition order."""
    query = ReferenceQuery(spec, schema.names)
    recorder = Recorder(max_steps)
    observer = CepTraceObserver(query, sql, parts, recorder)
    rows = [r for p in parts for r in p.rows]
    with replaying(parts, max_steps):
        evaluate_reference_cep(spec, pa.Table.from_pylist(rows, schema=schema), observer)
    order = {p.key: i for i, p in enumerate(parts)}
    return sorted(recorder.steps, key=lambda s: order.get(s.partition, 0))
