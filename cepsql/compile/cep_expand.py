"""The pattern as the run NFA's linear sequences (cython_ext/cep.pyx).

A CEP pattern expands into a union of *linear sequences* of components (a variable, or
V* / V+ / V{n,m} / KL(V, ...) of one variable) -- SEQ / regex concatenation, top-level
or nested OR (union of branches), AND (permutations of its items; under
SKIP_TILL_ANY_MATCH only AND of single variables, where permutations are exactly the
interleavings; SEQs of variables and one closure as their shuffles, R4). NOT(p) items
of SEQ or AND become checks on component ranges (rules R6,
R6a), p itself expanded the same way into a NOT *program* the evaluator searches with
any-match semantics. KL over a SEQ, or over an OR of SEQs naming distinct variables,
becomes an *iteration group* of its sequence (R6b); its alternatives may share a
variable (KL(AND(a, b))). A NOT inside the group is checked per iteration, its open
sides taken from the neighbouring iterations or the group's slot in the enclosing SEQ
(R6c). A KL nested in it, or an AND of closures under SKIP_TILL_ANY_MATCH, becomes flat
alternatives with the alternatives that may follow each (cep_group_shapes). Outside
groups each positive variable occurs once per sequence, and no NOT variable is also
positive.
"""
from __future__ import annotations

from itertools import permutations, product

import numpy as np

from cepsql.algebra.pattern import (Alternation, Anchor, Concat, Empty, Exclusion, Negation,
                               Permute, Quantified, Var)
from cepsql.errors import CepAnalysisError, CepUnsupportedError
from cepsql.compile.cep_group_shapes import (PLAIN, and_automaton, flatten_nested,
                                             interleaved_closures)
from cepsql.compile.linear_seq import LinearSeq
from cepsql.planning.evaluator_choice import PLANNED_STRATEGY

MAX_SEQUENCES = 256


def _shift(negs, k):
    return [(node, a + k, b + k, c + k, d + k, p) for node, a, b, c, d, p in negs]


def _shift_groups(groups, k):
    return [(f + k, l + k, lo, hi, [(a + k, b + k) for a, b in alts], loop,
             None if outer is None else tuple(x + k for x in outer), inner)
            for f, l, lo, hi, alts, loop, outer, inner in groups or ()]


def _fix_outer(groups, slot):
    """Groups of one SEQ item: their slot is the item's in this SEQ (R6c)."""
    return [g[:6] + (slot if g[6] is None else g[6], g[7]) for g in groups]


def _concat(parts: list[list[LinearSeq]]) -> list[LinearSeq]:
    out = []
    for combo in product(*parts):
        comps, negs, ids, groups = [], [], [], []
        for s in combo:
            negs += _shift(s.negs, len(comps))
            groups += _shift_groups(s.groups, len(comps))
            comps += s.comps
            ids += s.ids
        out.append(LinearSeq(comps, negs, ids, groups=groups,
                             repeats=any(s.repeats for s in combo)))
        if len(out) > MAX_SEQUENCES:
            raise CepUnsupportedError("CEP pattern expands into too many alternatives")
    return out


def settle_open_negations(seqs: list) -> None:
    """AND NOTs no SEQ encloses: both sides open (window-bounded, R6)."""
    for s in seqs:
        s.negs = [(node, b, b, c, c, False) if p else (node, a, b, c, d, p)
                  for node, a, b, c, d, p in s.negs]


def expand(node, strategy: str) -> list[LinearSeq]:
    """The pattern as a union of linear sequences (see module docstring)."""
    if isinstance(node, Var):
        return [LinearSeq([(node.name, 1, 1)], [], [(id(node),)])]
    if isinstance(node, Empty):
        return [LinearSeq([], [], [])]
    if isinstance(node, Quantified):
        if not isinstance(node.child, Var):
            return _expand_group(node, strategy)
        if node.max == 0:
            return [LinearSeq([], [], [])]
        return [LinearSeq([(node.child.name, node.min, -1 if node.max is None else node.max)], [],
                     [(id(node),)])]
    if isinstance(node, Alternation):
        out = []
        for item in node.items:
            out += expand(item, strategy)
        return out
    if isinstance(node, Concat):
        parts: list[list[LinearSeq]] = []
        neg_at: list[tuple[object, int]] = []   # (negated node, index of the next part)
        for item in node.items:
            if isinstance(item, Negation):
                neg_at.append((item.child, len(parts)))
                continue
            parts.append(expand(item, strategy))
        out = []
        for combo in product(*parts):
            comps, negs, starts, ids, owner, groups = [], [], [], [], [], []
            for k, s in enumerate(combo):
                starts.append(len(comps))
                negs += _shift(s.negs, len(comps))
                groups.append(_shift_groups(s.groups, len(comps)))
                owner += [k] * len(s.negs)
                comps += s.comps
                ids += s.ids
            starts.append(len(comps))
            n = len(comps)
            groups = [g for k, gs in enumerate(groups)
                      for g in _fix_outer(gs, (0, starts[k], starts[k + 1], n))]
            # an item's pending AND NOTs: the item's slot in this SEQ (R6)
            negs = [(child, 0, starts[k], starts[k + 1], n, False) if p else
                    (child, a, b, c, d, p)
                    for k, (child, a, b, c, d, p) in zip(owner, negs)]
            for child, at in neg_at:
                negs.append((child, 0, starts[at], starts[at], n, False))
            out.append(LinearSeq(comps, negs, ids, groups=groups,
                                 repeats=any(s.repeats for s in combo)))
            if len(out) > MAX_SEQUENCES:
                raise CepUnsupportedError("CEP pattern expands into too many alternatives")
        return out
    if isinstance(node, Permute):
        positives = [i for i in node.items if not isinstance(i, Negation)]
        negated = [i.child for i in node.items if isinstance(i, Negation)]
        if strategy == "SKIP_TILL_ANY_MATCH" and not all(isinstance(i, Var) for i in positives):
            return _interleavings(node, positives, negated)
        out = []
        for k, order in enumerate(permutations(positives)):
            for s in _concat([expand(i, strategy) for i in order]):
                n = len(s.comps)
                # pending NOTs of nested ANDs share this AND's slot (R6)
                s.negs = [(c, a, 0, n, d, True) if p else (c, a, b, cc, d, p)
                          for c, a, b, cc, d, p in s.negs]
                s.negs += [(c, 0, 0, n, n, True) for c in negated]
                s.ids = [("and", id(node), k) + x for x in s.ids]   # own states per order
                out.append(s)
            if len(out) > MAX_SEQUENCES:
                raise CepUnsupportedError("CEP pattern expands into too many alternatives")
        return out
    if isinstance(node, Negation):
        raise CepAnalysisError("NOT(...) must be an item of SEQ or AND", pos=node.pos)
    if isinstance(node, Anchor):
        raise CepUnsupportedError("anchors ^ and $ are not available in CEP mode",
                                  pos=getattr(node, "pos", None))
    if isinstance(node, Exclusion):
        raise CepUnsupportedError("pattern exclusion {- -} is not supported by the CEP "
                                  "evaluator", pos=getattr(node, "pos", None))
    raise CepUnsupportedError(f"{type(node).__name__} is not supported by the CEP evaluator",
                              pos=getattr(node, "pos", None))


def _interleavings(node: Permute, positives: list, negated: list) -> list[LinearSeq]:
    """AND under SKIP_TILL_ANY_MATCH (R4: items in any order, interleaving allowed) of
    items that expand into SEQs of single variables (NOT items between them allowed) and
    at most one unbounded closure V{0,1..} of a variable: every shuffle of the items'
    variables that keeps each item's order, and V's rows in the gaps around them: one
    sequence per first non-empty gap (V+ there, V* in the later gaps; all gaps V* when
    V may be empty). V then has several components (repeats): only an iteration group
    runs such sequences (its rows carry their component). An item's NOT region lies
    between its own neighbouring variables (rows of other items in between are match
    rows). Any other AND would interleave without bound and raises."""
    pos = getattr(node, "pos", None)
    closures = [i for i in positives if isinstance(i, Quantified) and isinstance(i.child, Var)
                and i.max is None and i.min <= 1]
    c = closures[0] if len(closures) == 1 else None
    choices = []
    for item in positives:
        if item is c:
            continue
        seqs = expand(item, "SKIP_TILL_ANY_MATCH")
        if len(closures) > 1 or any(x.groups or x.repeats or not x.comps or
                                    any(lo != 1 or hi != 1 for _, lo, hi in x.comps) or
                                    any(neg[5] for neg in x.negs) for x in seqs):
            raise CepUnsupportedError(
                "AND(...) of non-single-variable items under SKIP_TILL_ANY_MATCH "
                "(interleaved closures) is supported by the CEP evaluator only inside "
                "KL(...) over SEQs of variables and one unbounded closure of a variable "
                "(KL(AND(SEQ(a, b), c+)))", pos=pos)
        choices.append(seqs)
    out = []
    for combo in product(*choices):
        for k, order in enumerate(_shuffles([len(x.comps) for x in combo])):
            starts = [0] if c is None or c.min == 0 else range(len(order) + 1)
            for j in starts:
                out.append(_gapped(node, combo, order, c, j, (k, j), negated))
                if len(out) > MAX_SEQUENCES:
                    raise CepUnsupportedError(
                        "CEP pattern expands into too many alternatives", pos=pos)
    return out


def _shuffles(lengths: list[int]) -> list[list[tuple[int, int]]]:
    """Every merge of sequences of the given lengths keeping each one's order, as
    (sequence, index) lists."""
    if not any(lengths):
        return [[]]
    out = []
    for i, n in enumerate(lengths):
        if n:
            rest = list(lengths)
            rest[i] -= 1
            out += [tail + [(i, n - 1)] for tail in _shuffles(rest)]
    return out


def _gapped(node, combo, order, c, j, key, negated) -> LinearSeq:
    """One interleaving: the items' variables in order, V's components in the gaps
    (gap j first non-empty) and each item's NOT checks on its own neighbours."""
    comps, ids, at = [], [], {}
    for gap in range(len(order) + 1):
        if c is not None and gap >= j:
            comps.append((c.child.name, 1 if gap == j and c.min == 1 else 0, -1))
            ids.append(("and", id(node)) + key + ("gap", gap))
        if gap < len(order):
            i, idx = order[gap]
            at[(i, idx)] = len(comps)
            comps.append(combo[i].comps[idx])
            ids.append(("and", id(node)) + key + (i, idx))
    n = len(comps)
    negs = [(x, 0, 0, n, n, True) for x in negated]
    for i, x in enumerate(combo):
        for child, a, b, cc, d, _ in x.negs:
            lo = (at[(i, b - 1)], at[(i, b - 1)] + 1) if b > a else (0, 0)
            hi = (at[(i, cc)], at[(i, cc)] + 1) if d > cc else (n, n)
            negs.append((child,) + lo + hi + (False,))
    return LinearSeq(comps, negs, ids, repeats=True)


def _expand_group(node: Quantified, strategy: str) -> list[LinearSeq]:
    """KL(p) of a composite p (R6b) as one sequence with an iteration group: p must
    expand into linear sequences (alternatives: SEQs of variables and closures of
    variables) that each take at least one row and hold no inner group (nested KLs are
    flattened first); an iteration runs one alternative. Alternatives may share a
    variable and name one twice (KL(AND(a, b)) = the orders (a, b) | (b, a)): the
    components stay apart, the rows carry the variable's label (R6b). A NOT inside p is
    checked per iteration (R6c): a side no row of its SEQ bounds (a NOT at the
    iteration's edge, next to items that took no row, an AND's NOT) is the neighbouring
    iteration's nearest row, or the group's slot in the enclosing SEQ; the evaluator
    splits a match into iterations from the components that took its rows (cep.pyx
    _neg_iter_ok), so an alternative holding a NOT must split one way only
    (_ambiguous_split).
    """
    pos = getattr(node, "pos", None)
    if strategy == PLANNED_STRATEGY and interleaved_closures(node.child):
        expanded, loop_only = and_automaton(node.child)
    else:
        expanded = expand(node.child, strategy)
        loop_only = [PLAIN] * len(expanded)
    if any(x.groups for x in expanded):
        expanded, loop_only = flatten_nested(node, expanded, strategy)
    if any(x.groups for x in expanded) or \
            any(all(lo == 0 for _, lo, _ in x.comps) for x in expanded):
        raise CepUnsupportedError(
            "the CEP evaluator runs KL(...) of a composite pattern only over SEQs of "
            "variables and closures of variables, or an OR/AND of such SEQs, each taking "
            "a row (e.g. KL(SEQ(a, b+)), KL(OR(a, SEQ(b, c))), KL(AND(a, b))), or "
            "KL(SEQ(a, KL(SEQ(b, c)))) (see cep_group_shapes.flatten_nested)", pos=pos)
    if any(x.negs and _ambiguous_split(x) for x in expanded):
        raise CepUnsupportedError(
            "the CEP evaluator runs a NOT inside KL(...) only when the iterations of its "
            "alternative split one way: not when the alternative's only required item is a "
            "closure (KL(SEQ(NOT(f), a+)) reads a a as one or two iterations)", pos=pos)
    if node.max == 0:
        return [LinearSeq([], [], [])]
    comps, ids, alts, negs = [], [], [], []
    for x in expanded:
        n = len(x.comps)
        alts.append((len(comps), len(comps) + n - 1))
        # an AND's NOT directly in p: its scope is the whole iteration (R6c)
        local = [(c, 0, 0, n, n, False) if p else (c, a, b, cc, d, p)
                 for c, a, b, cc, d, p in x.negs]
        negs += _shift(local, len(comps))
        comps += x.comps
        ids += [("group", id(node)) + tuple(i) for i in x.ids]
    hi = -1 if node.max is None else node.max
    inner = frozenset(id(neg[0]) for neg in negs)
    return [LinearSeq(comps, negs, ids, groups=[(0, len(comps) - 1, node.min, hi, alts,
                                                 tuple(loop_only), None, inner)])]


def _ambiguous_split(seq: LinearSeq) -> bool:
    """Whether consecutive rows of one component may be one iteration or two: a closure
    that is the alternative's only required component (all others optional)."""
    comps = seq.comps
    return any(hi != 1 and all(c[1] == 0 for j, c in enumerate(comps) if j != i)
               for i, (_, _, hi) in enumerate(comps))


def _iteration_negs(seq: LinearSeq) -> list[list[int]]:
    """Per NOT check of seq, when it lies inside a group's pattern (R6c): its
    alternative's first and last component, the group's, and the group's slot
    (comps [a, b) before, [c, d) after; -1s when no SEQ encloses the group); else -1s."""
    out = []
    for node, a, _, _, d, _ in seq.negs:
        where = [-1] * 8
        for f, l, _, _, alts, _, outer, inner in seq.groups or ():
            if id(node) not in inner:
                continue
            for first, last in alts:
                if first <= a and d <= last + 1:
                    where = [first, last, f, l] + list(outer or (-1, -1, -1, -1))
        out.append(where)
    return out


def group_arrays(seqs: list, strategy: str, conj_label, conj_mask, labels) -> dict:
    """cep.pyx set_groups arrays, or {} when no sequence has a group."""
    if not any(s.groups for s in seqs):
        return {}
    rows, recheck, neg_iter = [], [], []
    # per comp: loop-only alternative (at its first comp); the alternatives that may
    # follow, the group may not be left, no outer iteration counted, the ones continuing
    # an outer iteration (at its last comp; cep_group_shapes)
    only = [[0, -1, 0, 0, 0] for s in seqs for _ in s.comps]
    in_group: dict[int, int] = {}   # label index -> mask of its group's labels
    for s in seqs:
        per = [[-1, -1, 0, 0, -1, -1] for _ in s.comps]
        base = len(rows)
        neg_iter += [[x + base if x >= 0 else -1 for x in where]
                     for where in _iteration_negs(s)]
        for f, l, lo, hi, alts, loop, _, _ in s.groups or ():
            # a set of labels: alternatives may name a variable more than once
            members = sum(1 << lab for lab in {labels.index(s.comps[i][0])
                                              for i in range(f, l + 1)})
            for k, (a, b) in enumerate(alts):
                nxt = alts[k + 1][0] + base if k + 1 < len(alts) else -1
                only[base + a][0] = int(loop[k][0])
                only[base + b][1:] = [loop[k][1], int(loop[k][2]), int(loop[k][3]),
                                      loop[k][4]]
                for i in range(a, b + 1):
                    per[i] = [f + base, l + base, lo, hi, b + base, nxt if i == a else -1]
                    lab = labels.index(s.comps[i][0])
                    in_group[lab] = in_group.get(lab, 0) | members
        rows += per
        recheck.append(int(bool(s.groups)))
    # under SKIP_TILL_ANY_MATCH a take must not be refused on another group variable's
    # row of an earlier iteration: R2 reads its FINAL row, decided on completion
    skip = [int(strategy == PLANNED_STRATEGY and
                bool(int(mask) & (in_group.get(lab, 0) & ~(1 << lab))))
            for lab, mask in zip(conj_label, conj_mask)]
    return dict(groups=np.asarray(rows, dtype=np.int32).reshape(-1, 6),
                seq_recheck=np.asarray(recheck, dtype=np.uint8),
                take_skip=np.asarray(skip, dtype=np.uint8),
                neg_iter=np.asarray(neg_iter, dtype=np.int32).reshape(-1, 8),
                loop_only=np.asarray(only, dtype=np.int64).reshape(-1, 5))


def negated_variables(node) -> set[str]:
    """The variables a NOT's pattern names."""
    if isinstance(node, Var):
        return {node.name}
    out: set[str] = set()
    for child in list(getattr(node, "items", ()) or ()) + [getattr(node, "child", None)]:
        if child is not None:
            out |= negated_variables(child)
    return out


def not_programs(seqs: list, labels: list[str]) -> tuple[dict, list[list]]:
    """Each distinct negated node -> its index, and per index the linear sequences of
    (label index, min, max) the evaluator searches (any-match, R6a)."""
    index: dict = {}
    programs: list[list] = []
    for s in seqs:
        for child, *_ in s.negs:
            if child in index:
                continue
            expanded = [x for x in expand(child, PLANNED_STRATEGY) if x.comps]
            if any(x.negs for x in expanded):
                raise CepAnalysisError("NOT(...) cannot be nested inside NOT(...)",
                                       pos=getattr(child, "pos", None))
            index[child] = len(programs)
            programs.append([[(labels.index(n), lo, hi) for n, lo, hi in x.comps]
                             for x in expanded])
    return index, programs


def pack_not_programs(programs: list[list], conj_label, conj_mask, conj_late,
                       labels: list[str]) -> dict:
    """Arrays of set_not_programs: programs -> sequences -> components, and per conjunct
    whether it reads no other variable of a NOT it belongs to (checked on placement)."""
    sub_start, seq_start, comps = [0], [0], []
    others: dict[int, int] = {}
    for prog in programs:
        members = {lab for seq in prog for lab, _, _ in seq}
        for lab in members:
            others[lab] = others.get(lab, 0) | sum(1 << x for x in members if x != lab)
        for seq in prog:
            comps += [list(c) for c in seq]
            seq_start.append(len(comps))
        sub_start.append(len(seq_start) - 1)
    early = [int(lab in others and not late and not (int(mask) & others[lab]))
             for lab, mask, late in zip(conj_label, conj_mask, conj_late)]
    return dict(not_sub_start=np.asarray(sub_start, dtype=np.int32),
                not_seq_start=np.asarray(seq_start, dtype=np.int32),
                not_comps=np.asarray(comps, dtype=np.int32).reshape(-1, 3),
                not_early=np.asarray(early, dtype=np.uint8))
