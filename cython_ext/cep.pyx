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

import numpy as np
cimport numpy as cnp

cnp.import_array()


from cepsql._ext.buffers cimport *
from cepsql._ext.vm cimport *
from cepsql._ext.aggregates cimport *
from cepsql._ext.match_order cimport MatchOrder, _cmp_match, _sort_matches
from cepsql._ext.closures cimport ClosureWalk, closure_candidates, walk_closures


cdef enum: A_LIST = 6   # a MEASURES row list (LIST/ROWS: gathered.py folds it)

# strategies
cdef enum: S_STRICT = 0
cdef enum: S_PARTITION = 1
cdef enum: S_NEXT = 2
cdef enum: S_ANY = 3

# run record: seq, comp, count, node, mask, guard, then the computation vector
cdef enum: R_SEQ = 0
cdef enum: R_COMP = 1
cdef enum: R_CNT = 2
cdef enum: R_NODE = 3
cdef enum: R_MASK = 4
cdef enum: R_GUARD = 5   # NEXT_MATCH: labels of the sibling closure states (see set_guards)
cdef enum: R_ITER = 6    # iterations the run completed of the group it is in (KL of a SEQ)
cdef enum: R_HDR = 7
cdef extern from *:
    """
    #define CEPSQL_PEEK (((unsigned long long) 1) << 63)
    #define CEPSQL_NO_BOUND (((long long) 1) << 62)
    """
    const u64 PEEK "CEPSQL_PEEK"   # R_GUARD flag: the run peeks from a Kleene state
    const i64 NO_BOUND "CEPSQL_NO_BOUND"   # f_lo / f_hi when no plan switch restricts


# streaming state words (CepMatcher.export_state / import_state)
cdef enum: STATE_MAGIC = 0x43455053   # "CEPS"
cdef enum: STATE_VERSION = 1


cdef object _buf_words(Buf* b):
    """[length, data...] of a buffer as int64 words."""
    cdef cnp.ndarray out = np.empty(b.n + 1, dtype=np.int64)
    (<i64*> out.data)[0] = b.n
    if b.n > 0:
        memcpy((<i64*> out.data) + 1, b.data, b.n * sizeof(i64))
    return out


cdef i64 _buf_load(Buf* b, cnp.ndarray[cnp.int64_t, ndim=1] w, i64 at) except -1:
    """Fill b from the words [length, data...] at w[at]; the offset after them."""
    cdef i64 n
    if at >= w.shape[0]:
        raise ValueError("corrupt CEP evaluator state")
    n = w[at]
    if n < 0 or at + 1 + n > w.shape[0]:
        raise ValueError("corrupt CEP evaluator state")
    b.n = 0
    if buf_reserve(b, n):
        raise MemoryError("cepsql CEP matcher ran out of memory")
    if n > 0:
        memcpy(b.data, (<i64*> w.data) + at + 1, n * sizeof(i64))
    b.n = n
    return at + 1 + n


cdef inline void _region_sides(const i64* mcomp, const i64* pos, i64 start, i64 stop,
                               int a, int b, int c, int d, i64* lo, bint* has_lo,
                               i64* hi, bint* has_hi) noexcept nogil:
    """Over match rows [start, stop): the last row taken by a component in [a, b) (a NOT
    region's lower side) and the first taken by one in [c, d) (its upper side)."""
    cdef i64 k, comp
    for k in range(start, stop):
        comp = mcomp[k]
        if comp >= a and comp < b:
            lo[0] = pos[k]
            has_lo[0] = True
        elif comp >= c and comp < d and not has_hi[0]:
            hi[0] = pos[k]
            has_hi[0] = True


cdef struct _KleeneCtx:
    # one Kleene leaf's closures being enumerated (CepMatcher._closures)
    int leaf, comp, label, parent, then_leaf
    i64 then_end
    i64* xp          # the context instance X: rows, components, stride, size, first row
    i64* xc
    i64 xst, xm, xmin
    i64* tc          # components of the closure (all the leaf's)
    i64* mp          # X and the elements so far, merged by row, and their labels
    i64* ml


cdef bint _cep_fits(void* owner, void* ctx, i64 lo, i64 hi) noexcept nogil:
    return (<CepMatcher> owner)._fits(lo, hi)


cdef int _cep_element_ok(void* owner, void* ctx, i64* rows, i64 n) noexcept nogil:
    return (<CepMatcher> owner)._element_ok(<_KleeneCtx*> ctx, rows, n)


cdef int _cep_closure(void* owner, void* ctx, i64* rows, i64 n) noexcept nogil:
    return (<CepMatcher> owner)._closure_done(<_KleeneCtx*> ctx, rows, n)


cdef class CepMatcher(ConditionHost):
    """One compiled CEP query; ``run`` evaluates every partition of a chunk."""
    # conditions
    cdef int* code
    cdef int* conj_off
    cdef int* conj_label
    cdef u64* conj_mask
    cdef int n_conj
    cdef int* lab_conj_start   # n_labels + 1
    cdef int* lab_conj
    cdef double* consts
    cdef double* vstack
    cdef unsigned char* nstack
    cdef ExactLane xl          # exact lane of the stack, constants and columns
    cdef object xcols_ref      # keeps the exact column matrix alive during a run
    cdef int* refs
    cdef int n_refs
    cdef unsigned char* member
    cdef int n_sets
    cdef int n_labels
    cdef int* daggs            # set, func, col (FINAL = set not containing the label)
    cdef int n_daggs
    # computation vector layout
    cdef int* trk_of_set       # set id + 1 (0 = universal) -> tracked index (-1)
    cdef int* trk_set          # tracked -> set id (-1 universal)
    cdef int* trk_base
    cdef int* trk_f
    cdef int* trk_k
    cdef int n_trk
    cdef int agg_base
    cdef int S
    cdef int RW
    cdef i64* drows            # scratch: the rows a DISTINCT DEFINE aggregate reads
    cdef i64 drows_cap
    cdef i64 dtoken            # per-take token in a DISTINCT aggregate's words (no merge)
    # sequences
    cdef int* comps            # seq, label, min, max(-1)
    cdef int* seq_start        # n_seq + 1
    cdef int n_seq
    cdef int* negs             # seq, NOT program, a, b, c, d (see _neg_ok)
    cdef int n_negs
    cdef int* nt_sub           # NOT program -> its first sequence (n_programs + 1)
    cdef int* nt_seq           # NOT sequence -> its first component (n + 1)
    cdef int* nt_comp          # NOT component: label, min, max (-1 unbounded)
    cdef unsigned char* nt_early   # conjunct: may be checked when its NOT row is placed
    cdef int* g_first          # comp -> first comp of its iteration group (KL(SEQ)) or -1
    cdef int* g_last           # comp -> last comp of its group or -1
    cdef int* g_min            # comp -> its group's min / max (-1) iterations
    cdef int* g_max
    cdef int* g_alt_last       # comp -> last comp of its alternative in the group (or -1)
    cdef int* g_alt_next       # first comp of an alternative -> first comp of the next (-1)
    cdef unsigned char* seq_recheck   # sequence with a group: re-check every conjunct (R2)
    cdef unsigned char* take_skip     # conjunct not decided at take time (ANY in a group)
    # NOT inside KL's pattern (R6b): per NOT check, the first and last component of the
    # group alternative it lies in (-1: not in a group); its region is fixed per iteration
    cdef int* neg_iter
    # nested KL flattened (cep_group_shapes.flatten_nested): an alternative that only a loop
    # back enters (an inner iteration), per alternative's first component
    cdef unsigned char* g_loop_only
    cdef u64* g_succ           # last comp of an alternative -> alternatives that may follow
    cdef unsigned char* g_noleave   # last comp of an alternative -> the group stays after it
    cdef unsigned char* g_nocount   # last comp of an alternative -> not an outer iteration
    cdef u64* g_cont           # ... -> the g_succ alternatives continuing an outer iteration
    cdef int comp_tags         # buffer nodes also record their component (label | comp+1 << 16)
    cdef int* comp_of          # seq * n_labels + label -> comp index (global) or -1
    # output
    cdef int* leaves
    cdef int n_leaves
    cdef int* maggs
    cdef int n_maggs
    cdef int* rank
    cdef int strategy
    cdef int all_rows
    cdef int with_unmatched
    cdef int select_past_last
    cdef int dedup
    cdef public int merging
    cdef int window_kind
    cdef double window_size
    # per chunk
    cdef const double* vals
    cdef const unsigned char* nulls
    cdef const double* wts
    cdef const unsigned char* wnull
    cdef const unsigned char* gbreak   # STRICT: 1 = another partition's row precedes
    cdef u64* comp_proceed             # NEXT_MATCH: comp -> labels it may proceed to
    cdef u64* comp_leave               # ... and, in a group, those once the walk leaves it
    cdef int walk_left                 # _cross left a group during _proceed_dynamic
    # planned evaluation (see set_plan)
    cdef int planned, pn
    cdef int* pl_node            # node * 5: term, left, right, comp (leaf) or -1, parent
    cdef int* pl_leaf_of         # component -> its leaf node
    cdef u64* pl_after           # component -> components (of its term) whose rows follow
    cdef int* pl_cs              # node -> start of its conjunct list (pn + 1)
    cdef int* pl_c
    cdef int* pl_ns              # node -> start of its early NOT checks (pn + 1)
    cdef int* pl_n
    cdef unsigned char* c_late   # conjunct decided on the complete match only
    cdef unsigned char* c_rowlocal
    cdef Buf* nd_inst            # per node: instances (entry offset, length, first row)
    cdef Buf* nd_ent             # per node: (row, component) entries of the instances
    cdef Buf* nd_tmp             # per node: the instance being formed
    cdef Buf* nd_dfs             # per Kleene leaf: closure enumeration state
    cdef i64* nd_live
    cdef i64 cur_row
    cdef i64 n_rows
    cdef i64 ps, pe
    # buffer (arena)
    cdef Buf n_row, n_lab, n_a, n_b, n_first
    # runs
    cdef Buf cur, nxt, fresh, starts, walkbuf
    cdef i64* tmpst
    cdef i64* startst
    cdef i64* tpos
    cdef i64* tlab
    cdef unsigned char* neg_memo   # NOT q, row r of this run: 0 unknown, 1 / 2 its
    cdef i64 neg_memo_cap          # row-local conjuncts hold / fail (see _neg_ok)
    cdef i64* neg_cnt              # NOT q: rows below r whose label holds (row-local
    cdef i64* neg_upto             # labels; filled up to neg_upto[q]; see _neg_count)
    cdef i64 neg_cnt_cap
    # path / match scratch
    cdef i64* ppos
    cdef i64* plab
    cdef i64* mpos
    cdef i64* mlab
    cdef i64* mcomp            # per match row: the component that took it (comp_tags)
    cdef i64 cap_path
    cdef i64 emit_last
    cdef int emit_seq
    # matches of the partition
    cdef Buf m_off, m_len, m_pos, m_lab
    cdef Buf m_st              # 0 found, 1 awaiting a trailing NOT, 2 selected, 3 gone
    cdef Buf m_sq              # sequence of the match (its NOT checks)
    cdef Buf m_chk             # NOT regions checked on rows below this one
    cdef Buf stk               # path enumeration stack
    cdef Buf lists             # row lists of LIST/ROWS measures (see list_rows)
    cdef int oom
    # streaming state of the open partition (rows rebased to the next chunk)
    cdef i64 last_end          # SKIP PAST LAST ROW: last row of the last selected match
    cdef int sel_dirty         # SKIP PAST LAST ROW: matches stored since the last selection
    cdef unsigned char* covered  # rows of output matches (WITH UNMATCHED ROWS)
    cdef i64 cap_flags
    cdef i64 pproc             # rows below are processed (the rest only lookahead)
    cdef int closed            # the partition ends in this chunk
    cdef int has_state
    cdef readonly i64 match_no   # matches numbered so far (read by the streaming backend)
    cdef i64 unmatched_done, resume, compact_at
    cdef public int lookback, lookahead
    cdef public i64 keep
    # plan switch (runtime/adaptive.py): only matches whose first row is in [f_lo, f_hi)
    # are stored; while hold is set none of them is output (their numbers wait for the
    # previous plan's count); p_* are applied to the first partition of the next run call
    cdef i64 f_lo, f_hi, p_lo, p_hi, p_base, p_ctx
    cdef int p_set, p_hold, hold
    cdef readonly int drained    # open partition: no match with first row < f_hi is left
    cdef readonly i64 processed  # open partition: rows below were processed (last call)
    # stats
    cdef public i64 runs_created, runs_merged, nodes_created, peak_runs, matches_found
    cdef public i64 peak_nodes, peak_rows, peak_stored, compactions
    cdef public i64 pm_created, pm_stored, peak_pm
    # candidates handed in by the shared DAG evaluator (set_candidates; shared_dag.pyx)
    cdef object ext_ref
    cdef const i64* ext_cand     # per candidate: end row, term, offset, length
    cdef const i64* ext_rows
    cdef const i64* ext_cmp
    cdef i64 ext_n, ext_at
    cdef int ext_on
    cdef object rows_ref         # VM rows attached for external condition checks
    # column pointer mode (use_column_pointers): C_LOAD reads column n's rows from
    # col_vals[n] / col_nulls[n] instead of the n-th row of the run's matrices
    cdef const double** col_vals
    cdef const unsigned char** col_nulls
    cdef const x_i128** col_exact     # exact-lane columns' 128-bit values (else NULL)
    cdef int n_colptr
    cdef object colptr_ref
    cdef i64 att_rows            # their number (run()'s n_rows stays the carried chunk's)

    def __cinit__(self):
        self.code = NULL
        self.f_lo = -NO_BOUND   # unrestricted until a plan switch says otherwise (also
        self.f_hi = NO_BOUND    # for state imported without a _reset)

    def __init__(self, cnp.ndarray code, cnp.ndarray conj_off, cnp.ndarray conj_label,
                 cnp.ndarray conj_mask, cnp.ndarray consts, cnp.ndarray refs,
                 cnp.ndarray membership, cnp.ndarray daggs, cnp.ndarray comps,
                 cnp.ndarray seq_start, cnp.ndarray negs, cnp.ndarray leaves,
                 cnp.ndarray maggs, cnp.ndarray rank, int strategy, int all_rows,
                 int with_unmatched, int select_past_last, int window_kind,
                 double window_size, int max_stack):
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
        _lane_init(&self.xl, max_stack)
        # conjuncts per label
        self.lab_conj_start = <int*> calloc(self.n_labels + 2, sizeof(int))
        self.lab_conj = <int*> malloc((self.n_conj + 1) * sizeof(int))
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

    cdef void _reach(self, int poff):
        if poff < 0 and -poff > self.lookback:
            self.lookback = -poff
        if poff > self.lookahead:
            self.lookahead = poff

    cdef void* _copy(self, cnp.ndarray arr):
        cdef size_t nbytes = arr.nbytes if arr.nbytes > 0 else 8
        cdef void* p = malloc(nbytes)
        if arr.nbytes > 0:
            memcpy(p, arr.data, arr.nbytes)
        return p

    def __dealloc__(self):
        cdef Buf* bufs[16]
        cdef int i
        if self.code == NULL:
            return
        free(self.col_vals); free(self.col_nulls); free(self.col_exact)
        free(self.code); free(self.conj_off); free(self.conj_label); free(self.conj_mask)
        free(self.consts); free(self.refs); free(self.member); free(self.daggs)
        free(self.drows)
        free(self.comps); free(self.seq_start); free(self.negs); free(self.leaves)
        free(self.maggs); free(self.rank); free(self.vstack); free(self.nstack)
        _lane_free(&self.xl)
        free(self.lab_conj_start); free(self.lab_conj); free(self.comp_of)
        free(self.trk_of_set); free(self.trk_set); free(self.trk_base); free(self.trk_f)
        free(self.trk_k); free(self.tmpst); free(self.startst)
        free(self.tpos); free(self.tlab); free(self.neg_memo)
        free(self.neg_cnt); free(self.neg_upto)
        free(self.ppos); free(self.plab); free(self.mpos); free(self.mlab); free(self.mcomp)
        free(self.neg_iter); free(self.g_loop_only)
        free(self.g_succ); free(self.g_noleave); free(self.g_nocount); free(self.g_cont)
        bufs[0] = &self.n_row; bufs[1] = &self.n_lab; bufs[2] = &self.n_a
        bufs[3] = &self.n_b; bufs[4] = &self.n_first; bufs[5] = &self.cur
        bufs[6] = &self.nxt; bufs[7] = &self.fresh; bufs[8] = &self.m_off
        bufs[9] = &self.m_len; bufs[10] = &self.m_pos; bufs[11] = &self.m_lab
        bufs[12] = &self.m_st; bufs[13] = &self.m_sq; bufs[14] = &self.m_chk
        bufs[15] = &self.stk
        for i in range(16):
            free(bufs[i].data)
        free(self.starts.data)
        free(self.walkbuf.data)
        free(self.lists.data)
        free(self.covered)
        free(self.comp_proceed); free(self.comp_leave)
        free(self.nt_sub); free(self.nt_seq); free(self.nt_comp); free(self.nt_early)
        free(self.g_first); free(self.g_last); free(self.g_min); free(self.g_max)
        free(self.g_alt_last); free(self.g_alt_next)
        free(self.seq_recheck); free(self.take_skip)
        self._plan_free()

    # ------------------------------------------------------------------ windows
    cdef inline bint _fits(self, i64 lo, i64 hi) noexcept nogil:
        if self.window_kind == 0:
            return True
        if self.window_kind == 1:
            return hi - lo < self.window_size
        if self.wnull[lo] or self.wnull[hi]:
            return False
        return fabs(self.wts[hi] - self.wts[lo]) <= self.window_size

    cdef inline bint _alive(self, i64 first, i64 r) noexcept nogil:
        """Whether some path whose youngest first row is first may still fit row r --
        and, under SKIP PAST LAST ROW, start after the last selected match (R7)."""
        if self.select_past_last and first <= self.last_end:
            return False
        if self.window_kind == 0:
            return True
        if self.window_kind == 1:
            return r - first < self.window_size
        if self.wnull[first] or self.wnull[r]:
            return False  # R3: a NULL time fails the window; rows are ordered by it
        return fabs(self.wts[r] - self.wts[first]) <= self.window_size

    # ------------------------------------------------------------------ resolve
    cdef inline bint _in(self, int set_id, int label) noexcept nogil:
        return set_id < 0 or self.member[set_id * self.n_labels + label]

    cdef i64 _resolve_take(self, int ref, i64* st, i64 r, int label, int* cls) noexcept nogil:
        """Row (or -1) of reference ref for a run with vector st taking row r as label."""
        cdef int s = self.refs[ref * 5]
        cdef int logical = self.refs[ref * 5 + 1]
        cdef i64 loff = self.refs[ref * 5 + 2]
        cdef i64 poff = self.refs[ref * 5 + 3]
        cdef int t = self.trk_of_set[s + 1]
        cdef int base = self.trk_base[t]
        cdef i64 cnt = st[base]
        cdef bint inset = self._in(s, label)
        cdef i64 packed = -1, j
        cdef i64 k
        if logical == 1:
            if inset:
                if loff == 0:
                    packed = r * 64 + label
                else:
                    k = loff - 1
                    if k < cnt and k < self.trk_k[t]:
                        packed = st[base + 1 + self.trk_f[t] + k]
            else:
                if loff < cnt and loff < self.trk_k[t]:
                    packed = st[base + 1 + self.trk_f[t] + loff]
        else:
            if loff < cnt:
                packed = st[base + 1 + loff]
            elif loff == cnt and inset:
                packed = r * 64 + label
        if packed < 0:
            cls[0] = -1
            return -1
        j = (packed >> 6) + poff
        cls[0] = <int> (packed & 63) if poff == 0 else -1
        if j < self.ps or j >= self.pe:
            return -1
        return j

    cdef inline i64 _nth_in_set(self, int s, i64* lab, i64 limit, int logical,
                                i64 loff) noexcept nogil:
        """Index among lab[0..limit) of the loff-th row of set s, counted from the first
        (logical 0) or the last (logical 1) such row; -1 when there are fewer."""
        cdef i64 i, cnt = 0
        if logical == 1:
            i = limit - 1
            while i >= 0:
                if self._in(s, <int> lab[i]):
                    if cnt == loff:
                        return i
                    cnt += 1
                i -= 1
        else:
            for i in range(limit):
                if self._in(s, <int> lab[i]):
                    if cnt == loff:
                        return i
                    cnt += 1
        return -1

    cdef i64 _resolve_explicit(self, int ref, i64* pos, i64* lab, i64 m, i64 r,
                               int* cls) noexcept nogil:
        """Row (or -1) of reference ref on the explicit match pos/lab (sorted), current r."""
        cdef int s = self.refs[ref * 5]
        cdef int logical = self.refs[ref * 5 + 1]
        cdef i64 loff = self.refs[ref * 5 + 2]
        cdef i64 poff = self.refs[ref * 5 + 3]
        cdef int final = self.refs[ref * 5 + 4]
        cdef i64 limit = m, i, cnt = 0, idx = -1, j
        if not final:
            limit = 0
            while limit < m and pos[limit] <= r:
                limit += 1
        idx = self._nth_in_set(s, lab, limit, logical, loff)
        if idx < 0:
            cls[0] = -1
            return -1
        j = pos[idx] + poff
        cls[0] = <int> lab[idx] if poff == 0 else -1
        if j < self.ps or j >= self.pe:
            return -1
        return j

    cdef inline void _agg_row(self, i64* a, int k, i64 r) noexcept nogil:
        _agg_define_row(a, self.daggs, k, &self.xl, self.vals, self.nulls, self.n_rows, r)

    cdef i64* _drows(self, i64 need) noexcept nogil:
        """The DISTINCT scratch with room for need rows (NULL: out of memory)."""
        if need > self.drows_cap:
            self.drows = <i64*> realloc(self.drows, need * sizeof(i64))
            self.drows_cap = need if self.drows != NULL else 0
            if self.drows == NULL:
                self.oom = 1
        return self.drows

    cdef void _distinct_take(self, int k, i64* st, i64 r, int label, double* dv,
                             x_i128* xv, unsigned char* isnull) noexcept nogil:
        """A DISTINCT aggregate at take time: the run's rows are its node chain (runs
        holding one never merge: _update gives each take its own token), plus row r."""
        cdef int s = self.daggs[k * 3]
        cdef i64 node = (st - R_HDR)[R_NODE]
        cdef i64 n = 1, i, t
        cdef i64* rows
        while node >= 0:
            n += 1
            node = self.n_a.data[node]
        rows = self._drows(n)
        if rows == NULL:
            isnull[0] = 1
            return
        n = 0
        if self._in(s, label):
            rows[n] = r
            n += 1
        node = (st - R_HDR)[R_NODE]
        while node >= 0:
            if self.n_b.data[node] < 0 and self._in(s, <int> (self.n_lab.data[node] & 0xFFFF)):
                rows[n] = self.n_row.data[node]
                n += 1
            node = self.n_a.data[node]
        for i in range(n // 2):  # match order: the first row of each value is kept
            t = rows[i]
            rows[i] = rows[n - 1 - i]
            rows[n - 1 - i] = t
        _agg_distinct(rows, n, self.daggs, k, &self.xl, self.vals, self.nulls, self.n_rows,
                      dv, xv, isnull)

    cdef void _agg_take(self, int k, i64* st, i64 r, int label, double* dv, x_i128* xv,
                        unsigned char* isnull) noexcept nogil:
        cdef i64 a[AGG_W]
        if _agg_listed(self.daggs[k * 3 + 1]):
            self._distinct_take(k, st, r, label, dv, xv, isnull)
            return
        memcpy(a, st + self.agg_base + AGG_W * k, AGG_W * sizeof(i64))
        if self._in(self.daggs[k * 3], label):
            self._agg_row(a, k, r)
        _agg_value(a, self.daggs[k * 3 + 1], self.xl.dlane + 4 * k, &self.xl, dv, xv, isnull)

    cdef void _agg_explicit(self, int k, i64* pos, i64* lab, i64 m, i64 r, int label,
                            double* dv, x_i128* xv, unsigned char* isnull) noexcept nogil:
        cdef int s = self.daggs[k * 3]
        cdef bint final = not self._in(s, label)  # R2: other variables FINAL
        cdef i64 i
        cdef i64 a[AGG_W]
        cdef i64 n = 0
        cdef i64* rows
        if _agg_listed(self.daggs[k * 3 + 1]):
            rows = self._drows(m)
            if rows == NULL:
                isnull[0] = 1
                return
            for i in range(m):
                if not final and pos[i] > r:
                    break
                if self._in(s, <int> lab[i]):
                    rows[n] = pos[i]
                    n += 1
            _agg_distinct(rows, n, self.daggs, k, &self.xl, self.vals, self.nulls,
                          self.n_rows, dv, xv, isnull)
            return
        memset(a, 0, sizeof(a))
        for i in range(m):
            if not final and pos[i] > r:
                break
            if self._in(s, <int> lab[i]):
                self._agg_row(a, k, pos[i])
        _agg_value(a, self.daggs[k * 3 + 1], self.xl.dlane + 4 * k, &self.xl, dv, xv, isnull)

    # ------------------------------------------------------------------ condition VM
    cdef bint _eval(self, int c, int label, i64* st, i64* pos, i64* lab, i64 m,
                    i64 r) noexcept nogil:
        """Conjunct c at row r labelled label: on run vector st (take time) when st is
        not NULL, else on the explicit match pos/lab[0..m)."""
        cdef int pc = self.conj_off[c]
        cdef int sp = 0
        cdef int op, n, i, cls
        cdef i64 j
        cdef double a, b, v
        cdef unsigned char na, nb
        cdef double* vs = self.vstack
        cdef unsigned char* ns = self.nstack
        if pc < 0:
            return True
        while True:
            op = self.code[pc]
            if op == C_LOAD or op == X_LOAD:
                if st != NULL:
                    j = self._resolve_take(self.code[pc + 2], st, r, label, &cls)
                else:
                    j = self._resolve_explicit(self.code[pc + 2], pos, lab, m, r, &cls)
                if j < 0:
                    vs[sp] = 0.0
                    ns[sp] = 1
                else:
                    n = self.code[pc + 1]
                    if self.col_vals != NULL:
                        if op == C_LOAD:
                            vs[sp] = self.col_vals[n][j]
                        else:
                            self.xl.xs[sp] = self.col_exact[n][j]
                        ns[sp] = self.col_nulls[n][j]
                    elif op == C_LOAD:
                        vs[sp] = self.vals[n * self.n_rows + j]
                        ns[sp] = self.nulls[n * self.n_rows + j]
                    else:
                        self.xl.xs[sp] = self.xl.cols[n * self.n_rows + j]
                        ns[sp] = self.nulls[n * self.n_rows + j]
                sp += 1
                pc += 3
            elif op == C_CONST:
                vs[sp] = self.consts[self.code[pc + 1]]
                ns[sp] = 0
                sp += 1
                pc += 2
            elif op == C_NULL or op == C_MATCHNO:
                vs[sp] = 0.0
                ns[sp] = 1
                sp += 1
                pc += 1
            elif op == C_LOAD_CLS:
                if st != NULL:
                    j = self._resolve_take(self.code[pc + 1], st, r, label, &cls)
                else:
                    j = self._resolve_explicit(self.code[pc + 1], pos, lab, m, r, &cls)
                if j < 0:
                    cls = -1
                vs[sp] = cls
                ns[sp] = cls < 0
                sp += 1
                pc += 2
            elif op == C_AGG or op == X_AGG:
                if st != NULL:
                    self._agg_take(self.code[pc + 1], st, r, label, &vs[sp], &self.xl.xs[sp],
                                   &ns[sp])
                else:
                    self._agg_explicit(self.code[pc + 1], pos, lab, m, r, label, &vs[sp],
                                       &self.xl.xs[sp], &ns[sp])
                sp += 1
                pc += 2
            else:
                pc = _stack_op(op, self.code, pc, vs, ns, &self.xl, &sp)
                if pc < 0:
                    break
        return sp > 0 and not ns[sp - 1] and vs[sp - 1] != 0.0

    # ------------------------------------------------------------------ runs
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
            self._agg_row(st + self.agg_base + AGG_W * t, t, r)

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

    cdef inline i64 _iter_class(self, i64* run) noexcept nogil:
        """Iterations that decide a run's future: beyond an unbounded group's min all
        counts are equivalent."""
        cdef int comp = <int> run[R_COMP]
        if self.g_first == NULL or self.g_first[comp] < 0:
            return 0
        if self.g_max[comp] < 0 and run[R_ITER] >= self.g_min[comp]:
            return self.g_min[comp]
        return run[R_ITER]

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

    cdef int _store_match(self, i64* pos, i64* lab, i64 m, i64 state, int seq) noexcept nogil:
        """Keep a checked match of the partition (emitted by _emit_ready); under SKIP PAST
        LAST ROW one starting at or before the last selected match is never output."""
        cdef i64 i
        if pos[0] < self.f_lo or pos[0] >= self.f_hi:
            return 0   # another plan's evaluator reports this match (adaptive switch)
        if self.select_past_last:
            if pos[0] <= self.last_end:
                return 0
            self.sel_dirty = 1
        if buf_push(&self.m_off, self.m_pos.n) or buf_push(&self.m_len, m) or \
                buf_push(&self.m_st, state) or buf_push(&self.m_sq, seq) or \
                buf_push(&self.m_chk, self.pproc) or \
                buf_reserve(&self.m_pos, m) or buf_reserve(&self.m_lab, m):
            self.oom = 1
            return -1
        memcpy(self.m_pos.data + self.m_pos.n, pos, m * sizeof(i64))
        memcpy(self.m_lab.data + self.m_lab.n, lab, m * sizeof(i64))
        if self.comp_tags:   # an iteration's NOT may be re-checked (_untag)
            for i in range(m):
                self.m_lab.data[self.m_lab.n + i] |= (self.mcomp[i] + 1) << 16
        self.m_pos.n += m
        self.m_lab.n += m
        self.matches_found += 1
        return 0

    def set_groups(self, cnp.ndarray groups, cnp.ndarray seq_recheck, cnp.ndarray take_skip,
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

    def set_not_programs(self, cnp.ndarray sub_start, cnp.ndarray seq_start,
                         cnp.ndarray comps, cnp.ndarray early):
        """What each NOT negates (cep_plan._not_programs): per program its linear
        sequences of (label, min, max) components, searched with any-match semantics
        (R6a); early[c]: conjunct c reads no other variable of its NOT, so it can prune
        the search as soon as its row is placed."""
        free(self.nt_sub); free(self.nt_seq); free(self.nt_comp); free(self.nt_early)
        self.nt_sub = <int*> self._copy(np.ascontiguousarray(sub_start, dtype=np.int32))
        self.nt_seq = <int*> self._copy(np.ascontiguousarray(seq_start, dtype=np.int32))
        self.nt_comp = <int*> self._copy(np.ascontiguousarray(comps, dtype=np.int32))
        self.nt_early = <unsigned char*> self._copy(np.ascontiguousarray(early, dtype=np.uint8))

    cdef int _neg_ok(self, int q, i64* pos, i64* lab, i64 m, i64 from_row) noexcept nogil:
        """R6: no match of the NOT's program on rows outside the match in its region
        (after the last row of components [a, b), before the first row of components
        [c, d); a side without such a row is open, bounded by the window).
        0: violated; 1: holds; 2: holds on the rows seen so far (an open trailing region
        that later rows may still enter). Rows below from_row were checked before (a
        single-row NOT only: a composite one may combine old and new rows)."""
        cdef int seq = self.negs[q * 6]
        cdef int sub = self.negs[q * 6 + 1]
        cdef int a = self.negs[q * 6 + 2], b = self.negs[q * 6 + 3]
        cdef int cc = self.negs[q * 6 + 4], d = self.negs[q * 6 + 5]
        cdef i64 lo = -1, hi = -1, i, lo_r, hi_r
        cdef int comp, rc
        cdef bint has_lo = False, has_hi = False
        if self.neg_iter != NULL and self.neg_iter[q * 8] >= 0:
            return self._neg_iter_ok(q, pos, lab, m, from_row)
        for i in range(m):
            comp = self.comp_of[seq * self.n_labels + lab[i]]
            if comp >= a and comp < b:
                lo = pos[i]
                has_lo = True
            elif comp >= cc and comp < d and not has_hi:
                hi = pos[i]
                has_hi = True
        lo_r = lo + 1 if has_lo else self.ps
        hi_r = hi if has_hi else self.pproc
        rc = self._neg_region(q, sub, pos, lab, m, lo_r, hi_r, has_lo, has_hi, from_row)
        if rc != 1:
            return rc
        if not has_hi and not self.closed and self._fits(pos[0], self.pproc - 1):
            return 2
        return 1

    cdef int _neg_iter_ok(self, int q, i64* pos, i64* lab, i64 m, i64 from_row) noexcept nogil:
        """R6b/R6c: a NOT inside KL's pattern holds in every iteration of its alternative,
        the region between that iteration's rows of components [a, b) and [c, d). The
        components the rows were taken in (mcomp) split the match into iterations: one
        of the alternative starts at a lower component, at the same single-row component
        or after a row outside it (cep_expand._ambiguous_split refuses alternatives where
        that is not decided). A side without such a row is the neighbouring iteration's
        nearest row (the match rows of a group are consecutive), else the group's slot
        (components [oa, ob) before it, [oc, od) after it), else open. 0: violated; 1:
        holds; 2: holds on the rows seen so far (open trailing region); -1: out of memory."""
        cdef int* ni = self.neg_iter + q * 8
        cdef int sub = self.negs[q * 6 + 1]
        cdef int a = self.negs[q * 6 + 2], b = self.negs[q * 6 + 3]
        cdef int cc = self.negs[q * 6 + 4], d = self.negs[q * 6 + 5]
        cdef int af = ni[0], al = ni[1], gf = ni[2], gl = ni[3]
        cdef int oa = ni[4], ob = ni[5], oc = ni[6], od = ni[7]
        cdef i64 i, j, c, lo = -1, hi = -1, olo = -1, ohi = -1
        cdef int rc, waiting = 0
        cdef bint has_lo, has_hi, has_olo = False, has_ohi = False
        _region_sides(self.mcomp, pos, 0, m, oa, ob, oc, od, &olo, &has_olo, &ohi, &has_ohi)
        i = 0
        while i < m:
            c = self.mcomp[i]
            if c < af or c > al:
                i += 1
                continue
            j = i   # the iteration: rows i..j
            while j + 1 < m and self.mcomp[j + 1] >= af and self.mcomp[j + 1] <= al and \
                    (self.mcomp[j + 1] > self.mcomp[j] or
                     (self.mcomp[j + 1] == self.mcomp[j] and
                      self.comps[self.mcomp[j] * 4 + 3] != 1)):
                j += 1
            has_lo = False
            has_hi = False
            _region_sides(self.mcomp, pos, i, j + 1, a, b, cc, d, &lo, &has_lo, &hi, &has_hi)
            if not has_lo:
                if i > 0 and self.mcomp[i - 1] >= gf and self.mcomp[i - 1] <= gl:
                    lo = pos[i - 1]
                    has_lo = True
                elif has_olo:
                    lo = olo
                    has_lo = True
            if not has_hi:
                if j + 1 < m and self.mcomp[j + 1] >= gf and self.mcomp[j + 1] <= gl:
                    hi = pos[j + 1]
                    has_hi = True
                elif has_ohi:
                    hi = ohi
                    has_hi = True
            rc = self._neg_region(q, sub, pos, lab, m, lo + 1 if has_lo else self.ps,
                                  hi if has_hi else self.pproc, has_lo, has_hi, from_row)
            if rc != 1:
                return rc
            if not has_hi and not self.closed and self._fits(pos[0], self.pproc - 1):
                waiting = 1
            i = j + 1
        return 2 if waiting else 1

    cdef int _neg_region(self, int q, int sub, i64* pos, i64* lab, i64 m, i64 lo_r, i64 hi_r,
                         bint has_lo, bint has_hi, i64 from_row) noexcept nogil:
        """No match of NOT q's program sub on the rows of [lo_r, hi_r) outside the match;
        a side without a bounding row (has_lo / has_hi false) is open: only rows that fit
        the window with the match count. Rows below from_row were checked before (a
        single-row NOT only). 0: violated; 1: holds; -1: out of memory."""
        cdef int nlab, first_comp, c, rc
        cdef i64 i, r, k, lo_b, hi_b
        cdef bint ok
        cdef i64* tp = self.tpos   # scratch for the trial match
        cdef i64* tl = self.tlab
        cdef unsigned char* memo
        first_comp = self.nt_seq[self.nt_sub[sub]]
        if self.nt_sub[sub + 1] - self.nt_sub[sub] != 1 or \
                self.nt_seq[self.nt_sub[sub] + 1] - first_comp != 1 or \
                self.nt_comp[first_comp * 3 + 1] != 1 or self.nt_comp[first_comp * 3 + 2] != 1:
            return self._neg_program(sub, pos, lab, m, lo_r, hi_r, has_lo and has_hi)
        nlab = self.nt_comp[first_comp * 3]
        if lo_r < from_row:
            lo_r = from_row
        if not has_lo and self.window_kind != 0 and lo_r < pos[0]:
            # an open leading region: start at the first row that fits the window
            # with the match's last row (the window column is the first ORDER BY
            # key, so fitting is monotone in the row; binary search, not a scan
            # from the partition start for every candidate)
            lo_b = lo_r
            hi_b = pos[0]
            while lo_b < hi_b:
                r = (lo_b + hi_b) // 2
                if self._fits(r, pos[m - 1]):
                    hi_b = r
                else:
                    lo_b = r + 1
            lo_r = lo_b
        if self.neg_cnt != NULL and lo_r < hi_r and self._label_rowlocal(nlab):
            rc = self._neg_count(q, nlab, pos, m, lo_r, hi_r, has_lo and has_hi)
            if rc >= 0:
                return rc
        k = 0
        for r in range(lo_r, hi_r):
            while k < m and pos[k] < r:
                k += 1
            if k < m and pos[k] == r:
                continue
            if not (has_lo and has_hi):
                if not self._fits(pos[0] if pos[0] < r else r,
                                  pos[m - 1] if pos[m - 1] > r else r):
                    if r > pos[m - 1]:
                        break   # the window column is the first ORDER BY key: rows
                                # further on are further still (or NULL)
                    continue
            # a row failing the NOT label's row-local conjuncts fails them for
            # every match (memo per run: the region scans of many candidates
            # overlap; planned mode knows which conjuncts are row-local)
            memo = self.neg_memo + q * self.n_rows + r if self.neg_memo != NULL \
                else NULL
            if memo != NULL and memo[0] == 2:
                continue
            # trial = match + (r, NOT label)
            for i in range(k):
                tp[i] = pos[i]
                tl[i] = lab[i]
            tp[k] = r
            tl[k] = nlab
            for i in range(k, m):
                tp[i + 1] = pos[i]
                tl[i + 1] = lab[i]
            ok = True
            if memo != NULL and memo[0] == 0:
                for i in range(self.lab_conj_start[nlab], self.lab_conj_start[nlab + 1]):
                    c = self.lab_conj[i]
                    if self.c_rowlocal[c] and not self._eval(c, nlab, NULL, tp, tl,
                                                             m + 1, r):
                        ok = False
                        break
                memo[0] = 1 if ok else 2
                if not ok:
                    continue
            for i in range(self.lab_conj_start[nlab], self.lab_conj_start[nlab + 1]):
                c = self.lab_conj[i]
                if memo != NULL and self.c_rowlocal[c]:
                    continue
                if not self._eval(c, nlab, NULL, tp, tl, m + 1, r):
                    ok = False
                    break
            if ok:
                return 0
        return 1

    cdef inline bint _label_rowlocal(self, int nlab) noexcept nogil:
        """Whether every conjunct of label nlab reads the current row only (planned mode)."""
        cdef int i
        for i in range(self.lab_conj_start[nlab], self.lab_conj_start[nlab + 1]):
            if not self.c_rowlocal[self.lab_conj[i]]:
                return False
        return True

    cdef int _neg_count(self, int q, int nlab, i64* pos, i64 m, i64 lo_r, i64 hi_r,
                        bint closed_region) noexcept nogil:
        """_neg_region for a single-row NOT whose label is row-local: whether a row of
        [lo_r, hi_r) outside the match satisfies it is a difference of prefix counts, not
        a scan per candidate (lo_r already fits the window with the match's last row).
        An open region ends at the first row past the match that does not fit the
        window with its first row (the window column is the first ORDER BY key: fitting
        is monotone). 0: violated; 1: holds; -1: use the scan (the match itself does
        not fit the window, so the scan's per-row test decides)."""
        cdef i64 lo_b, hi_b, r, n, i
        cdef i64* cnt = self.neg_cnt + q * (self.n_rows + 1)
        if not closed_region and self.window_kind != 0:
            if not self._fits(pos[0], pos[m - 1]):
                return -1
            if hi_r > pos[m - 1] + 1:
                lo_b = pos[m - 1] + 1 if pos[m - 1] + 1 > lo_r else lo_r
                hi_b = hi_r
                while lo_b < hi_b:   # the first row past the match out of the window
                    r = (lo_b + hi_b) // 2
                    if self._fits(pos[0], r):
                        lo_b = r + 1
                    else:
                        hi_b = r
                hi_r = lo_b
                if hi_r <= lo_r:
                    return 1
        self._neg_fill(q, nlab, hi_r)
        n = cnt[hi_r] - cnt[lo_r]
        for i in range(m):   # the match's own rows do not count
            if pos[i] >= lo_r and pos[i] < hi_r:
                n -= cnt[pos[i] + 1] - cnt[pos[i]]
        return 0 if n > 0 else 1

    cdef void _neg_fill(self, int q, int nlab, i64 hi) noexcept nogil:
        """Extend NOT q's prefix counts to row hi (rows below the partition start
        count nothing: partitions are matched in row order, no region reaches back)."""
        cdef i64* cnt = self.neg_cnt + q * (self.n_rows + 1)
        cdef i64 r = self.neg_upto[q], i
        cdef bint ok
        cdef unsigned char* memo = self.neg_memo + q * self.n_rows
        cdef int cols[8]
        cdef int n_cols = self._plain_columns(nlab, cols, 8)
        cdef i64 lo = self.ps if self.ps > r else r
        cdef i64 top = self.pe if self.pe < hi else hi
        if n_cols > 0 and r < hi:
            # plain column tests (a precomputed row-local condition): the same truth
            # value as the VM's, read straight from the columns
            while r < lo:
                cnt[r + 1] = cnt[r]
                r += 1
            while r < top:
                ok = True
                for i in range(n_cols):
                    if not self._column_true(cols[i], r):
                        ok = False
                        break
                cnt[r + 1] = cnt[r] + (1 if ok else 0)
                r += 1
            while r < hi:   # past the partition: the reference resolves to NULL
                cnt[r + 1] = cnt[r]
                r += 1
        while r < hi:
            ok = False
            if r >= self.ps:
                if memo[r] == 0:
                    self.tpos[0] = r
                    self.tlab[0] = nlab
                    ok = True
                    for i in range(self.lab_conj_start[nlab], self.lab_conj_start[nlab + 1]):
                        if not self._eval(self.lab_conj[i], nlab, NULL, self.tpos,
                                          self.tlab, 1, r):
                            ok = False
                            break
                    memo[r] = 1 if ok else 2
                else:
                    ok = memo[r] == 1
            cnt[r + 1] = cnt[r] + (1 if ok else 0)
            r += 1
        if hi > self.neg_upto[q]:
            self.neg_upto[q] = hi

    cdef int _plain_columns(self, int nlab, int* cols, int cap) noexcept nogil:
        """The columns of label nlab's conjuncts when every one is a plain column test
        of its own row ("C_LOAD column, current row; end": a precomputed row-local
        expression such as ``symbol = 'S03'``, in a set holding nlab), as many as
        there are (at most cap); -1 otherwise. Such a conjunct holds on row r of the
        partition exactly when the column there is non-NULL and non-zero."""
        cdef int i, c, pc, ref, n = 0
        for i in range(self.lab_conj_start[nlab], self.lab_conj_start[nlab + 1]):
            c = self.lab_conj[i]
            pc = self.conj_off[c]
            if n == cap or pc < 0 or self.code[pc] != C_LOAD or \
                    self.code[pc + 3] != C_JUMP or self.code[pc + 4] != -1:
                return -1
            ref = self.code[pc + 2]
            if self.refs[ref * 5 + 2] != 0 or self.refs[ref * 5 + 3] != 0 or \
                    not self._in(self.refs[ref * 5], nlab):
                return -1
            cols[n] = self.code[pc + 1]
            n += 1
        return n

    cdef inline bint _column_true(self, int col, i64 r) noexcept nogil:
        """Column col of row r is non-NULL and non-zero (as the VM reads it)."""
        if self.col_vals != NULL:
            return not self.col_nulls[col][r] and self.col_vals[col][r] != 0.0
        return not self.nulls[col * self.n_rows + r] and \
            self.vals[col * self.n_rows + r] != 0.0

    cdef int _neg_program(self, int sub, i64* pos, i64* lab, i64 m, i64 lo_r, i64 hi_r,
                          bint closed_region) noexcept nogil:
        """R6a: 0 when some sequence of NOT program sub matches (any-match) on the
        region's rows outside the match, 1 when none does, -1 out of memory."""
        cdef i64 n = hi_r - lo_r if hi_r > lo_r else 0
        cdef i64 nreg = 0, r, k = 0
        cdef int s, rc = 0
        cdef i64* reg = <i64*> malloc((n + 1) * sizeof(i64))
        cdef i64* tp = <i64*> malloc((m + n + 1) * sizeof(i64))
        cdef i64* tl = <i64*> malloc((m + n + 1) * sizeof(i64))
        cdef i64* placed = <i64*> malloc((n + 1) * 2 * sizeof(i64))
        if reg == NULL or tp == NULL or tl == NULL or placed == NULL:
            free(reg); free(tp); free(tl); free(placed)
            self.oom = 1
            return -1
        for r in range(lo_r, hi_r):
            while k < m and pos[k] < r:
                k += 1
            if k < m and pos[k] == r:
                continue
            if not closed_region and not self._fits(pos[0] if pos[0] < r else r,
                                                    pos[m - 1] if pos[m - 1] > r else r):
                continue
            reg[nreg] = r
            nreg += 1
        memcpy(tp, pos, m * sizeof(i64))
        memcpy(tl, lab, m * sizeof(i64))
        for s in range(self.nt_sub[sub], self.nt_sub[sub + 1]):
            rc = self._nt_search(s, self.nt_seq[s], 0, 0, reg, nreg, tp, tl, m, placed, 0)
            if rc != 0:
                break
        free(reg); free(tp); free(tl); free(placed)
        if rc < 0:
            return -1
        return 0 if rc == 1 else 1

    cdef int _nt_search(self, int s, int j, i64 cnt, i64 x0, i64* reg, i64 nreg, i64* tp,
                        i64* tl, i64 tm, i64* placed, i64 k) noexcept nogil:
        """Depth-first: component j of NOT sequence s has taken cnt rows; the next row
        comes from reg[x0:]. tp/tl: the trial match (sorted), placed: the k NOT rows
        (row, label) in order. 1 when a complete NOT match holds, else 0."""
        cdef int end = self.nt_seq[s + 1]
        cdef int label, mn, mx, rc, i, c
        cdef i64 x, r, at, w
        cdef bint ok
        if j == end:
            if k == 0:
                return 0
            for w in range(k):   # R2 on the complete trial: every NOT row's DEFINE
                label = <int> placed[2 * w + 1]
                for i in range(self.lab_conj_start[label], self.lab_conj_start[label + 1]):
                    c = self.lab_conj[i]
                    if not self.nt_early[c] and \
                            not self._eval(c, label, NULL, tp, tl, tm, placed[2 * w]):
                        return 0
            return 1
        label = self.nt_comp[j * 3]
        mn = self.nt_comp[j * 3 + 1]
        mx = self.nt_comp[j * 3 + 2]
        if cnt >= mn:
            rc = self._nt_search(s, j + 1, 0, x0, reg, nreg, tp, tl, tm, placed, k)
            if rc != 0:
                return rc
        if mx >= 0 and cnt >= mx:
            return 0
        for x in range(x0, nreg):
            r = reg[x]
            if k > 0 and not self._fits(placed[0], r):
                continue   # the NOT match itself fits the window (R6a)
            at = tm
            while at > 0 and tp[at - 1] > r:
                at -= 1
            memmove(tp + at + 1, tp + at, (tm - at) * sizeof(i64))
            memmove(tl + at + 1, tl + at, (tm - at) * sizeof(i64))
            tp[at] = r
            tl[at] = label
            placed[2 * k] = r
            placed[2 * k + 1] = label
            ok = True
            for i in range(self.lab_conj_start[label], self.lab_conj_start[label + 1]):
                c = self.lab_conj[i]
                if self.nt_early[c] and not self._eval(c, label, NULL, tp, tl, tm + 1, r):
                    ok = False
                    break
            rc = 0
            if ok:
                rc = self._nt_search(s, j, cnt + 1, x + 1, reg, nreg, tp, tl, tm + 1,
                                     placed, k + 1)
            memmove(tp + at, tp + at + 1, (tm - at) * sizeof(i64))
            memmove(tl + at, tl + at + 1, (tm - at) * sizeof(i64))
            if rc != 0:
                return rc
        return 0

    # ------------------------------------------------------------------ planned evaluation
    # SKIP_TILL_ANY_MATCH with a cost-based plan (cepsql/runtime/cep_planner.py): per OR-free
    # disjunct ("term") a join tree whose leaves are its components. A plain leaf keeps
    # the rows that pass its single-row conditions (the lazy NFA's input buffer); an inner
    # node keeps the instances (partial matches) of its subtree. A new row enters every
    # leaf it qualifies for and climbs: joined with each live instance of the sibling
    # (disjoint rows, SEQ precedence, window, the conjuncts whose variables the node
    # completes), stored, and joined further up; at the root it is a match candidate
    # (conditions that read the whole match, NOT checks), stored like the run NFA's. Each
    # combination is formed once: when its youngest part arrives. A Kleene leaf keeps its
    # candidate rows only; its closures (every non-empty ordered subset allowed by min/max
    # and its own conditions, enumerated depth-first) are produced on demand: those ending
    # at a new row when it arrives, all of them when the sibling delivers an instance.
    # Order plans run as left-deep trees: prefix stores = the lazy chain NFA's states.

    def set_guards(self, cnp.ndarray proceed):
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

    def set_plan(self, cnp.ndarray nodes, cnp.ndarray leaf_of, cnp.ndarray after,
                 cnp.ndarray conj_start, cnp.ndarray conj, cnp.ndarray late,
                 cnp.ndarray rowlocal, cnp.ndarray neg_start, cnp.ndarray neg):
        """Switch to planned evaluation (arrays from cep_plan._tree_arrays)."""
        self.pl_node = <int*> self._copy(np.ascontiguousarray(nodes, dtype=np.int32))
        self.pn = nodes.shape[0]
        self.pl_leaf_of = <int*> self._copy(np.ascontiguousarray(leaf_of, dtype=np.int32))
        self.pl_after = <u64*> self._copy(np.ascontiguousarray(after, dtype=np.uint64))
        self.pl_cs = <int*> self._copy(np.ascontiguousarray(conj_start, dtype=np.int32))
        self.pl_c = <int*> self._copy(np.ascontiguousarray(conj, dtype=np.int32))
        self.c_late = <unsigned char*> self._copy(np.ascontiguousarray(late, dtype=np.uint8))
        self.c_rowlocal = <unsigned char*> self._copy(
            np.ascontiguousarray(rowlocal, dtype=np.uint8))
        self.pl_ns = <int*> self._copy(np.ascontiguousarray(neg_start, dtype=np.int32))
        self.pl_n = <int*> self._copy(np.ascontiguousarray(neg, dtype=np.int32))
        self.nd_inst = <Buf*> calloc(self.pn + 1, sizeof(Buf))
        self.nd_ent = <Buf*> calloc(self.pn + 1, sizeof(Buf))
        self.nd_tmp = <Buf*> calloc(self.pn + 1, sizeof(Buf))
        self.nd_dfs = <Buf*> calloc(self.pn + 1, sizeof(Buf))
        self.nd_live = <i64*> calloc(self.pn + 1, sizeof(i64))
        if self.nd_inst == NULL or self.nd_ent == NULL or self.nd_tmp == NULL or \
                self.nd_dfs == NULL or self.nd_live == NULL:
            raise MemoryError("cepsql CEP matcher ran out of memory")
        self.planned = 1

    cdef void _plan_free(self):
        cdef int i
        if not self.planned:
            return
        for i in range(self.pn):
            free(self.nd_inst[i].data); free(self.nd_ent[i].data)
            free(self.nd_tmp[i].data); free(self.nd_dfs[i].data)
        free(self.nd_inst); free(self.nd_ent); free(self.nd_tmp); free(self.nd_dfs)
        free(self.nd_live); free(self.pl_node); free(self.pl_leaf_of); free(self.pl_after)
        free(self.pl_cs); free(self.pl_c); free(self.c_late); free(self.c_rowlocal)
        free(self.pl_ns); free(self.pl_n)

    cdef inline bint _plain(self, int comp) noexcept nogil:
        return self.comps[comp * 4 + 2] == 1 and self.comps[comp * 4 + 3] == 1

    cdef void _plan_clear(self) noexcept nogil:
        cdef int i
        if not self.planned:
            return
        for i in range(self.pn):
            self.nd_inst[i].n = 0
            self.nd_ent[i].n = 0
            self.nd_live[i] = 0

    cdef int _plan_store(self, int node, i64* pos, i64* cmp, i64 m, i64 mn) noexcept nogil:
        """Append an instance (rows pos, components cmp) to node's store."""
        cdef Buf* e = &self.nd_ent[node]
        cdef Buf* s = &self.nd_inst[node]
        cdef i64 i
        if buf_reserve(e, 2 * m) or buf_reserve(s, 3):
            self.oom = 1
            return -1
        s.data[s.n] = e.n // 2
        s.data[s.n + 1] = m
        s.data[s.n + 2] = mn
        s.n += 3
        for i in range(m):
            e.data[e.n + 2 * i] = pos[i]
            e.data[e.n + 2 * i + 1] = cmp[i]
        e.n += 2 * m
        self.pm_stored += 1
        if self.pm_stored > self.peak_pm:
            self.peak_pm = self.pm_stored
        return 0

    cdef void _plan_compact(self, int node, i64 r) noexcept nogil:
        """Drop node's instances that can no longer fit the window with row r."""
        cdef Buf* e = &self.nd_ent[node]
        cdef Buf* s = &self.nd_inst[node]
        cdef i64 k, n = s.n // 3, w = 0, we = 0, off, m
        for k in range(n):
            off = s.data[3 * k]
            m = s.data[3 * k + 1]
            if not self._alive(s.data[3 * k + 2], r):
                continue
            if we != 2 * off:
                memmove(e.data + we, e.data + 2 * off, 2 * m * sizeof(i64))
            s.data[3 * w] = we // 2
            s.data[3 * w + 1] = m
            s.data[3 * w + 2] = s.data[3 * k + 2]
            w += 1
            we += 2 * m
        self.pm_stored -= n - w
        s.n = 3 * w
        e.n = we
        self.nd_live[node] = w

    cdef void _plan_rebase(self, i64 d) noexcept nogil:
        cdef int node
        cdef i64 k
        if not self.planned:
            return
        for node in range(self.pn):
            self._plan_compact(node, self.pproc - 1)
            for k in range(0, self.nd_ent[node].n, 2):
                self.nd_ent[node].data[k] -= d
            for k in range(0, self.nd_inst[node].n, 3):
                self.nd_inst[node].data[k + 2] -= d

    cdef bint _leaf_ok(self, int leaf, int label, i64 r, bint rowlocal_only) noexcept nogil:
        cdef i64 p = r, l = label
        cdef int k, c
        for k in range(self.pl_cs[leaf], self.pl_cs[leaf + 1]):
            c = self.pl_c[k]
            if rowlocal_only and not self.c_rowlocal[c]:
                continue
            if not self._eval(c, label, NULL, &p, &l, 1, r):
                return False
        return True

    cdef int _plan_rows(self, i64 start, i64 stop) noexcept nogil:
        """Feed rows [start, stop) of the current partition to the plan trees."""
        cdef i64 r, total
        cdef i64 pos[1]
        cdef i64 cmp[1]
        cdef int j, n_comps = self.seq_start[self.n_seq], leaf, label, node
        cdef bint plain
        if self.ext_on:
            return self._ext_rows(start, stop)
        for r in range(start, stop):
            self.cur_row = r
            for j in range(n_comps):
                leaf = self.pl_leaf_of[j]
                label = self.comps[j * 4 + 1]
                plain = self._plain(j)
                if not self._leaf_ok(leaf, label, r, not plain):
                    continue
                pos[0] = r
                cmp[0] = j
                if self._plan_store(leaf, pos, cmp, 1, r):
                    return -1
                if plain:
                    if self._up(leaf, pos, cmp, 1, 1, r):
                        return -1
                elif self._kleene_arrival(leaf, r):
                    return -1
            if self.sel_dirty and self._select_ready():
                return -1
            for node in range(self.pn):
                total = self.nd_inst[node].n // 3
                if total > 2 * self.nd_live[node] + 256:
                    self._plan_compact(node, r)
            if self.oom:
                return -1
        return 0

    cdef int _ext_rows(self, i64 start, i64 stop) noexcept nogil:
        """Rows [start, stop) with the candidates of set_candidates instead of the plan
        trees: each candidate ending at row r is finished (late conjuncts, window, NOTs)
        and stored at r, exactly where the own trees would have completed it. A row
        without a candidate changes nothing once the row before it left no selection
        pending (sel_dirty) and no error: the loop visits the first row and the
        candidates' end rows only, so a pattern with few candidates costs no row scan."""
        cdef i64 r = start
        cdef const i64* c
        while r < stop:
            self.cur_row = r
            while self.ext_at < self.ext_n and self.ext_cand[4 * self.ext_at] < r:
                self.ext_at += 1
            while self.ext_at < self.ext_n and self.ext_cand[4 * self.ext_at] == r:
                c = self.ext_cand + 4 * self.ext_at
                self.ext_at += 1
                if self._plan_finish(<int> c[1], <i64*> self.ext_rows + c[2],
                                     <i64*> self.ext_cmp + c[2], 1, c[3]) < 0:
                    return -1
            if self.sel_dirty and self._select_ready():
                return -1
            if self.oom:
                return -1
            # the next row with a candidate (none: the partition's last row, as the
            # row-by-row loop leaves cur_row)
            r += 1
            if self.ext_at < self.ext_n and self.ext_cand[4 * self.ext_at] < stop:
                if self.ext_cand[4 * self.ext_at] > r:
                    r = self.ext_cand[4 * self.ext_at]
            elif r < stop:
                self.cur_row = stop - 1
                break
        return 0

    def set_candidates(self, cand, rows=None, comps=None):
        """The next run() finishes these candidate matches instead of forming its own
        (planned clauses only): cand int64[n, 4] = (end row, term, offset, length) sorted
        by end row, rows/comps int64 (row ascending within a candidate, global component
        index). None switches back to the own plan trees."""
        if cand is None:
            self.ext_on = 0
            self.ext_ref = None
            return
        if not self.planned:
            raise ValueError("set_candidates needs a planned matcher")
        c = np.ascontiguousarray(cand, dtype=np.int64).reshape(-1, 4)
        rw = np.ascontiguousarray(rows, dtype=np.int64)
        cm = np.ascontiguousarray(comps, dtype=np.int64)
        if rw.shape[0] == 0:
            rw = np.zeros(1, dtype=np.int64)
            cm = np.zeros(1, dtype=np.int64)
        self.ext_ref = (c, rw, cm)
        self.ext_cand = <const i64*> cnp.PyArray_DATA(c)
        self.ext_rows = <const i64*> cnp.PyArray_DATA(rw)
        self.ext_cmp = <const i64*> cnp.PyArray_DATA(cm)
        self.ext_n = c.shape[0]
        self.ext_at = 0
        self.ext_on = 1

    def attach_rows(self, values, nulls):
        """VM rows (as for run()) for conditions checked from outside a run through
        eval_explicit (the shared DAG); the exact columns and constants come from
        set_exact_columns /
        set_consts as for run()."""
        vv = np.ascontiguousarray(values, dtype=np.float64)
        nn = np.ascontiguousarray(nulls, dtype=np.uint8)
        self.rows_ref = (vv, nn)
        self.att_rows = vv.shape[1]
        self.vals = <const double*> cnp.PyArray_DATA(vv) if vv.size else NULL
        self.nulls = <const unsigned char*> cnp.PyArray_DATA(nn) if nn.size else NULL

    def use_column_pointers(self, values, nulls, i64 offset=0, exact=None):
        """Column pointer mode: condition column n is read from values[n] / nulls[n]
        (1-D float64 / uint8 arrays; exact[n]: int64[rows, 2], the 128-bit values of an
        exact-lane column, None for a float one; row ``offset`` being the run's row 0),
        so patterns of one shared pass read one converted copy of each column instead
        of each copying them into its own matrix (run() / attach_rows() then take
        (0, n_rows) matrices). Not for patterns with an aggregate reading a column
        (those read the run's matrices). None: switch off."""
        cdef int n, i
        cdef cnp.ndarray v, u, x
        free(self.col_vals)
        free(self.col_nulls)
        free(self.col_exact)
        self.col_vals = NULL
        self.col_nulls = NULL
        self.col_exact = NULL
        self.colptr_ref = None
        if values is None:
            return
        for i in range(self.n_maggs):
            if self.maggs[4 * i + 2] >= 0:
                raise ValueError("column pointers: a measure aggregates a column")
        if self.n_daggs:
            raise ValueError("column pointers: the pattern has DEFINE aggregates")
        n = len(values)
        if len(nulls) != n or (exact is not None and len(exact) != n):
            raise ValueError("column pointers: one NULL array per column")
        refs = []
        self.col_vals = <const double**> calloc(n + 1, sizeof(double*))
        self.col_nulls = <const unsigned char**> calloc(n + 1, sizeof(unsigned char*))
        self.col_exact = <const x_i128**> calloc(n + 1, sizeof(x_i128*))
        if self.col_vals == NULL or self.col_nulls == NULL or self.col_exact == NULL:
            raise MemoryError("cepsql CEP matcher ran out of memory")
        for i in range(n):
            u = np.ascontiguousarray(nulls[i], dtype=np.uint8)
            if exact is not None and exact[i] is not None:
                x = np.ascontiguousarray(exact[i], dtype=np.int64)
                if x.ndim != 2 or x.shape[1] != 2 or x.shape[0] != u.shape[0]:
                    raise ValueError("column pointers: exact columns are int64[rows, 2]")
                refs.append(x)
                self.col_exact[i] = (<const x_i128*> cnp.PyArray_DATA(x)) + offset
                v = np.zeros(u.shape[0], dtype=np.float64) if values[i] is None else \
                    np.ascontiguousarray(values[i], dtype=np.float64)
            else:
                v = np.ascontiguousarray(values[i], dtype=np.float64)
            if v.ndim != 1 or u.shape[0] != v.shape[0] or not 0 <= offset <= v.shape[0]:
                raise ValueError("column pointers: 1-D columns of one length past offset")
            refs.append((v, u))
            self.col_vals[i] = (<const double*> cnp.PyArray_DATA(v)) + offset
            self.col_nulls[i] = (<const unsigned char*> cnp.PyArray_DATA(u)) + offset
        self.n_colptr = n
        self.colptr_ref = refs

    cdef bint eval_explicit(self, int c, int label, i64* pos, i64* lab, i64 m, i64 r,
                            i64 ps, i64 pe) noexcept nogil:
        """Conjunct c of the pattern at row r (labelled label) on the explicit,
        row-sorted match pos/lab[0..m), within partition rows [ps, pe) of the rows given
        to attach_rows: the shared DAG's call (ConditionHost). Evaluated between runs
        only (it sets the partition bounds)."""
        cdef i64 saved = self.n_rows
        cdef bint ok
        self.ps = ps
        self.pe = pe
        self.n_rows = self.att_rows
        ok = self._eval(c, label, NULL, pos, lab, m, r)
        self.n_rows = saved
        return ok

    cdef inline int _sibling(self, int node, int parent) noexcept nogil:
        cdef int sib = self.pl_node[parent * 5 + 1]
        return self.pl_node[parent * 5 + 2] if sib == node else sib

    cdef inline bint _is_kleene_leaf(self, int node) noexcept nogil:
        return self.pl_node[node * 5 + 3] >= 0 and not self._plain(self.pl_node[node * 5 + 3])

    cdef int _kleene_arrival(self, int leaf, i64 r) noexcept nogil:
        """Row r joined a Kleene leaf: every closure ending at r, formed in the context of
        each live sibling instance (so the conditions linking the closure to the
        sibling's variables prune the enumeration), or alone at the root."""
        cdef int parent = self.pl_node[leaf * 5 + 4], sib
        cdef i64 k, off
        cdef Buf* s
        cdef Buf* e
        if parent < 0:
            return self._closures(leaf, NULL, NULL, 1, 0, r, -1, -1, -1)
        sib = self._sibling(leaf, parent)
        if self._is_kleene_leaf(sib):
            # every closure of the sibling (alone), then ours ending at r in its context
            return self._closures(sib, NULL, NULL, 1, 0, -1, parent, leaf, r)
        s = &self.nd_inst[sib]
        e = &self.nd_ent[sib]
        for k in range(s.n // 3):
            if not self._alive(s.data[3 * k + 2], r):
                continue
            off = s.data[3 * k]
            if self._closures(leaf, e.data + 2 * off, e.data + 2 * off + 1, 2,
                              s.data[3 * k + 1], r, parent, -1, -1):
                return -1
        return 0

    cdef int _up(self, int node, i64* pos, i64* cmp, i64 stride, i64 m,
                 i64 mn) noexcept nogil:
        """A new instance of node: to the root's check, or joined with the sibling's."""
        cdef int parent = self.pl_node[node * 5 + 4], sib
        cdef i64 k, off
        cdef Buf* s
        cdef Buf* e
        if parent < 0:
            return self._plan_finish(self.pl_node[node * 5], pos, cmp, stride, m)
        sib = self._sibling(node, parent)
        if self._is_kleene_leaf(sib):
            return self._closures(sib, pos, cmp, stride, m, -1, parent, -1, -1)
        s = &self.nd_inst[sib]
        e = &self.nd_ent[sib]
        for k in range(s.n // 3):
            if not self._alive(s.data[3 * k + 2], self.cur_row):
                continue
            off = s.data[3 * k]
            if self._join(parent, pos, cmp, stride, m, mn, e.data + 2 * off,
                          e.data + 2 * off + 1, 2, s.data[3 * k + 1], s.data[3 * k + 2]):
                return -1
        return 0

    cdef int _join(self, int parent, i64* ip, i64* ic, i64 ist, i64 im, i64 imin,
                   i64* jp, i64* jc, i64 jst, i64 jm, i64 jmin) noexcept nogil:
        """Join instances I and J (rows ip/jp, components ic/jc, with strides) at parent:
        disjoint rows, precedence, window, parent's conjuncts and NOT checks; then store
        the result and climb (or check it as a match at the root)."""
        cdef i64 lo = imin if imin < jmin else jmin
        cdef i64 ilast = ip[(im - 1) * ist], jlast = jp[(jm - 1) * jst], hi
        cdef i64 a, b, p, q, m = im + jm, x
        cdef int term = self.pl_node[parent * 5], base = self.seq_start[term]
        cdef int cp, cq, k, c, lab
        cdef Buf* t
        cdef i64* mp
        cdef i64* ml
        cdef i64* mc
        hi = ilast if ilast > jlast else jlast
        if not self._fits(lo, hi):
            return 0
        for a in range(im):
            p = ip[a * ist]
            cp = <int> ic[a * ist]
            for b in range(jm):
                q = jp[b * jst]
                cq = <int> jc[b * jst]
                if p == q:
                    return 0
                if (self.pl_after[cp] >> (cq - base)) & 1:
                    if not p < q:
                        return 0
                elif (self.pl_after[cq] >> (cp - base)) & 1:
                    if not q < p:
                        return 0
        t = &self.nd_tmp[parent]
        if buf_reserve(t, 3 * m):
            self.oom = 1
            return -1
        mp = t.data
        ml = t.data + m
        mc = t.data + 2 * m
        a = 0
        b = 0
        for x in range(m):
            if b >= jm or (a < im and ip[a * ist] < jp[b * jst]):
                mp[x] = ip[a * ist]
                mc[x] = ic[a * ist]
                a += 1
            else:
                mp[x] = jp[b * jst]
                mc[x] = jc[b * jst]
                b += 1
            ml[x] = self.comps[mc[x] * 4 + 1]
        for k in range(self.pl_cs[parent], self.pl_cs[parent + 1]):
            c = self.pl_c[k]
            lab = self.conj_label[c]
            for x in range(m):
                if ml[x] == lab and not self._eval(c, lab, NULL, mp, ml, m, mp[x]):
                    return 0
        for k in range(self.pl_ns[parent], self.pl_ns[parent + 1]):
            if self._neg_ok(self.pl_n[k], mp, ml, m, self.ps) == 0:
                return 0
        self.pm_created += 1
        if self.pl_node[parent * 5 + 4] < 0:
            return self._plan_finish(term, mp, mc, 1, m)
        if self._plan_store(parent, mp, mc, m, lo):
            return -1
        return self._up(parent, mp, mc, 1, m, lo)

    cdef int _closures(self, int leaf, i64* xp, i64* xc, i64 xst, i64 xm, i64 end_row,
                       int parent, int then_leaf, i64 then_end) noexcept nogil:
        """Closures of a Kleene leaf (ending at end_row unless -1) in the context of
        instance X (rows xp, components xc, stride xst; the sibling's, joined at parent;
        none at the root), enumerated by closures.walk_closures. Each element must pass
        the leaf's own conditions and, with X, the parent's conditions on the leaf's
        variable (X binds every other variable they read), checked on X plus the elements
        so far (R2: own references RUNNING). Each closure is joined with X at parent, or
        checked as a match (no parent), or -- with then_leaf -- used as the context of
        then_leaf's closures ending at then_end."""
        cdef int comp = self.pl_node[leaf * 5 + 3]
        cdef int term = self.pl_node[leaf * 5], base = self.seq_start[term]
        cdef i64 lo_b = -1, hi_b = -1, xmin = -1, xmax = -1, k, n, nc, row, a
        cdef int cx
        cdef Buf* s = &self.nd_inst[leaf]
        cdef Buf* e = &self.nd_ent[leaf]
        cdef Buf* d = &self.nd_dfs[leaf]
        cdef i64* cand
        cdef ClosureWalk w
        cdef _KleeneCtx ctx
        for a in range(xm):
            row = xp[a * xst]
            cx = <int> xc[a * xst]
            if xmin < 0 or row < xmin:
                xmin = row
            if row > xmax:
                xmax = row
            if (self.pl_after[cx] >> (comp - base)) & 1:
                if row > lo_b:
                    lo_b = row
            elif (self.pl_after[comp] >> (cx - base)) & 1:
                if hi_b < 0 or row < hi_b:
                    hi_b = row
        n = s.n // 3
        if buf_reserve(d, 6 * (n + 1) + 2 * (xm + 1)):
            self.oom = 1
            return -1
        cand = d.data
        ctx.leaf = leaf
        ctx.comp = comp
        ctx.label = self.comps[comp * 4 + 1]
        ctx.parent = parent
        ctx.then_leaf = then_leaf
        ctx.then_end = then_end
        ctx.xp = xp
        ctx.xc = xc
        ctx.xst = xst
        ctx.xm = xm
        ctx.xmin = xmin
        ctx.tc = cand + 3 * (n + 1)
        ctx.mp = ctx.tc + (n + 1)        # X + elements so far, merged by row
        ctx.ml = ctx.mp + (n + xm + 1)
        w.owner = <void*> self
        w.ctx = &ctx
        w.fits = _cep_fits
        w.check = _cep_element_ok
        w.emit = _cep_closure
        w.lo_n = self.comps[comp * 4 + 2]
        w.hi_n = self.comps[comp * 4 + 3]
        w.end_row = end_row
        w.xmin = xmin
        w.xmax = xmax
        nc = 0
        for k in range(n):
            row = e.data[2 * s.data[3 * k]]
            if self._alive(row, self.cur_row):
                cand[nc] = row
                nc += 1
        nc = closure_candidates(&w, cand, nc, xp, xst, xm, lo_b, hi_b)
        if nc == 0:
            return 0
        return walk_closures(&w, cand, nc, cand + (n + 1), cand + 2 * (n + 1))

    cdef int _element_ok(self, _KleeneCtx* x, i64* tp, i64 n) noexcept nogil:
        """The closure tp[0..n) of x's leaf may take its newest element: the leaf's
        non-row-local conjuncts and, with X, the parent's on the leaf's variable, on X
        and the elements merged by row."""
        cdef i64 a = 0, b = 0, i, tm = x.xm + n, row = tp[n - 1]
        cdef int kk, c, label = x.label
        cdef i64* mp = x.mp
        cdef i64* ml = x.ml
        for i in range(tm):
            if b >= n or (a < x.xm and x.xp[a * x.xst] < tp[b]):
                mp[i] = x.xp[a * x.xst]
                ml[i] = self.comps[x.xc[a * x.xst] * 4 + 1]
                a += 1
            else:
                mp[i] = tp[b]
                ml[i] = label
                b += 1
        for kk in range(self.pl_cs[x.leaf], self.pl_cs[x.leaf + 1]):
            c = self.pl_c[kk]
            if not self.c_rowlocal[c] and not self._eval(c, label, NULL, mp, ml, tm, row):
                return 0
        if x.xm > 0 and x.parent >= 0:
            for kk in range(self.pl_cs[x.parent], self.pl_cs[x.parent + 1]):
                c = self.pl_c[kk]
                if self.conj_label[c] == label and \
                        not self._eval(c, label, NULL, mp, ml, tm, row):
                    return 0
        return 1

    cdef int _closure_done(self, _KleeneCtx* x, i64* tp, i64 n) noexcept nogil:
        """A closure tp[0..n) of an admitted size: the context of then_leaf's closures,
        a match (no parent) or joined with X at parent."""
        cdef i64 i
        for i in range(n):
            x.tc[i] = x.comp
        if x.then_leaf >= 0:
            return self._closures(x.then_leaf, tp, x.tc, 1, n, x.then_end, x.parent, -1, -1)
        if x.parent < 0:
            return self._up(x.leaf, tp, x.tc, 1, n, tp[0])
        return self._join(x.parent, x.xp, x.xc, x.xst, x.xm, x.xmin, tp, x.tc, 1, n, tp[0])

    cdef int _plan_finish(self, int term, i64* rows, i64* cmp, i64 stride,
                          i64 m) noexcept nogil:
        """A candidate of term: whole-match conditions (R2), NOT checks (R6); store."""
        cdef i64* lab = self.mlab
        cdef i64* pos = self.mpos
        cdef i64 i
        cdef int k, c, label, q, rc
        cdef i64 state = 0
        for i in range(m):
            pos[i] = rows[i * stride]
            lab[i] = self.comps[cmp[i * stride] * 4 + 1]
        if not self._fits(pos[0], pos[m - 1]):
            return 0
        for i in range(m):
            label = <int> lab[i]
            for k in range(self.lab_conj_start[label], self.lab_conj_start[label + 1]):
                c = self.lab_conj[k]
                if self.c_late[c] and not self._eval(c, label, NULL, pos, lab, m, pos[i]):
                    return 0
        for q in range(self.n_negs):
            if self.negs[q * 6] == term:
                rc = self._neg_ok(q, pos, lab, m, self.ps)
                if rc == 0:
                    return 0
                if rc == 2:
                    state = 1
        return self._store_match(pos, lab, m, state, term)

    # ------------------------------------------------------------------ partition
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
                if not self._alive(self.n_first.data[run[R_NODE]], r):
                    continue
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
            if self.merging:
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
            if self.oom:
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
        if self.cap_path < self.n_rows + 2:
            self.cap_path = self.n_rows + 2
            self.ppos = <i64*> realloc(self.ppos, self.cap_path * sizeof(i64))
            self.plab = <i64*> realloc(self.plab, self.cap_path * sizeof(i64))
            self.mpos = <i64*> realloc(self.mpos, self.cap_path * sizeof(i64))
            self.mlab = <i64*> realloc(self.mlab, self.cap_path * sizeof(i64))
            self.mcomp = <i64*> realloc(self.mcomp, self.cap_path * sizeof(i64))
            self.tpos = <i64*> realloc(self.tpos, self.cap_path * sizeof(i64))
            self.tlab = <i64*> realloc(self.tlab, self.cap_path * sizeof(i64))
        if self.cap_flags < self.n_rows + 1:
            self.cap_flags = self.n_rows + 1
            p = <unsigned char*> realloc(self.covered, self.cap_flags)
            if p == NULL:
                raise MemoryError("cepsql CEP matcher ran out of memory")
            self.covered = p
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
                    if self._emit_ready(out, self.f_lo if self.hold and need > self.f_lo
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
        if err:
            for k in range(4):
                free(out[k].data)
            self.has_state = 0
            raise MemoryError("cepsql CEP matcher ran out of memory")
        rows = _to_numpy(&out[0])
        numbers = _to_numpy(&out[1])
        leaves = _to_numpy(&out[2]).reshape(len(rows), self.n_leaves)
        aggs = _to_numpy(&out[3]).reshape(len(rows), self.n_maggs, 2)
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

    def list_rows(self):
        """The rows of the LIST/ROWS measures of the last run's output, laid out per
        output row, then per such aggregate (the SQL:2016 worker's layout)."""
        return _to_numpy(&self.lists)

    def set_exact(self, consts, int ansi, dlane, mlane):
        """Exact constants (int64[n, 2] halves of 128-bit values), the ANSI flag, and
        the lanes (int32[n, 4]) of the DEFINE and MEASURES aggregates."""
        _lane_set_consts(&self.xl, consts, ansi, dlane, mlane)

    def set_exact_columns(self, cols):
        """The exact column matrix for the next run: int64[n_columns, n_rows, 2], the
        128-bit value of every exact-lane column (other columns' rows are unused)."""
        cdef cnp.ndarray c = np.ascontiguousarray(cols, dtype=np.int64)
        self.xcols_ref = c
        self.xl.cols = <const x_i128*> cnp.PyArray_DATA(c) if c.size else NULL

    def vm_error(self):
        """The first ANSI runtime error of the condition VM since the last call (0 none,
        1 arithmetic overflow, 2 division by zero); clears it."""
        err = self.xl.error
        self.xl.error = 0
        return err

    def set_consts(self, cnp.ndarray consts):
        cdef cnp.ndarray c = np.ascontiguousarray(consts, dtype=np.float64)
        free(self.consts)
        self.consts = <double*> self._copy(c)

    # ------------------------------------------------------------------ streaming state
    # (export/import of the carry-over of an open partition; used by the CEP streaming
    # engine, cepsql/backends/streaming/engine.py, to keep it in Spark's state store)

    def export_state(self):
        """The carry-over of the open partition after ``run(..., open_last=1)`` as bytes
        (int64 words): scalars, runs, match buffer nodes, undecided matches, covered
        flags of the carried rows and the planned evaluator's instances. Row indices
        are already rebased to ``keep``, so the bytes grow with the window, not the
        stream. Empty when nothing is carried."""
        cdef i64 carried, i, node
        cdef Buf* bufs[13]
        cdef cnp.ndarray flags
        if not self.has_state:
            return b""
        carried = self.n_rows - self.keep
        self._fill_state_bufs(bufs)
        words = [STATE_MAGIC, STATE_VERSION, self.RW, self.planned, self.pn,
                 self.n_rows, self.keep, self.pproc, self.last_end, self.sel_dirty,
                 self.unmatched_done, self.match_no, self.compact_at, self.pm_stored]
        parts = [np.asarray(words, dtype=np.int64)]
        for i in range(13):
            parts.append(_buf_words(bufs[i]))
        flags = np.zeros(8 * ((carried + 7) // 8), dtype=np.uint8)  # 8 flags a word
        if carried > 0:
            memcpy(flags.data, self.covered, carried)
        parts.append(np.asarray([carried], dtype=np.int64))
        parts.append(flags.view(np.int64))
        if self.planned:
            for node in range(self.pn):
                parts.append(np.asarray([self.nd_live[node]], dtype=np.int64))
                parts.append(_buf_words(&self.nd_inst[node]))
                parts.append(_buf_words(&self.nd_ent[node]))
        return np.concatenate(parts).tobytes()

    def import_state(self, data):
        """Restore what export_state gave (from a matcher built from the same plan), so
        the next ``run(..., cont=1)`` continues the open partition on the carried rows
        (the first ``n_rows - keep`` rows of its input) plus new ones."""
        cdef cnp.ndarray[cnp.int64_t, ndim=1] w
        cdef i64 at, i, carried, node
        cdef Buf* bufs[13]
        cdef unsigned char* p
        self.has_state = 0
        if not data:
            return
        w = np.frombuffer(data, dtype=np.int64).copy()
        if w.shape[0] < 14 or w[0] != STATE_MAGIC or w[1] != STATE_VERSION:
            raise ValueError("not a cepsql CEP evaluator state")
        if w[2] != self.RW or w[3] != self.planned or w[4] != self.pn:
            raise ValueError("the CEP evaluator state belongs to another pattern")
        self.n_rows = w[5]
        self.keep = w[6]
        self.pproc = w[7]
        self.last_end = w[8]
        self.sel_dirty = <int> w[9]
        self.unmatched_done = w[10]
        self.match_no = w[11]
        self.compact_at = w[12]
        self.pm_stored = w[13]
        at = 14
        self._fill_state_bufs(bufs)
        for i in range(13):
            at = _buf_load(bufs[i], w, at)
        if at >= w.shape[0]:
            raise ValueError("corrupt CEP evaluator state")
        carried = w[at]
        at += 1
        if carried != self.n_rows - self.keep or carried < 0 or \
                at + (carried + 7) // 8 > w.shape[0]:
            raise ValueError("corrupt CEP evaluator state")
        if self.cap_flags < carried + 1:
            p = <unsigned char*> realloc(self.covered, carried + 1)
            if p == NULL:
                raise MemoryError("cepsql CEP matcher ran out of memory")
            self.covered = p
            self.cap_flags = carried + 1
        if carried > 0:
            memcpy(self.covered, (<i64*> w.data) + at, carried)
        at += (carried + 7) // 8
        if self.planned:
            for node in range(self.pn):
                if at >= w.shape[0]:
                    raise ValueError("corrupt CEP evaluator state")
                self.nd_live[node] = w[at]
                at = _buf_load(&self.nd_inst[node], w, at + 1)
                at = _buf_load(&self.nd_ent[node], w, at)
        if at != w.shape[0] or not self._state_consistent():
            self._reset_state_bufs()
            raise ValueError("corrupt CEP evaluator state")
        self.has_state = 1

    cdef bint _state_consistent(self):
        """Whether the imported buffers fit together (no index points outside them)."""
        cdef i64 i, n_nodes = self.n_row.n, total = 0
        if self.cur.n % self.RW or self.n_lab.n != n_nodes or self.n_a.n != n_nodes or \
                self.n_b.n != n_nodes or self.n_first.n != n_nodes:
            return False
        for i in range(self.cur.n // self.RW):
            if not 0 <= self.cur.data[i * self.RW + R_NODE] < n_nodes:
                return False
        for i in range(n_nodes):
            if self.n_a.data[i] >= i or self.n_b.data[i] >= i:
                return False   # a node points only to older nodes
        i = self.m_off.n
        if self.m_len.n != i or self.m_st.n != i or self.m_sq.n != i or self.m_chk.n != i \
                or self.m_lab.n != self.m_pos.n:
            return False
        for i in range(self.m_off.n):
            if self.m_off.data[i] != total or self.m_len.data[i] < 0:
                return False
            total += self.m_len.data[i]
        if total != self.m_pos.n:
            return False
        if self.planned:
            for i in range(self.pn):
                if not self._instances_consistent(&self.nd_inst[i], &self.nd_ent[i]):
                    return False
        return True

    cdef bint _instances_consistent(self, Buf* inst, Buf* ent):
        cdef i64 k
        if inst.n % 3 or ent.n % 2:
            return False
        for k in range(0, inst.n, 3):
            if inst.data[k] < 0 or inst.data[k + 1] < 0 or \
                    2 * (inst.data[k] + inst.data[k + 1]) > ent.n:
                return False
        return True

    cdef void _reset_state_bufs(self):
        cdef Buf* bufs[13]
        cdef int i
        self._fill_state_bufs(bufs)
        for i in range(13):
            bufs[i].n = 0
        self.has_state = 0

    def n_carried(self):
        """Rows of the previous input the carried state refers to (its ``keep`` suffix):
        the next ``run(..., cont=1)`` must get them first."""
        return self.n_rows - self.keep if self.has_state else 0

    cdef void _fill_state_bufs(self, Buf** bufs):
        bufs[0] = &self.cur; bufs[1] = &self.n_row; bufs[2] = &self.n_lab
        bufs[3] = &self.n_a; bufs[4] = &self.n_b; bufs[5] = &self.n_first
        bufs[6] = &self.m_off; bufs[7] = &self.m_len; bufs[8] = &self.m_pos
        bufs[9] = &self.m_lab; bufs[10] = &self.m_st; bufs[11] = &self.m_sq
        bufs[12] = &self.m_chk

    # ------------------------------------------------------------------ (end of streaming state)

    def stats(self):
        return dict(runs_created=self.runs_created, runs_merged=self.runs_merged,
                    nodes_created=self.nodes_created, peak_runs=self.peak_runs,
                    matches_found=self.matches_found, peak_nodes=self.peak_nodes,
                    peak_rows=self.peak_rows, peak_stored=self.peak_stored,
                    planned=self.planned, partial_matches=self.pm_created,
                    peak_partial_matches=self.peak_pm,
                    compactions=self.compactions)

    # ------------------------------------------------------------------ output
    cdef i64* _order(self, int lo, int hi, i64* n_out) noexcept nogil:
        """Indices of the stored matches whose state is in [lo, hi]."""
        cdef i64 n = self.m_off.n, i, w = 0
        cdef i64* order = <i64*> malloc((n + 1) * sizeof(i64))
        if order == NULL:
            return NULL
        for i in range(n):
            if self.m_st.data[i] >= lo and self.m_st.data[i] <= hi:
                order[w] = i
                w += 1
        n_out[0] = w
        return order

    cdef MatchOrder _match_order(self, int last_first) noexcept nogil:
        """Sort context over the stored matches (valid until they are next appended)."""
        cdef MatchOrder c
        c.off = self.m_off.data
        c.len = self.m_len.data
        c.pos = self.m_pos.data
        c.lab = self.m_lab.data
        c.rank = self.rank
        c.last_first = last_first
        return c

    cdef i64 _group(self, i64* order, i64 i, i64 n, const MatchOrder* c,
                    i64* pick) noexcept nogil:
        """End of the run of equal matches (distinct assignments, R7) starting at order[i];
        pick = one of them already found complete (state 0), or -1."""
        cdef i64 j = i + 1, k
        if self.dedup:
            while j < n and _cmp_match(c, order[j], order[i]) == 0:
                j += 1
        pick[0] = -1
        for k in range(i, j):
            if self.m_st.data[order[k]] == 0:
                pick[0] = order[k]
                break
        return j

    cdef int _select_ready(self) noexcept nogil:
        """R7 under SKIP PAST LAST ROW (SASE+'s non-overlap format), as far as it is
        decided: the stored candidates in (last, first, positions, labels) order; one
        starting at or before the last selected match's last row is gone (state 3),
        otherwise it is selected (state 2) and moves last_end -- up to the first
        candidate still awaiting a trailing NOT. Every match found later ends after
        the stored ones, so these decisions are final."""
        cdef i64 n, i, j, x, pick, o, selected
        cdef MatchOrder ctx = self._match_order(1)
        cdef i64* order = self._order(0, 1, &n)
        if order == NULL:
            self.oom = 1
            return -1
        self.sel_dirty = 0
        if _sort_matches(order, n, &ctx):
            free(order)
            self.oom = 1
            return -1
        i = 0
        while i < n:
            j = self._group(order, i, n, &ctx, &pick)
            o = self.m_off.data[order[i]]
            selected = -1
            if self.m_pos.data[o] > self.last_end:
                if pick < 0:
                    break   # undecided: it may still be the next selected match
                selected = pick
                self.last_end = self.m_pos.data[o + self.m_len.data[order[i]] - 1]
            for x in range(i, j):
                self.m_st.data[order[x]] = 3
            if selected >= 0:
                self.m_st.data[selected] = 2
            i = j
        free(order)
        self._drop_gone()
        return 0

    cdef void _drop_gone(self) noexcept nogil:
        """Remove the stored matches in state 3 (output or never to be output); the peak
        counts the undecided ones (selected ones wait only for the chunk's output)."""
        cdef i64 i, o, w = 0, l = 0, undecided = 0
        for i in range(self.m_off.n):
            if self.m_st.data[i] == 3:
                continue
            if self.m_st.data[i] != 2:
                undecided += 1
            o = self.m_off.data[i]
            memmove(self.m_pos.data + l, self.m_pos.data + o,
                    self.m_len.data[i] * sizeof(i64))
            memmove(self.m_lab.data + l, self.m_lab.data + o,
                    self.m_len.data[i] * sizeof(i64))
            self.m_off.data[w] = l
            self.m_len.data[w] = self.m_len.data[i]
            self.m_st.data[w] = self.m_st.data[i]
            self.m_sq.data[w] = self.m_sq.data[i]
            self.m_chk.data[w] = self.m_chk.data[i]
            l += self.m_len.data[i]
            w += 1
        self.m_off.n = w
        self.m_len.n = w
        self.m_st.n = w
        self.m_sq.n = w
        self.m_chk.n = w
        self.m_pos.n = l
        self.m_lab.n = l
        if undecided > self.peak_stored:
            self.peak_stored = undecided

    cdef int _emit_ready(self, Buf* out, i64 future) noexcept nogil:
        """R7, incrementally: output (numbered) every stored match whose MATCH_NUMBER
        order is final -- no match still to be found (first row >= future) and no stored
        one still undecided can sort before it; then unmatched rows below that frontier.
        With future past the partition end everything is output."""
        cdef i64 n, i, j, p, o, l, pick, x, q, frontier
        cdef i64* order
        cdef MatchOrder ctx
        cdef int rc, sq
        cdef i64* labs
        # 1. matches waiting for a trailing NOT: check the rows that arrived since
        for i in range(self.m_off.n):
            if self.m_st.data[i] != 1:
                continue
            o = self.m_off.data[i]
            l = self.m_len.data[i]
            sq = <int> self.m_sq.data[i]
            self.m_st.data[i] = 0
            labs = self._untag(o, l)
            for q in range(self.n_negs):
                if self.negs[q * 6] != sq:
                    continue
                rc = self._neg_ok(<int> q, self.m_pos.data + o, labs, l,
                                  self.m_chk.data[i])
                if rc == 0:
                    self.m_st.data[i] = 3
                    break
                if rc == 2:
                    self.m_st.data[i] = 1
            self.m_chk.data[i] = self.pproc
        frontier = future
        if self.select_past_last:
            # 2a. SASE+ non-overlap selection; the selected matches are disjoint ranges
            # of rows, so their selection order is their MATCH_NUMBER order and no
            # match still to come can sort before them (it ends later, so it starts
            # after the last of them or is never output)
            if self._select_ready():
                return -1
            order = self._order(2, 2, &n)
        else:
            order = self._order(0, 1, &n)
        if order == NULL:
            return -1
        # 2b. numbering in (first, last, ...) order
        ctx = self._match_order(0)
        if _sort_matches(order, n, &ctx):
            free(order)
            return -1
        i = 0
        while i < n:
            if not self.select_past_last and \
                    self.m_pos.data[self.m_off.data[order[i]]] > frontier:
                break
            j = self._group(order, i, n, &ctx, &pick)
            if self.select_past_last:
                pick = order[i]
            if pick < 0:
                break
            for x in range(i, j):
                self.m_st.data[order[x]] = 3
            self.match_no += 1
            o = self.m_off.data[pick]
            l = self.m_len.data[pick]
            if self.all_rows and self.with_unmatched:
                for p in range(l):
                    self.covered[self.m_pos.data[o + p]] = 1
            if self._emit_match(self.m_pos.data + o, self._untag(o, l), l, self.match_no,
                                out):
                free(order)
                return -1
            i = j
        free(order)
        # 3. drop what is gone; the unmatched-row frontier
        self._drop_gone()
        for i in range(self.m_off.n):
            p = self.m_pos.data[self.m_off.data[i]]
            if p < frontier:
                frontier = p
        if self.all_rows and self.with_unmatched:
            if frontier > self.pproc:
                frontier = self.pproc
            for p in range(self.unmatched_done, frontier):
                if not self.covered[p]:
                    if self._emit_unmatched(p, out):
                        return -1
            if frontier > self.unmatched_done:
                self.unmatched_done = frontier
        return 0

    cdef i64* _untag(self, i64 o, i64 l) noexcept nogil:
        """A stored match's labels; with comp_tags they also carry the component that
        took each row (_store_match): labels into mlab, components into mcomp."""
        cdef i64 i, x
        if not self.comp_tags:
            return self.m_lab.data + o
        for i in range(l):
            x = self.m_lab.data[o + i]
            self.mlab[i] = x & 0xFFFF
            self.mcomp[i] = (x >> 16) - 1
        return self.mlab

    cdef int _emit_unmatched(self, i64 row, Buf* out) noexcept nogil:
        cdef int q, func
        if buf_push(&out[0], row) or buf_push(&out[1], -1):
            return -1
        for q in range(self.n_leaves):
            if buf_push(&out[2], -1):
                return -1
        for q in range(self.n_maggs):
            func = self.maggs[q * 4 + 1]
            if _push_null_aggregate(&out[3], func, self.xl.mlane + 4 * q):
                return -1
        return 0

    cdef int _emit_match(self, i64* pos, i64* lab, i64 m, i64 number, Buf* out) noexcept nogil:
        cdef i64 i
        if not self.all_rows:
            if buf_push(&out[0], pos[m - 1]) or buf_push(&out[1], number):
                return -1
            return self._emit_measures(pos, lab, m, m, out)
        for i in range(m):
            if buf_push(&out[0], pos[i]) or buf_push(&out[1], number):
                return -1
            if self._emit_measures(pos, lab, m, i + 1, out):
                return -1
        return 0

    cdef int _emit_measures(self, i64* pos, i64* lab, i64 m, i64 upto, Buf* out) noexcept nogil:
        cdef int q, s, logical, final, kind, func, col
        cdef i64 loff, poff, p, idx, cnt, i, j, v, base
        cdef i64 acc[AGG_W]
        for q in range(self.n_leaves):
            s = self.leaves[q * 6]
            logical = self.leaves[q * 6 + 1]
            loff = self.leaves[q * 6 + 2]
            poff = self.leaves[q * 6 + 3]
            final = self.leaves[q * 6 + 4]
            kind = self.leaves[q * 6 + 5]
            p = m if (final or not self.all_rows) else upto
            idx = self._nth_in_set(s, lab, p, logical, loff)
            j = -1
            if idx >= 0:
                j = pos[idx] + poff
                if j < self.ps or j >= self.pe:
                    j = -1
            if kind == 1 and j >= 0:
                v = -1
                for i in range(m):
                    if pos[i] == j:
                        v = lab[i]
                        break
                j = v
            if buf_push(&out[2], j):
                return -1
        for q in range(self.n_maggs):
            s = self.maggs[q * 4]
            func = self.maggs[q * 4 + 1]
            col = self.maggs[q * 4 + 2]
            final = self.maggs[q * 4 + 3]
            p = m if (final or not self.all_rows) else upto
            base = col * self.n_rows
            if func == A_LIST:
                # the rows themselves (gathered.py folds them): the non-NULL rows of
                # the set in match order; the count, or -1 for none (NULL)
                cnt = 0
                for i in range(p):
                    if self._in(s, <int> lab[i]) and not self.nulls[base + pos[i]]:
                        if buf_push(&self.lists, pos[i]):
                            return -1
                        cnt += 1
                if buf_push(&out[3], cnt if cnt > 0 else -1) or buf_push(&out[3], 0):
                    return -1
                continue
            memset(acc, 0, sizeof(acc))
            for i in range(p):
                if self._in(s, <int> lab[i]):
                    if col < 0:
                        _agg_step(acc, func, self.xl.mlane + 4 * q, NULL, NULL, NULL, pos[i], 1)
                    else:
                        _agg_step(acc, func, self.xl.mlane + 4 * q, self.vals + base,
                                  self.xl.cols + base, self.nulls + base, pos[i], 1)
            if _push_aggregate(&out[3], acc, func, self.xl.mlane + 4 * q, &self.xl):
                return -1
        return 0


cdef object _to_numpy(Buf* b):
    cdef cnp.ndarray out = np.empty(b.n, dtype=np.int64)
    if b.n > 0:
        memcpy(out.data, b.data, b.n * sizeof(i64))
    return out
