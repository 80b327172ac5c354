"""The planned evaluator's plans as the arrays cython_ext/cep.pyx reads (set_plan): plan
nodes in post-order, the DEFINE conjuncts and NOT checks each node applies as soon as it
forms an instance. Built on the driver for plans chosen there (compile.cep) and inside a
task for plans it chooses from its own rows (runtime.task_planning)."""
from __future__ import annotations

import numpy as np

from cepsql.compile.cep_expand import negated_variables


def plan_arrays(choice, terms: list, labels: list[str], seq_start: list[int],
                conj_label: list[int], conj_mask: list[int], conj_late: list[int]) -> dict:
    """CepConfig's plan fields for a plan choice ({} when it runs in order)."""
    arrays = _tree_arrays(choice, terms, labels, seq_start, conj_label, conj_mask, conj_late)
    if arrays:
        arrays.update(_negation_nodes(choice, terms, labels, conj_label, conj_mask,
                                      conj_late))
    return arrays


def _post_order(root) -> list:
    """The plan tree's nodes, children before parents (the order cep.pyx numbers them)."""
    if root.is_leaf:
        return [root]
    return _post_order(root.left) + _post_order(root.right) + [root]


def _label_comps(comp_of: dict, labels: list[str], label_mask: int) -> int:
    """Components (bit mask) of a term that hold the variables in label_mask."""
    return sum(1 << i for v, i in comp_of.items() if label_mask >> labels.index(v) & 1)


def _covering(masks: list[int], need: int) -> list[int]:
    """Indices of the nodes holding every component in need, lowest first."""
    return sorted((k for k, m in enumerate(masks) if m & need == need),
                  key=lambda k: bin(masks[k]).count("1"))


def _csr(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    starts = np.cumsum([0] + [len(x) for x in lists]).astype(np.int32)
    return starts, np.asarray([v for x in lists for v in x], dtype=np.int32)


def _tree_arrays(choice, terms, labels, seq_start, conj_label, conj_mask, conj_late) -> dict:
    """The plans as arrays for cep.pyx: nodes (term, left, right, comp, parent) in
    post-order, each term's root last; per node the conjuncts to check when it forms an
    instance (the lowest node holding every variable a conjunct reads)."""
    if choice is None or not choice.planned:
        return {}
    nodes, node_conj, leaf_of, after = [], [], [], []
    for t, (term, root) in enumerate(zip(terms, choice.trees())):
        base = seq_start[t]
        comp_of = {name: i for i, (name, _, _) in enumerate(term.comps)}
        after += term.after_masks()
        leaf_of += [0] * len(term.comps)
        order = _post_order(root)
        index = {id(tn): len(nodes) + k for k, tn in enumerate(order)}
        for tn in order:
            if tn.is_leaf:
                leaf_of[base + tn.leaf] = index[id(tn)]
                nodes.append([t, -1, -1, base + tn.leaf, -1])
            else:
                li, ri = index[id(tn.left)], index[id(tn.right)]
                nodes[li][4] = nodes[ri][4] = index[id(tn)]
                nodes.append([t, li, ri, -1, -1])
        masks = [tn.mask for tn in order]
        lists = [[] for _ in order]
        for c, (lab, mask, late) in enumerate(zip(conj_label, conj_mask, conj_late)):
            name = labels[lab]
            if name not in comp_of or late:
                continue
            need = 1 << comp_of[name] | _label_comps(comp_of, labels, mask)
            lists[_covering(masks, need)[0]].append(c)
        node_conj += lists
    starts, flat = _csr(node_conj)
    return dict(
        plan_nodes=np.asarray(nodes, dtype=np.int32).reshape(-1, 5),
        plan_leaf_of=np.asarray(leaf_of, dtype=np.int32),
        plan_after=np.asarray(after, dtype=np.uint64),
        plan_conj_start=starts, plan_conj=flat)


def _negation_nodes(choice, terms, labels, conj_label, conj_mask, conj_late) -> dict:
    """Per plan node, the NOT checks to run as soon as it forms an instance (VLDB 2018
    section 4: the lowest node binding the region's neighbours and every variable the
    NOT's DEFINE reads). Open (window-bounded) regions and NOTs whose DEFINE needs the
    whole match stay on the complete match only."""
    lists, q_base = [], 0
    for term, root in zip(terms, choice.trees()):
        masks = [tn.mask for tn in _post_order(root)]
        term_lists = [[] for _ in masks]
        comp_of = {name: i for i, (name, _, _) in enumerate(term.comps)}
        after = term.after_masks()
        for q, ((child, *_), (left, right)) in enumerate(zip(term.negs, term.neg_sides)):
            names = negated_variables(child)
            conjs = [c for c, lab in enumerate(conj_label) if labels[lab] in names]
            if not left or any(conj_late[c] for c in conjs):
                continue
            need = left | right
            for c in conjs:
                need |= _label_comps(comp_of, labels, conj_mask[c])
            for k in _covering(masks, need):
                if k == len(masks) - 1:
                    break   # the root checks every NOT anyway
                if _region_settled(masks[k], left, right, after, len(term.comps)):
                    term_lists[k].append(q_base + q)
                    break
        lists += term_lists
        q_base += len(term.negs)
    starts, flat = _csr(lists)
    return dict(plan_neg_start=starts, plan_neg=flat)


def _region_settled(mask: int, left: int, right: int, after: list[int], n: int) -> bool:
    """Whether no component outside the instance (mask) can put a row inside the NOT's
    region (after the left components, before the right ones) -- rows of the match are
    not NOT candidates, so before that the check could reject an instance whose
    complete match passes."""
    bits = [i for i in range(n) if (left | right) >> i & 1]
    for x in range(n):
        if mask >> x & 1:
            continue
        before = any(after[x] >> b & 1 for b in bits if left >> b & 1)
        behind = any(after[b] >> x & 1 for b in bits if right >> b & 1)
        if not (before or behind):
            return False
    return True
