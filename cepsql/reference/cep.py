"""Pure-Python reference evaluator of CEP mode (STRATEGY / WITHIN): the test oracle.

Obviously correct, not fast: it enumerates candidate matches per partition and checks
every rule on the complete match. The exact rules (which the compiled evaluators must
reproduce) are listed in ``docs``-style form in the module-level ``RULES`` below.
"""
from __future__ import annotations

import datetime as _dt
import sys
from dataclasses import dataclass, replace
from decimal import Decimal
from itertools import permutations
from typing import Callable, Iterator

import pyarrow as pa

from cepsql.algebra.expressions import (Aggregate, BinaryOp, Case, Classifier, ColumnRef, Expr, IsNull,
                                   Literal, MatchNumber, RowValue, children, walk)
from cepsql.algebra.pattern import (Alternation, Anchor, Concat, Empty, Exclusion, Negation,
                               PatternNode, Permute, Quantified, Var, walk as walk_pattern)
from cepsql.algebra.rowrefs import bind_rows, rebuild
from cepsql.algebra.spec import MatchRecognizeSpec, Window
from cepsql.errors import CepAnalysisError, CepUnsupportedError
from cepsql.reference.pattern import PatternMatcher
from cepsql.reference.sql import (DEFAULT_MAX_STEPS, ReferenceQuery, all_rows_row, evaluate_reference,
                                  match_rows, next_start, ordered_rows, partition_values, partitioned_rows,
                                  unmatched_row)
from cepsql.reference.expr import EvalContext, aggregate_variable, evaluate

__all__ = ["evaluate_reference_cep", "RULES"]

RULES = """
CEP-mode semantics (reference_cep):
 R1 Rows are partitioned and ordered as in SQL mode; a position is the ORDER BY index in
    the partition. A match is a non-empty set of (position, variable) pairs; empty matches
    are never output in CEP mode.
 R2 DEFINE of V holds at each row r labelled V, evaluated on the complete match with
    current row r: references to V (or a SUBSET containing V) and unqualified references
    are RUNNING (matched rows at positions <= r, so LAST(v.x, 1) = previous V element,
    avg(v.x) = over V elements up to r); references to any other variable are FINAL
    (its rows in the complete match). Unqualified columns/navigation/aggregates range over
    the match rows only (rows skipped between them are invisible), PREV/NEXT move in the
    partition. MATCH_NUMBER() is NULL in DEFINE. A NULL condition is false.
 R3 WITHIN INTERVAL w: ts = first ORDER BY key (timestamp -> microseconds, date -> days,
    number -> seconds); max(ts) - min(ts) over the match rows <= w; a NULL ts fails.
    WITHIN n ROWS: max position - min position < n.
 R4 SKIP_TILL_ANY_MATCH: every structural assignment: SEQ items in strictly increasing
    position blocks; AND items all present with disjoint rows in any order (interleaving
    allowed); OR exactly one branch; p{n,m} / KL = n..m non-empty iterations in increasing
    blocks (missing iterations may be empty only when p can match empty).
 R5 SKIP_TILL_NEXT_MATCH / PARTITION_CONTIGUITY / STRICT_CONTIGUITY: runs over the
    Thompson NFA of the pattern (AND = alternation of the permutations of its positive
    items, no interleaving). A run starts at every row r where the first variable's take
    condition holds. After a take the run is in every state of its epsilon closure
    (Kleene: stay or proceed, optional items, OR branches) at once. NEXT_MATCH, after a
    take in a Kleene state that can take more (SASE+'s a[i] state, of that closure only:
    each iteration of an enclosing KL has a closure of its own): the state ignores
    every row it cannot take and takes the first it can; each row some following state
    takes meanwhile branches off there (SASE+'s proceed edge, evaluated on the row read:
    take-proceed and ignore-proceed branching), until the Kleene state takes a row.
    NEXT_MATCH otherwise: a row no state of the closure can take is ignored; the first
    row some state can take is taken in every state that can (no take-vs-ignore
    branching), and the run waits no longer. PARTITION_CONTIGUITY - the next row of the
    partition, taken
    in every state that can, else the run dies; STRICT_CONTIGUITY - likewise with the next
    row of the whole input in ORDER BY order (ignoring PARTITION BY), which must be in
    the same partition. The take condition of V
    at r = the top-level AND conjuncts of V's DEFINE all of whose referenced variables are
    V or already bound in the run, evaluated on the partial match plus r (rule R2).
    A run whose state reaches the end emits its assignment; it continues if it can.
    An emitted assignment must then pass R2 (all conditions, complete match), R3 and R6.
 R6 NOT(p) as an item of a SEQ: no match of p (any-match, its DEFINEs evaluated with the
    positive match bound) on rows outside the match strictly between the previous item's
    last row and the next item's first row in that SEQ (nearest non-empty items). With no
    previous (next) row in the SEQ the side is open: every row before (after) that still
    fits the WITHIN window together with the match; the whole partition side without
    WITHIN. NOT(p) as an item of AND: the absence of p from the AND's scope: the AND's
    slot in the nearest enclosing SEQ reached through OR and AND (strictly after the
    previous item's last row and before the next item's first row of that SEQ, open sides
    as above; both sides open when no SEQ encloses it; inside KL see R6c). Rows of the
    AND's own positive items are match rows, never NOT rows. Under contiguity strategies
    SEQ neighbours (and an AND's rows) are adjacent, so only NOTs with an open side can
    fail.
 R6a NOT(p) of a composite p (SEQ/AND/OR/KL of variables): one region as in R6; p is
    searched with SKIP_TILL_ANY_MATCH semantics (R4, its own rows within the WITHIN
    window) over the region's rows, whatever the clause's strategy, each NOT row's
    DEFINE evaluated on the match plus that p match
    (R2: p's own variables RUNNING, the match's variables FINAL). NOT inside NOT is a
    syntax error.
 R6b KL(p) of a composite p: n..m iterations, each a match of p (R4 inside it under
    SKIP_TILL_ANY_MATCH, the Thompson NFA's loop under R5), every row of an iteration
    after every row of the previous one. A variable of p labels its rows of every
    iteration, so in its DEFINE LAST(v.x, 1) is v's row of the previous iteration (or
    the previous v row of the same iteration) and aggregates run over all iterations so
    far; references to other variables are FINAL (their last row in the whole match).
    A NOT item of a SEQ inside p is scoped to its iteration: R6's region between the
    SEQ's neighbouring items' rows of that iteration.
 R6c NOT inside KL(p), a side of its region no row of its SEQ bounds in that iteration
    (the NOT at the iteration's start or end, next to items that took no row, or an
    AND's NOT whose AND no SEQ of p encloses -- its scope is the iteration): the lower
    side is the previous iteration's last row, the upper side the next iteration's first
    row; in the first (last) iteration the last row before (first row after) the KL in
    its slot of the nearest enclosing SEQ reached through OR and AND; open (R6,
    window-bounded) when there is none.
 R7 Output: distinct assignments. AFTER MATCH SKIP PAST LAST ROW written explicitly:
    SASE+'s non-overlap format. Candidates in order (last position, first position,
    positions, labels); keep one when its first position is after the last position of
    the previously kept match (the first one is kept), so the match that completes first
    wins, ties go to the earlier start, then to the smaller position tuple, then to the
    smaller label tuple (variable names as strings). Per partition; STRICT_CONTIGUITY:
    over the whole input, positions in its ORDER BY order (the same matches: a
    STRICT_CONTIGUITY match is a contiguous range of that order inside one partition).
    Default or TO NEXT ROW: all matches.
    MATCH_NUMBER numbers the output matches per partition by (first position, last
    position, positions, labels). ONE ROW: partition keys + measures (FINAL, current =
    last row); ALL ROWS: one row per matched, non-excluded row in position order
    (RUNNING measures at that row); WITH UNMATCHED ROWS adds rows in no output match.
 R8 WITHIN without STRATEGY: SQL:2016 semantics where a row may join a match only if the
    match so far still fits the window (so the preferred match is the first one in
    preference order satisfying the DEFINEs and the window).
"""

_MATCH = "\x00match"   # the universal variable restricted to the match rows
_GAP = ""              # label of a skipped row inside the match span (no variable)

# A match row: (position, variable, excluded); a match: rows sorted by position.
Row = tuple[int, str, bool]
Rows = tuple[Row, ...]


def evaluate_reference_cep(spec: MatchRecognizeSpec, table: pa.Table,
                           observer: object | None = None) -> tuple[list[str], list[tuple]]:
    """(output column names, output rows) of a CEP-mode spec (or a windowed SQL-mode one).

    ``observer`` (CEP mode; cepsql/debugging/cep_trace.py) is told every take condition
    checked (``take``), every complete candidate checked (``checked``) and each
    partition's output matches (``output``); it never changes the result."""
    if spec.strategy is None and spec.window is None:
        return evaluate_reference(spec, table)
    if spec.window is not None and spec.window.kind == "time" and not spec.order_by:
        raise CepAnalysisError("WITHIN INTERVAL needs an ORDER BY on a timestamp column")
    rows = table.to_pylist()
    query = ReferenceQuery(spec, list(table.column_names))
    parts = partitioned_rows(spec, rows, query.colmap)
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 20_000 + 50 * len(rows)))
    try:
        if spec.strategy is None:
            out = [r for part in parts for r in _sql_mode_partition(query, part)]
        else:
            _check_cep_spec(spec)
            global_index = _global_order(spec, rows, query) \
                if spec.strategy == "STRICT_CONTIGUITY" else None
            out = _cep_partitions(query, parts, global_index, observer)
    finally:
        sys.setrecursionlimit(old_limit)
    return query.output_names, out


def _check_cep_spec(spec: MatchRecognizeSpec) -> None:
    skip = spec.after_match_skip
    if skip.explicit and skip.kind in ("TO_FIRST", "TO_LAST"):
        raise CepUnsupportedError("AFTER MATCH SKIP TO FIRST/LAST is not available in CEP mode; "
                                  "use SKIP PAST LAST ROW (non-overlapping) or omit it (all "
                                  "matches)", pos=skip.pos)
    for node in walk_pattern(spec.pattern):
        if isinstance(node, Anchor):
            raise CepUnsupportedError("anchors ^ and $ are not available in CEP mode")


# --- time and windows ----------------------------------------------------------------

_EPOCH = _dt.datetime(1970, 1, 1)


def time_micros(v: object) -> object:
    """A window-comparable value of the first ORDER BY key (R3), None for NULL."""
    if v is None:
        return None
    if isinstance(v, _dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(_dt.timezone.utc).replace(tzinfo=None)
        delta = v - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(v, _dt.date):
        return (v - _EPOCH.date()).days * 86_400_000_000
    if isinstance(v, bool):
        raise CepAnalysisError("WITHIN INTERVAL needs a timestamp or numeric ORDER BY key")
    if isinstance(v, (int, Decimal)):
        return v * 1_000_000
    if isinstance(v, float):
        return v * 1e6
    raise CepAnalysisError(f"WITHIN INTERVAL cannot measure time on {type(v).__name__} values")


class Span:
    """Window test of a set of positions in one partition."""

    def __init__(self, window: Window | None, ts: list[object]):
        self.window = window
        self.ts = ts

    def fits(self, lo: int, hi: int) -> bool:
        """Whether rows at positions lo <= hi (the extremes of a match) fit the window."""
        w = self.window
        if w is None:
            return True
        if w.kind == "rows":
            return hi - lo < w.size
        a, b = self.ts[lo], self.ts[hi]
        if a is None or b is None:
            return False
        return abs(b - a) <= w.size


# --- conditions ----------------------------------------------------------------------

def _map(expr: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Bottom-up rewrite; fn returns a replacement or None to keep the (rebuilt) node."""
    kids = children(expr)
    if kids and not isinstance(expr, Aggregate):
        expr = rebuild(expr, [_map(k, fn) for k in kids])
    out = fn(expr)
    return expr if out is None else out


def _qualify_aggregate(agg: Aggregate) -> Aggregate:
    """Aggregates over the universal variable range over the match rows only (R2)."""
    if agg.star_var == "":
        return replace(agg, star_var=_MATCH)
    if agg.star_var is not None or aggregate_variable(agg) is not None:
        return agg

    def qualify(e: Expr) -> Expr | None:
        if isinstance(e, ColumnRef) and e.var is None:
            return ColumnRef(_MATCH, e.column, e.pos)
        if isinstance(e, Classifier) and e.var is None:
            return Classifier(_MATCH, e.pos)
        return None
    args = tuple(_map(a, qualify) for a in agg.args)
    if aggregate_variable(replace(agg, args=args)) is None:
        # no column or CLASSIFIER() (e.g. array_agg(MATCH_NUMBER())): still the match's
        # rows only, so read the first argument through a match row
        first = Case(None, ((IsNull(Classifier(_MATCH, agg.pos)), Literal(None, "null")),),
                     args[0], agg.pos)
        args = (first,) + args[1:]
    return replace(agg, args=args)


def _is_own(ref_var: str | None, var: str | None, subsets: dict[str, frozenset[str]]) -> bool:
    """Whether a reference reads RUNNING in var's DEFINE (var itself, its subsets, universal)."""
    return ref_var in (None, _MATCH, var) or (var is not None and var in subsets.get(ref_var, ()))


def _cep_bind(expr: Expr, var: str | None, known: set[str], subsets: dict[str, frozenset[str]],
              final_default: bool) -> Expr:
    """bind_rows, then: universal -> match rows; in a DEFINE (var set) other variables FINAL."""
    bound = bind_rows(expr, in_define=var is not None, final_default=final_default,
                      known_vars=known)

    def fix(e: Expr) -> Expr | None:
        if isinstance(e, RowValue):
            ref = e.ref
            if ref.var is None:
                ref = replace(ref, var=_MATCH)
            if var is not None and not _is_own(ref.var, var, subsets):
                ref = replace(ref, final=True)
            return replace(e, ref=ref)
        if isinstance(e, Aggregate):
            agg = _qualify_aggregate(e)
            if var is not None:
                own = _is_own(aggregate_variable(agg) if agg.star_var is None
                              else agg.star_var, var, subsets)
                agg = replace(agg, semantics="RUNNING" if own else "FINAL")
            return agg
        return None
    return _map(bound, fix)


def _referenced(expr: Expr, subsets: dict[str, frozenset[str]]) -> set[str]:
    """Primary variables a bound condition reads (subsets expand to their members)."""
    names: set[str] = set()
    for e in walk(expr):
        if isinstance(e, RowValue):
            names.add(e.ref.var)
        elif isinstance(e, Aggregate):
            names.add(e.star_var if e.star_var is not None else aggregate_variable(e))
    out: set[str] = set()
    for n in names - {None, _MATCH}:
        out |= set(subsets.get(n, (n,)))
    return out


def _conjuncts(expr: Expr) -> list[Expr]:
    if isinstance(expr, BinaryOp) and expr.op.upper() == "AND":
        return _conjuncts(expr.left) + _conjuncts(expr.right)
    return [expr]


def _is_local(expr: Expr, var: str, subsets: dict[str, frozenset[str]]) -> bool:
    """Whether a condition reads only its current row (and rows physically around it)."""
    for e in walk(expr):
        if isinstance(e, (Aggregate, MatchNumber)):
            return False
        if isinstance(e, RowValue):
            ref = e.ref
            if ref.final or ref.logical != "LAST" or ref.logical_offset != 0 or \
                    not _is_own(ref.var, var, subsets):
                return False
    return True


class _Conditions:
    """DEFINE conditions of one query, evaluated on (partial or complete) assignments."""

    def __init__(self, q: ReferenceQuery, observer: object | None = None):
        self.q = q
        self.observer = observer
        self.subsets = dict(q.subsets)
        self.subsets[_MATCH] = frozenset(q.spec.variables)
        self.known = set(q.known) | {_MATCH}
        self.defines = {v: _cep_bind(e, v, self.known, self.subsets, False)
                        for v, e in q.spec.defines.items()}
        self.conjuncts = {v: [(c, _referenced(c, self.subsets) - {v}) for c in _conjuncts(e)]
                          for v, e in self.defines.items()}
        self.local = {v: _is_local(e, v, self.subsets) for v, e in self.defines.items()}
        one = q.spec.rows_per_match == "ONE"
        self.measures = [_cep_bind(m.expr, None, self.known, self.subsets, one)
                         for m in q.spec.measures]

    def context(self, rows: list[dict], labels: dict[int, str], current: int | None,
                final_default: bool = False, match_number: int | None = None,
                in_define: bool = False) -> EvalContext:
        start, end = min(labels), max(labels)
        seq = tuple(labels.get(p, _GAP) for p in range(start, end + 1))
        return EvalContext(rows=rows, start=start, labels=seq, current=current,
                           final_default=final_default, match_number=match_number,
                           subsets=self.subsets, known_vars=frozenset(self.known),
                           colmap=self.q.colmap, in_define=in_define)

    def holds(self, rows: list[dict], var: str, pos: int, labels: dict[int, str]) -> bool:
        """V's whole DEFINE at pos, labels = the complete assignment (R2)."""
        cond = self.defines.get(var)
        return cond is None or evaluate(cond, self.context(rows, labels, pos,
                                                            in_define=True)) is True

    def take_ok(self, rows: list[dict], var: str, pos: int, labels: dict[int, str]) -> bool:
        """V's immediate conjuncts at pos on a partial assignment (R5)."""
        bound = set(labels.values())
        ctx = None
        verdict = True
        for cond, refs in self.conjuncts.get(var, ()):
            if refs <= bound:
                ctx = ctx or self.context(rows, labels, pos, in_define=True)
                if evaluate(cond, ctx) is not True:
                    verdict = False
                    break
        if self.observer is not None:
            self.observer.take(self, rows, var, pos, labels, verdict)
        return verdict

    def all_hold(self, rows: list[dict], match: Rows) -> bool:
        labels = {p: v for p, v, _ in match}
        return all(self.holds(rows, v, p, labels) for p, v, _ in match)


# --- negation ------------------------------------------------------------------------

@dataclass(frozen=True)
class _NegCheck:
    """No match of ``child`` strictly between lo and hi (None = open, window-bounded side).
    ``lo_slot`` / ``hi_slot``: that side is still to be fixed by the enclosing SEQ (an
    AND's NOT, R6; an open side of a KL's first / last iteration, R6c)."""
    child: PatternNode
    lo: int | None
    hi: int | None
    lo_slot: bool = False
    hi_slot: bool = False


class _Partition:
    """One ordered partition with everything the matchers need."""

    def __init__(self, q: ReferenceQuery, conds: _Conditions, rows: list[dict]):
        self.q, self.conds, self.rows, self.n = q, conds, rows, len(rows)
        spec = q.spec
        ts: list[object] = []
        if spec.window is not None and spec.window.kind == "time":
            ctx = EvalContext(rows=rows, colmap=q.colmap)
            ts = [time_micros(evaluate(spec.order_by[0].expr, ctx, i)) for i in range(self.n)]
        self.span = Span(spec.window, ts)
        self.cands: dict[str, list[int]] = {}
        for var in spec.variables:
            if conds.local.get(var, False):
                self.cands[var] = [p for p in range(self.n)
                                   if conds.holds(rows, var, p, {p: var})]
            else:
                self.cands[var] = list(range(self.n))
        self.cand_sets = {v: set(c) for v, c in self.cands.items()}

    def fits(self, match: Rows) -> bool:
        return not match or self.span.fits(match[0][0], match[-1][0])

    def negation_ok(self, match: Rows, check: _NegCheck) -> bool:
        used = {p for p, _, _ in match}
        first, last = match[0][0], match[-1][0]
        region = []
        for r in range(self.n):
            if r in used or (check.lo is not None and r <= check.lo) or \
                    (check.hi is not None and r >= check.hi):
                continue
            if (check.lo is None or check.hi is None) and \
                    not self.span.fits(min(first, r), max(last, r)):
                continue
            region.append(r)
        labels = {p: v for p, v, _ in match}
        allowed = set(region)
        for seg, _ in any_match(self, check.child, 0, allowed):
            if not seg:
                continue
            trial = dict(labels)
            trial.update({p: v for p, v, _ in seg})
            if all(self.conds.holds(self.rows, v, p, trial) for p, v, _ in seg):
                return False
        return True

    def accept(self, match: Rows, checks: tuple[_NegCheck, ...]) -> bool:
        """R2 + R3 + R6 on a complete candidate."""
        verdict = bool(match) and self.fits(match) and self.conds.all_hold(self.rows, match) \
            and all(self.negation_ok(match, c) for c in checks)
        if self.conds.observer is not None and match:
            self.conds.observer.checked(self, match, checks, verdict)
        return verdict


# --- SKIP_TILL_ANY_MATCH: structural enumeration (R4) -----------------------------------

Seg = tuple[Rows, tuple[_NegCheck, ...]]


def _nullable(node: PatternNode) -> bool:
    if isinstance(node, (Empty, Negation)):
        return True
    if isinstance(node, Var):
        return False
    if isinstance(node, Concat | Permute):
        return all(_nullable(i) for i in node.items)
    if isinstance(node, Alternation):
        return any(_nullable(i) for i in node.items)
    if isinstance(node, Quantified):
        return node.min == 0 or _nullable(node.child)
    if isinstance(node, Exclusion):
        return _nullable(node.child)
    return False


def any_match(part: _Partition, node: PatternNode, lo: int, allowed: set[int] | None,
              excl: bool = False) -> Iterator[Seg]:
    """Every structural assignment of node to rows >= lo (restricted to ``allowed``)."""
    if isinstance(node, Var):
        for p in part.cands.get(node.name, range(part.n)):
            if p >= lo and (allowed is None or p in allowed):
                yield ((p, node.name, excl),), ()
    elif isinstance(node, Empty):
        yield (), ()
    elif isinstance(node, Exclusion):
        yield from any_match(part, node.child, lo, allowed, True)
    elif isinstance(node, Alternation):
        for item in node.items:
            yield from any_match(part, item, lo, allowed, excl)
    elif isinstance(node, Concat):
        yield from _seq(part, node.items, 0, lo, allowed, excl, (), (), ())
    elif isinstance(node, Permute):
        yield from _and(part, node, lo, allowed, excl)
    elif isinstance(node, Quantified):
        yield from _loop(part, node, 0, lo, allowed, excl, (), ())
    elif isinstance(node, Negation):
        raise CepAnalysisError("NOT(...) must be an item of SEQ or AND", pos=node.pos)
    else:
        raise CepUnsupportedError(f"{type(node).__name__} is not available in CEP mode")


def _merge(a: Rows, b: Rows) -> Rows:
    return tuple(sorted(a + b))


def _seq(part, items, i, lo, allowed, excl, rows: Rows, checks, pending) -> Iterator[Seg]:
    """SEQ items[i:] after ``rows`` (the SEQ's rows so far); pending = NOTs awaiting hi
    (the SEQ's own NOT items and the AND NOTs scoped to one of its items, R6)."""
    if i == len(items):
        done = tuple(_NegCheck(c, l, None) for c, l in pending)
        yield rows, checks + done
        return
    item = items[i]
    prev = rows[-1][0] if rows else None
    if isinstance(item, Negation):
        yield from _seq(part, items, i + 1, lo, allowed, excl, rows, checks,
                        pending + ((item.child, prev),))
        return
    for seg, seg_checks in any_match(part, item, lo, allowed, excl):
        # sides the item left to this SEQ: the previous item's last row, and (pending)
        # the next item's first row (R6, R6c)
        closed = tuple(_NegCheck(c.child, prev if c.lo_slot else c.lo, c.hi)
                       for c in seg_checks if not c.hi_slot)
        scoped = tuple((c.child, prev if c.lo_slot else c.lo)
                       for c in seg_checks if c.hi_slot)
        if not seg:
            yield from _seq(part, items, i + 1, lo, allowed, excl, rows,
                            checks + closed, pending + scoped)
            continue
        new_rows = rows + seg
        if not part.fits(new_rows):
            continue
        done = tuple(_NegCheck(c, l, seg[0][0]) for c, l in pending)
        yield from _seq(part, items, i + 1, seg[-1][0] + 1, allowed, excl, new_rows,
                        checks + closed + done, scoped)


def _and(part, node: Permute, lo, allowed, excl) -> Iterator[Seg]:
    positives = [i for i in node.items if not isinstance(i, Negation)]
    negated = [i.child for i in node.items if isinstance(i, Negation)]

    def combine(k: int, rows: Rows, checks) -> Iterator[Seg]:
        if k == len(positives):
            # the region is the AND's slot in the enclosing SEQ: fixed there (R6)
            yield rows, checks + tuple(_NegCheck(c, None, None, True, True) for c in negated)
            return
        used = {p for p, _, _ in rows}
        for seg, seg_checks in any_match(part, positives[k], lo, allowed, excl):
            if any(p in used for p, _, _ in seg):
                continue
            merged = _merge(rows, seg)
            if part.fits(merged):
                yield from combine(k + 1, merged, checks + seg_checks)
    yield from combine(0, (), ())


def _loop(part, node: Quantified, count, lo, allowed, excl, rows: Rows, checks,
          waiting: tuple = ()) -> Iterator[Seg]:
    """Iterations count.. of node; waiting: the previous iteration's NOT checks whose
    upper side is open, fixed by the next iteration's first row (R6c)."""
    if count >= node.min or _nullable(node.child):
        # the last iteration's open upper sides: the KL's slot in the enclosing SEQ
        yield rows, checks + tuple(replace(c, hi_slot=True) for c in waiting)
    if node.max is not None and count >= node.max:
        return
    for seg, seg_checks in any_match(part, node.child, lo, allowed, excl):
        if not seg:
            continue
        new_rows = rows + seg
        if part.fits(new_rows):
            done = tuple(replace(c, hi=seg[0][0]) for c in waiting)
            closed, still = _iteration_sides(seg_checks, rows[-1][0] if rows else None)
            yield from _loop(part, node, count + 1, seg[-1][0] + 1, allowed, excl, new_rows,
                             checks + done + closed, still)


def _iteration_sides(checks, prev_last: int | None) -> tuple[tuple, tuple]:
    """An iteration's NOT checks with an open side (no row of their SEQ bounds it, or an
    AND's NOT, R6c): the lower side is the previous iteration's last row, or the KL's
    slot when this is the first iteration; (closed ones, ones awaiting an upper side)."""
    closed, waiting = [], []
    for c in checks:
        if c.lo is None or c.lo_slot:
            c = replace(c, lo=prev_last, lo_slot=prev_last is None)
        if c.hi is None or c.hi_slot:
            waiting.append(replace(c, hi=None, hi_slot=False))
        else:
            closed.append(c)
    return tuple(closed), tuple(waiting)


# --- run-based strategies: Thompson NFA (R5) ------------------------------------------

@dataclass
class _State:
    var: str | None = None          # consuming state: the variable it takes
    excl: bool = False
    target: int = -1                # consuming state: state after taking
    eps: list = None                # epsilon edges: [(target, action or None)]
    loop: int | None = None         # consuming state of a closure of one variable: its id


class _Nfa:
    """Thompson construction; actions on epsilon edges record SEQ/AND scopes and NOTs."""

    def __init__(self, pattern: PatternNode):
        self.states: list[_State] = []
        self._ids = 0
        self.start, self.final = self.build(pattern, False)

    def new(self, **kw) -> int:
        self.states.append(_State(eps=[], **kw))
        return len(self.states) - 1

    def edge(self, a: int, b: int, action=None) -> None:
        self.states[a].eps.append((b, action))

    def scope(self) -> int:
        self._ids += 1
        return self._ids

    def build(self, node: PatternNode, excl: bool, slot=None, kl=None) -> tuple[int, int]:
        """States of node; slot = (SEQ scope, item index) fixing an AND NOT's region;
        kl = (loop scope, the loop's slot) of the nearest enclosing KL (R6c)."""
        if isinstance(node, Var):
            out = self.new()
            return self.new(var=node.name, excl=excl, target=out), out
        if isinstance(node, Empty):
            s = self.new()
            return s, s
        if isinstance(node, Exclusion):
            return self.build(node.child, True, slot, kl)
        if isinstance(node, Alternation):
            s, t = self.new(), self.new()
            for item in node.items:
                a, b = self.build(item, excl, slot, kl)
                self.edge(s, a)
                self.edge(b, t)
            return s, t
        if isinstance(node, Concat):
            return self.build_seq(node.items, excl, kl)
        if isinstance(node, Permute):
            return self.build_and(node, excl, slot, kl)
        if isinstance(node, Quantified):
            return self.build_loop(node, excl, slot, kl)
        if isinstance(node, Negation):
            raise CepAnalysisError("NOT(...) must be an item of SEQ or AND", pos=node.pos)
        raise CepUnsupportedError(f"{type(node).__name__} is not available in CEP mode")

    def build_seq(self, items, excl: bool, kl=None) -> tuple[int, int]:
        sid = self.scope()
        s = self.new()
        cur = self.new()
        self.edge(s, cur, ("open", sid))
        for k, item in enumerate(items):
            if isinstance(item, Negation):
                nxt = self.new()
                self.edge(cur, nxt, ("neg", sid, item.child, kl))
                cur = nxt
                continue
            a, b = self.build(item, excl, (sid, k), kl)
            enter, leave = self.new(), self.new()
            self.edge(cur, enter, ("item", sid, k))
            self.edge(enter, a)
            self.edge(b, leave, ("item_end", sid, k))
            cur = leave
        t = self.new()
        self.edge(cur, t, ("close", sid))
        return s, t

    def build_and(self, node: Permute, excl: bool, slot, kl=None) -> tuple[int, int]:
        positives = [i for i in node.items if not isinstance(i, Negation)]
        negated = tuple(i.child for i in node.items if isinstance(i, Negation))
        s, t = self.new(), self.new()
        for order in permutations(positives):
            aid = self.scope()
            a = cur = self.new()
            for item in order:   # one order: a chain in the AND's own slot
                x, y = self.build(item, excl, slot, kl)
                self.edge(cur, x)
                cur = y
            self.edge(s, a, ("and_open", aid))
            self.edge(cur, t, ("and_close", aid, negated, slot, kl))
        return s, t

    def build_loop(self, node: Quantified, excl: bool, slot, kl=None) -> tuple[int, int]:
        child = node.child.child if isinstance(node.child, Exclusion) else node.child
        if isinstance(child, Var):
            return self.build_kleene(node, excl, slot, kl)
        if isinstance(node.child, Exclusion):
            return self._build_loop(node, excl, slot, kl)
        # a composite iteration: its open NOT sides come from the neighbouring
        # iterations or the loop's slot (R6c), found through these markers
        lid = self.scope()
        s, t = self._build_loop(node, excl, None, (lid, slot), lid)
        s0, t0 = self.new(), self.new()
        self.edge(s0, s, ("loop_open", lid))
        self.edge(t, t0, ("loop_close", lid))
        return s0, t0

    def build_kleene(self, node: Quantified, excl: bool, slot, kl=None) -> tuple[int, int]:
        """A closure of one variable: its copies are one Kleene state (SASE+'s a[i], R5)
        while the run stays in this closure. A path that leaves it (its "kl_exit" edge)
        and enters it again through an enclosing KL starts a new closure, whether that
        KL built another copy of node for the next iteration or loops back to this one."""
        start = len(self.states)
        s, t = self._build_loop(node, excl, slot, kl)
        kleene = self.scope()
        for st in self.states[start:]:
            if st.var is not None:
                st.loop = kleene
        t0 = self.new()
        self.edge(t, t0, ("kl_exit", kleene))
        return s, t0

    def _build_loop(self, node: Quantified, excl: bool, slot, kl=None,
                    lid: int | None = None) -> tuple[int, int]:
        mark = None if lid is None else ("iter", lid)
        s = self.new()
        cur = s
        for _ in range(node.min):
            a, b = self.build(node.child, excl, slot, kl)
            self.edge(cur, a, mark)
            cur = b
        t = self.new()
        if node.max is None:
            a, b = self.build(node.child, excl, slot, kl)
            self.edge(cur, a, mark)
            self.edge(b, cur)
            self.edge(cur, t)
            return s, t
        for _ in range(node.max - node.min):
            a, b = self.build(node.child, excl, slot, kl)
            self.edge(cur, t)
            self.edge(cur, a, mark)
            cur = b
        self.edge(cur, t)
        return s, t

    def closure(self, state: int) -> Iterator[tuple[int, tuple]]:
        """(consuming or final state, actions on the way) for every acyclic epsilon path."""
        def walk_(s: int, acts: tuple, seen: frozenset) -> Iterator[tuple[int, tuple]]:
            st = self.states[s]
            if st.var is not None or s == self.final:
                yield s, acts
            for b, action in st.eps:
                if b not in seen:
                    yield from walk_(b, acts if action is None else acts + (action,),
                                     seen | {b})
        seen_out: set = set()
        for item in walk_(state, (), frozenset({state})):
            if item not in seen_out:
                seen_out.add(item)
                yield item


def _log_rows(log: tuple) -> Rows:
    return tuple(sorted(e[1:] for e in log if e[0] == "row"))


def _log_checks(log: tuple) -> tuple[_NegCheck, ...]:
    """Negation checks of a complete run from its action log (R6)."""
    checks = []
    for i, e in enumerate(log):
        if e[0] == "neg":
            sid = e[1]
            opened = max(j for j in range(i) if log[j][:2] == ("open", sid))
            closed = min(j for j in range(i, len(log)) if log[j][:2] == ("close", sid))
            before = [x[1] for x in log[opened:i] if x[0] == "row"]
            after = [x[1] for x in log[i:closed] if x[0] == "row"]
            lo, hi = _iteration_bounds(log, i, e[3], before[-1] if before else None,
                                       after[0] if after else None)
            checks.append(_NegCheck(e[2], lo, hi))
        elif e[0] == "and_close":
            lo, hi = _iteration_bounds(log, i, e[4], *_slot_bounds(log, i, e[3]))
            checks += [_NegCheck(child, lo, hi) for child in e[2]]
    return tuple(checks)


def _iteration_bounds(log: tuple, i: int, kl, lo: int | None, hi: int | None
                      ) -> tuple[int | None, int | None]:
    """Open sides of a NOT inside a KL iteration (R6c): the previous iteration's last
    row / the next iteration's first row, else the loop's slot in its enclosing SEQ."""
    if kl is None or (lo is not None and hi is not None):
        return lo, hi
    lid, slot = kl
    if lo is None:
        start = max(j for j in range(i) if log[j] == ("iter", lid))
        opened = max(j for j in range(start) if log[j] == ("loop_open", lid))
        rows = [x[1] for x in log[opened:start] if x[0] == "row"]
        lo = rows[-1] if rows else _slot_bounds(log, i, slot)[0]
    if hi is None:
        closed = min(j for j in range(i, len(log)) if log[j] == ("loop_close", lid))
        nxt = [j for j in range(i, closed) if log[j] == ("iter", lid)]
        rows = [x[1] for x in log[nxt[0]:closed] if x[0] == "row"] if nxt else []
        hi = rows[0] if rows else _slot_bounds(log, i, slot)[1]
    return lo, hi


def _slot_bounds(log: tuple, i: int, slot) -> tuple[int | None, int | None]:
    """Region of an AND's NOT closed at log[i] (R6): after the last row before the
    AND's item of the enclosing SEQ, before the first row after it; open without one."""
    if slot is None:
        return None, None
    sid, k = slot
    enter = max(j for j in range(i) if log[j][:3] == ("item", sid, k))
    opened = max(j for j in range(enter) if log[j][:2] == ("open", sid))
    leave = min(j for j in range(i, len(log)) if log[j][:3] == ("item_end", sid, k))
    closed = min(j for j in range(leave, len(log)) if log[j][:2] == ("close", sid))
    before = [x[1] for x in log[opened:enter] if x[0] == "row"]
    after = [x[1] for x in log[leave:closed] if x[0] == "row"]
    return (before[-1] if before else None), (after[0] if after else None)


def run_matches(part: _Partition, nfa: _Nfa, strategy: str,
                global_index: list[int] | None) -> set[Rows]:
    """Accepted assignments of the run-based strategies."""
    conds, rows = part.conds, part.rows
    found: set[Rows] = set()

    def labels_of(log: tuple) -> dict[int, str]:
        return {e[1]: e[2] for e in log if e[0] == "row"}

    def take(q: int, pos: int, log: tuple) -> None:
        st = nfa.states[q]
        log = log + (("row", pos, st.var, st.excl),)
        if not part.fits(_log_rows(log)):
            if conds.observer is not None:
                conds.observer.checked(part, _log_rows(log), (), False)
            return
        home, waiting = None, []
        for s, acts in nfa.closure(st.target):
            full = log + acts
            if s == nfa.final:
                match = _log_rows(full)
                if match not in found and part.accept(match, _log_checks(full)):
                    found.add(match)
            elif (home is None and st.loop is not None and nfa.states[s].loop == st.loop
                  and ("kl_exit", st.loop) not in acts):
                home = (s, full)   # the Kleene state takes more
            else:
                waiting.append((s, full))
        if strategy == "SKIP_TILL_NEXT_MATCH" and home is not None:
            advance([home], pos)
            for s, full in waiting:
                peek(s, full, home, pos)
        else:
            advance(([home] if home else []) + waiting, pos)

    def peek(q: int, log: tuple, home: tuple, last: int) -> None:
        """SASE+ proceed edge: while the run stays in its Kleene state (which ignores
        the rows it does not take), every row the next state takes branches off."""
        for r in range(last + 1, part.n):
            if ok(q, r, log):
                take(q, r, log)
            if ok(home[0], r, home[1]):
                return   # the Kleene state took r: this prefix waits no longer

    def ok(q: int, r: int, log: tuple) -> bool:
        var = nfa.states[q].var
        if r not in part.cand_sets[var]:
            return False
        labels = labels_of(log)
        labels[r] = var
        return conds.take_ok(rows, var, r, labels)

    def advance(waiting: list, last: int) -> None:
        """The run after row last, in every state of its epsilon closure at once."""
        if strategy == "SKIP_TILL_NEXT_MATCH":
            # ignore a row only when no state of the closure can take it; otherwise
            # take it in every state that can (take-proceed branching) and stop waiting
            for r in range(last + 1, part.n):
                takers = [(q, log) for q, log in waiting if ok(q, r, log)]
                if takers:
                    for q, log in takers:
                        take(q, r, log)
                    return
            return
        r = last + 1
        if r >= part.n:
            return
        if global_index is not None and global_index[r] != global_index[last] + 1:
            return
        for q, log in waiting:
            if ok(q, r, log):
                take(q, r, log)

    starts = list(nfa.closure(nfa.start))
    for pos in range(part.n):
        for q, acts in starts:
            if q != nfa.final and ok(q, pos, acts):
                take(q, pos, acts)
    return found


# --- per partition -------------------------------------------------------------------

def _global_order(spec: MatchRecognizeSpec, rows: list[dict], q: ReferenceQuery) -> dict[int, int]:
    """id(row) -> index in the ORDER BY order of the whole input (STRICT_CONTIGUITY)."""
    ordered = ordered_rows(spec.order_by, rows, list(q.colmap.values()), q.colmap)
    return {id(r): i for i, r in enumerate(ordered)}


def _cep_partitions(q: ReferenceQuery, parts: list[list[dict]],
                    global_order: dict[int, int] | None, observer: object | None = None
                    ) -> list[tuple]:
    """Output rows of every partition; R7's selection per partition, or over the whole
    input (positions in its ORDER BY order) under STRICT_CONTIGUITY."""
    found = []
    for rows in parts:
        conds = _Conditions(q, observer)
        gidx = None if global_order is None else [global_order[id(r)] for r in rows]
        found.append((rows, conds, gidx, _candidates(q, conds, rows, gidx)))
    if _non_overlapping(q.spec):
        if global_order is None:
            kept = [set(_select_non_overlapping(matches, range(len(rows))))
                    for rows, _, _, matches in found]
        else:
            kept = _select_global(found)
        found = [(rows, conds, gidx, k) for (rows, conds, gidx, _), k in zip(found, kept)]
    out: list[tuple] = []
    for rows, conds, _, matches in found:
        if observer is not None:
            observer.output(rows, sorted(matches, key=_order_key))
        out.extend(_output(q, conds, rows, sorted(matches, key=_order_key)))
    return out


def _candidates(q: ReferenceQuery, conds: _Conditions, rows: list[dict],
                gidx: list[int] | None) -> set[Rows]:
    """Every match of one partition (R1-R6), before R7's selection."""
    spec = q.spec
    part = _Partition(q, conds, rows)
    if spec.strategy == "SKIP_TILL_ANY_MATCH":
        matches: set[Rows] = set()
        for match, checks in any_match(part, spec.pattern, 0, None):
            if match not in matches and part.accept(match, checks):
                matches.add(match)
        return matches
    return run_matches(part, _Nfa(spec.pattern), spec.strategy, gidx)


def _non_overlapping(spec: MatchRecognizeSpec) -> bool:
    skip = spec.after_match_skip
    return skip.explicit and skip.kind == "PAST_LAST_ROW"


def _order_key(m: Rows) -> tuple:
    return (m[0][0], m[-1][0], tuple(p for p, _, _ in m), tuple(v for _, v, _ in m))


def _selection_key(m: Rows, where) -> tuple:
    """SASE+ non-overlap order: completion (last position) first, then the earlier start,
    then the match order (positions, labels); positions mapped through ``where``."""
    return (where[m[-1][0]], where[m[0][0]], tuple(where[p] for p, _, _ in m),
            tuple(v for _, v, _ in m))


def _select_non_overlapping(matches: set[Rows], where) -> list[Rows]:
    """R7's greedy selection: a candidate is kept when it starts after the previously
    kept match completes."""
    kept: list[Rows] = []
    last_end = None
    for m in sorted(matches, key=lambda m: _selection_key(m, where)):
        if last_end is None or where[m[0][0]] > last_end:
            kept.append(m)
            last_end = where[m[-1][0]]
    return kept


def _select_global(found: list) -> list[set[Rows]]:
    """STRICT_CONTIGUITY: R7 over the whole input, positions in its global ORDER BY order."""
    kept: list[set[Rows]] = [set() for _ in found]
    last_end = None
    tagged = [(m, k) for k, (_, _, _, matches) in enumerate(found) for m in matches]
    for m, k in sorted(tagged, key=lambda mk: _selection_key(mk[0], found[mk[1]][2])):
        where = found[k][2]
        if last_end is None or where[m[0][0]] > last_end:
            kept[k].add(m)
            last_end = where[m[-1][0]]
    return kept


def _output(q: ReferenceQuery, conds: _Conditions, rows: list[dict], matches: list[Rows]) -> list[tuple]:
    spec = q.spec
    keys = partition_values(q, rows)
    out: list[tuple] = []
    for number, m in enumerate(matches, 1):
        labels = {p: v for p, v, _ in m}
        if spec.rows_per_match == "ONE":
            ctx = conds.context(rows, labels, m[-1][0], True, number)
            out.append(keys + tuple(evaluate(e, ctx) for e in conds.measures))
            continue
        for p, _, excluded in m:
            if not excluded:
                ctx = conds.context(rows, labels, p, False, number)
                values = [evaluate(e, ctx) for e in conds.measures]
                out.append(all_rows_row(q, rows[p], keys, values))
    if spec.rows_per_match == "ALL" and spec.all_rows_option == "WITH_UNMATCHED":
        covered = {p for m in matches for p, _, _ in m}
        out.extend(unmatched_row(q, rows, keys, p) for p in range(len(rows)) if p not in covered)
    return out


# --- SQL:2016 mode with a WITHIN window (R8) ------------------------------------------

def _sql_mode_partition(q: ReferenceQuery, rows: list[dict]) -> list[tuple]:
    """The SQL reference's partition loop with the window added to every row's acceptance."""
    spec = q.spec
    ts: list[object] = []
    if spec.window.kind == "time":
        ctx0 = EvalContext(rows=rows, colmap=q.colmap)
        ts = [time_micros(evaluate(spec.order_by[0].expr, ctx0, i)) for i in range(len(rows))]
    span = Span(spec.window, ts)
    state = {"number": 0}

    def accept(start: int, row: int, labels: tuple[str, ...]) -> bool:
        if not span.fits(start, row):
            return False
        cond = q.defines.get(labels[-1])
        if cond is None:
            return True
        ctx = q.context(rows, start=start, labels=labels, current=row,
                        match_number=state["number"] + 1, in_define=True)
        return evaluate(cond, ctx) is True

    matcher = PatternMatcher(spec.pattern, len(rows), accept, DEFAULT_MAX_STEPS)
    keys = partition_values(q, rows)
    out: list[tuple] = []
    pos, covered = 0, -1
    while pos < len(rows):
        labels = matcher.match(pos)
        if labels is None:
            if spec.rows_per_match == "ALL" and spec.all_rows_option == "WITH_UNMATCHED" \
                    and pos > covered:
                out.append(unmatched_row(q, rows, keys, pos))
            pos += 1
            continue
        state["number"] += 1
        out.extend(match_rows(q, rows, keys, pos, labels, state["number"]))
        covered = max(covered, pos + len(labels) - 1)
        pos = next_start(spec, pos, labels)
    return out
