"""Compile a pattern AST into a program for the regex VM (Trino-style: pattern ->
program -> VM).

Instructions are (op, a, b) triples of ints. Preference is encoded in SPLIT: the VM
explores ``a`` before ``b``, so threads stay in the standard's preference order.

Empty iterations follow Trino: bounded quantifiers are unrolled and every iteration may
match nothing; in an unbounded loop an iteration that matched no rows leaves the loop
instead of looping again (SAVE at the body start, LOOP_BACK at its end). That keeps the
VM finite on ``(A*)*``.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ..algebra.pattern import (Alternation, Anchor, Concat, Empty, Exclusion, PatternNode,
                               Permute, Quantified, Var)
from ..errors import CepUnsupportedError

OP_LABEL = 0      # a = label id: consume the current row if the label's DEFINE holds
OP_SPLIT = 1      # try a, then b
OP_JUMP = 2       # go to a
OP_DONE = 3       # match found
OP_ANCHOR_START = 4
OP_ANCHOR_END = 5
OP_SAVE = 6       # slot a := current position
OP_LOOP_BACK = 7  # go to b if current position > slot a (progress), else fall through
OP_EXCL_BEGIN = 8
OP_EXCL_END = 9

MAX_PROGRAM_SIZE = 200_000
MAX_PERMUTE_ITEMS = 7


@dataclass
class Program:
    ops: np.ndarray  # int32[n, 3]
    labels: list[str]  # label id -> variable name
    n_slots: int

    def __len__(self) -> int:
        return len(self.ops)

    def describe(self) -> str:
        names = {OP_LABEL: "LABEL", OP_SPLIT: "SPLIT", OP_JUMP: "JUMP", OP_DONE: "DONE",
                 OP_ANCHOR_START: "ANCHOR ^", OP_ANCHOR_END: "ANCHOR $", OP_SAVE: "SAVE",
                 OP_LOOP_BACK: "LOOP_BACK", OP_EXCL_BEGIN: "EXCL_BEGIN", OP_EXCL_END: "EXCL_END"}
        lines = []
        for i, (op, a, b) in enumerate(self.ops.tolist()):
            arg = self.labels[a] if op == OP_LABEL else f"{a} {b}"
            lines.append(f"{i:4d} {names[op]} {arg}")
        return "\n".join(lines)


def compile_pattern(pattern: PatternNode, labels: list[str]) -> Program:
    """labels: variable names in label-id order (primary variables of the pattern)."""
    builder = _Builder({name: i for i, name in enumerate(labels)})
    builder.emit_node(pattern)
    builder.emit(OP_DONE)
    return Program(np.asarray(builder.code, dtype=np.int32).reshape(-1, 3), list(labels),
                   builder.n_slots)


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
        self.code: list[list[int]] = []
        self.n_slots = 0

    def emit(self, op: int, a: int = 0, b: int = 0) -> int:
        if len(self.code) >= MAX_PROGRAM_SIZE:
            raise CepUnsupportedError(
                "pattern too large: quantifier bounds expand to more than "
                f"{MAX_PROGRAM_SIZE} instructions")
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
            if len(node.items) > MAX_PERMUTE_ITEMS:
                raise CepUnsupportedError(
                    f"PERMUTE with more than {MAX_PERMUTE_ITEMS} items is not supported")
            orders = [Concat(tuple(p)) if len(p) > 1 else p[0]
                      for p in itertools.permutations(node.items)]
            if len(orders) == 1:
                self.emit_node(orders[0])
            else:
                self.emit_alternation(orders)
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

    def emit_quantified(self, node: Quantified) -> None:
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
            else:
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
