"""Iteration groups whose alternatives must follow each other in a given way
(cep_expand: KL of a composite pattern, R6b): a KL nested in a composite KL, unrolled
as the Thompson NFA unrolls it, and KL(AND(a+, b+)) under SKIP_TILL_ANY_MATCH as an
automaton of single-row alternatives. Each returns the flat alternatives (linear
sequences) and per alternative its flags: (entered only by a loop back, mask of the
alternatives that may follow it, the group may not be left after it, it does not
count an outer iteration, the alternatives of that mask continuing an outer
iteration). cep.pyx set_groups takes them as the loop_only array.
"""
from __future__ import annotations

from cepsql.algebra.pattern import Negation, Permute, Quantified, Var
from cepsql.errors import CepUnsupportedError
from cepsql.compile.linear_seq import LinearSeq

# an alternative's flags outside nested groups (see flatten_nested)
PLAIN = (False, -1, False, False, 0)


def flatten_nested(node: Quantified, expanded: list, strategy: str
                    ) -> tuple[list[LinearSeq], list[tuple]]:
    """KL(p) whose alternatives hold a nested KL, as one iteration group (R6b). An
    alternative SEQ(p..., KL(q, n, m), s...) is the stages p q q ... s: as the Thompson
    NFA unrolls KL(q, n, m) into copies of q (n copies then m - n optional ones, or one
    copy that loops when unbounded), each copy of each alternative of q becomes a flat
    alternative (the first copy joined to p), and a stage says which may follow it:
    the next copy, itself (the looping copy), and once n copies were taken s alone or,
    without s, the end of the outer iteration (leave the group or start the next one).
    The language and the NFA's states after every take are those of the nested
    closures. Plain alternatives start and end an outer iteration. Per flat
    alternative: (entered only by a loop back, mask of the alternatives that may follow
    it, the group may not be left after it, it does not count an outer iteration, the
    ones of that mask that continue the current outer iteration: all that may follow
    once a bounded outer KL has its maximum)."""
    pos = getattr(node, "pos", None)
    # per outer alternative: stages [(seqs, successor stage indices, ends the outer
    # iteration)]; stage 0 starts it
    parts = []
    for x in expanded:
        if not x.groups:
            parts.append([([x], [], True)])
            continue
        ok = len(x.groups) == 1 and not x.negs
        if ok:
            f, l, lo, hi, alts, loop, _, _ = x.groups[0]
            suf = x.comps[l + 1:]
            ok = all(fl == PLAIN for fl in loop) and \
                (lo >= 1 or any(c[1] > 0 for c in x.comps[:f])) and \
                (not suf or any(c[1] > 0 for c in suf)) and (hi < 0 or hi <= 8)
        if not ok:
            raise CepUnsupportedError(
                "the CEP evaluator runs a KL(...) nested in a composite KL(...) only "
                "without NOT, with an inner KL bounded by at most 8 iterations or "
                "unbounded, and items around it that take a row when it may take none "
                "(e.g. KL(SEQ(a, KL(SEQ(b, c)))), KL(SEQ(KL(SEQ(a, b), 2), c)))", pos=pos)
        parts.append(_stages(x, f, l, lo, hi, alts))
    flat = [(k, j) for k, part in enumerate(parts) for j, st in enumerate(part)
            for _ in st[0]]
    if len(flat) > 64:
        raise CepUnsupportedError("a nested composite KL(...) expands into more than 64 "
                                  "alternatives", pos=pos)

    def stage_mask(k: int, j: int) -> int:
        return sum(1 << i for i, at in enumerate(flat) if at == (k, j))
    entry = sum(stage_mask(k, 0) for k in range(len(parts)))
    seqs, flags = [], []
    for k, part in enumerate(parts):
        for j, (alternatives, nxt, ends) in enumerate(part):
            cont = sum(stage_mask(k, t) for t in nxt)
            succ = cont | (entry if ends else 0)
            for seq in alternatives:
                seqs.append(seq)
                flags.append((j > 0, succ, not ends, j > 0, cont))
    return seqs, flags


def _stages(x: LinearSeq, f: int, l: int, lo: int, hi: int, alts: list) -> list:
    """The stages of SEQ(p, KL(q, lo, hi), s) (see flatten_nested); a copy's
    components get their own NFA identities (the Thompson NFA's copies of q)."""
    pre = (x.comps[:f], x.ids[:f])
    suf = (x.comps[l + 1:], x.ids[l + 1:])

    def copy(c: int, with_pre: bool) -> list[LinearSeq]:
        out = []
        for a, b in alts:
            ids = [tuple(i) + ("copy", c) for i in x.ids[a:b + 1]]
            if with_pre:
                out.append(LinearSeq(pre[0] + x.comps[a:b + 1], [], pre[1] + ids))
            else:
                out.append(LinearSeq(x.comps[a:b + 1], [], ids))
        return out
    n_copies = hi if hi >= 0 else max(lo, 1) + 1   # unbounded: the last copy loops
    stages: list = []
    if lo == 0:
        stages.append(([LinearSeq(pre[0], [], pre[1])], [], not suf[0]))
    first = len(stages)
    for c in range(1, n_copies + 1):
        stages.append((copy(c, c == 1 and lo >= 1 and f > 0), [], False))
    tail = len(stages)
    if suf[0]:
        stages.append(([LinearSeq(suf[0], [], suf[1])], [], True))
    out = []
    for j, (seqs, _, ends) in enumerate(stages):
        nxt = []
        done = j == 0 and lo == 0 or j >= first and j - first + 1 >= lo
        if j < first or j >= first and j < tail:
            if j + 1 < tail and j + 1 >= first:
                nxt.append(j + 1)
            if hi < 0 and j == tail - 1 and j >= first:
                nxt.append(j)            # the looping copy
            if done and suf[0]:
                nxt.append(tail)
        ends_here = ends if j >= tail else (done and not suf[0])
        out.append((seqs, nxt, ends_here))
    return out


def interleaved_closures(node) -> bool:
    """An AND (no NOT) of variables and unbounded closures of variables, two or more
    of them closures: under SKIP_TILL_ANY_MATCH no finite set of sequences spells its
    interleavings (and_automaton does, inside KL)."""
    if not isinstance(node, Permute) or any(isinstance(i, Negation) for i in node.items):
        return False
    closures = [i for i in node.items if isinstance(i, Quantified) and
                isinstance(i.child, Var) and i.max is None and i.min <= 1]
    singles = [i for i in node.items if isinstance(i, Var)]
    return len(closures) >= 2 and len(closures) + len(singles) == len(node.items) <= 4


def and_automaton(node: Permute) -> tuple[list[LinearSeq], list[tuple]]:
    """KL(AND(a+, b+, ...)) under SKIP_TILL_ANY_MATCH (R4: an iteration is any
    interleaving of the items' rows): one flat alternative per (items seen so far, item
    whose row comes next), a single component; it may be followed by the alternatives
    of the new set, and ends the iteration once every required item was seen (a single
    variable is taken once). Flags as flatten_nested's: the empty set's alternatives
    start (count) an iteration."""
    items = [(i.name, True, True) if isinstance(i, Var) else
             (i.child.name, False, i.min == 1) for i in node.items]
    alts: list = []          # (seen, item)
    frontier, seen_sets = [frozenset()], []
    while frontier:
        state = frontier.pop()
        if state in seen_sets:
            continue
        seen_sets.append(state)
        for k, (_, single, _) in enumerate(items):
            if not (single and k in state):
                alts.append((state, k))
                frontier.append(state | {k})
    if len(alts) > 64:
        raise CepUnsupportedError("AND(...) of closures inside KL(...) has too many "
                                  "interleaving states", pos=getattr(node, "pos", None))

    def done(state) -> bool:
        return all(k in state for k, (_, _, req) in enumerate(items) if req)
    entry = sum(1 << j for j, (st, _) in enumerate(alts) if not st)
    seqs, flags = [], []
    for state, k in alts:
        after = state | {k}
        cont = sum(1 << j for j, (st, _) in enumerate(alts) if st == after)
        ends = done(after)
        seqs.append(LinearSeq([(items[k][0], 1, 1)], [],
                              [("and-automaton", id(node), tuple(sorted(state)), k)]))
        flags.append((bool(state), cont | (entry if ends else 0), not ends, bool(state),
                      cont))
    return seqs, flags
