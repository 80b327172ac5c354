# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Shared DAG evaluator of a workload's global plan (SIGMOD 2019 MPM; MOTTO mark-points).

One pass over the sorted rows of a chunk (whole PARTITION BY groups): a *node* holds
instances of a sub-pattern -- one row per slot. A leaf's instances are the rows its
owner variable's single-row DEFINE conjuncts accept (evaluated once per leaf, however
many patterns share it). A join combines one instance of its left child with one of
its right child (slots: left's, then right's) when their rows are disjoint, the result
fits the node's window (the largest of its consumers') and passes the node's checks
(order between slots, cross-variable DEFINE conjuncts of the owner pattern). Every new
instance goes to EVERY consumer: the parent joins that share the node and the roots.

A root turns an instance into a candidate match of its pattern's disjunct (term): the
pattern's remaining checks (its own window, order checks, conjuncts) are applied and the
candidate is listed with the row it completes at (its last row, as in the pattern's own
planned evaluator). The pattern's own CepMatcher then finishes the candidates exactly as
it finishes its own trees' (late conjuncts, NOT checks, R7, measures, output) --
``CepMatcher.set_candidates``.

Conditions run in the owner pattern's condition VM (its CepMatcher as a
``ConditionHost``, cepsql/_ext/vm.pxd: a typed call without the GIL); the matchers must have the chunk's
rows attached (``attach_rows``). A join scans only the part of the sibling's store
that can pass: along a store the newest row never decreases, so the instances outside the
parent's window and those an order check against the store's newest slot fails are a
prefix / suffix, skipped by galloping search (_scan_range; dag_arrays._scan_cuts); a
consumer whose every scan is futile is skipped outright (dag_arrays._futile_uses). With
the chunk's prefilter masks a row goes only to the leaves of the tests accepting it
(_routed_rows). Instances are pruned as rows advance by each node's
window; with WITHIN on every pattern the open PARTITION BY group of a chunk carries its
stores into the next chunk (rows rebased), so memory follows the largest window. No
module-level state: one SharedDag per evaluator, re-entrant.
"""
from libc.stdlib cimport malloc, realloc, free, calloc
from libc.string cimport memcpy, memset, memmove
from libc.math cimport fabs

import numpy as np
cimport numpy as cnp

cnp.import_array()


from cepsql._ext.buffers cimport i64, Buf, buf_reserve, buf_push, buf_to_numpy
from cepsql._ext.vm cimport ConditionHost
from cepsql._ext.closures cimport ClosureWalk, closure_candidates, walk_closures
from cepsql._ext.interrupt cimport Countdown, interrupted, raise_interrupt

# check kinds (node and binding check tables: kind, a, b)
cdef enum: K_ORDER = 0     # row of slot a < row of slot b
cdef enum: K_CONJ = 1      # conjunct a of the owner pattern, on slot b
cdef enum: K_KCONJ = 2     # Kleene leaf: conjunct a checked on the closure being formed
# consumer kinds (kind, index)
cdef enum: U_LEFT = 0      # join node index takes the instance as its left input
cdef enum: U_RIGHT = 1
cdef enum: U_ROOT = 2      # binding index
cdef extern from *:
    """#define CEPSQL_DAG_NO_ROW (1LL << 62)"""
    long long NO_ROW "CEPSQL_DAG_NO_ROW"   # oldest of an empty store


cdef struct _DagKleeneCtx:
    # one Kleene leaf's closures being enumerated (SharedDag._closures)
    int leaf, parent, bind, then_leaf, owner, llab, lslot, pw_kind
    bint leaf_left
    i64 then_end
    double pw
    i64* x               # the sibling's instance (or NULL)
    i64* rec             # the closure as a record: first, m, rows, slots
    const int* plabs


cdef bint _dag_fits(void* owner, void* ctx, i64 lo, i64 hi) noexcept nogil:
    cdef _DagKleeneCtx* c = <_DagKleeneCtx*> ctx
    return (<SharedDag> owner)._fits(c.pw_kind, c.pw, lo, hi)


cdef int _dag_element_ok(void* owner, void* ctx, i64* rows, i64 n) noexcept nogil:
    return (<SharedDag> owner)._element_ok(<_DagKleeneCtx*> ctx, rows, n)


cdef int _dag_closure(void* owner, void* ctx, i64* rows, i64 n) noexcept nogil:
    return (<SharedDag> owner)._closure_done(<_DagKleeneCtx*> ctx, rows, n)


cdef class SharedDag:
    """The nodes, checks and roots of a GlobalPlan as C arrays (see shared/dag_arrays.py)."""
    cdef int n_nodes, n_bind, n_pat
    cdef int* nd_left
    cdef int* nd_right
    cdef int* nd_arity
    cdef int* nd_owner
    cdef int* nd_wkind
    cdef double* nd_win
    cdef int* nd_lab_start     # node -> its slots' owner labels (CSR)
    cdef int* nd_lab
    cdef int* nd_chk_start     # node -> checks (CSR of kind, a, b)
    cdef int* nd_chk
    cdef int* nd_use_start     # node -> consumers (CSR of kind, index)
    cdef int* nd_use
    cdef int* nd_use_futile    # per consumer: 1 = never a pair (dag_arrays._futile_uses)
    cdef int* nd_newest        # node -> slot holding every instance's newest row (-1)
    cdef int* nd_cut_start     # 2 * node + stored side -> scan cuts (CSR of dir, slot)
    cdef int* nd_cut
    cdef unsigned char* nd_keep  # node has a join consumer: store its instances
    cdef int* nd_rep           # leaf -> the first leaf with its condition (-1: a join)
    cdef i64* rep_row          # per leaf: the row its condition was last tested on
    cdef unsigned char* rep_ok  # and the result
    cdef int* nd_pre           # rep leaf -> row of the chunk's prefilter masks (-1: VM)
    cdef const unsigned char* pre   # prefilter masks of this run [k, rows] (or NULL)
    cdef i64 pre_n
    cdef object pre_ref
    cdef int* leaf_list        # the leaves, in node order
    cdef int n_leaves
    cdef int n_tests           # prefilter tests (rows of the run's masks)
    cdef int* tl_start         # prefilter test -> the leaves it stands for (CSR)
    cdef int* tl_leaf
    cdef int* vm_leaf          # the leaves tested in the condition VM, in node order
    cdef int n_vm
    cdef const unsigned char* pre_rows   # this run's masks row-major, rows pre_w wide
    cdef i64 pre_w
    cdef object pre_rows_ref
    cdef int* bd_pattern
    cdef int* bd_term
    cdef int* bd_root
    cdef int* bd_wkind
    cdef double* bd_win
    cdef int* bd_slot_start    # binding -> per root slot: pattern label, global component
    cdef int* bd_slot          # (pairs)
    cdef int* bd_chk_start
    cdef int* bd_chk
    cdef void** pat_host       # per pattern: its ConditionHost (borrowed from hosts)
    cdef list hosts
    # state of a run
    cdef Buf* store            # per node: records (first row, m, m rows, m slots)
    cdef i64* live             # per node: instances after the last compaction
    cdef i64* count            # per node: instances stored
    cdef i64* oldest           # per node: the earliest first row stored (NO_ROW: none)
    cdef int* scanning         # per node: scans of its store under way (no compaction)
    cdef int* nd_kmin          # per node: Kleene leaf min / max (-1) elements; -1: plain
    cdef int* nd_kmax
    cdef Buf* tmp              # per node: the instance being formed
    cdef Buf* c_cand           # per pattern: end, term, offset, length
    cdef Buf* c_rows
    cdef Buf* c_comp
    cdef i64* sort_pos         # a match sorted by row, for the condition VM
    cdef i64* sort_lab
    cdef i64 sort_cap
    cdef const double* wts
    cdef const unsigned char* wnull
    cdef i64 ps, pe, cur
    cdef int oom
    cdef public i64 max_state  # bound on instances held plus candidates (0: none), issue 24 A1
    cdef readonly int limit_hit  # the last run stopped at max_state
    cdef i64 n_grown           # instances stored and candidates formed (checks every 1024)
    cdef int stop              # a signal handler raised (Ctrl-C): unwind, then raise
    cdef Countdown countdown   # to the next Ctrl-C check (interrupt.pxd)
    cdef int has_state         # the open group's stores carry into the next run
    cdef i64 resume            # first row of the open group not yet processed
    cdef public i64 keep       # first row the next run must get again (see run)
    cdef public object created  # per node: instances formed (numpy int64)
    cdef i64* n_created
    cdef public i64 candidates
    cdef public i64 join_attempts   # pairs of child instances tried at join nodes
    cdef public i64 scans_skipped   # sibling store scans no pair could pass (_futile)

    def __cinit__(self):
        self.n_nodes = 0
        self.store = NULL
        self.c_cand = NULL

    def __init__(self, dict arrays, list hosts):
        """arrays: the int/float arrays of dag_arrays.dag_arrays; hosts: per pattern the
        ConditionHost (its CepMatcher) whose VM runs its conditions, or None for a
        pattern the DAG never tests; held for as long as this object."""
        cdef int i, k
        cdef ConditionHost host
        self.hosts = list(hosts)
        self.n_nodes = len(arrays["nd_left"])
        self.n_bind = len(arrays["bd_pattern"])
        self.n_pat = len(self.hosts)
        self.nd_left = <int*> _copy_i32(arrays["nd_left"])
        self.nd_right = <int*> _copy_i32(arrays["nd_right"])
        self.nd_arity = <int*> _copy_i32(arrays["nd_arity"])
        self.nd_owner = <int*> _copy_i32(arrays["nd_owner"])
        self.nd_wkind = <int*> _copy_i32(arrays["nd_wkind"])
        self.nd_win = <double*> _copy_f64(arrays["nd_win"])
        self.nd_lab_start = <int*> _copy_i32(arrays["nd_lab_start"])
        self.nd_lab = <int*> _copy_i32(arrays["nd_lab"])
        self.nd_chk_start = <int*> _copy_i32(arrays["nd_chk_start"])
        self.nd_chk = <int*> _copy_i32(arrays["nd_chk"])
        self.nd_use_start = <int*> _copy_i32(arrays["nd_use_start"])
        self.nd_use = <int*> _copy_i32(arrays["nd_use"])
        self.nd_newest = <int*> _copy_i32(arrays["nd_newest"])
        self.nd_use_futile = <int*> _copy_i32(arrays["nd_use_futile"])
        self.nd_cut_start = <int*> _copy_i32(arrays["nd_cut_start"])
        self.nd_cut = <int*> _copy_i32(arrays["nd_cut"])
        self.nd_keep = <unsigned char*> calloc(self.n_nodes + 1, 1)
        self.nd_rep = <int*> _copy_i32(arrays["nd_rep"])
        self.rep_row = <i64*> malloc((self.n_nodes + 1) * sizeof(i64))
        self.rep_ok = <unsigned char*> calloc(self.n_nodes + 1, 1)
        self.nd_pre = <int*> _copy_i32(arrays["nd_pre"] if "nd_pre" in arrays else
                                       np.full(self.n_nodes, -1, dtype=np.int32))
        leaves = [i for i in range(self.n_nodes) if arrays["nd_left"][i] < 0]
        self.n_leaves = len(leaves)
        self.leaf_list = <int*> _copy_i32(np.asarray(leaves, dtype=np.int32))
        # routing by prefilter test: a row reaches only the leaves of the tests that
        # accept it (an engine routes an event by its type), not a look at every leaf
        test_of = [int(arrays["nd_pre"][arrays["nd_rep"][i]]) if "nd_pre" in arrays
                   else -1 for i in leaves]
        self.n_tests = max(test_of, default=-1) + 1
        by_test = [[i for i, t in zip(leaves, test_of) if t == k]
                   for k in range(self.n_tests)]
        self.tl_start = <int*> _copy_i32(np.cumsum([0] + [len(x) for x in by_test]))
        self.tl_leaf = <int*> _copy_i32(np.asarray([i for x in by_test for i in x],
                                                   dtype=np.int32))
        vm = [i for i, t in zip(leaves, test_of) if t < 0]
        self.n_vm = len(vm)
        self.vm_leaf = <int*> _copy_i32(np.asarray(vm, dtype=np.int32))
        self.bd_pattern = <int*> _copy_i32(arrays["bd_pattern"])
        self.bd_term = <int*> _copy_i32(arrays["bd_term"])
        self.bd_root = <int*> _copy_i32(arrays["bd_root"])
        self.bd_wkind = <int*> _copy_i32(arrays["bd_wkind"])
        self.bd_win = <double*> _copy_f64(arrays["bd_win"])
        self.bd_slot_start = <int*> _copy_i32(arrays["bd_slot_start"])
        self.bd_slot = <int*> _copy_i32(arrays["bd_slot"])
        self.bd_chk_start = <int*> _copy_i32(arrays["bd_chk_start"])
        self.bd_chk = <int*> _copy_i32(arrays["bd_chk"])
        self.pat_host = <void**> calloc(self.n_pat + 1, sizeof(void*))
        if self.pat_host == NULL:
            raise MemoryError("cepsql shared DAG evaluator ran out of memory")
        for i in range(self.n_pat):
            if self.hosts[i] is not None:
                host = self.hosts[i]
                self.pat_host[i] = <void*> host
        self.store = <Buf*> calloc(self.n_nodes + 1, sizeof(Buf))
        self.tmp = <Buf*> calloc(self.n_nodes + 1, sizeof(Buf))
        self.live = <i64*> calloc(self.n_nodes + 1, sizeof(i64))
        self.count = <i64*> calloc(self.n_nodes + 1, sizeof(i64))
        self.oldest = <i64*> malloc((self.n_nodes + 1) * sizeof(i64))
        self.scanning = <int*> calloc(self.n_nodes + 1, sizeof(int))
        if self.oldest == NULL or self.scanning == NULL:
            raise MemoryError("cepsql shared DAG evaluator ran out of memory")
        for i in range(self.n_nodes + 1):
            self.oldest[i] = NO_ROW
        self.nd_kmin = <int*> _copy_i32(arrays["nd_kmin"])
        self.nd_kmax = <int*> _copy_i32(arrays["nd_kmax"])
        self.n_created = <i64*> calloc(self.n_nodes + 1, sizeof(i64))
        self.c_cand = <Buf*> calloc(self.n_pat + 1, sizeof(Buf))
        self.c_rows = <Buf*> calloc(self.n_pat + 1, sizeof(Buf))
        self.c_comp = <Buf*> calloc(self.n_pat + 1, sizeof(Buf))
        if self.rep_row == NULL or self.rep_ok == NULL:
            raise MemoryError("cepsql shared DAG evaluator ran out of memory")
        for i in range(self.n_nodes):
            self.rep_row[i] = -1
        if self.nd_keep == NULL or self.store == NULL or self.tmp == NULL or \
                self.live == NULL or self.count == NULL or self.n_created == NULL or \
                self.c_cand == NULL or \
                self.c_rows == NULL or self.c_comp == NULL:
            raise MemoryError("cepsql shared DAG evaluator ran out of memory")
        for i in range(self.n_nodes):
            for k in range(self.nd_use_start[i], self.nd_use_start[i + 1]):
                if self.nd_use[2 * k] != U_ROOT:
                    self.nd_keep[i] = 1
            if self.nd_arity[i] > 63:
                raise ValueError("a DAG node has more than 63 slots")
            if self.nd_kmin[i] >= 0:
                self.nd_keep[i] = 1   # closures are enumerated from the stored elements

    def __dealloc__(self):
        cdef int i
        if self.store != NULL:
            for i in range(self.n_nodes):
                free(self.store[i].data)
                free(self.tmp[i].data)
        if self.c_cand != NULL:
            for i in range(self.n_pat):
                free(self.c_cand[i].data)
                free(self.c_rows[i].data)
                free(self.c_comp[i].data)
        free(self.store); free(self.tmp); free(self.live); free(self.n_created)
        free(self.count); free(self.nd_kmin); free(self.nd_kmax)
        free(self.oldest); free(self.scanning)
        free(self.sort_pos); free(self.sort_lab)
        free(self.c_cand); free(self.c_rows); free(self.c_comp)
        free(self.nd_left); free(self.nd_right); free(self.nd_arity); free(self.nd_owner)
        free(self.nd_wkind); free(self.nd_win); free(self.nd_lab_start); free(self.nd_lab)
        free(self.nd_chk_start); free(self.nd_chk); free(self.nd_use_start); free(self.nd_use)
        free(self.nd_newest); free(self.nd_use_futile); free(self.nd_cut_start); free(self.nd_cut)
        free(self.nd_keep); free(self.nd_rep); free(self.rep_row); free(self.rep_ok)
        free(self.nd_pre); free(self.leaf_list)
        free(self.tl_start); free(self.tl_leaf); free(self.vm_leaf)
        free(self.bd_pattern); free(self.bd_term); free(self.bd_root)
        free(self.bd_wkind); free(self.bd_win); free(self.bd_slot_start); free(self.bd_slot)
        free(self.bd_chk_start); free(self.bd_chk); free(self.pat_host)

    # ------------------------------------------------------------------ windows
    cdef inline bint _fits(self, int kind, double w, i64 lo, i64 hi) noexcept nogil:
        if kind == 0:
            return True
        if kind == 1:
            return hi - lo < w
        if self.wnull[lo] or self.wnull[hi]:
            return False   # R3: a NULL time fits no window
        return fabs(self.wts[hi] - self.wts[lo]) <= w

    cdef void _compact(self, int node) noexcept nogil:
        """Drop the node's instances whose first row no longer fits its window."""
        cdef Buf* s = &self.store[node]
        cdef i64 k = 0, w = 0, size, live = 0, oldest = NO_ROW
        cdef int kind = self.nd_wkind[node]
        cdef double win = self.nd_win[node]
        while k < s.n:
            size = 2 + 2 * s.data[k + 1]
            if self._fits(kind, win, s.data[k], self.cur):
                if w != k:
                    memmove(s.data + w, s.data + k, size * sizeof(i64))
                if s.data[w] < oldest:
                    oldest = s.data[w]
                w += size
                live += 1
            k += size
        s.n = w
        self.live[node] = live
        self.count[node] = live
        self.oldest[node] = oldest

    cdef inline void _fresh(self, int node) noexcept nogil:
        """Before scanning node's store: drop its expired instances when the oldest
        one no longer fits (each would be a failed join attempt) -- unless an outer
        frame is scanning the same store (a node shared twice in one plan). Not for a
        plain leaf: _scan_range skips its expired front by binary search, and
        compacting on every expiry would move the whole store once per row (_new's
        amortised compaction bounds its memory)."""
        if self.nd_arity[node] == 1 and self.nd_newest[node] == 0:
            return
        if self.scanning[node] == 0 and self.oldest[node] != NO_ROW and \
                not self._fits(self.nd_wkind[node], self.nd_win[node], self.oldest[node],
                               self.cur):
            self._compact(node)

    # ------------------------------------------------------------------ checks
    cdef bint _sort_room(self, i64 m) noexcept nogil:
        """Room for m rows in the sorted-match arrays (False: out of memory)."""
        cdef i64* a
        cdef i64* b
        if m <= self.sort_cap:
            return True
        a = <i64*> realloc(self.sort_pos, 2 * m * sizeof(i64))
        if a == NULL:
            self.oom = 1
            return False
        self.sort_pos = a
        b = <i64*> realloc(self.sort_lab, 2 * m * sizeof(i64))
        if b == NULL:
            self.oom = 1
            return False
        self.sort_lab = b
        self.sort_cap = 2 * m
        return True

    cdef bint _checks(self, const int* chk, int lo, int hi, i64* rec,
                      const int* labels, int pattern) noexcept nogil:
        """Checks chk[lo:hi] on an instance record (first row, m, rows, slots; labels
        per slot in the pattern's terms): order between slots (every row of one before
        every row of the other), then conjuncts on the row-sorted match, for every row
        of their slot."""
        cdef i64 m = rec[1], i, j, va, vb, vp, vl
        cdef i64* rows = rec + 2
        cdef i64* slots = rec + 2 + m
        cdef int k, a, b, sorted_ = 0
        for k in range(lo, hi):
            if chk[3 * k] != K_ORDER:
                continue
            a = chk[3 * k + 1]
            b = chk[3 * k + 2]
            va = -1
            vb = -1
            for i in range(m):
                if slots[i] == a and (va < 0 or rows[i] > va):
                    va = rows[i]
                elif slots[i] == b and (vb < 0 or rows[i] < vb):
                    vb = rows[i]
            if not va < vb:
                return False
        for k in range(lo, hi):
            if chk[3 * k] == K_ORDER:
                continue
            if not sorted_:
                if not self._sort_room(m):
                    return False
                for i in range(m):
                    vp = rows[i]
                    vl = labels[slots[i]]
                    j = i
                    while j > 0 and self.sort_pos[j - 1] > vp:
                        self.sort_pos[j] = self.sort_pos[j - 1]
                        self.sort_lab[j] = self.sort_lab[j - 1]
                        j -= 1
                    self.sort_pos[j] = vp
                    self.sort_lab[j] = vl
                sorted_ = 1
            a = chk[3 * k + 1]
            b = chk[3 * k + 2]
            for i in range(m):
                if slots[i] == b and not self._cond(
                        pattern, a, labels[b], self.sort_pos, self.sort_lab, m, rows[i]):
                    return False
        return True

    cdef inline bint _cond(self, int pattern, int c, int label, i64* pos, i64* lab, i64 m,
                           i64 r) noexcept nogil:
        """Conjunct c of the pattern in its own condition VM, within this partition."""
        return (<ConditionHost> self.pat_host[pattern]).eval_explicit(
            c, label, pos, lab, m, r, self.ps, self.pe)

    # ------------------------------------------------------------------ propagation
    cdef inline bint _kleene(self, int node) noexcept nogil:
        return self.nd_kmin[node] >= 0

    cdef int _new(self, int node, i64* rec) noexcept nogil:
        """A new instance record of node: store it if a join reads the node, then hand
        it to every consumer (a Kleene leaf's new element: the closures ending at it)."""
        cdef int k, kind, idx, other
        cdef i64 size = 2 + 2 * rec[1], j, n
        cdef Buf* s
        cdef bint kl = self._kleene(node)
        self.n_created[node] += 1
        if self.nd_keep[node]:
            s = &self.store[node]
            # expired instances cost a failed join attempt on every scan of the store:
            # compact once an eighth more were added since the last compaction
            # (amortised O(1) per instance; only ancestors' stores grow during a scan)
            if self.count[node] > self.live[node] + (self.live[node] >> 3) + 8:
                self._compact(node)
            if buf_reserve(s, size):
                self.oom = 1
                return -1
            memcpy(s.data + s.n, rec, size * sizeof(i64))
            s.n += size
            self.count[node] += 1
            if self._state_full():
                return -1
            if rec[0] < self.oldest[node]:
                self.oldest[node] = rec[0]
        for k in range(self.nd_use_start[node], self.nd_use_start[node + 1]):
            if self.nd_use_futile[k]:
                self.scans_skipped += 1
                continue
            kind = self.nd_use[2 * k]
            idx = self.nd_use[2 * k + 1]
            if kind == U_ROOT:
                if kl:
                    if self._closures(node, NULL, rec[2], -1, idx, 0, -1, -1):
                        return -1
                elif self._root(idx, rec):
                    return -1
                continue
            other = self.nd_right[idx] if kind == U_LEFT else self.nd_left[idx]
            if kl and self._kleene(other):
                if self._sibling_follows(idx, kind == U_LEFT):
                    # its rows all follow ours: none has arrived, and each of its
                    # arrivals forms these matches (below); enumerating its closures
                    # alone here would be for nothing, exponentially (issue 24 A2,
                    # SEQ(a{2}, KL(b)); cep_tree.pyx _kleene_arrival does the same)
                    continue
                if self._checks_slot(idx, kind == U_LEFT, False) and \
                        not self._checks_slot(idx, kind == U_LEFT, True):
                    # the parent's conditions read the sibling's elements only (they
                    # link them to ours): ours ending here alone, then the sibling's in
                    # their context, which prunes its walk
                    if self._closures(node, NULL, rec[2], idx, -1, kind == U_LEFT, other, -1):
                        return -1
                    continue
                # every closure of the sibling alone, then ours ending here in its context
                if self._closures(other, NULL, -1, idx, -1, kind == U_RIGHT, node, rec[2]):
                    return -1
                continue
            if kl:
                # the closures ending at this element, with every live sibling instance
                s = &self.store[other]
                j = 0
                n = s.n
                self.scanning[other] += 1
                while j < n:
                    if self._closures(node, s.data + j, rec[2], idx, -1, kind == U_LEFT,
                                      -1, -1):
                        return -1
                    j += 2 + 2 * s.data[j + 1]
                self.scanning[other] -= 1
                continue
            if self._kleene(other):
                if self._closures(other, rec, -1, idx, -1, kind == U_RIGHT, -1, -1):
                    return -1
                continue
            # (a node with a known newest slot: decided once, nd_use_futile)
            if self.nd_newest[node] < 0 and self._futile(idx, kind == U_LEFT, rec):
                self.scans_skipped += 1
                continue
            self._fresh(other)
            s = &self.store[other]
            j = 0
            n = s.n    # joins only grow ancestors' stores, never this one
            if self.nd_newest[other] >= 0:
                self._scan_range(idx, kind == U_LEFT, other, rec, &j, &n)
            self.scanning[other] += 1
            while j < n:
                if kind == U_LEFT:
                    if self._join(idx, rec, s.data + j):
                        return -1
                elif self._join(idx, s.data + j, rec):
                    return -1
                j += 2 + 2 * s.data[j + 1]
            self.scanning[other] -= 1
        return 0

    cdef bint _futile(self, int parent, bint new_left, i64* rec) noexcept nogil:
        """No stored sibling instance can join rec at parent: rec holds the current row
        in a slot the parent orders before a sibling slot, and every stored row is at or
        before the current row (the order check, max row of a < min row of b, fails for
        every pair; skipping the scan changes nothing else)."""
        cdef i64 m = rec[1], i, newest = -1
        cdef int slot = -1, q, a, b, shift = self.nd_arity[self.nd_left[parent]]
        cdef int lo, hi
        for i in range(m):
            if rec[2 + i] > newest:
                newest = rec[2 + i]
                slot = <int> rec[2 + m + i]
        if newest != self.cur:
            return False
        if new_left:
            lo, hi = shift, self.nd_arity[parent]
        else:
            slot += shift
            lo, hi = 0, shift
        for q in range(self.nd_chk_start[parent], self.nd_chk_start[parent + 1]):
            if self.nd_chk[3 * q] != K_ORDER:
                continue
            a = self.nd_chk[3 * q + 1]
            b = self.nd_chk[3 * q + 2]
            if a == slot and lo <= b < hi:
                return True
        return False

    cdef void _scan_range(self, int parent, bint new_left, int other, i64* rec, i64* j0,
                          i64* j1) noexcept nogil:
        """Narrow the scan of other's store [j0, j1) (offsets; fixed-size records, rows
        in slot order) to the instances that can join rec at parent. Along the store the
        newest row never decreases (appended as rows advance, each instance holding the
        row it was formed at; compaction and rebasing keep the order), and it sits in
        slot nd_newest. Skipped in front: instances whose newest row is outside the
        parent's window with the current row (the window key is monotone in the
        partition, so the pair's first row is too) or not after a row of rec the
        parent orders before it; at the back: those not before a row of rec the parent
        orders after it (the cuts of dag_arrays._scan_cuts). Every skipped pair would
        fail _join."""
        cdef i64 size = 2 + 2 * self.nd_arity[other], at = 2 + self.nd_newest[other]
        cdef i64 cnt = (j1[0] - j0[0]) // size, lo = 0, hi, mid, i, v, m = rec[1]
        cdef i64 after = -1, before = NO_ROW, step
        cdef int q, cut = 2 * parent + (1 if new_left else 0), slot
        cdef const i64* d = self.store[other].data + j0[0]
        for q in range(self.nd_cut_start[cut], self.nd_cut_start[cut + 1]):
            slot = self.nd_cut[2 * q + 1]
            for i in range(m):
                if rec[2 + m + i] != slot:
                    continue
                v = rec[2 + i]
                if self.nd_cut[2 * q] == 0:
                    if v < before:
                        before = v
                elif v > after:
                    after = v
        # first instance past the front (both tests fail on a prefix): galloping from
        # the first, as the front is usually short, then binary search
        step = 1
        hi = 0
        while hi < cnt and not self._front_ok(parent, d[hi * size + at], after):
            lo = hi + 1
            hi += step
            step *= 2
        if hi > cnt:
            hi = cnt
        while lo < hi:
            mid = (lo + hi) // 2
            if self._front_ok(parent, d[mid * size + at], after):
                hi = mid
            else:
                lo = mid + 1
        # first instance of the back (its newest row at or after `before`): galloping
        # from the last
        hi = cnt
        if before != NO_ROW:
            step = 1
            i = cnt
            while i > lo and d[(i - 1) * size + at] >= before:
                hi = i - 1
                i -= step
                step *= 2
            if i < lo:
                i = lo
            while i < hi:
                mid = (i + hi) // 2
                if d[mid * size + at] < before:
                    i = mid + 1
                else:
                    hi = mid
        j1[0] = j0[0] + hi * size
        j0[0] = j0[0] + lo * size

    cdef inline bint _front_ok(self, int parent, i64 newest, i64 after) noexcept nogil:
        return newest > after and self._fits(self.nd_wkind[parent], self.nd_win[parent],
                                             newest, self.cur)

    cdef int _join(self, int node, i64* a, i64* b) noexcept nogil:
        """Join instance a of node's left child with b of its right child."""
        cdef int shift = self.nd_arity[self.nd_left[node]]
        cdef i64 ma = a[1], mb = b[1], m = ma + mb, i, j
        cdef i64 lo = a[0] if a[0] < b[0] else b[0]
        cdef i64* t
        self.join_attempts += 1
        if not self._fits(self.nd_wkind[node], self.nd_win[node], lo, self.cur):
            return 0
        for i in range(ma):
            for j in range(mb):
                if a[2 + i] == b[2 + j]:
                    return 0
        if buf_reserve(&self.tmp[node], 2 + 2 * m):
            self.oom = 1
            return -1
        t = self.tmp[node].data
        t[0] = lo
        t[1] = m
        for i in range(ma):   # a few slots: a loop, not a libc call per copy
            t[2 + i] = a[2 + i]
            t[2 + m + i] = a[2 + ma + i]
        for j in range(mb):
            t[2 + ma + j] = b[2 + j]
            t[2 + m + ma + j] = b[2 + mb + j] + shift
        if not self._checks(self.nd_chk, self.nd_chk_start[node], self.nd_chk_start[node + 1],
                            t, self.nd_lab + self.nd_lab_start[node], self.nd_owner[node]):
            return 0
        return self._new(node, t)

    cdef bint _sibling_follows(self, int parent, bint node_left) noexcept nogil:
        """Whether parent's order checks put every row of the node's sibling after the
        node's rows (both Kleene leaves: one slot each)."""
        cdef int q, mine = 0 if node_left else self.nd_arity[self.nd_left[parent]]
        cdef int theirs = self.nd_arity[self.nd_left[parent]] if node_left else 0
        for q in range(self.nd_chk_start[parent], self.nd_chk_start[parent + 1]):
            if self.nd_chk[3 * q] == K_ORDER and self.nd_chk[3 * q + 1] == mine and \
                    self.nd_chk[3 * q + 2] == theirs:
                return True
        return False

    cdef bint _checks_slot(self, int parent, bint node_left, bint mine) noexcept nogil:
        """Whether parent checks a conjunct on the node's slot (mine) or its sibling's."""
        cdef int q, slot = self.nd_arity[self.nd_left[parent]] if node_left != mine else 0
        for q in range(self.nd_chk_start[parent], self.nd_chk_start[parent + 1]):
            if self.nd_chk[3 * q] != K_ORDER and self.nd_chk[3 * q + 2] == slot:
                return True
        return False

    cdef int _closures(self, int leaf, i64* x, i64 end_row, int parent, int bind,
                       bint leaf_left, int then_leaf, i64 then_end) noexcept nogil:
        """Closures of Kleene leaf (ending at end_row unless -1) in the context of the
        sibling's instance x at parent (or alone, for binding bind), enumerated by
        closures.walk_closures as in the pattern's own evaluator: each element passes the
        leaf's remaining conditions (on the elements so far) and the parent's conditions
        on the leaf's slot (on x plus the elements so far); each closure of an admitted
        size is joined with x at parent or handed to the root -- or, with then_leaf (the
        sibling, also a Kleene leaf; x is NULL), is the context of then_leaf's closures
        ending at then_end."""
        cdef Buf* s = &self.store[leaf]
        cdef int q
        cdef i64 xm = 0 if x == NULL else x[1], xmin = -1, xmax = -1, lo_b = -1, hi_b = -1
        cdef i64 n, nc = 0, k, row, a, m, rc
        cdef i64* cand
        cdef ClosureWalk w
        cdef _DagKleeneCtx ctx
        ctx.leaf = leaf
        ctx.x = x
        ctx.parent = parent
        ctx.bind = bind
        ctx.leaf_left = leaf_left
        ctx.then_leaf = then_leaf
        ctx.then_end = then_end
        ctx.owner = self.nd_owner[leaf]
        ctx.llab = self.nd_lab[self.nd_lab_start[leaf]]
        ctx.plabs = NULL
        if parent >= 0:
            ctx.pw_kind = self.nd_wkind[parent]
            ctx.pw = self.nd_win[parent]
            ctx.plabs = self.nd_lab + self.nd_lab_start[parent]
            ctx.lslot = 0 if leaf_left else self.nd_arity[self.nd_left[parent]]
        else:
            ctx.pw_kind = self.bd_wkind[bind]
            ctx.pw = self.bd_win[bind]
            ctx.lslot = 0
        # order bounds of the elements from the parent's order checks against x
        for a in range(xm):
            row = x[2 + a]
            if xmin < 0 or row < xmin:
                xmin = row
            if row > xmax:
                xmax = row
        if parent >= 0:
            for q in range(self.nd_chk_start[parent], self.nd_chk_start[parent + 1]):
                if self.nd_chk[3 * q] != K_ORDER:
                    continue
                for a in range(xm):
                    k = x[2 + xm + a] + (self.nd_arity[self.nd_left[parent]] if leaf_left else 0)
                    if self.nd_chk[3 * q + 1] == k and self.nd_chk[3 * q + 2] == ctx.lslot:
                        if x[2 + a] > lo_b:
                            lo_b = x[2 + a]
                    elif self.nd_chk[3 * q + 1] == ctx.lslot and self.nd_chk[3 * q + 2] == k:
                        if hi_b < 0 or x[2 + a] < hi_b:
                            hi_b = x[2 + a]
        n = self.count[leaf] + 1
        m = xm + n + 1
        cand = <i64*> malloc((2 * n + 2 + 2 * m) * sizeof(i64))
        if cand == NULL:
            self.oom = 1
            return -1
        ctx.rec = cand + 2 * n       # the closure: first, m, rows, slots
        w.owner = <void*> self
        w.ctx = &ctx
        w.fits = _dag_fits
        w.check = _dag_element_ok
        w.emit = _dag_closure
        w.lo_n = self.nd_kmin[leaf]
        w.hi_n = self.nd_kmax[leaf]
        w.end_row = end_row
        w.xmin = xmin
        w.xmax = xmax
        w.ticks = &self.countdown
        w.stopped = &self.stop
        k = 0
        while k < s.n:
            row = s.data[k + 2]
            k += 2 + 2 * s.data[k + 1]
            if self._fits(ctx.pw_kind, ctx.pw, row, self.cur):
                cand[nc] = row
                nc += 1
        rc = 0
        nc = closure_candidates(&w, cand, nc, x + 2 if x != NULL else NULL, 1, xm, lo_b, hi_b)
        if nc > 0:
            rc = walk_closures(&w, cand, nc, cand + n, ctx.rec + 2)
        free(cand)
        return rc

    cdef int _element_ok(self, _DagKleeneCtx* c, i64* rows, i64 tm) noexcept nogil:
        """The leaf's own (non-row-local) conditions on the elements so far, then the
        parent's on the leaf's slot with x."""
        cdef i64* rec = rows - 2
        if not self._leaf_checks(c.leaf, rec, tm, c.llab, c.owner):
            return 0
        if c.parent >= 0 and c.x != NULL and not self._context_checks(
                c.parent, c.x, rec, tm, c.leaf_left, c.lslot, c.plabs):
            return 0
        return 1

    cdef int _closure_done(self, _DagKleeneCtx* c, i64* rows, i64 tm) noexcept nogil:
        """A closure of an admitted size as an instance record of the leaf (every
        element in its one slot): joined with x, handed to the root, or the context of
        then_leaf's closures."""
        cdef i64* rec = rows - 2
        cdef i64 i
        rec[0] = rec[2]
        rec[1] = tm
        for i in range(tm):
            rec[2 + tm + i] = 0
        if c.then_leaf >= 0:
            return self._closures(c.then_leaf, rec, c.then_end, c.parent, -1,
                                  not c.leaf_left, -1, -1)
        if c.parent < 0:
            return self._root(c.bind, rec)
        if c.leaf_left:
            return self._join(c.parent, rec, c.x)
        return self._join(c.parent, c.x, rec)

    cdef bint _leaf_checks(self, int leaf, i64* rec, i64 tm, int llab, int owner
                           ) noexcept nogil:
        """The Kleene leaf's enumeration-time conjuncts at its newest element, on the
        elements so far (they read the leaf's own variable only)."""
        cdef int q
        cdef i64 i
        for q in range(self.nd_chk_start[leaf], self.nd_chk_start[leaf + 1]):
            if self.nd_chk[3 * q] != K_KCONJ:
                continue
            if not self._sort_room(tm):
                return False
            for i in range(tm):
                self.sort_pos[i] = rec[2 + i]
                self.sort_lab[i] = llab
            if not self._cond(owner, self.nd_chk[3 * q + 1], llab, self.sort_pos,
                              self.sort_lab, tm, rec[2 + tm - 1]):
                return False
        return True

    cdef bint _context_checks(self, int parent, i64* x, i64* rec, i64 tm, bint leaf_left,
                              int lslot, const int* plabs) noexcept nogil:
        """The parent's conjuncts on the leaf's slot, at the newest element, on x plus
        the elements so far (the parent's owner's labels)."""
        cdef i64 xm = x[1], m = xm + tm, i, j, vp, vl
        cdef int q, sorted_ = 0
        for q in range(self.nd_chk_start[parent], self.nd_chk_start[parent + 1]):
            if self.nd_chk[3 * q] != K_CONJ or self.nd_chk[3 * q + 2] != lslot:
                continue
            if not sorted_:
                if not self._sort_room(m):
                    return False
                for i in range(m):
                    if i < xm:
                        vp = x[2 + i]
                        j = x[2 + xm + i] + (self.nd_arity[self.nd_left[parent]]
                                             if leaf_left else 0)
                        vl = plabs[j]
                    else:
                        vp = rec[2 + i - xm]
                        vl = plabs[lslot]
                    j = i
                    while j > 0 and self.sort_pos[j - 1] > vp:
                        self.sort_pos[j] = self.sort_pos[j - 1]
                        self.sort_lab[j] = self.sort_lab[j - 1]
                        j -= 1
                    self.sort_pos[j] = vp
                    self.sort_lab[j] = vl
                sorted_ = 1
            if not self._cond(
                    self.nd_owner[parent], self.nd_chk[3 * q + 1], plabs[lslot],
                    self.sort_pos, self.sort_lab, m, rec[2 + tm - 1]):
                return False
        return True

    cdef int _root(self, int bind, i64* rec) noexcept nogil:
        """Instance of binding bind's root: the pattern's own window and remaining
        checks; then a candidate (rows ascending, global components) ending at cur."""
        cdef int p = self.bd_pattern[bind], arity = self.nd_arity[self.bd_root[bind]]
        cdef int base = self.bd_slot_start[bind], i, j
        cdef i64 m = rec[1], vp, vc
        cdef int labels[64]
        cdef Buf* cr
        cdef Buf* cc
        if not self._fits(self.bd_wkind[bind], self.bd_win[bind], rec[0], self.cur):
            return 0
        for i in range(arity):
            labels[i] = self.bd_slot[2 * (base + i)]
        if not self._checks(self.bd_chk, self.bd_chk_start[bind], self.bd_chk_start[bind + 1],
                            rec, labels, p):
            return 0
        cr = &self.c_rows[p]
        cc = &self.c_comp[p]
        if buf_reserve(cr, m) or buf_reserve(cc, m) or buf_reserve(&self.c_cand[p], 4):
            self.oom = 1
            return -1
        for i in range(m):
            vp = rec[2 + i]
            vc = self.bd_slot[2 * (base + rec[2 + m + i]) + 1]
            j = i
            while j > 0 and cr.data[cr.n + j - 1] > vp:
                cr.data[cr.n + j] = cr.data[cr.n + j - 1]
                cc.data[cc.n + j] = cc.data[cc.n + j - 1]
                j -= 1
            cr.data[cr.n + j] = vp
            cc.data[cc.n + j] = vc
        cc = &self.c_cand[p]
        cc.data[cc.n] = self.cur
        cc.data[cc.n + 1] = self.bd_term[bind]
        cc.data[cc.n + 2] = cr.n
        cc.data[cc.n + 3] = m
        cc.n += 4
        cr.n += m
        self.c_comp[p].n += m
        self.candidates += 1
        if self._state_full():
            return -1
        return 0

    cdef bint _state_full(self) noexcept nogil:
        """Every 1024 instances stored or candidates formed: whether the instances the
        nodes hold plus this run's candidates passed max_state; then the loops stop as
        out of memory does, with limit_hit set (the pass's CepRuntimeError names the
        conf key)."""
        cdef i64 total = 0
        cdef int k
        self.n_grown += 1
        if self.max_state <= 0 or (self.n_grown & 1023) != 0:
            return False
        for k in range(self.n_nodes):
            total += self.count[k]
        for k in range(self.n_pat):
            total += self.c_cand[k].n // 4
        if total <= self.max_state:
            return False
        self.limit_hit = 1
        self.oom = 1
        return True

    cdef bint _leaf_ok(self, int leaf, i64 r) noexcept nogil:
        """Row r is an instance of the leaf (a Kleene leaf: an element candidate, its
        row-local conjuncts only)."""
        cdef i64 pos[1]
        cdef i64 lab[1]
        cdef int k, p = self.nd_owner[leaf]
        pos[0] = r
        lab[0] = self.nd_lab[self.nd_lab_start[leaf]]
        for k in range(self.nd_chk_start[leaf], self.nd_chk_start[leaf + 1]):
            if self.nd_chk[3 * k] != K_CONJ:
                continue
            if not self._cond(p, self.nd_chk[3 * k + 1], <int> lab[0], pos, lab, 1, r):
                return False
        return True

    cdef void _clear(self) noexcept nogil:
        cdef int node
        for node in range(self.n_nodes):
            self.store[node].n = 0
            self.live[node] = 0
            self.count[node] = 0
            self.oldest[node] = NO_ROW
            self.scanning[node] = 0

    cdef int _rows(self, i64 start, i64 stop) noexcept nogil:
        """Rows [start, stop) of the current partition: each leaf that accepts a row
        makes an instance, which climbs to every consumer."""
        cdef int node, rep, k
        cdef i64 r
        cdef i64 rec[4]
        if self.pre_rows != NULL:
            return self._routed_rows(start, stop)
        for r in range(start, stop):
            if interrupted(&self.countdown):
                self.stop = 1
                return -1
            self.cur = r
            for k in range(self.n_leaves):
                node = self.leaf_list[k]
                rep = self.nd_rep[node]
                if self.rep_row[rep] != r:   # the leaf's condition, once per row
                    if self.pre != NULL and self.nd_pre[rep] >= 0:
                        self.rep_ok[rep] = self.pre[self.nd_pre[rep] * self.pre_n + r]
                    else:
                        self.rep_ok[rep] = self._leaf_ok(rep, r)
                    self.rep_row[rep] = r
                if not self.rep_ok[rep]:
                    continue
                rec[0] = r
                rec[1] = 1
                rec[2] = r
                rec[3] = 0
                if self._new(node, rec):
                    return -1
            if self.oom:
                return -1
        return 0

    cdef int _routed_rows(self, i64 start, i64 stop) noexcept nogil:
        """_rows with the run's prefilter masks row-major: per row, the VM-tested
        leaves, then the leaves of each test that accepts it (eight tests per word
        read; the order of a row's leaves changes no instance: two instances formed at
        one row share it and never join)."""
        cdef int node, rep, k, q
        cdef i64 r, w, b
        cdef i64 rec[4]
        cdef unsigned long long word
        cdef const unsigned char* row
        for r in range(start, stop):
            if interrupted(&self.countdown):
                self.stop = 1
                return -1
            self.cur = r
            rec[0] = r
            rec[1] = 1
            rec[2] = r
            rec[3] = 0
            for k in range(self.n_vm):
                node = self.vm_leaf[k]
                rep = self.nd_rep[node]
                if self.rep_row[rep] != r:
                    self.rep_ok[rep] = self._leaf_ok(rep, r)
                    self.rep_row[rep] = r
                if self.rep_ok[rep] and self._new(node, rec):
                    return -1
            row = self.pre_rows + r * self.pre_w
            w = 0
            while w < self.pre_w:
                memcpy(&word, row + w, 8)
                if word != 0:
                    for b in range(w, w + 8):
                        if row[b] == 0:
                            continue
                        for q in range(self.tl_start[b], self.tl_start[b + 1]):
                            if self._new(self.tl_leaf[q], rec):
                                return -1
                w += 8
            if self.oom:
                return -1
        return 0

    cdef i64 _open_keep(self, i64 stop, int lookback) noexcept nogil:
        """After rows up to stop of the open partition: prune every store by window and
        return the first row the carried instances (and their conditions' PREV) read."""
        cdef int node
        cdef i64 need = stop, k
        cdef Buf* s
        self.cur = stop - 1
        for node in range(self.n_nodes):
            if stop > self.ps:
                self._compact(node)
            s = &self.store[node]
            k = 0
            while k < s.n:
                if s.data[k] < need:
                    need = s.data[k]
                k += 2 + 2 * s.data[k + 1]
        need -= lookback
        if need < self.ps:
            need = self.ps
        return need

    def run(self, cnp.ndarray bounds, wts=None, wnulls=None, int open_last=0, int cont=0,
            int lookahead=0, int lookback=0, prefilter=None):
        """Every partition [bounds[k], bounds[k+1]) of the chunk the matchers' rows are
        attached for. Returns per pattern (cand int64[n, 4], rows, comps) for
        CepMatcher.set_candidates.

        Streaming (every node windowed): with open_last the last partition continues in
        the next run: its rows are processed up to lookahead rows before the chunk end
        (NEXT() of a condition must see them), the stores are pruned and ``keep`` is the
        first row the carried instances need (lookback rows before the oldest); call
        rebase(d) once the caller dropped the chunk's first d rows. With cont the first
        partition continues the carried stores. ``prefilter``: uint8[k, rows], the
        chunk's value of the leaf tests dag_arrays.leaf_prefilters computes at once (row
        r of test nd_pre[leaf]), or None (every leaf test in the VM)."""
        cdef const i64[::1] bb = np.ascontiguousarray(bounds, dtype=np.int64)
        cdef cnp.ndarray pm
        cdef const double[::1] wt
        cdef const unsigned char[::1] wn
        cdef double dummy_d = 0.0
        cdef unsigned char dummy_u = 0
        cdef i64 k, n_parts = bb.shape[0] - 1, start, stop
        cdef int p, err = 0, is_cont, is_open
        self.wts = &dummy_d
        self.wnull = &dummy_u
        self.pre = NULL
        self.pre_ref = None
        self.pre_rows = NULL
        self.pre_rows_ref = None
        if prefilter is not None:
            pm = np.ascontiguousarray(prefilter, dtype=np.uint8)
            if pm.ndim != 2:
                raise ValueError("prefilter: uint8[tests, rows]")
            if pm.size:
                self.pre_ref = pm
                self.pre_n = pm.shape[1]
                self.pre = <const unsigned char*> cnp.PyArray_DATA(pm)
                if pm.shape[0] == self.n_tests:
                    rows_major = np.zeros((pm.shape[1], (self.n_tests + 7) // 8 * 8),
                                          dtype=np.uint8)
                    rows_major[:, :self.n_tests] = pm.T
                    self.pre_rows_ref = rows_major
                    self.pre_w = rows_major.shape[1]
                    self.pre_rows = <const unsigned char*> cnp.PyArray_DATA(rows_major)
        if wts is not None:
            wt = np.ascontiguousarray(wts, dtype=np.float64)
            wn = np.ascontiguousarray(wnulls, dtype=np.uint8)
            if wt.shape[0] > 0:
                self.wts = &wt[0]
                self.wnull = &wn[0]
        for p in range(self.n_pat):
            self.c_cand[p].n = 0
            self.c_rows[p].n = 0
            self.c_comp[p].n = 0
        self.oom = 0
        self.limit_hit = 0
        self.keep = 0
        for k in range(self.n_nodes):
            self.rep_row[k] = -1   # rows of another chunk: forget the leaf tests
        with nogil:
            for k in range(n_parts):
                self.ps = bb[k]
                self.pe = bb[k + 1]
                is_cont = k == 0 and cont and self.has_state
                is_open = k == n_parts - 1 and open_last
                if is_cont:
                    start = self.resume
                else:
                    self._clear()
                    start = self.ps
                stop = self.pe - lookahead if is_open else self.pe
                if stop < start:
                    stop = start
                if self._rows(start, stop):
                    err = 1
                    break
                if is_open:
                    self.keep = self._open_keep(stop, lookback)
                    self.resume = stop
            self.has_state = open_last and n_parts > 0 and not err
            if not self.has_state:
                self._clear()
        if err:
            self._clear()
            if self.stop:  # Ctrl-C
                self.stop = 0
                raise_interrupt()
            raise MemoryError("cepsql shared DAG evaluator ran out of memory")
        out = []
        for p in range(self.n_pat):
            out.append((buf_to_numpy(&self.c_cand[p], False).reshape(-1, 4),
                        buf_to_numpy(&self.c_rows[p], False), buf_to_numpy(&self.c_comp[p], False)))
        return out

    def rebase(self, i64 d):
        """The caller dropped the first d rows of the chunk: shift the carried state."""
        cdef int node
        cdef i64 k, m, i
        cdef i64* data
        if not self.has_state or d <= 0:
            return
        for node in range(self.n_nodes):
            data = self.store[node].data
            k = 0
            while k < self.store[node].n:
                m = data[k + 1]
                data[k] -= d
                for i in range(m):
                    data[k + 2 + i] -= d
                k += 2 + 2 * m
        for node in range(self.n_nodes):
            if self.oldest[node] != NO_ROW:
                self.oldest[node] -= d
        self.resume -= d
        self.keep -= d

    def node_instances(self):
        """Instances formed per node since this object was made."""
        return [self.n_created[i] for i in range(self.n_nodes)]


cdef void* _copy_i32(arr):
    cdef cnp.ndarray a = np.ascontiguousarray(arr, dtype=np.int32)
    cdef size_t nbytes = a.nbytes if a.nbytes > 0 else 8
    cdef void* p = malloc(nbytes)
    if p == NULL:
        raise MemoryError("cepsql shared DAG evaluator ran out of memory")
    if a.nbytes:
        memcpy(p, cnp.PyArray_DATA(a), a.nbytes)
    return p


cdef void* _copy_f64(arr):
    cdef cnp.ndarray a = np.ascontiguousarray(arr, dtype=np.float64)
    cdef size_t nbytes = a.nbytes if a.nbytes > 0 else 8
    cdef void* p = malloc(nbytes)
    if p == NULL:
        raise MemoryError("cepsql shared DAG evaluator ran out of memory")
    if a.nbytes:
        memcpy(p, cnp.PyArray_DATA(a), a.nbytes)
    return p


