# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""CepMatcher: one compiled CEP query (STRATEGY ...); construction and ``run`` over the
partitions of a chunk. The evaluator's ideas live one per module in the class chain
CepCore (cep_core) -> CepNot (cep_not) -> CepOutput (cep_output) -> CepTree (cep_tree)
-> CepRuns (cep_nfa) -> CepState (cep_state) -> CepMatcher."""
from libc.stdlib cimport malloc, realloc, free, calloc
from libc.string cimport memcpy, memset, memmove
from libc.math cimport fabs, sqrt, log, exp, floor, ceil, pow, log10, fmod

cimport numpy as cnp

from cepsql._ext.buffers cimport *
from cepsql._ext.vm cimport *
from cepsql._ext.aggregates cimport *
from cepsql._ext.interrupt cimport raise_interrupt
from cepsql._ext.match_order cimport MatchOrder, _cmp_match, _sort_matches
from cepsql._ext.closures cimport ClosureWalk, closure_candidates, walk_closures
from cepsql._ext.cep_core cimport *
from cepsql._ext.cep_not cimport *
from cepsql._ext.cep_output cimport *
from cepsql._ext.cep_tree cimport *
from cepsql._ext.cep_nfa cimport *
from cepsql._ext.cep_state cimport *

import numpy as np

cnp.import_array()


class StateLimitReached(MemoryError):
    """run() stopped: one partition's state passed the matcher's max_state (the worker
    reports it with its conf key, runtime.cep_worker)."""


cdef class CepSpec:
    """Everything a CepMatcher is built from, by name: the compiled pattern's arrays
    (cepsql/compile/cep.py), the exact lane (xconsts, ansi, dlane, mlane; see
    vm.pxd), run merging, and the optional parts left None when the pattern has none:
    NEXT_MATCH guards (proceed), iteration groups (groups .. loop_only; cep_expand's
    group arrays), NOT programs (not_*) and the tree plan (plan_*). One object instead
    of positional arrays and set_* calls, so a new part is a named field."""
    cdef readonly object code, conj_off, conj_label, conj_mask, consts, refs, membership
    cdef readonly object daggs, comps, seq_start, negs, leaves, maggs, rank, strategy
    cdef readonly object all_rows, with_unmatched, select_past_last, window_kind
    cdef readonly object window_size, max_stack, xconsts, ansi, dlane, mlane, merging
    cdef readonly object proceed, groups, seq_recheck, take_skip, neg_iter, loop_only
    cdef readonly object not_sub_start, not_seq_start, not_comps, not_early, plan_nodes
    cdef readonly object plan_leaf_of, plan_after, plan_conj_start, plan_conj, plan_late
    cdef readonly object plan_rowlocal, plan_neg_start, plan_neg

    def __init__(self, *, code, conj_off, conj_label, conj_mask, consts, refs,
                 membership, daggs, comps, seq_start, negs, leaves, maggs, rank,
                 strategy, all_rows, with_unmatched, select_past_last, window_kind,
                 window_size, max_stack, xconsts, ansi, dlane, mlane, merging=1,
                 proceed=None, groups=None, seq_recheck=None, take_skip=None,
                 neg_iter=None, loop_only=None, not_sub_start=None, not_seq_start=None,
                 not_comps=None, not_early=None, plan_nodes=None, plan_leaf_of=None,
                 plan_after=None, plan_conj_start=None, plan_conj=None, plan_late=None,
                 plan_rowlocal=None, plan_neg_start=None, plan_neg=None):
        self.code = code
        self.conj_off = conj_off
        self.conj_label = conj_label
        self.conj_mask = conj_mask
        self.consts = consts
        self.refs = refs
        self.membership = membership
        self.daggs = daggs
        self.comps = comps
        self.seq_start = seq_start
        self.negs = negs
        self.leaves = leaves
        self.maggs = maggs
        self.rank = rank
        self.strategy = strategy
        self.all_rows = all_rows
        self.with_unmatched = with_unmatched
        self.select_past_last = select_past_last
        self.window_kind = window_kind
        self.window_size = window_size
        self.max_stack = max_stack
        self.xconsts = xconsts
        self.ansi = ansi
        self.dlane = dlane
        self.mlane = mlane
        self.merging = merging
        self.proceed = proceed
        self.groups = groups
        self.seq_recheck = seq_recheck
        self.take_skip = take_skip
        self.neg_iter = neg_iter
        self.loop_only = loop_only
        self.not_sub_start = not_sub_start
        self.not_seq_start = not_seq_start
        self.not_comps = not_comps
        self.not_early = not_early
        self.plan_nodes = plan_nodes
        self.plan_leaf_of = plan_leaf_of
        self.plan_after = plan_after
        self.plan_conj_start = plan_conj_start
        self.plan_conj = plan_conj
        self.plan_late = plan_late
        self.plan_rowlocal = plan_rowlocal
        self.plan_neg_start = plan_neg_start
        self.plan_neg = plan_neg


cdef class CepMatcher(CepState):
    """One compiled CEP query; ``run`` evaluates every partition of a chunk."""

    def __init__(self, CepSpec spec):
        """The matcher of spec's pattern, ready to run."""
        cdef cnp.ndarray code = spec.code, conj_off = spec.conj_off
        cdef cnp.ndarray conj_label = spec.conj_label, conj_mask = spec.conj_mask
        cdef cnp.ndarray consts = spec.consts, refs = spec.refs
        cdef cnp.ndarray membership = spec.membership, daggs = spec.daggs
        cdef cnp.ndarray comps = spec.comps, seq_start = spec.seq_start, negs = spec.negs
        cdef cnp.ndarray leaves = spec.leaves, maggs = spec.maggs, rank = spec.rank
        cdef int strategy = spec.strategy, all_rows = spec.all_rows
        cdef int with_unmatched = spec.with_unmatched
        cdef int select_past_last = spec.select_past_last, window_kind = spec.window_kind
        cdef double window_size = spec.window_size
        cdef int max_stack = spec.max_stack
        cdef int i, j, s, t, lab, loff, logical, n_comps
        self.n_labels = rank.shape[0]
        self.code = <int*> self._copy(np.ascontiguousarray(code, dtype=np.int32))
        self.conj_off = <int*> self._copy(np.ascontiguousarray(conj_off, dtype=np.int32))
        self.conj_label = <int*> self._copy(np.ascontiguousarray(conj_label, dtype=np.int32))
        self.conj_mask = <u64*> self._copy(np.ascontiguousarray(conj_mask, dtype=np.uint64))
        self.n_conj = conj_off.shape[0]
        self.consts = <double*> self._copy(np.ascontiguousarray(consts, dtype=np.float64))
        self.refs = <int*> self._copy(np.ascontiguousarray(refs, dtype=np.int32))
        self.n_refs = refs.shape[0]
        self.member = <unsigned char*> self._copy(np.ascontiguousarray(membership, dtype=np.uint8))
        self.n_sets = membership.shape[0]
        self.daggs = <int*> self._copy(np.ascontiguousarray(daggs, dtype=np.int32))
        self.n_daggs = daggs.shape[0]
        self.comps = <int*> self._copy(np.ascontiguousarray(comps, dtype=np.int32))
        n_comps = comps.shape[0]
        self.seq_start = <int*> self._copy(np.ascontiguousarray(seq_start, dtype=np.int32))
        self.n_seq = seq_start.shape[0] - 1
        self.negs = <int*> self._copy(np.ascontiguousarray(negs, dtype=np.int32))
        self.n_negs = negs.shape[0]
        self.leaves = <int*> self._copy(np.ascontiguousarray(leaves, dtype=np.int32))
        self.n_leaves = leaves.shape[0]
        self.maggs = <int*> self._copy(np.ascontiguousarray(maggs, dtype=np.int32))
        self.n_maggs = maggs.shape[0]
        self.rank = <int*> self._copy(np.ascontiguousarray(rank, dtype=np.int32))
        self.strategy = strategy
        self.all_rows = all_rows
        self.with_unmatched = with_unmatched
        self.select_past_last = select_past_last
        self.dedup = self.n_seq > 1
        self.merging = 1
        self.window_kind = window_kind
        self.window_size = window_size
        self.vstack = <double*> malloc((max_stack + 8) * sizeof(double))
        self.nstack = <unsigned char*> malloc(max_stack + 8)
        if _lane_init(&self.xl, max_stack) or self.vstack == NULL or self.nstack == NULL:
            raise MemoryError("cepsql CEP matcher ran out of memory")
        # conjuncts per label
        self.lab_conj_start = <int*> calloc(self.n_labels + 2, sizeof(int))
        self.lab_conj = <int*> malloc((self.n_conj + 1) * sizeof(int))
        if self.lab_conj_start == NULL or self.lab_conj == NULL:
            raise MemoryError("cepsql CEP matcher ran out of memory")
        t = 0
        for lab in range(self.n_labels):
            self.lab_conj_start[lab] = t
            for i in range(self.n_conj):
                if self.conj_label[i] == lab:
                    self.lab_conj[t] = i
                    t += 1
        self.lab_conj_start[self.n_labels] = t
        # component of a label in each sequence
        self.comp_of = <int*> malloc((self.n_seq * self.n_labels + 1) * sizeof(int))
        if self.comp_of == NULL:
            raise MemoryError("cepsql CEP matcher ran out of memory")
        for i in range(self.n_seq * self.n_labels):
            self.comp_of[i] = -1
        for i in range(n_comps):
            self.comp_of[self.comps[i * 4] * self.n_labels + self.comps[i * 4 + 1]] = i
        # tracked sets: every set a conjunct reference reads (first F / last K rows)
        self.trk_of_set = <int*> malloc((self.n_sets + 1) * sizeof(int))
        self.trk_set = <int*> malloc((self.n_sets + 1) * sizeof(int))
        self.trk_base = <int*> malloc((self.n_sets + 1) * sizeof(int))
        self.trk_f = <int*> calloc(self.n_sets + 1, sizeof(int))
        self.trk_k = <int*> calloc(self.n_sets + 1, sizeof(int))
        if self.trk_of_set == NULL or self.trk_set == NULL or self.trk_base == NULL or \
                self.trk_f == NULL or self.trk_k == NULL:
            raise MemoryError("cepsql CEP matcher ran out of memory")
        for i in range(self.n_sets + 1):
            self.trk_of_set[i] = -1
        self.n_trk = 0
        for i in range(self.n_refs):
            s = self.refs[i * 5]
            logical = self.refs[i * 5 + 1]
            loff = self.refs[i * 5 + 2]
            t = self.trk_of_set[s + 1]
            if t < 0:
                t = self.n_trk
                self.n_trk += 1
                self.trk_of_set[s + 1] = t
                self.trk_set[t] = s
            if logical == 0:
                if loff + 1 > self.trk_f[t]:
                    self.trk_f[t] = loff + 1
            else:
                if loff + 1 > self.trk_k[t]:
                    self.trk_k[t] = loff + 1
        j = 0
        for t in range(self.n_trk):
            self.trk_base[t] = j
            j += 1 + self.trk_f[t] + self.trk_k[t]
        self.agg_base = j
        self.S = j + AGG_W * self.n_daggs
        self.RW = R_HDR + self.S
        self.tmpst = <i64*> malloc((self.RW + 1) * sizeof(i64))
        self.startst = <i64*> malloc((self.RW + 1) * sizeof(i64))
        if self.tmpst == NULL or self.startst == NULL:
            raise MemoryError("cepsql CEP matcher ran out of memory")
        self.tpos = NULL
        self.tlab = NULL
        self.neg_memo = NULL
        self.neg_memo_cap = 0
        self.neg_cnt = NULL
        self.neg_upto = NULL
        self.neg_cnt_cap = 0
        self.nt_sub = NULL
        self.nt_seq = NULL
        self.nt_comp = NULL
        self.nt_early = NULL
        self.g_first = NULL
        self.g_last = NULL
        self.g_min = NULL
        self.g_max = NULL
        self.g_alt_last = NULL
        self.g_alt_next = NULL
        self.seq_recheck = NULL
        self.take_skip = NULL
        self.neg_iter = NULL
        self.g_loop_only = NULL
        self.comp_tags = 0
        self.mcomp = NULL
        self.cap_path = 0
        self.ppos = NULL
        self.plab = NULL
        self.mpos = NULL
        self.mlab = NULL
        self.covered = NULL
        self.cap_flags = 0
        self.has_state = 0
        self.keep = 0
        # deepest PREV / NEXT reach (DEFINE references and measure leaves)
        self.lookback = 0
        self.lookahead = 0
        for i in range(self.n_refs):
            self._reach(self.refs[i * 5 + 3])
        for i in range(self.n_leaves):
            self._reach(self.leaves[i * 6 + 3])
        self._set_exact(spec.xconsts, spec.ansi, spec.dlane, spec.mlane)
        self.merging = spec.merging
        if spec.proceed is not None:
            self._set_guards(spec.proceed)
        if spec.groups is not None:
            self._set_groups(spec.groups, spec.seq_recheck, spec.take_skip, spec.neg_iter,
                             spec.loop_only)
        if spec.not_sub_start is not None:
            self._set_not_programs(spec.not_sub_start, spec.not_seq_start, spec.not_comps,
                                   spec.not_early)
        if spec.plan_nodes is not None:
            self._set_plan(spec.plan_nodes, spec.plan_leaf_of, spec.plan_after,
                           spec.plan_conj_start, spec.plan_conj, spec.plan_late,
                           spec.plan_rowlocal, spec.plan_neg_start, spec.plan_neg)
        self._set_compact()

    def run(self, cnp.ndarray values, cnp.ndarray nulls, cnp.ndarray bounds,
            wts=None, wnulls=None, int open_last=0, int cont=0, breaks=None):
        """Match every partition [bounds[k], bounds[k+1]). Returns (rows, match numbers,
        leaves[n, n_leaves], aggregates[n, n_maggs]).

        Streaming (WITHIN only): with open_last the last partition continues in the next
        call; rows are processed up to the deepest NEXT before the chunk end, matches are
        output once their MATCH_NUMBER order is final, and ``keep`` tells the first row
        the next call must get again (every row index of the carried state is rebased
        to it). With cont the first partition continues the carried state. ``breaks``
        (STRICT_CONTIGUITY with PARTITION BY): one flag per row, 1 when the row's
        predecessor in the global ORDER BY order belongs to another partition -- every
        run waiting at such a row dies (R5)."""
        cdef const double[:, ::1] vv = np.ascontiguousarray(values, dtype=np.float64)
        cdef const unsigned char[:, ::1] nn = np.ascontiguousarray(nulls, dtype=np.uint8)
        cdef const i64[::1] bb = np.ascontiguousarray(bounds, dtype=np.int64)
        cdef const double[::1] wt
        cdef const unsigned char[::1] wn
        cdef Buf out[4]
        cdef i64 k, n_parts = bb.shape[0] - 1, start, carried = 0, need, i
        cdef int err = 0, is_cont, is_open
        cdef double dummy_d = 0.0
        cdef unsigned char dummy_u = 0
        cdef unsigned char* p
        if cont and self.has_state:
            carried = self.n_rows - self.keep   # rows of the previous chunk passed again
        if carried <= 0 or carried > values.shape[1]:
            cont = 0   # nothing carried: the state held nothing alive
            carried = 0
        self.has_state = 0
        self.n_rows = vv.shape[1]
        if self.n_rows > self.peak_rows:
            self.peak_rows = self.n_rows
        self.keep = 0
        self.vals = &vv[0, 0] if vv.shape[0] > 0 and vv.shape[1] > 0 else &dummy_d
        self.nulls = &nn[0, 0] if nn.shape[0] > 0 and nn.shape[1] > 0 else &dummy_u
        if self.planned and self.n_negs:   # the rows changed: forget the NOT memo
            if self.neg_memo_cap < self.n_negs * self.n_rows:
                free(self.neg_memo)
                self.neg_memo_cap = self.n_negs * self.n_rows
                self.neg_memo = <unsigned char*> malloc(self.neg_memo_cap)
                if self.neg_memo == NULL:
                    self.neg_memo_cap = 0
                    raise MemoryError("cepsql CEP matcher ran out of memory")
            memset(self.neg_memo, 0, self.n_negs * self.n_rows)
            if self.neg_cnt_cap < self.n_negs * (self.n_rows + 1):
                free(self.neg_cnt)
                free(self.neg_upto)
                self.neg_cnt_cap = self.n_negs * (self.n_rows + 1)
                self.neg_cnt = <i64*> malloc(self.neg_cnt_cap * sizeof(i64))
                self.neg_upto = <i64*> malloc(self.n_negs * sizeof(i64))
                if self.neg_cnt == NULL or self.neg_upto == NULL:
                    self.neg_cnt_cap = 0
                    raise MemoryError("cepsql CEP matcher ran out of memory")
            for k in range(self.n_negs):
                self.neg_upto[k] = 0
                self.neg_cnt[k * (self.n_rows + 1)] = 0
        if self.window_kind == 2:
            wt = np.ascontiguousarray(wts, dtype=np.float64)
            wn = np.ascontiguousarray(wnulls, dtype=np.uint8)
            self.wts = &wt[0] if wt.shape[0] > 0 else &dummy_d
            self.wnull = &wn[0] if wn.shape[0] > 0 else &dummy_u
        self.gbreak = NULL
        if breaks is not None:
            gb = np.ascontiguousarray(breaks, dtype=np.uint8)
            if gb.shape[0] != self.n_rows:
                raise ValueError("breaks must have one flag per row")
            self.gbreak = <const unsigned char*> cnp.PyArray_DATA(gb)
        memset(out, 0, sizeof(out))
        self.lists.n = 0
        self.oom = 0
        self.tie_hit = 0
        self.limit_hit = 0
        self.signalled = 0
        if self.cap_path < self.n_rows + 2:
            if grow_i64(&self.ppos, self.n_rows + 2) or grow_i64(&self.plab, self.n_rows + 2) \
                    or grow_i64(&self.mpos, self.n_rows + 2) \
                    or grow_i64(&self.mlab, self.n_rows + 2) \
                    or grow_i64(&self.mcomp, self.n_rows + 2) \
                    or grow_i64(&self.tpos, self.n_rows + 2) \
                    or grow_i64(&self.tlab, self.n_rows + 2):
                raise MemoryError("cepsql CEP matcher ran out of memory")
            self.cap_path = self.n_rows + 2
        if self.cap_flags < self.n_rows + 1:
            self.cap_flags = self.n_rows + 1
            p = <unsigned char*> realloc(self.covered, self.cap_flags)
            if p == NULL:
                raise MemoryError("cepsql CEP matcher ran out of memory")
            self.covered = p
        if self.compact_ok and self.tie_cap < self.n_rows + 1:
            free(self.tie_row)
            self.tie_row = <i64*> calloc(self.n_rows + 1, sizeof(i64))
            self.tie_cap = self.n_rows + 1 if self.tie_row != NULL else 0
        if self.compact_ok:   # row indices restart: forget the last call's matches
            if self.tie_row == NULL:
                raise MemoryError("cepsql CEP matcher ran out of memory")
            memset(self.tie_row, 0, (self.n_rows + 1) * sizeof(i64))
        if self.ppos == NULL or self.tlab == NULL or self.mcomp == NULL:
            raise MemoryError("cepsql CEP matcher ran out of memory")
        with nogil:
            if self.n_rows > carried:
                memset(self.covered + carried, 0, self.n_rows - carried)
            for k in range(n_parts):
                self.ps = bb[k]
                self.pe = bb[k + 1]
                is_cont = k == 0 and cont
                is_open = k == n_parts - 1 and open_last
                if self.pe <= self.ps and not is_cont:
                    continue
                if is_cont:
                    start = self.pproc   # rebased: the first row not yet processed
                else:
                    self._reset()
                    start = self.ps
                # compact: a whole partition in this call, no plan switch to apply
                self.compact = self.compact_ok and not is_cont and not is_open and \
                    not (k == 0 and self.p_set)
                if k == 0 and self.p_set:
                    if self.p_set & 1:
                        self.f_lo = self.p_lo
                        self.f_hi = self.p_hi
                        self.hold = self.p_hold
                    if self.p_set & 2:
                        self.match_no += self.p_base
                        self.hold = 0
                    if self.p_set & 4 and not is_cont:
                        start = self.ps + self.p_ctx   # rows before: PREV reads them only
                        if start > self.pe:
                            start = self.pe
                        self.unmatched_done = start
                        self.last_end = start - 1
                    self.p_set = 0
                if is_open:
                    self.closed = 0
                    self.pproc = self.pe - self.lookahead
                    if self.pproc < start:
                        self.pproc = start
                else:
                    self.closed = 1
                    self.pproc = self.pe
                if self._partition(start, self.pproc) != 0:
                    if not self.tie_hit or self.signalled or self.limit_hit:
                        err = 1
                        break
                    # two compact matches tie on (first, last): again with their rows
                    self.tie_hit = 0
                    self.compact_retries += 1
                    self.oom = 0
                    self.compact = 0
                    self._reset()
                    if self._partition(self.ps, self.pproc) != 0:
                        err = 1
                        break
                if is_open:
                    if self.cur.n > 0 and self.pproc > self.ps:
                        if self._compact(self.pproc - 1):
                            err = 1
                            break
                    elif self.cur.n == 0:
                        self._clear_nodes()
                    need = self._future_first()
                    # held (a plan switch): only matches starting before f_lo are output;
                    # _emit_ready outputs those starting at or before its bound
                    if self._emit_ready(out, self.f_lo - 1 if self.hold and need >= self.f_lo
                                        else need) != 0:
                        err = 1
                        break
                    self.processed = self.pproc
                    self.drained = need >= self.f_hi
                    for i in range(self.m_off.n):
                        if self.m_st.data[i] != 3:
                            self.drained = 0
                    # rows the carried state may still read
                    for i in range(self.m_off.n):
                        if self.m_pos.data[self.m_off.data[i]] < need:
                            need = self.m_pos.data[self.m_off.data[i]]
                    if self.all_rows and self.with_unmatched and self.unmatched_done < need:
                        need = self.unmatched_done
                    need -= self.lookback
                    if need < self.ps:
                        need = self.ps
                    if need > self.pproc:
                        need = self.pproc
                    self.keep = need
                    self._rebase(need)
                    self.has_state = 1
                elif self._emit_ready(out, self.pe + 1) != 0:
                    err = 1
                    break
        self.compact = 0
        if err:
            for k in range(4):
                free(out[k].data)
            self.has_state = 0
            if self.signalled:  # Ctrl-C: what the signal handler raised
                self.signalled = 0
                raise_interrupt()
            if self.limit_hit:
                raise StateLimitReached(
                    f"cepsql CEP matcher: partition state over {self.max_state} entries")
            raise MemoryError("cepsql CEP matcher ran out of memory")
        rows = buf_to_numpy(&out[0], False)
        numbers = buf_to_numpy(&out[1], False)
        leaves = buf_to_numpy(&out[2], False).reshape(len(rows), self.n_leaves)
        aggs = buf_to_numpy(&out[3], False).reshape(len(rows), self.n_maggs, 2)
        for k in range(4):
            free(out[k].data)
        return rows, numbers, leaves, aggs

    def restrict_first(self, i64 lo, i64 hi, int hold=0):
        """Plan switch (runtime/adaptive.py): in the first partition of the next run
        call keep only matches whose first row (an index of that call's rows) is in
        [lo, hi); with hold output none of them until release_numbers."""
        self.p_lo = lo
        self.p_hi = hi
        self.p_hold = hold
        self.p_set |= 1

    def set_context(self, i64 rows):
        """Streaming (a key's new segment after a gap longer than the window): the first
        ``rows`` rows of the next run call's first partition are the previous segment's
        last rows, there only for PREV to read -- no run starts at them, they are never
        output (not even as unmatched rows)."""
        self.p_ctx = rows
        self.p_set |= 4

    def release_numbers(self, i64 base):
        """From the next run call on, number the held partition's matches after the
        base matches the previous plan numbered, and output them."""
        self.p_base = base
        self.p_set |= 2

    def keep_histories(self):
        """Run every partition with buffer nodes, never compact (cep_output._set_compact):
        the evaluation before issue 24 A1, the baseline benchmarks compare against."""
        self.compact_ok = 0

    def stats(self):
        retries = dict(compact_retries=self.compact_retries) if self.compact_retries else {}
        return retries | dict(runs_created=self.runs_created, runs_merged=self.runs_merged,
                    nodes_created=self.nodes_created, peak_runs=self.peak_runs,
                    matches_found=self.matches_found, peak_nodes=self.peak_nodes,
                    peak_rows=self.peak_rows, peak_stored=self.peak_stored,
                    planned=self.planned, partial_matches=self.pm_created,
                    peak_partial_matches=self.peak_pm,
                    compactions=self.compactions, matches_output=self.matches_output,
                    peak_held=self.peak_held)

    # ------------------------------------------------------------------ output
