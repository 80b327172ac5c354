"""Compile a pattern AST into a program for the regex VM (Trino-style: pattern ->
program -> VM).

Instructions are (op, a, b) triples of ints. Preference is encoded in SPLIT: the VM
explores ``a`` before ``b``, so threads stay in the standard's preference order.

Empty iterations follow Trino: in a bounded quantifier every iteration may match
nothing; in an unbounded loop an iteration that matched no rows leaves the loop instead
of looping again (SAVE at the body start, LOOP_BACK at its end). That keeps the VM finite
on ``(A*)*``. The matcher forgets the row an iteration began at once it consumed a row
(all LOOP_BACK asks is whether it did), and the slot is cleared where the loop exits
(CLEAR): threads that differ only in when their iterations began merge (else ``(A*)*B``
keeps one thread per such row and turns quartic, ``(A? B?)* C+ D`` cubic).

Bounded quantifiers are unrolled while that stays small (UNROLL_LIMIT instructions);
larger ones, such as ``(A{700}){700}``, become a counted loop (COUNT_BEGIN / COUNT_LOOP
with its bounds / COUNT_NEXT, an iteration counter in a slot, as Trino does), so the
program grows with the pattern's text, not with its bounds.

PERMUTE means the alternation of its orders, lexicographic by item position (Trino).
When every item matches in at most one way from a given row (variables, fixed
sequences of them), it is not expanded into its n! orders: a slot holds the bitmask of
the items a thread has used, and a dispatch tries the unused items in written order,
then comes back. Depth-first, that enumerates the orders lexicographically, and threads
with the same mask at the same instruction merge, so states stay at most 2^n. Items with
inner choices (quantifiers, alternation) would interleave those choices with the choice
of the next item, so such a PERMUTE is expanded (up to MAX_EXPANDED_PERMUTE items), or,
from MIN_SEARCHED_PERMUTE items where its place allows (below; faster from 5 items on,
benchmarks/bench_permute.py), *searched*: compiled as the dispatch loop, with
PERM_BEGIN's b = its item count, and the matcher fixes the order one position at a time,
the earliest item with which some match exists first, then finds the preferred match
under the whole order (matcher.pyx _attempt). That needs the order to be the first choice a path makes that can differ:
the searched PERMUTE is entered once per match, and only items without choices come
before it (the pattern is ``X Y PERMUTE(...) rest`` or ``PERMUTE(...) rest``).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations

import numpy as np

from cepsql.algebra.pattern import (Alternation, Anchor, Concat, Empty, Exclusion, PatternNode,
                               Permute, Quantified, Var, walk)
from cepsql.errors import CepUnsupportedError
from cepsql.compile.opcodes import (OP_ANCHOR_END, OP_ANCHOR_START, OP_CLEAR,
                                    OP_COUNT_BEGIN, OP_COUNT_BOUNDS, OP_COUNT_LOOP,
                                    OP_COUNT_NEXT, OP_DONE, OP_EXCL_BEGIN, OP_EXCL_END,
                                    OP_FAIL, OP_JUMP, OP_LABEL, OP_LOOP_BACK, OP_PERM_BEGIN,
                                    OP_PERM_NEXT, OP_PERM_TRY, OP_SAVE, OP_SPLIT)

MAX_PROGRAM_SIZE = 200_000
MAX_PERMUTE_ITEMS = 62     # the used-items mask is one signed 64-bit state word
MAX_EXPANDED_PERMUTE = 7   # items with inner choices: n! alternatives at most
MIN_SEARCHED_PERMUTE = 5   # ... searched from this many items where the place allows
MAX_CLOSURE_DEPTH = 1_000_000
UNROLL_LIMIT = 4096        # instructions a bounded quantifier unrolls to; beyond, it counts
MAX_COUNT = 2**31 - 1      # a counted loop's bounds are int32 program words


@dataclass
class Program:
    ops: np.ndarray  # int32[n, 3]
    labels: list[str]  # label id -> variable name
    n_slots: int
    closure_depth: int  # bound on branch nesting while following epsilon instructions

    def __len__(self) -> int:
        return len(self.ops)

    def describe(self) -> str:
        names = {OP_LABEL: "LABEL", OP_SPLIT: "SPLIT", OP_JUMP: "JUMP", OP_DONE: "DONE",
                 OP_ANCHOR_START: "ANCHOR ^", OP_ANCHOR_END: "ANCHOR $", OP_SAVE: "SAVE",
                 OP_LOOP_BACK: "LOOP_BACK", OP_EXCL_BEGIN: "EXCL_BEGIN", OP_EXCL_END: "EXCL_END",
                 OP_PERM_BEGIN: "PERM_BEGIN", OP_PERM_NEXT: "PERM_NEXT", OP_PERM_TRY: "PERM_TRY",
                 OP_FAIL: "FAIL", OP_CLEAR: "CLEAR", OP_COUNT_BEGIN: "COUNT_BEGIN",
                 OP_COUNT_LOOP: "COUNT_LOOP", OP_COUNT_BOUNDS: "COUNT_BOUNDS",
                 OP_COUNT_NEXT: "COUNT_NEXT"}
        lines = []
        for i, (op, a, b) in enumerate(self.ops.tolist()):
            if op == OP_LABEL:
                arg = self.labels[a]
            elif op in (OP_PERM_NEXT, OP_PERM_TRY):
                arg = f"slot {a >> 6} item {a & 63} -> {b}"
            elif op == OP_COUNT_LOOP:
                arg = f"slot {a >> 1}{' reluctant' if a & 1 else ''} exit {b}"
            else:
                arg = f"{a} {b}"
            lines.append(f"{i:4d} {names[op]} {arg}")
        return "\n".join(lines)


def compile_pattern(pattern: PatternNode, labels: list[str]) -> Program:
    """labels: variable names in label-id order (primary variables of the pattern)."""
    builder = _Builder({name: i for i, name in enumerate(labels)})
    builder.searched = searched_permute(pattern)
    builder.emit_node(pattern)
    builder.emit(OP_DONE)
    depth = closure_depth(pattern)
    if depth > MAX_CLOSURE_DEPTH:
        raise CepUnsupportedError(
            "pattern too large: nested PERMUTE and quantifiers allow more than "
            f"{MAX_CLOSURE_DEPTH} steps without consuming a row", pos=first_pos(pattern))
    return Program(np.asarray(builder.code, dtype=np.int32).reshape(-1, 3), list(labels),
                   builder.n_slots, max(depth, len(builder.code)) + 2)


def first_pos(node: PatternNode) -> int | None:
    """The text position of node's first positioned part (a variable, PERMUTE, ...)."""
    return next((n.pos for n in walk(node) if getattr(n, "pos", None) is not None), None)


def searched_permute(pattern: PatternNode) -> Permute | None:
    """The PERMUTE the matcher searches order by order (module docstring): at least
    MIN_SEARCHED_PERMUTE items, some with inner choices, entered once per match, with
    only items without choices before it."""
    items = list(pattern.items) if isinstance(pattern, Concat) else [pattern]
    for item in items:
        if isinstance(item, Permute):
            if len(item.items) >= MIN_SEARCHED_PERMUTE and \
                    not all(single_path(i) for i in item.items):
                return item
            return None
        if not single_path(item):
            return None
    return None


def single_path(node: PatternNode) -> bool:
    """True when node matches in at most one way (one labelling) from any given row."""
    if isinstance(node, (Var, Empty, Anchor)):
        return True
    if isinstance(node, Concat):
        return all(single_path(i) for i in node.items)
    if isinstance(node, Exclusion):
        return single_path(node.child)
    if isinstance(node, Quantified):
        return node.max == node.min and single_path(node.child)
    if isinstance(node, Permute):
        return len(node.items) == 1 and single_path(node.items[0])
    return False


def closure_depth(node: PatternNode) -> int:
    """Upper bound on the branches one epsilon path of node's code can pass.

    Without PERMUTE every instruction is entered at most once per path (loops only go
    back after progress); a PERMUTE dispatch is re-entered once per item used. A path
    passes more than one iteration of a quantifier only when its body can match
    nothing."""
    if isinstance(node, (Var, Empty, Anchor)):
        return 1
    if isinstance(node, (Concat, Alternation)):
        return sum(closure_depth(i) for i in node.items) + len(node.items)
    if isinstance(node, Exclusion):
        return closure_depth(node.child) + 2
    if isinstance(node, Quantified):
        copies = node.min + 1 if node.max is None else node.max
        if not can_be_empty(node.child):
            copies = 1
        return (closure_depth(node.child) + 2) * max(copies, 1) + 1
    if isinstance(node, Permute):
        n = len(node.items)
        return (n + 1) * (sum(closure_depth(i) for i in node.items) + 2 * n + 3)
    raise TypeError(node)


def can_be_empty(node: PatternNode) -> bool:
    """True when node can match the empty row sequence."""
    if isinstance(node, (Empty, Anchor)):
        return True
    if isinstance(node, Var):
        return False
    if isinstance(node, (Concat, Permute)):
        return all(can_be_empty(i) for i in node.items)
    if isinstance(node, Alternation):
        return any(can_be_empty(i) for i in node.items)
    if isinstance(node, Quantified):
        return node.min == 0 or can_be_empty(node.child)
    if isinstance(node, Exclusion):
        return can_be_empty(node.child)
    raise TypeError(node)


class _Builder:
    def __init__(self, label_ids: dict[str, int]):
        self.label_ids = label_ids
        self.searched: Permute | None = None
        self.code: list[list[int]] = []
        self.n_slots = 0
        self.pos: int | None = None  # the text position of the node being emitted

    def emit(self, op: int, a: int = 0, b: int = 0) -> int:
        if len(self.code) >= MAX_PROGRAM_SIZE:
            raise CepUnsupportedError(
                "pattern too large: it compiles to more than "
                f"{MAX_PROGRAM_SIZE} instructions", pos=self.pos)
        self.code.append([op, a, b])
        return len(self.code) - 1

    def patch(self, at: int, a: int | None = None, b: int | None = None) -> None:
        if a is not None:
            self.code[at][1] = a
        if b is not None:
            self.code[at][2] = b

    @property
    def here(self) -> int:
        return len(self.code)

    def emit_node(self, node: PatternNode) -> None:
        self.pos = first_pos(node) if self.pos is None else self.pos
        if getattr(node, "pos", None) is not None:
            self.pos = node.pos
        if isinstance(node, Var):
            self.emit(OP_LABEL, self.label_ids[node.name])
        elif isinstance(node, Empty):
            pass
        elif isinstance(node, Anchor):
            self.emit(OP_ANCHOR_START if node.kind == "start" else OP_ANCHOR_END)
        elif isinstance(node, Concat):
            for item in node.items:
                self.emit_node(item)
        elif isinstance(node, Alternation):
            self.emit_alternation(list(node.items))
        elif isinstance(node, Exclusion):
            self.emit(OP_EXCL_BEGIN)
            self.emit_node(node.child)
            self.emit(OP_EXCL_END)
        elif isinstance(node, Permute):
            if len(node.items) == 1:
                self.emit_node(node.items[0])
            elif all(single_path(i) for i in node.items):
                self.emit_permute(node)
            elif node is self.searched:
                self.emit_permute(node, searched=True)
            elif len(node.items) <= MAX_EXPANDED_PERMUTE:
                self.emit_alternation([Concat(tuple(order))
                                       for order in permutations(node.items)])
            else:
                raise CepUnsupportedError(
                    f"PERMUTE with more than {MAX_EXPANDED_PERMUTE} items whose items have "
                    "inner choices (a quantifier, alternation or nested PERMUTE) is supported "
                    "only as the pattern's first item with choices, outside any quantifier "
                    "or alternation (e.g. PATTERN (S PERMUTE(A+, B, ...) E)); with "
                    "variables or fixed sequences as items it is supported anywhere",
                    pos=node.pos)
        elif isinstance(node, Quantified):
            self.emit_quantified(node)
        else:
            raise TypeError(f"unknown pattern node {node!r}")

    def emit_alternation(self, items: list[PatternNode]) -> None:
        jumps_to_end = []
        for i, item in enumerate(items):
            if i < len(items) - 1:
                split = self.emit(OP_SPLIT)
                self.patch(split, a=self.here)
                self.emit_node(item)
                jumps_to_end.append(self.emit(OP_JUMP))
                self.patch(split, b=self.here)
            else:
                self.emit_node(item)
        for j in jumps_to_end:
            self.patch(j, a=self.here)

    def emit_permute(self, node: Permute, searched: bool = False) -> None:
        """Dispatch loop over a used-items mask (see the module docstring)."""
        items = list(node.items)
        if len(items) > MAX_PERMUTE_ITEMS:
            raise CepUnsupportedError(
                f"PERMUTE with more than {MAX_PERMUTE_ITEMS} items is not supported",
                pos=node.pos)
        slot = self.n_slots
        self.n_slots += 1
        self.emit(OP_PERM_BEGIN, slot, len(items) if searched else 0)
        dispatch = self.emit(OP_PERM_NEXT, slot << 6 | len(items))
        tries = [self.emit(OP_PERM_TRY, slot << 6 | i) for i in range(len(items))]
        self.emit(OP_FAIL)
        for i, item in enumerate(items):
            self.patch(tries[i], b=self.here)
            self.emit_node(item)
            self.emit(OP_JUMP, dispatch)
        self.patch(dispatch, b=self.here)

    def child_size(self, node: Quantified) -> int:
        """Instructions one copy of node's body compiles to."""
        scratch = _Builder(self.label_ids)
        scratch.emit_node(node.child)
        return len(scratch.code)

    def emit_counted(self, node: Quantified) -> None:
        """A bounded quantifier as a loop over an iteration counter (module docstring)."""
        if node.max > MAX_COUNT:
            raise CepUnsupportedError(
                f"quantifier bound {node.max} is too large (at most {MAX_COUNT})",
                pos=self.pos)
        slot = self.n_slots
        self.n_slots += 1
        self.emit(OP_COUNT_BEGIN, slot)
        loop = self.emit(OP_COUNT_LOOP, slot << 1 | (0 if node.greedy else 1))
        self.emit(OP_COUNT_BOUNDS, node.min, node.max)
        self.emit_node(node.child)
        self.emit(OP_COUNT_NEXT, slot, loop)
        self.patch(loop, b=self.here)

    def emit_quantified(self, node: Quantified) -> None:
        copies = node.min if node.max is None else node.max
        if copies > 1 and copies * self.child_size(node) > UNROLL_LIMIT:
            if node.max is not None:
                self.emit_counted(node)
                return
            # {n,}: n counted iterations, then the unbounded loop
            self.emit_counted(Quantified(node.child, node.min, node.min, node.greedy))
            self.emit_quantified(Quantified(node.child, 0, None, node.greedy))
            return
        for _ in range(node.min):
            self.emit_node(node.child)
        if node.max is not None and node.max == node.min:
            return
        if node.max is None:
            loop = self.emit(OP_SPLIT)
            body = self.here
            if can_be_empty(node.child):
                slot = self.n_slots
                self.n_slots += 1
                self.emit(OP_SAVE, slot)
                self.emit_node(node.child)
                self.emit(OP_LOOP_BACK, slot, loop)
                self.set_split(loop, body, self.here, node.greedy)
                self.emit(OP_CLEAR, slot)  # both exits (split, no progress) pass here
                return
            self.emit_node(node.child)
            self.emit(OP_JUMP, loop)
            self.set_split(loop, body, self.here, node.greedy)
            return
        exits = []
        for _ in range(node.max - node.min):
            split = self.emit(OP_SPLIT)
            exits.append((split, self.here))
            self.emit_node(node.child)
        for split, body in exits:
            self.set_split(split, body, self.here, node.greedy)

    def set_split(self, split: int, body: int, exit_: int, greedy: bool) -> None:
        if greedy:
            self.patch(split, a=body, b=exit_)
        else:
            self.patch(split, a=exit_, b=body)
