"""A linear sequence of the run NFA (cython_ext/cep.pyx): the unit cep_expand turns a CEP
pattern into and cep_group_shapes reshapes iteration groups with."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LinearSeq:
    comps: list            # (label, min, max or -1)
    # NOT checks: (negated node, a, b, c, d, pending): the region lies after the last row
    # of components [a, b) and before the first row of components [c, d) (R6); pending:
    # an AND's NOT whose region the enclosing SEQ still has to fix
    negs: list
    ids: list = None       # per comp: its NFA state identity (pattern node, AND order)
    pos: int | None = None
    # iteration groups of KL over a SEQ (R6b): (first comp, last comp, min, max or -1,
    # alternatives [(first, last)], per alternative: entered only by a loop back,
    # outer: the group's slot in the nearest enclosing SEQ (comps [a, b) before it,
    # [c, d) after it) or None until a SEQ fixes it, ids of the NOT nodes inside, R6c)
    groups: list = None
    # a variable may have several components (the interleavings of AND(a, b+), R4)
    repeats: bool = False
