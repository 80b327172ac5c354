"""The CEP evaluator's foundation: the compiled query's arrays and per-chunk state (every
field of the CepMatcher class chain), its lifetime, and the condition VM's loads
(computation vector, explicit matches, aggregates) -- what every other layer evaluates
through. The layers above add one idea each: cep_not (NOT sub-programs), cep_output
(R7 selection and output rows), cep_tree (planned tree evaluator and the shared DAG's
candidates), cep_nfa (the run NFA and the partition driver), cep_state (streaming state
export / import), cep (CepMatcher: construction and run)."""
from libc.stdlib cimport malloc, realloc, free, calloc
from libc.string cimport memcpy, memset, memmove
from libc.math cimport fabs, sqrt, log, exp, floor, ceil, pow, log10, fmod

cimport numpy as cnp

from cepsql._ext.buffers cimport *
from cepsql._ext.vm cimport *
from cepsql._ext.aggregates cimport *
from cepsql._ext.match_order cimport MatchOrder, _cmp_match, _sort_matches
from cepsql._ext.closures cimport ClosureWalk, closure_candidates, walk_closures
from cepsql._ext.vm cimport ConditionHost
from cepsql._ext.interrupt cimport Countdown, interrupted

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
cdef enum: R_GUARD = 5   # NEXT_MATCH: labels of the sibling closure states (see _set_guards)
cdef enum: R_ITER = 6    # iterations the run completed of the group it is in (KL of a SEQ)
cdef enum: R_HDR = 7
# _walk's node argument of a compact run (no buffer node: see CepCore.compact)
cdef enum: NODE_COMPACT = -3
cdef extern from *:
    """
    #define CEPSQL_PEEK (((unsigned long long) 1) << 63)
    #define CEPSQL_NO_BOUND (((long long) 1) << 62)
    """
    const u64 PEEK "CEPSQL_PEEK"   # R_GUARD flag: the run peeks from a Kleene state
    const i64 NO_BOUND "CEPSQL_NO_BOUND"   # f_lo / f_hi when no plan switch restricts




cdef class CepCore(ConditionHost):
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
    # planned evaluation (see _set_plan)
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
    # compact partitions (issue 24 A1; cep_output._set_compact): when the output needs
    # only what a run can fold as it takes rows (its first row, FIRST/LAST leaves, MEASURES
    # aggregates), runs record no buffer node and a match is stored as its output row
    # [first, leaves, aggregate words, last] in m_pos (m_lab stays empty)
    cdef int compact_ok        # the query allows it (fixed at construction)
    cdef int compact           # the open partition runs compact
    cdef int ms_base           # run record offset of the fold: first row + 1, leaves, aggs
    cdef int* ms_leaf          # per leaf: offset of its [count, entries] in the record
    cdef int* ms_agg           # per MEASURES aggregate: offset of its AGG_W words
    cdef i64* tie_row          # first row -> 1 + last row of a stored compact match
    cdef i64 tie_cap
    cdef int tie_hit           # two compact matches share first and last rows: the
                               # order needs their rows, the partition is run again
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
    cdef public i64 matches_output   # matches emitted after R7's selection (EXPLAIN ANALYZE)
    cdef public i64 peak_held        # most state entries _state_full counted at once
    cdef public i64 compact_retries  # compact partitions run again with nodes (tie_hit)
    # bound on the partition's state (runtime.cep_worker: cepsql.cep.maxPartialMatches);
    # 0: none. Passing it stops the loops as an out-of-memory does, with limit_hit set
    cdef public i64 max_state
    cdef readonly int limit_hit
    cdef Countdown countdown    # Ctrl-C / cancel (interrupt.pxd): to the next check
    cdef int signalled          # a handler raised or the run was cancelled
    cdef object cancel_ref      # the run's cancel flag it watches (cancel_with)
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

    cdef void _reach(self, int poff)
    cdef void* _copy(self, cnp.ndarray arr) except NULL

    cdef inline bint _state_full(self) noexcept nogil:
        """Whether the partition's state -- live runs, run-buffer nodes, stored partial
        matches of a plan, rows of the matches held (a compact match counts 2: its
        output row of a few words, then output buffers and the result's arrays, about
        180 bytes at peak against the 96 an entry stands for) -- passed max_state;
        then the loops
        stop (oom) and run() raises StateLimitReached (issue 24 A1). Called once per row
        and per stored partial match, it is also where the loops check for Ctrl-C
        (issue 24 A4): a signal handler that raised stops them the same way."""
        cdef i64 held
        if interrupted(&self.countdown):
            self.signalled = 1
            self.oom = 1
            return True
        held = (self.cur.n // self.RW if self.RW > 0 else 0) + self.n_row.n + \
            self.pm_stored + (2 * self.m_off.n if self.compact else self.m_pos.n)
        if held > self.peak_held:
            self.peak_held = held
        if self.max_state <= 0 or held <= self.max_state:
            return False
        self.limit_hit = 1
        self.oom = 1
        return True

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
    cdef i64 _resolve_take(self, int ref, i64* st, i64 r, int label, int* cls) noexcept nogil

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
                               int* cls) noexcept nogil

    cdef inline void _agg_row(self, i64* a, int k, i64 r, int label) noexcept nogil:
        _agg_define_row(a, self.daggs, k, &self.xl, self.vals, self.nulls, self.n_rows, r,
                        label)
    cdef i64* _drows(self, i64 need) noexcept nogil
    cdef void _distinct_take(self, int k, i64* st, i64 r, int label, double* dv,
                             x_i128* xv, unsigned char* isnull) noexcept nogil
    cdef void _agg_take(self, int k, i64* st, i64 r, int label, double* dv, x_i128* xv,
                        unsigned char* isnull) noexcept nogil
    cdef void _agg_explicit(self, int k, i64* pos, i64* lab, i64 m, i64 r, int label,
                            double* dv, x_i128* xv, unsigned char* isnull) noexcept nogil
    cdef bint _eval(self, int c, int label, i64* st, i64* pos, i64* lab, i64 m,
                    i64 r) noexcept nogil
    cdef int _store_match(self, i64* pos, i64* lab, i64 m, i64 state, int seq) noexcept nogil
    cdef void _plan_free(self)
    cdef bint eval_explicit(self, int c, int label, i64* pos, i64* lab, i64 m, i64 r,
                            i64 ps, i64 pe) noexcept nogil
