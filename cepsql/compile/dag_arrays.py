"""A GlobalPlan as the C arrays of cython_ext/shared_dag.pyx.

Checks are translated from the plan's terms (variable names of the owner pattern,
conjunct numbers as compile.cep numbers them) into slot numbers and labels of the owner's
condition VM: (kind, a, b) with kind 0 = row of slot a before row of slot b, kind 1 =
conjunct a on slot b (kind 2 on a Kleene leaf: checked on the closure being formed, not
on the element alone). ("not", q) and ("window", None) on a Binding are left to the
pattern's own matcher / the root's window test, which always applies.
"""
from __future__ import annotations

import numpy as np

from cepsql.compile.worker_config import CepConfig
from cepsql.sharing.global_plan import GlobalPlan

from cepsql.compile.opcodes import C_JUMP, C_LOAD, K_CONJ, K_KCONJ, K_ORDER, U_LEFT, U_RIGHT, U_ROOT


def _check_rows(checks, slot_vars: tuple[str, ...], config: CepConfig, where: str,
                late_ok: bool = False) -> list[tuple[int, int, int]]:
    out = []
    slot_of = {v: k for k, v in enumerate(slot_vars)}
    for kind, payload in checks:
        if kind == "order":
            a, b = payload
            out.append((K_ORDER, slot_of[a], slot_of[b]))
        elif kind == "conjunct":
            var = config.labels[int(config.conj_label[payload])]
            if late_ok is False and config.conj_late is not None and config.conj_late[payload]:
                raise ValueError(f"{where}: conjunct {payload} reads the whole match "
                                 "(late); only a root may check it")
            if var not in slot_of:
                raise ValueError(f"{where}: conjunct {payload} is on {var}, not a slot")
            out.append((K_CONJ, int(payload), slot_of[var]))
        elif kind not in ("not", "window"):
            raise ValueError(f"{where}: unknown check kind {kind!r}")
    # orders first (cheap), then conjuncts in the order given
    return sorted(out, key=lambda c: c[0])


def _slot_conjuncts(plan: GlobalPlan, configs: list[CepConfig], node: int, base: int,
                    counts: list[int]) -> None:
    """Add the conjunct checks of node's subtree per slot (slots from base on)."""
    nd = plan.nodes[node]
    owner = configs[nd.owner]
    slot_of = {v: k for k, v in enumerate(nd.owner_vars)}
    for kind, payload in nd.checks:
        if kind == "conjunct":
            counts[base + slot_of[owner.labels[int(owner.conj_label[payload])]]] += 1
    if not nd.is_leaf:
        _slot_conjuncts(plan, configs, nd.left, base, counts)
        _slot_conjuncts(plan, configs, nd.right, base + plan.nodes[nd.left].arity, counts)


def _check_coverage(plan: GlobalPlan, configs: list[CepConfig], bind, b: int) -> None:
    """Every conjunct the pattern's own plan checks below its root (the non-late
    ones of the term's variables) must be checked once on the DAG path to the root or
    on the root: the pattern's matcher re-checks only the late ones. Compared as a
    count over the term's variables: a shared node may hold a condition in another
    variable's DEFINE than this pattern writes it (for single-row variables that is the
    same constraint on the match; the sharing planner's validator checks the meaning)."""
    config = configs[bind.pattern]
    counts = [0] * plan.nodes[bind.root].arity
    _slot_conjuncts(plan, configs, bind.root, 0, counts)
    for kind, payload in bind.extra_checks:
        if kind == "conjunct" and not config.conj_late[payload]:
            counts[0] += 1
    labels = {config.labels.index(var) for var in bind.slot_vars}
    want = sum(1 for x, late in zip(config.conj_label, config.conj_late)
               if x in labels and not late)
    if sum(counts) != want:
        raise ValueError(f"binding {b}: {sum(counts)} conjunct checks on the way to the "
                         f"root of {', '.join(bind.slot_vars)}; their DEFINEs have {want} "
                         "(late conjuncts excluded)")


def _is_kleene(node) -> bool:
    return node.kleene is not None and tuple(node.kleene) != (1, 1)


def _unprivate(key):
    """A node key without the planner's ("private", term) tag (trivial_global_plan and
    NONE keep every term's nodes apart that way)."""
    if isinstance(key, tuple):
        return tuple(k for k in key if not (isinstance(k, tuple) and len(k) == 2
                                            and k[0] == "private"))
    return key


def _csr(lists: list[list], width: int) -> tuple[np.ndarray, np.ndarray]:
    starts = np.cumsum([0] + [len(x) for x in lists]).astype(np.int32)
    flat = np.asarray([v for x in lists for row in x for v in
                       (row if isinstance(row, tuple) else (row,))], dtype=np.int32)
    return starts, flat.reshape(-1) if width else flat


def _window(kind: int, size) -> tuple[int, float]:
    return (0, 0.0) if not kind or size is None else (int(kind), float(size))


def _implied_orders(plan: GlobalPlan, checks: list, i: int, memo: dict) -> set:
    """The slot pairs (a, b) every instance of node i satisfies as "every row of slot a
    before every row of slot b": its subtree's order checks (an instance passed each),
    closed transitively."""
    if i in memo:
        return memo[i]
    node = plan.nodes[i]
    pairs: set = set()
    if not node.is_leaf:
        shift = plan.nodes[node.left].arity
        pairs |= _implied_orders(plan, checks, node.left, memo)
        pairs |= {(a + shift, b + shift)
                  for a, b in _implied_orders(plan, checks, node.right, memo)}
        pairs |= {(a, b) for k, a, b in checks[i] if k == K_ORDER}
        grew = True
        while grew:
            new = {(a, d) for a, b in pairs for c, d in pairs if b == c} - pairs
            grew = bool(new)
            pairs |= new
    memo[i] = pairs
    return pairs


def _has_kleene(plan: GlobalPlan, i: int) -> bool:
    node = plan.nodes[i]
    if node.is_leaf:
        return _is_kleene(node)
    return _has_kleene(plan, node.left) or _has_kleene(plan, node.right)


def _newest_slots(plan: GlobalPlan, checks: list) -> list[int]:
    """Per node, the slot that holds the newest row of every instance (every other slot
    is ordered before it; a plain leaf's one slot), or -1: not known, or a Kleene
    closure below (records of varying size; the scan cuts read fixed-size records)."""
    memo: dict = {}
    out = []
    for i, node in enumerate(plan.nodes):
        if _has_kleene(plan, i):
            out.append(-1)
            continue
        pairs = _implied_orders(plan, checks, i, memo)
        last = [s for s in range(node.arity)
                if all((t, s) in pairs for t in range(node.arity) if t != s)]
        out.append(last[0] if last else -1)
    return out


def _scan_cuts(plan: GlobalPlan, checks: list, newest: list[int]) -> list[list]:
    """Per join node and stored side (2 * node + 0: the left child's store is scanned
    for a new right instance; + 1: the right child's for a new left one): the parent's
    order checks between the stored child's newest slot and a slot b of the new
    instance, as (direction, b in the new child's slots). Direction 0: the stored
    newest row must come before every row of b; 1: after every row of b. Along a store
    the newest row never decreases (instances are appended as rows advance, each
    holding the row it was formed at), so such a check fails on a suffix (0) or a
    prefix (1) of the store: the scan skips it (shared_dag.pyx _scan_range)."""
    cuts: list[list] = []
    for i, node in enumerate(plan.nodes):
        for stored_left in (True, False):
            row: list = []
            if not node.is_leaf:
                shift = plan.nodes[node.left].arity
                stored = node.left if stored_left else node.right
                if newest[stored] >= 0:
                    top = newest[stored] + (0 if stored_left else shift)
                    new_lo, new_hi = (shift, node.arity) if stored_left else (0, shift)
                    new_base = shift if stored_left else 0
                    for k, a, b in checks[i]:
                        if k != K_ORDER:
                            continue
                        if a == top and new_lo <= b < new_hi:
                            row.append((0, b - new_base))
                        elif b == top and new_lo <= a < new_hi:
                            row.append((1, a - new_base))
            cuts.append(row)
    return cuts


def _futile_uses(plan: GlobalPlan, checks: list, newest: list[int],
                 uses: list[list]) -> list[list[int]]:
    """Per node, per consumer (as in uses): 1 when no stored sibling instance can ever
    pass the parent's order checks with a new instance of the node -- the parent orders
    the node's newest slot (which holds the current row: every instance is formed at
    its newest row) before a slot of the sibling, whose stored rows are all at or before
    the current row. The evaluator then skips the sibling's store without a look (what
    shared_dag.pyx _futile finds per instance; a Kleene sibling is enumerated instead)."""
    out = []
    for i, node_uses in enumerate(uses):
        row = []
        for kind, parent in node_uses:
            futile = 0
            if kind != U_ROOT and newest[i] >= 0:
                pn = plan.nodes[parent]
                shift = plan.nodes[pn.left].arity
                sibling = pn.right if kind == U_LEFT else pn.left
                top = newest[i] + (0 if kind == U_LEFT else shift)
                lo, hi = (shift, pn.arity) if kind == U_LEFT else (0, shift)
                if not _is_kleene(plan.nodes[sibling]) and any(
                        k == K_ORDER and a == top and lo <= b < hi
                        for k, a, b in checks[parent]):
                    futile = 1
            row.append(futile)
        out.append(row)
    return out


def dag_arrays(plan: GlobalPlan, configs: list[CepConfig]) -> dict[str, np.ndarray]:
    """The arrays of SharedDag for plan; configs[i] is pattern i's CepConfig."""
    n = len(plan.nodes)
    labels, checks, uses = [], [], [[] for _ in range(n)]
    for i, node in enumerate(plan.nodes):
        config = configs[node.owner]
        if len(node.owner_vars) != node.arity:
            raise ValueError(f"node {i}: {node.arity} slots but owner_vars {node.owner_vars}")
        labels.append([config.labels.index(v) for v in node.owner_vars])
        rows = _check_rows(node.checks, node.owner_vars, config, f"node {i}")
        if _is_kleene(node):
            if not node.is_leaf:
                raise ValueError(f"node {i}: only a leaf can be a Kleene closure")
            # row-local conjuncts admit elements; the rest run on the closure (R2)
            rows = [(K_CONJ if config.conj_rowlocal[a] else K_KCONJ, a, b)
                    for k, a, b in rows]
        if node.is_leaf and any(k == K_ORDER for k, _, _ in rows):
            raise ValueError(f"leaf {i} has an order check")
        checks.append(rows)
        if not node.is_leaf:
            if not (node.left < i and node.right < i):
                raise ValueError(f"node {i}: children must come first")
            if plan.nodes[node.left].arity + plan.nodes[node.right].arity != node.arity:
                raise ValueError(f"node {i}: arity is not the children's sum")
            uses[node.left].append((U_LEFT, i))
            uses[node.right].append((U_RIGHT, i))
    slots, bchecks, wins = [], [], []
    for b, bind in enumerate(plan.bindings):
        config = configs[bind.pattern]
        root = plan.nodes[bind.root]
        if len(bind.slot_vars) != root.arity:
            raise ValueError(f"binding {b}: {len(bind.slot_vars)} variables for "
                             f"{root.arity} root slots")
        lo, hi = int(config.seq_start[bind.term]), int(config.seq_start[bind.term + 1])
        comp_of = {int(config.comps[j, 1]): j for j in range(lo, hi)}
        row = []
        for var in bind.slot_vars:
            lab = config.labels.index(var)
            if lab not in comp_of:
                raise ValueError(f"binding {b}: {var} is not in term {bind.term}")
            row.append((lab, comp_of[lab]))
        if len(row) != hi - lo:
            raise ValueError(f"binding {b}: the root binds {len(row)} of the term's "
                             f"{hi - lo} components")
        slots.append(row)
        _check_coverage(plan, configs, bind, b)
        bchecks.append(_check_rows(bind.extra_checks, bind.slot_vars, config, f"binding {b}",
                                   late_ok=True))
        wins.append(_window(config.window_kind, config.window_size))
        uses[bind.root].append((U_ROOT, b))
    nd_win = [_window(node.window_kind, node.window) for node in plan.nodes]
    # leaves with one condition (equal keys but for a private tag: the trivial and
    # independent plans' unshared copies of one event type) accept the same rows: the
    # evaluator tests a row once per distinct leaf condition, as an engine routes an
    # event by its type, whether or not the plan shares the leaves' instances
    reps: dict = {}
    nd_rep = [reps.setdefault((_unprivate(nd.key),
                               sum(1 for k, _, _ in checks[i] if k == K_CONJ)), i)
              if nd.is_leaf else -1 for i, nd in enumerate(plan.nodes)]
    out = {
        "nd_rep": np.asarray(nd_rep, dtype=np.int32),
        "nd_left": np.asarray([nd.left for nd in plan.nodes], dtype=np.int32),
        "nd_right": np.asarray([nd.right for nd in plan.nodes], dtype=np.int32),
        "nd_arity": np.asarray([nd.arity for nd in plan.nodes], dtype=np.int32),
        "nd_owner": np.asarray([nd.owner for nd in plan.nodes], dtype=np.int32),
        "nd_kmin": np.asarray([nd.kleene[0] if _is_kleene(nd) else -1
                               for nd in plan.nodes], dtype=np.int32),
        "nd_kmax": np.asarray([nd.kleene[1] if _is_kleene(nd) else -1
                               for nd in plan.nodes], dtype=np.int32),
        "nd_wkind": np.asarray([k for k, _ in nd_win], dtype=np.int32),
        "nd_win": np.asarray([w for _, w in nd_win], dtype=np.float64),
        "bd_pattern": np.asarray([b.pattern for b in plan.bindings], dtype=np.int32),
        "bd_term": np.asarray([b.term for b in plan.bindings], dtype=np.int32),
        "bd_root": np.asarray([b.root for b in plan.bindings], dtype=np.int32),
        "bd_wkind": np.asarray([k for k, _ in wins], dtype=np.int32),
        "bd_win": np.asarray([w for _, w in wins], dtype=np.float64),
    }
    out["nd_lab_start"], out["nd_lab"] = _csr(labels, 0)
    out["nd_chk_start"], out["nd_chk"] = _csr(checks, 3)
    out["nd_use_start"], out["nd_use"] = _csr(uses, 2)
    out["bd_slot_start"], out["bd_slot"] = _csr(slots, 2)
    out["bd_chk_start"], out["bd_chk"] = _csr(bchecks, 3)
    newest = _newest_slots(plan, checks)
    out["nd_newest"] = np.asarray(newest, dtype=np.int32)
    out["nd_cut_start"], out["nd_cut"] = _csr(_scan_cuts(plan, checks, newest), 2)
    out["nd_use_futile"] = _csr(_futile_uses(plan, checks, newest, uses), 0)[1]
    return out


def _column_conjunct(config: CepConfig, c: int, label: int) -> int:
    """The column a conjunct tests on a one-row match labelled ``label`` when its
    program is only "that row's column, as a truth value" (a precomputed row-local
    expression such as ``symbol = 'S03'``); -1 otherwise."""
    code = np.asarray(config.code.code)
    off = int(config.conj_off[c])
    end = int(config.conj_off[c + 1]) if c + 1 < len(config.conj_off) else len(code)
    if end - off != 5 or code[off] != C_LOAD or code[off + 3] != C_JUMP or \
            code[off + 4] != -1:
        return -1
    s, _, loff, poff, _ = (int(v) for v in np.asarray(config.refs).reshape(-1, 5)[code[off + 2]])
    member = np.asarray(config.membership)
    if loff != 0 or poff != 0 or (s >= 0 and not member[s, label]):
        return -1
    return int(code[off + 1])


def leaf_prefilters(plan: GlobalPlan, configs: list[CepConfig], arrays: dict
                    ) -> tuple[np.ndarray, list[list[tuple[int, int]]]]:
    """Leaf tests the evaluator computes for a whole chunk at once: per node the index
    of its prefilter (-1: tested row by row in the condition VM), and per prefilter the
    (pattern, VM column) pairs whose rows must all be true (non-NULL, non-zero). Only
    for the leaves that stand for their condition (``nd_rep``) whose row conjuncts are
    all plain column tests; the DAG reads a row's mask byte instead of calling the VM
    (the same value: see _column_conjunct)."""
    chk_start, chk = arrays["nd_chk_start"], arrays["nd_chk"].reshape(-1, 3)
    pre = np.full(len(plan.nodes), -1, dtype=np.int32)
    tests: list[list[tuple[int, int]]] = []
    for i, node in enumerate(plan.nodes):
        if arrays["nd_rep"][i] != i:
            continue
        config = configs[node.owner]
        label = config.labels.index(node.owner_vars[0])
        cols = []
        for kind, a, _ in chk[chk_start[i]:chk_start[i + 1]]:
            if kind != K_CONJ:
                continue
            col = _column_conjunct(config, int(a), label)
            if col < 0:
                cols = None
                break
            cols.append((node.owner, col))
        if cols:
            pre[i] = len(tests)
            tests.append(cols)
    return pre, tests
