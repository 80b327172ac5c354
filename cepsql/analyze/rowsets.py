"""Label sets and row references in the integer form the Cython evaluators read.

A *set* is a primary variable (its label id) or a SUBSET (ids after the labels);
-1 is the universal variable. A row reference is encoded as four ints:
[set id, logical (0 FIRST / 1 LAST), logical offset, physical offset], plus a FINAL flag
for measures.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cepsql.algebra.expressions import RowRef

UNIVERSAL = -1
FIRST, LAST = 0, 1


@dataclass
class LabelSets:
    labels: list[str]
    subsets: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.set_names = list(self.labels) + list(self.subsets)

    def set_id(self, var: str | None) -> int:
        return UNIVERSAL if var is None else self.set_names.index(var)

    def members(self, var: str | None) -> set[str]:
        if var is None:
            return set(self.labels)
        return set(self.subsets.get(var, (var,)))

    def membership(self) -> np.ndarray:
        """uint8[n_sets, n_labels]: 1 when the label belongs to the set."""
        out = np.zeros((max(len(self.set_names), 1), max(len(self.labels), 1)), dtype=np.uint8)
        for s, name in enumerate(self.set_names):
            for label in self.members(name):
                out[s, self.labels.index(label)] = 1
        return out


@dataclass
class RefTable:
    """Distinct row references, interned to small ints."""
    sets: LabelSets
    refs: list[RowRef] = field(default_factory=list)

    def intern(self, ref: RowRef) -> int:
        if ref not in self.refs:
            self.refs.append(ref)
        return self.refs.index(ref)

    def encode(self) -> np.ndarray:
        """int32[n, 5]: set id, logical, logical offset, physical offset, final."""
        rows = [[self.sets.set_id(r.var), FIRST if r.logical == "FIRST" else LAST,
                 r.logical_offset, r.physical_offset, int(r.final)] for r in self.refs]
        return np.asarray(rows or np.zeros((0, 5)), dtype=np.int32).reshape(-1, 5)
