# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""CEP-mode evaluator (STRATEGY ...): a run-based SASE+ NFA^b over linear sequences.

The planner (cepsql/runtime/cep_expand.py) expands the pattern into linear *sequences*
of components (a variable taken once, or V{min,max} Kleene closure of one variable) with
NOT checks attached by component ranges (what a NOT negates is a small program of such
sequences, searched depth-first with any-match semantics) and, for KL over a SEQ or an
OR of SEQs, an iteration group of components a run loops through. Per partition, rows
are fed in ORDER BY order to a set of *runs*; a run waits for one component's variable
(SASE's NFA^b state: take / proceed edges of a Kleene state are the forks made after
each take).

Shared versioned match buffer (SASE+ 5.2.1): every taken event is an arena node
(row, label, parent) shared by all runs that extend it -- a fork after a take copies
only the run record, never the history. Merging equivalent runs (SASE+ 5.2.2) adds ALT
nodes (histories(ALT) = histories(a) U histories(b), both ending at the same row); a
run's tail node thus stands for a set of versions (paths to a root), which is what
SASE's version-numbered pointers encode. A match is emitted per path.

Computation state (SASE+ 5.2): each run carries a fixed vector of what future edge
formulas can read: per tracked row set (a variable, a SUBSET, or the whole match) its
count, first F rows and last K rows (packed row*64+label), and per DEFINE aggregate
(rows, non-null rows, sum, min, max). Take conditions (the top-level AND conjuncts whose
other variables are already bound, rule R5) are evaluated against that vector plus
the current row; conjuncts that could not be evaluated at take time are re-checked per
path on completion (R2), with NOT(var) (R6) and the window (R3).

Two runs created at the same row are equivalent when (sequence, component, count class,
bound-variable mask, computation vector) are equal: their future takes are identical,
so one run with an ALT node continues for both. The window does not enter the key:
paths whose first row no longer fits are dropped when enumerated, and a run is pruned
once its youngest path (node.maxfirst) cannot fit the current row.

Bounded state: when the buffer outgrows a threshold (twice the last live size, at
least 4096 nodes) it is compacted to the nodes reachable from live runs, ALT branches
whose paths no longer fit the window cut off; with WITHIN the open partition of a chunk
streams into the next call (``run(..., open_last, cont)``, see run) carrying runs,
buffer and undecided matches with row indices rebased.

No Python object is touched per event; everything runs on C arrays.
"""
from libc.stdlib cimport malloc, realloc, free, calloc
from libc.string cimport memcpy, memset, memmove
from libc.math cimport fabs, sqrt, log, exp, floor, ceil, pow, log10, fmod

cimport numpy as cnp

from cepsql._ext.buffers cimport *
from cepsql._ext.vm cimport *
from cepsql._ext.aggregates cimport *
from cepsql._ext.match_order cimport MatchOrder, _cmp_match, _sort_matches
from cepsql._ext.closures cimport ClosureWalk, closure_candidates, walk_closures
from cepsql._ext.cep_core cimport *
from cepsql._ext.cep_not cimport *
from cepsql._ext.cep_output cimport *
from cepsql._ext.cep_tree cimport *

import numpy as np

cnp.import_array()


cdef class CepRuns(CepTree):
    """The run NFA and the partition driver."""
    cdef bint _take_ok(self, i64* run, int label, i64 r) noexcept nogil:
        """R5 take condition: label's conjuncts whose other variables are bound."""
        cdef u64 bound = (<u64> run[R_MASK]) | ((<u64> 1) << label)
        cdef int i, c
        for i in range(self.lab_conj_start[label], self.lab_conj_start[label + 1]):
            c = self.lab_conj[i]
            if self.take_skip != NULL and self.take_skip[c]:
                continue
            if (self.conj_mask[c] & ~bound) == 0:
                if not self._eval(c, label, run + R_HDR, NULL, NULL, 0, r):
                    return False
        return True

    cdef i64 _new_node(self, i64 row, int label, i64 a, i64 b, i64 first) noexcept nogil:
        if buf_push(&self.n_row, row) or buf_push(&self.n_lab, label) or \
                buf_push(&self.n_a, a) or buf_push(&self.n_b, b) or \
                buf_push(&self.n_first, first):
            self.oom = 1
            return -1
        self.nodes_created += 1
        return self.n_row.n - 1

    cdef void _update(self, i64* st, i64 r, int label) noexcept nogil:
        """Computation vector after the run takes row r as label."""
        cdef int t, s, base, f, k, i, col
        cdef i64 cnt
        cdef double v
        for t in range(self.n_trk):
            s = self.trk_set[t]
            if not self._in(s, label):
                continue
            base = self.trk_base[t]
            f = self.trk_f[t]
            k = self.trk_k[t]
            cnt = st[base]
            if cnt < f:
                st[base + 1 + cnt] = r * 64 + label
            i = k - 1
            while i > 0:
                st[base + 1 + f + i] = st[base + 1 + f + i - 1]
                i -= 1
            if k > 0:
                st[base + 1 + f] = r * 64 + label
            st[base] = cnt + 1
        for t in range(self.n_daggs):
            s = self.daggs[t * 3]
            if _agg_listed(self.daggs[t * 3 + 1]):
                self.dtoken += 1
                st[self.agg_base + AGG_W * t] = self.dtoken
                continue
            if not self._in(s, label):
                continue
            self._agg_row(st + self.agg_base + AGG_W * t, t, r, label)

    cdef int _push_run(self, Buf* L, i64* proto, int comp, i64 cnt, u64 closure) noexcept nogil:
        if buf_reserve(L, self.RW):
            self.oom = 1
            return -1
        memcpy(L.data + L.n, proto, self.RW * sizeof(i64))
        L.data[L.n + R_COMP] = comp
        L.data[L.n + R_CNT] = cnt
        if closure & PEEK:
            # a peeking state (even one of the Kleene variable itself, in the next
            # iteration of a group) waits only until the Kleene state takes a row
            L.data[L.n + R_GUARD] = <i64> closure
        else:
            L.data[L.n + R_GUARD] = <i64> (closure & ~((<u64> 1) << self.comps[comp * 4 + 1]))
        L.n += self.RW
        self.runs_created += 1
        return 0

    cdef int _take(self, i64* run, i64 r) noexcept nogil:
        """Run takes row r: new buffer node, forks (stay / proceed), emission."""
        cdef i64* proto = self.tmpst
        cdef int seq = <int> run[R_SEQ]
        cdef int comp = <int> run[R_COMP]
        cdef int label = self.comps[comp * 4 + 1]
        cdef i64 cnt = run[R_CNT] + 1
        cdef int mx = self.comps[comp * 4 + 3]
        cdef int j, end = self.seq_start[seq + 1]
        cdef i64 node, first
        cdef u64 closure = 0
        memcpy(proto, run, self.RW * sizeof(i64))
        if self.compact:
            node = NODE_COMPACT   # the output's needs are folded, no history is kept
            self._fold_take(proto, r, label)
        else:
            first = r if run[R_NODE] < 0 else self.n_first.data[run[R_NODE]]
            node = self._new_node(r, label | ((comp + 1) << 16) if self.comp_tags else label,
                                  run[R_NODE], -2, first)
            if node < 0:
                return -1
        proto[R_NODE] = node
        proto[R_MASK] = <i64> ((<u64> run[R_MASK]) | ((<u64> 1) << label))
        self._update(proto + R_HDR, r, label)
        if self.comp_proceed != NULL:   # NEXT_MATCH: the epsilon closure after this take (R5)
            if mx != 1 and (mx < 0 or cnt < mx):
                # a Kleene state that takes more: the following states only peek (they
                # branch off on rows they take) until it takes a row
                closure = PEEK | ((<u64> 1) << label)
            else:
                closure = self.comp_proceed[comp]
        if mx < 0 or cnt < mx:
            if self._push_run(&self.fresh, proto, comp, cnt, 0):
                return -1
        if cnt >= self.comps[comp * 4 + 2]:
            if self.comp_proceed != NULL and (closure & PEEK) == 0 and \
                    self.seq_recheck != NULL and self.seq_recheck[seq]:
                return self._proceed_dynamic(proto, comp, end, node, r, closure)
            if self.g_alt_last != NULL and self.g_alt_last[comp] == comp:
                return self._cross(&self.fresh, proto, comp, proto[R_ITER], end, node, r,
                                   closure)
            return self._walk(&self.fresh, proto, comp + 1, proto[R_ITER], end, node, r,
                              closure, False)
        return 0

    cdef int _proceed_dynamic(self, i64* proto, int comp, int end, i64 node, i64 r,
                              u64 closure) noexcept nogil:
        """NEXT_MATCH in a sequence with an iteration group: which states the epsilon
        closure holds depends on the iteration count (loop back, leave), so the sibling
        labels every forked run guards against are collected from the walk itself (plus
        the static ones of other sequences sharing the states, in closure)."""
        cdef i64 i, n
        cdef u64 mask = closure
        cdef int rc
        cdef i64* q
        self.walkbuf.n = 0
        self.walk_left = 0
        if self.g_alt_last[comp] == comp:
            rc = self._cross(&self.walkbuf, proto, comp, proto[R_ITER], end, node, r, 0)
        else:
            rc = self._walk(&self.walkbuf, proto, comp + 1, proto[R_ITER], end, node, r, 0,
                            False)
        if rc:
            return rc
        n = self.walkbuf.n // self.RW
        if self.walk_left and self.comp_leave != NULL:
            mask |= self.comp_leave[comp]   # sibling sequences' states after the group
        for i in range(n):
            q = self.walkbuf.data + i * self.RW
            mask |= (<u64> 1) << self.comps[q[R_COMP] * 4 + 1]
        if buf_reserve(&self.fresh, self.walkbuf.n):
            self.oom = 1
            return -1
        for i in range(n):
            q = self.walkbuf.data + i * self.RW
            q[R_GUARD] = <i64> (mask & ~((<u64> 1) << self.comps[q[R_COMP] * 4 + 1]))
            memcpy(self.fresh.data + self.fresh.n, q, self.RW * sizeof(i64))
            self.fresh.n += self.RW
        return 0

    cdef int _walk(self, Buf* L, i64* proto, int j, i64 it, int end, i64 node, i64 r,
                   u64 closure, bint entered) noexcept nogil:
        """The epsilon closure from just before component j (it: iterations completed
        of the group j is in): a run waits at every component up to the first one that
        must take a row; reaching the end emits (node >= 0). Reaching a group's first
        component enters the group (_enter) unless entered says that was done; passing
        the last component of one of its alternatives completes an iteration (_cross)."""
        while True:
            if j == end:
                if node == NODE_COMPACT:
                    return self._store_compact(proto, <int> proto[R_SEQ], r)
                if node >= 0:
                    return self._emit_paths(node, <int> proto[R_SEQ], r)
                return 0
            if self.g_first != NULL and self.g_first[j] == j and not entered:
                return self._enter(L, proto, j, 0, False, end, node, r, closure, ~(<u64> 0))
            entered = False
            proto[R_ITER] = it
            if self._push_run(L, proto, j, 0, closure):
                return -1
            if self.comps[j * 4 + 2] > 0:
                return 0
            if self.g_alt_last != NULL and self.g_alt_last[j] == j:
                return self._cross(L, proto, j, it, end, node, r, closure)
            j += 1

    cdef int _enter(self, Buf* L, i64* proto, int first, i64 it, bint looped, int end,
                    i64 node, i64 r, u64 closure, u64 allow) noexcept nogil:
        """Start an iteration of the group beginning at first, in each of its
        alternatives (KL of an OR) that allow has (the ones that may follow the previous
        iteration's, cep_group_shapes); from outside (not looped) the count starts at 0
        and a group that may iterate zero times is also skipped."""
        cdef int a = first, k = 0
        if not looped:
            it = 0
            if self.g_min[first] == 0:
                if self._walk(L, proto, self.g_last[first] + 1, 0, end, node, r, closure,
                              False):
                    return -1
        while a >= 0:
            if (looped or self.g_loop_only == NULL or not self.g_loop_only[a]) and \
                    (k >= 64 or (allow >> k) & 1):
                if self._walk(L, proto, a, it, end, node, r, closure, True):
                    return -1
            a = self.g_alt_next[a]
            k += 1
        return 0

    cdef int _cross(self, Buf* L, i64* proto, int last, i64 it, int end, i64 node, i64 r,
                    u64 closure) noexcept nogil:
        """A run passes the end of an iteration (the last component of one of the
        group's alternatives): loop back into the group and/or leave it (R6b)."""
        cdef i64 k = it + (0 if self.g_nocount != NULL and self.g_nocount[last] else 1)
        cdef int mx = self.g_max[last]
        if mx < 0 or k < mx:
            if self._enter(L, proto, self.g_first[last], k, True, end, node, r, closure,
                           self.g_succ[last] if self.g_succ != NULL else ~(<u64> 0)):
                return -1
        elif self.g_succ != NULL and self.g_cont[last] != 0:
            # a bounded outer KL at its maximum: only its current iteration continues
            if self._enter(L, proto, self.g_first[last], k, True, end, node, r, closure,
                           self.g_cont[last]):
                return -1
        if k >= self.g_min[last] and (self.g_noleave == NULL or not self.g_noleave[last]):
            self.walk_left = 1
            return self._walk(L, proto, self.g_last[last] + 1, 0, end, node, r, closure,
                              False)
        return 0

    cdef void _merge_fresh(self) noexcept nogil:
        """SASE+ 5.2.2: runs created at this row with equal key share one run."""
        cdef i64 n = self.fresh.n // self.RW
        cdef i64 cap = 16, i, h, slot, w, other
        cdef i64* table
        cdef i64* a
        cdef i64* b
        cdef u64 hv
        cdef int comp, mn, mx, same, keep
        cdef i64 cls_a, cls_b
        if n < 2:
            return
        while cap < 2 * n:
            cap *= 2
        table = <i64*> malloc(cap * sizeof(i64))
        if table == NULL:
            return
        for i in range(cap):
            table[i] = -1
        keep = 0
        for i in range(n):
            a = self.fresh.data + i * self.RW
            comp = <int> a[R_COMP]
            mn = self.comps[comp * 4 + 2]
            mx = self.comps[comp * 4 + 3]
            cls_a = a[R_CNT] if (mx >= 0 or a[R_CNT] < mn) else mn
            hv = <u64> (a[R_SEQ] * 1000003 + comp * 7919 + cls_a * 31 + a[R_MASK]
                        + a[R_GUARD] * 131 + self._iter_class(a) * 524287)
            for w in range(self.S):
                hv = (hv ^ (<u64> a[R_HDR + w])) * (<u64> 1099511628211)
            slot = <i64> (hv & (<u64> (cap - 1)))
            same = 0
            while table[slot] >= 0:
                other = table[slot]
                b = self.fresh.data + other * self.RW
                cls_b = b[R_CNT] if (mx >= 0 or b[R_CNT] < mn) else mn
                if b[R_SEQ] == a[R_SEQ] and b[R_COMP] == comp and cls_b == cls_a and \
                        b[R_MASK] == a[R_MASK] and b[R_GUARD] == a[R_GUARD] and \
                        self._iter_class(a) == self._iter_class(b):
                    same = 1
                    for w in range(self.S):
                        if a[R_HDR + w] != b[R_HDR + w]:
                            same = 0
                            break
                    if same:
                        break
                slot = (slot + 1) & (cap - 1)
            if same:
                # b keeps running for both; a's histories join through an ALT node
                h = self._new_node(self.n_row.data[b[R_NODE]], <int> self.n_lab.data[b[R_NODE]],
                                   b[R_NODE], a[R_NODE],
                                   max(self.n_first.data[a[R_NODE]],
                                       self.n_first.data[b[R_NODE]]))
                if h >= 0:
                    b[R_NODE] = h
                    if cls_a > cls_b:
                        b[R_CNT] = a[R_CNT]
                self.runs_merged += 1
                a[R_SEQ] = -1
            else:
                table[slot] = i
        free(table)
        # compact
        w = 0
        for i in range(n):
            a = self.fresh.data + i * self.RW
            if a[R_SEQ] < 0:
                continue
            if w != i:
                memcpy(self.fresh.data + w * self.RW, a, self.RW * sizeof(i64))
            w += 1
        self.fresh.n = w * self.RW

    # ------------------------------------------------------------------ emission

    cdef int _emit_paths(self, i64 node, int seq, i64 last) noexcept nogil:
        self.emit_last = last
        self.emit_seq = seq
        return self._paths(node)

    cdef int _paths(self, i64 node) noexcept nogil:
        """Every path from node to a root (depth-first, an explicit stack of the ALT
        branches still to visit, so deep merge histories do not recurse)."""
        cdef int rc
        cdef i64 depth = 0
        self.stk.n = 0
        if buf_push(&self.stk, node) or buf_push(&self.stk, 0):
            self.oom = 1
            return -1
        while self.stk.n > 0:
            self.stk.n -= 2
            node = self.stk.data[self.stk.n]
            depth = self.stk.data[self.stk.n + 1]
            while True:
                if node < 0:
                    rc = self._finish(depth)
                    if rc:
                        return rc
                    break
                if self.select_past_last and self.n_first.data[node] <= self.last_end:
                    break   # every path through node starts too early (R7)
                if not self._fits(self.n_first.data[node], self.emit_last) and \
                        self.window_kind != 0:
                    # no path through node has a young enough first row
                    if self.window_kind == 1 or not (self.wnull[self.n_first.data[node]]):
                        break
                if self.n_b.data[node] != -2:
                    if buf_push(&self.stk, self.n_b.data[node]) or buf_push(&self.stk, depth):
                        self.oom = 1
                        return -1
                    node = self.n_a.data[node]
                    continue
                self.ppos[depth] = self.n_row.data[node]
                self.plab[depth] = self.n_lab.data[node]
                depth += 1
                node = self.n_a.data[node]
        return 0

    cdef int _finish(self, i64 m) noexcept nogil:
        """A complete path (reversed in ppos/plab): R2 re-checks, R3, R6; then store."""
        cdef i64 i, k
        cdef i64* pos = self.mpos
        cdef i64* lab = self.mlab
        cdef u64 prefix = 0, bit
        cdef int label, c, q, rc
        cdef i64 state
        for i in range(m):
            pos[i] = self.ppos[m - 1 - i]
            lab[i] = self.plab[m - 1 - i] & 0xFFFF
            self.mcomp[i] = (self.plab[m - 1 - i] >> 16) - 1
        if not self._fits(pos[0], pos[m - 1]):
            return 0
        for i in range(m):
            label = <int> lab[i]
            bit = (<u64> 1) << label
            for k in range(self.lab_conj_start[label], self.lab_conj_start[label + 1]):
                c = self.lab_conj[k]
                if (self.conj_mask[c] & ~(prefix | bit)) != 0 or \
                        (self.seq_recheck != NULL and self.seq_recheck[self.emit_seq]):
                    if not self._eval(c, label, NULL, pos, lab, m, pos[i]):
                        return 0
            prefix |= bit
        state = 0
        for q in range(self.n_negs):
            if self.negs[q * 6] == self.emit_seq:
                rc = self._neg_ok(q, pos, lab, m, self.ps)
                if rc == 0:
                    return 0
                if rc == 2:
                    state = 1   # a trailing NOT still sees rows to come
        return self._store_match(pos, lab, m, state, self.emit_seq)

    def _set_groups(self, cnp.ndarray groups, cnp.ndarray seq_recheck, cnp.ndarray take_skip,
                   neg_iter=None, loop_only=None):
        """Iteration groups of KL over a SEQ or an OR of SEQs (cep_plan: per component
        first, last, min, max of its group, last component of its alternative, next
        alternative's first component; -1s outside groups): after an alternative's last
        component a run loops back into every alternative or leaves (R6b). seq_recheck: sequences whose conjuncts are all
        re-checked on the complete match; take_skip: conjuncts not decided at take time;
        neg_iter: per NOT check, 8 ints when the NOT lies inside KL's pattern: its
        alternative's first and last component, the group's, the group's slot [oa, ob),
        [oc, od) (-1s otherwise; _neg_iter_ok, R6c); loop_only: per component,
        1 at the first component of an alternative only a loop back enters (nested KL)."""
        cdef int n = groups.shape[0], i
        cdef cnp.ndarray g = np.ascontiguousarray(groups, dtype=np.int32)
        free(self.g_first); free(self.g_last); free(self.g_min); free(self.g_max)
        free(self.g_alt_last); free(self.g_alt_next)
        free(self.seq_recheck); free(self.take_skip)
        self.g_alt_last = <int*> malloc((n + 1) * sizeof(int))
        self.g_alt_next = <int*> malloc((n + 1) * sizeof(int))
        self.g_first = <int*> malloc((n + 1) * sizeof(int))
        self.g_last = <int*> malloc((n + 1) * sizeof(int))
        self.g_min = <int*> malloc((n + 1) * sizeof(int))
        self.g_max = <int*> malloc((n + 1) * sizeof(int))
        if self.g_alt_last == NULL or self.g_alt_next == NULL or self.g_first == NULL or \
                self.g_last == NULL or self.g_min == NULL or self.g_max == NULL:
            raise MemoryError("cepsql CEP matcher ran out of memory")
        for i in range(n):
            self.g_first[i] = g[i, 0]
            self.g_last[i] = g[i, 1]
            self.g_min[i] = g[i, 2]
            self.g_max[i] = g[i, 3]
            self.g_alt_last[i] = g[i, 4]
            self.g_alt_next[i] = g[i, 5]
        self.seq_recheck = <unsigned char*> self._copy(
            np.ascontiguousarray(seq_recheck, dtype=np.uint8))
        self.dedup = 1   # one assignment may arise from several iteration splits
        self.take_skip = <unsigned char*> self._copy(
            np.ascontiguousarray(take_skip, dtype=np.uint8))
        free(self.neg_iter); free(self.g_loop_only)
        self.neg_iter = NULL
        self.comp_tags = 0
        self.g_loop_only = NULL
        free(self.g_succ); free(self.g_noleave); free(self.g_nocount); free(self.g_cont)
        self.g_cont = NULL
        self.g_succ = NULL
        self.g_noleave = NULL
        self.g_nocount = NULL
        flags = None if loop_only is None else np.asarray(loop_only, dtype=np.int64)
        if flags is not None and flags.ndim == 2:
            if (flags[:, 1] != -1).any():
                self.g_succ = <u64*> self._copy(
                    np.ascontiguousarray(flags[:, 1].astype(np.uint64)))
                self.g_cont = <u64*> self._copy(
                    np.ascontiguousarray(flags[:, 4].astype(np.uint64)))
            if flags[:, 2].any():
                self.g_noleave = <unsigned char*> self._copy(
                    np.ascontiguousarray(flags[:, 2], dtype=np.uint8))
            if flags.shape[1] > 3 and flags[:, 3].any():
                self.g_nocount = <unsigned char*> self._copy(
                    np.ascontiguousarray(flags[:, 3], dtype=np.uint8))
            flags = flags[:, 0]
        if flags is not None and len(flags) and flags.any():
            self.g_loop_only = <unsigned char*> self._copy(
                np.ascontiguousarray(flags, dtype=np.uint8))
        if neg_iter is not None and len(neg_iter) and (np.asarray(neg_iter)[:, 0] >= 0).any():
            self.neg_iter = <int*> self._copy(np.ascontiguousarray(neg_iter, dtype=np.int32))
            self.comp_tags = 1

    def _set_guards(self, cnp.ndarray proceed):
        """SKIP_TILL_NEXT_MATCH (R5): a run waits in every state of its epsilon closure
        at once, so it ignores a row only when none of them can take it. Runs are forked
        per state eagerly; each carries the labels of its sibling states (proceed[comp]:
        the labels reachable without taking comp again, across sequences sharing the NFA
        states) and dies at a row one of them takes. A second column: per component of
        an iteration group, the labels of sibling sequences after the group, added when
        the walk leaves the group (_proceed_dynamic)."""
        cdef cnp.ndarray p = np.ascontiguousarray(proceed, dtype=np.uint64)
        free(self.comp_proceed)
        free(self.comp_leave)
        self.comp_leave = NULL
        if p.ndim == 2:
            self.comp_leave = <u64*> self._copy(np.ascontiguousarray(p[:, 1]))
            p = np.ascontiguousarray(p[:, 0])
        self.comp_proceed = <u64*> self._copy(p)

    cdef bint _guard_takes(self, i64* run, i64 r) noexcept nogil:
        cdef u64 g = (<u64> run[R_GUARD]) & ~PEEK
        cdef int lab = 0
        while g != 0:
            if g & 1:
                if self._take_ok(run, lab, r):
                    return True
            g >>= 1
            lab += 1
        return False

    cdef int _partition(self, i64 start, i64 stop) noexcept nogil:
        """Feed rows [start, stop) of the current partition to the runs."""
        cdef i64 r, i, nr
        cdef i64* run
        cdef Buf swap
        cdef int seq, j, end
        cdef bint ok
        cdef i64* proto = self.startst
        if self.planned:
            return self._plan_rows(start, stop)
        for r in range(start, stop):
            self.fresh.n = 0
            self.nxt.n = 0
            nr = self.cur.n // self.RW
            for i in range(nr):
                run = self.cur.data + i * self.RW
                if not self.compact and not self._alive(self.n_first.data[run[R_NODE]], r):
                    continue   # (a compact partition has no window nor SKIP PAST LAST ROW)
                ok = not (self.gbreak != NULL and self.gbreak[r]) and \
                    self._take_ok(run, self.comps[run[R_COMP] * 4 + 1], r)
                if ok:
                    if self._take(run, r):
                        return -1
                    run = self.cur.data + i * self.RW
                if self.strategy == S_NEXT and run[R_GUARD] != 0:
                    if self._guard_takes(run, r):
                        continue   # a sibling state of the closure takes r (R5)
                    if (<u64> run[R_GUARD]) & PEEK:
                        ok = False  # a peeking state keeps waiting after a take
                if self.strategy == S_ANY or (self.strategy == S_NEXT and not ok):
                    if buf_reserve(&self.nxt, self.RW):
                        return -1
                    memcpy(self.nxt.data + self.nxt.n, run, self.RW * sizeof(i64))
                    self.nxt.n += self.RW
            # new runs start at r
            for seq in range(self.n_seq):
                end = self.seq_start[seq + 1]
                j = self.seq_start[seq]
                if self.g_first != NULL:
                    # the start states, through groups (R6b)
                    memset(proto, 0, self.RW * sizeof(i64))
                    proto[R_SEQ] = seq
                    proto[R_NODE] = -1
                    self.starts.n = 0
                    if self._walk(&self.starts, proto, j, 0, end, -1, r, 0, False):
                        return -1
                    for i in range(self.starts.n // self.RW):
                        memcpy(proto, self.starts.data + i * self.RW, self.RW * sizeof(i64))
                        if self._take_ok(proto, self.comps[proto[R_COMP] * 4 + 1], r):
                            if self._take(proto, r):
                                return -1
                    continue
                while j < end:
                    memset(proto, 0, self.RW * sizeof(i64))
                    proto[R_SEQ] = seq
                    proto[R_COMP] = j
                    proto[R_NODE] = -1
                    if self._take_ok(proto, self.comps[j * 4 + 1], r):
                        if self._take(proto, r):
                            return -1
                    if self.comps[j * 4 + 2] > 0:
                        break
                    j += 1
            if self.merging and not self.compact:   # a compact run folds its own rows
                self._merge_fresh()
            if buf_reserve(&self.nxt, self.fresh.n):
                return -1
            memcpy(self.nxt.data + self.nxt.n, self.fresh.data, self.fresh.n * sizeof(i64))
            self.nxt.n += self.fresh.n
            swap = self.cur
            self.cur = self.nxt
            self.nxt = swap
            if self.sel_dirty and self._select_ready():
                return -1
            if self.cur.n // self.RW > self.peak_runs:
                self.peak_runs = self.cur.n // self.RW
            if self.n_row.n > self.peak_nodes:
                self.peak_nodes = self.n_row.n
            if self.cur.n == 0:
                # no live run: the whole buffer is garbage
                self._clear_nodes()
            elif self.n_row.n > self.compact_at:
                if self._compact(r):
                    return -1
            if self.oom or self._state_full():
                return -1
        return 0

    cdef void _clear_nodes(self) noexcept nogil:
        self.n_row.n = 0
        self.n_lab.n = 0
        self.n_a.n = 0
        self.n_b.n = 0
        self.n_first.n = 0

    cdef int _compact(self, i64 r) noexcept nogil:
        """Keep the buffer nodes reachable from the runs still alive after row r: dead
        runs go, ALT branches whose paths cannot fit the window any more are cut (an ALT
        left with one branch becomes that branch); parents are remapped. Nodes only point
        to older nodes, so one backward marking pass and one forward sweep suffice."""
        cdef i64 n = self.n_row.n, i, w, a, b, node, nr
        cdef unsigned char* mark
        cdef i64* remap
        cdef i64* run
        self.compactions += 1
        mark = <unsigned char*> calloc(n + 1, 1)
        remap = <i64*> malloc((n + 1) * sizeof(i64))
        if mark == NULL or remap == NULL:
            free(mark)
            free(remap)
            self.oom = 1
            return -1
        nr = self.cur.n // self.RW
        w = 0
        for i in range(nr):
            run = self.cur.data + i * self.RW
            node = run[R_NODE]
            if not self._alive(self.n_first.data[node], r):
                continue
            mark[node] = 1
            if w != i:
                memcpy(self.cur.data + w * self.RW, run, self.RW * sizeof(i64))
            w += 1
        self.cur.n = w * self.RW
        # bit 0 marked, bit 1 / bit 2: ALT branch a / b alive
        i = n - 1
        while i >= 0:
            if mark[i]:
                a = self.n_a.data[i]
                b = self.n_b.data[i]
                if b != -2:
                    if self._alive(self.n_first.data[a], r):
                        mark[i] |= 2
                        mark[a] |= 1
                    if self._alive(self.n_first.data[b], r):
                        mark[i] |= 4
                        mark[b] |= 1
                elif a >= 0:
                    mark[a] |= 1
            i -= 1
        w = 0
        for i in range(n):
            if not mark[i]:
                continue
            a = self.n_a.data[i]
            b = self.n_b.data[i]
            if b != -2:
                if (mark[i] & 6) == 2:
                    remap[i] = remap[a]
                    continue
                if (mark[i] & 6) == 4:
                    remap[i] = remap[b]
                    continue
                a = remap[a]
                b = remap[b]
            elif a >= 0:
                a = remap[a]
            self.n_row.data[w] = self.n_row.data[i]
            self.n_lab.data[w] = self.n_lab.data[i]
            self.n_first.data[w] = self.n_first.data[i]
            self.n_a.data[w] = a
            self.n_b.data[w] = b
            remap[i] = w
            w += 1
        self.n_row.n = w
        self.n_lab.n = w
        self.n_a.n = w
        self.n_b.n = w
        self.n_first.n = w
        for i in range(self.cur.n // self.RW):
            run = self.cur.data + i * self.RW
            run[R_NODE] = remap[run[R_NODE]]
        free(mark)
        free(remap)
        self.compact_at = 2 * w if 2 * w > 4096 else 4096
        return 0

    cdef void _reset(self) noexcept nogil:
        """A new partition starts at self.ps."""
        self.cur.n = 0
        self.nxt.n = 0
        self._clear_nodes()
        self.m_off.n = 0
        self.m_len.n = 0
        self.m_pos.n = 0
        self.m_lab.n = 0
        self.m_st.n = 0
        self.m_sq.n = 0
        self.m_chk.n = 0
        self.match_no = 0
        self.f_lo = -NO_BOUND
        self.f_hi = NO_BOUND
        self.hold = 0
        self.last_end = self.ps - 1
        self.sel_dirty = 0
        self.unmatched_done = self.ps
        self.compact_at = 4096
        self._plan_clear()
        self.pm_stored = 0

    cdef i64 _future_first(self) noexcept nogil:
        """Lower bound of the first row of every match still to be found: it ends at or
        after row pproc, so its first row fits the window with row pproc - 1 (R3; the
        window key is monotonic in the partition and a NULL time never fits)."""
        cdef i64 f, last = self.pproc - 1
        if last < self.ps:
            return self.ps
        if self.window_kind == 1:
            f = last - <i64> ceil(self.window_size) + 1
            if f < self.ps:
                f = self.ps
        else:
            f = self.ps
        while f <= last and not self._fits(f, last):
            f += 1
        return f

    cdef int _rebase(self, i64 d) noexcept nogil:
        """Drop the first d rows of the chunk from every row index the state holds."""
        cdef i64 i, nr, dd = d * 64, cnt
        cdef int t, base, f, k, x
        cdef i64* st
        if d <= 0:
            return 0
        self._plan_rebase(d)
        for i in range(self.n_row.n):
            self.n_row.data[i] -= d
            self.n_first.data[i] -= d
        nr = self.cur.n // self.RW
        for i in range(nr):
            st = self.cur.data + i * self.RW + R_HDR
            for t in range(self.n_trk):
                base = self.trk_base[t]
                f = self.trk_f[t]
                k = self.trk_k[t]
                cnt = st[base]
                for x in range(f):
                    if x < cnt:
                        st[base + 1 + x] -= dd
                for x in range(k):
                    if x < cnt:
                        st[base + 1 + f + x] -= dd
        for i in range(self.m_pos.n):
            self.m_pos.data[i] -= d
        for i in range(self.m_chk.n):
            self.m_chk.data[i] -= d
        if self.n_rows > d:
            memmove(self.covered, self.covered + d, self.n_rows - d)
        self.last_end -= d
        self.f_lo -= d
        self.f_hi -= d
        self.unmatched_done -= d
        self.pproc -= d
        return 0
