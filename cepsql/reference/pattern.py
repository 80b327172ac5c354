"""Backtracking row-pattern matcher of the reference evaluator.

It explores label assignments in the standard's preference order (greedy: more
iterations first, reluctant: fewer first, alternation: left first, PERMUTE:
lexicographic) and returns the first complete one, checking each row's DEFINE as
soon as the row is labelled. The continuation of the search is an explicit,
hashable stack of frames, so a failed (node, position, labels, continuation) state
is remembered and never explored twice: its future is a function of exactly those.

Empty iterations follow Trino: bounded quantifiers are unrolled (an iteration may be
empty), and an iteration of an unbounded loop that matched no rows may not loop
again (it may only leave the loop), which is what Trino's program does when a thread
comes back to the loop's start with the same state.

PERMUTE is the alternation of its orders, lexicographic by item position. When every
item matches in one way only (variables, fixed sequences), choosing the unused items
one at a time, depth-first, visits the orders in exactly that sequence, so such a
PERMUTE is searched lazily (10 items need not build 10! alternatives); otherwise the
alternation is built.
"""
from __future__ import annotations

from itertools import permutations
from typing import Callable

from cepsql.algebra.pattern import (Alternation, Anchor, Concat, Empty, Exclusion, PatternNode,
                               Permute, Quantified, Var, transform)
from cepsql.compile.program import single_path

# A labelled prefix: one (variable, excluded) pair per row from the match start.
Labels = tuple[tuple[str, bool], ...]
# accept(start, row, variables of the rows start..row) -> DEFINE of the last one holds
Acceptor = Callable[[int, int, tuple[str, ...]], bool]


class SearchBudgetExceeded(RuntimeError):
    """The search took more steps than allowed (a pathological pattern for an oracle)."""


def expand_permutations(node: PatternNode, keep_single_path: bool = False) -> PatternNode:
    """PERMUTE(a, b, ...) as the alternation of every order, lexicographic by position
    (with keep_single_path, a PERMUTE of single-path items stays, for the lazy search)."""
    def expand(n: PatternNode) -> PatternNode:
        if not isinstance(n, Permute):
            return n
        items = n.items
        if len(items) == 1:
            return items[0]
        if keep_single_path and all(single_path(i) for i in items):
            return n
        return Alternation(tuple(Concat(tuple(items[i] for i in order))
                                 for order in permutations(range(len(items)))))
    return transform(node, expand)


class PatternMatcher:
    """Finds the preferred match of a pattern at a start row of one partition."""

    def __init__(self, pattern: PatternNode, n_rows: int, accept: Acceptor,
                 max_steps: int | None = None, lazy_permute: bool = True):
        self.pattern = expand_permutations(pattern, keep_single_path=lazy_permute)
        self.n_rows = n_rows
        self.accept = accept
        self.max_steps = max_steps
        self.steps = 0
        self._start = 0
        self._failed: set = set()
        self._conts: dict = {}

    def match(self, start: int) -> Labels | None:
        """The preferred match starting at row ``start`` (possibly empty), or None."""
        self._start = start
        self._failed = set()
        self._conts = {}
        return self._run(self.pattern, start, (), False, None)

    def _push(self, frame: tuple, rest):
        """The continuation ``(frame, rest)``, one object per distinct content (frames
        name their node by identity: the pattern's nodes live as long as the matcher), so
        the failed-state memo keys a continuation by id instead of hashing the whole
        chain of frames and pattern nodes at every step."""
        key = (frame[0], id(frame[1]), *frame[2:], id(rest))
        cont = self._conts.get(key)
        if cont is None:
            cont = self._conts[key] = (frame, rest)
        return cont

    # -- search ------------------------------------------------------------------

    def failed_before(self, node: PatternNode, pos: int, labels: Labels, excl: bool,
                      cont) -> bool:
        """Whether this search state is already known to fail (the trace reports it)."""
        return (id(node), pos, labels, excl, id(cont)) in self._failed

    def _run(self, node: PatternNode, pos: int, labels: Labels, excl: bool, cont) -> Labels | None:
        key = (id(node), pos, labels, excl, id(cont))
        if key in self._failed:
            return None
        self.steps += 1
        if self.max_steps is not None and self.steps > self.max_steps:
            raise SearchBudgetExceeded(f"pattern search exceeded {self.max_steps} steps")
        result = self._step(node, pos, labels, excl, cont)
        if result is None:
            self._failed.add(key)
        return result

    def _step(self, node: PatternNode, pos: int, labels: Labels, excl: bool, cont) -> Labels | None:
        if isinstance(node, Var):
            if pos >= self.n_rows:
                return None
            new = labels + ((node.name, excl),)
            if not self.accept(self._start, pos, tuple(v for v, _ in new)):
                return None
            return self._resume(cont, pos + 1, new)
        if isinstance(node, Empty):
            return self._resume(cont, pos, labels)
        if isinstance(node, Anchor):
            at_edge = pos == 0 if node.kind == "start" else pos == self.n_rows
            return self._resume(cont, pos, labels) if at_edge else None
        if isinstance(node, Concat):
            return self._run(node.items[0], pos, labels, excl,
                             self._push(("seq", node, 1, excl), cont))
        if isinstance(node, Alternation):
            for item in node.items:
                result = self._run(item, pos, labels, excl, cont)
                if result is not None:
                    return result
            return None
        if isinstance(node, Exclusion):
            return self._run(node.child, pos, labels, True, cont)
        if isinstance(node, Quantified):
            return self._loop(node, 0, pos, labels, excl, cont, may_iterate=True)
        if isinstance(node, Permute):
            return self._permute(node, 0, pos, labels, excl, cont)
        raise TypeError(f"unknown pattern node {node!r}")

    def _resume(self, cont, pos: int, labels: Labels) -> Labels | None:
        """Continue after a sub-pattern matched up to ``pos``."""
        if cont is None:
            return labels
        frame, rest = cont
        if frame[0] == "seq":
            _, node, i, excl = frame
            nxt = rest if i + 1 == len(node.items) else self._push(("seq", node, i + 1, excl),
                                                                   rest)
            return self._run(node.items[i], pos, labels, excl, nxt)
        if frame[0] == "perm":
            _, node, used, excl = frame
            return self._permute(node, used, pos, labels, excl, rest)
        _, node, count, iter_start, excl = frame
        empty_loop = pos == iter_start and node.max is None and count >= max(node.min, 1)
        return self._loop(node, count, pos, labels, excl, rest, may_iterate=not empty_loop)

    def _permute(self, node: Permute, used: int, pos: int, labels: Labels, excl: bool,
                 cont) -> Labels | None:
        """Items not in the ``used`` bitmask, next one in written order first."""
        if used == (1 << len(node.items)) - 1:
            return self._resume(cont, pos, labels)
        for i, item in enumerate(node.items):
            if not used >> i & 1:
                result = self._run(item, pos, labels, excl,
                                   self._push(("perm", node, used | 1 << i, excl), cont))
                if result is not None:
                    return result
        return None

    def _loop(self, node: Quantified, count: int, pos: int, labels: Labels, excl: bool,
              cont, may_iterate: bool) -> Labels | None:
        """After ``count`` iterations: iterate again and/or leave, in preference order."""
        can_iterate = may_iterate and (node.max is None or count < node.max)
        can_leave = count >= node.min
        for choice in (("iterate", "leave") if node.greedy else ("leave", "iterate")):
            if choice == "iterate" and can_iterate:
                nxt = count + 1
                if node.max is None:  # beyond this, the count no longer matters
                    nxt = min(nxt, max(node.min, 1))
                frame = ("loop", node, nxt, pos, excl)
                result = self._run(node.child, pos, labels, excl, self._push(frame, cont))
            elif choice == "leave" and can_leave:
                result = self._resume(cont, pos, labels)
            else:
                continue
            if result is not None:
                return result
        return None
