# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""CepCore: lifetime and condition evaluation of the CEP evaluator (see cep_core.pxd)."""
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
from cepsql._ext.interrupt cimport watch_flag

import numpy as np

cnp.import_array()




cdef class CepCore(ConditionHost):
    """The fields, lifetime and condition evaluation every layer shares."""
    def cancel_with(self, flag):
        """Stop as on Ctrl-C once flag[0] (uint8 array) is set, by another thread."""
        self.cancel_ref = watch_flag(&self.countdown, flag)

    def __cinit__(self):
        self.code = NULL
        self.f_lo = -NO_BOUND   # unrestricted until a plan switch says otherwise (also
        self.f_hi = NO_BOUND    # for state imported without a _reset)

    cdef void _reach(self, int poff):
        if poff < 0 and -poff > self.lookback:
            self.lookback = -poff
        if poff > self.lookahead:
            self.lookahead = poff

    cdef void* _copy(self, cnp.ndarray arr) except NULL:
        cdef size_t nbytes = arr.nbytes if arr.nbytes > 0 else 8
        cdef void* p = malloc(nbytes)
        if p == NULL:
            raise MemoryError("cepsql CEP matcher ran out of memory")
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
        free(self.ms_leaf); free(self.ms_agg); free(self.tie_row)
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

    cdef i64* _drows(self, i64 need) noexcept nogil:
        """The DISTINCT scratch with room for need rows (NULL: out of memory)."""
        if need > self.drows_cap:
            if grow_i64(&self.drows, need):
                self.oom = 1
                return NULL
            self.drows_cap = need
        return self.drows

    cdef void _distinct_take(self, int k, i64* st, i64 r, int label, double* dv,
                             x_i128* xv, unsigned char* isnull) noexcept nogil:
        """A DISTINCT aggregate at take time: the run's rows are its node chain (runs
        holding one never merge: _update gives each take its own token), plus row r."""
        cdef int s = self.daggs[k * 3]
        cdef i64 node = (st - R_HDR)[R_NODE]
        cdef i64 need = 1, n = 0
        cdef int lb
        cdef i64* rows
        cdef i64* labs
        while node >= 0:
            need += 1
            node = self.n_a.data[node]
        rows = self._drows(2 * need)  # rows, then their labels; filled from the end
        if rows == NULL:
            isnull[0] = 1
            return
        labs = rows + need
        if self._in(s, label):
            n += 1
            rows[need - n] = r
            labs[need - n] = label
        node = (st - R_HDR)[R_NODE]
        while node >= 0:
            lb = <int> (self.n_lab.data[node] & 0xFFFF)
            if self.n_b.data[node] < 0 and self._in(s, lb):
                n += 1
                rows[need - n] = self.n_row.data[node]
                labs[need - n] = lb
            node = self.n_a.data[node]
        _agg_distinct(rows + need - n, labs + need - n, n, self.daggs, k, &self.xl, self.vals,
                      self.nulls, self.n_rows, dv, xv, isnull)

    cdef void _agg_take(self, int k, i64* st, i64 r, int label, double* dv, x_i128* xv,
                        unsigned char* isnull) noexcept nogil:
        cdef i64 a[AGG_W]
        if _agg_listed(self.daggs[k * 3 + 1]):
            self._distinct_take(k, st, r, label, dv, xv, isnull)
            return
        memcpy(a, st + self.agg_base + AGG_W * k, AGG_W * sizeof(i64))
        if self._in(self.daggs[k * 3], label):
            self._agg_row(a, k, r, label)
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
            rows = self._drows(2 * m + 1)  # rows, then their labels
            if rows == NULL:
                isnull[0] = 1
                return
            for i in range(m):
                if not final and pos[i] > r:
                    break
                if self._in(s, <int> lab[i]):
                    rows[n] = pos[i]
                    rows[m + n] = lab[i]
                    n += 1
            _agg_distinct(rows, rows + m, n, self.daggs, k, &self.xl, self.vals, self.nulls,
                          self.n_rows, dv, xv, isnull)
            return
        memset(a, 0, sizeof(a))
        for i in range(m):
            if not final and pos[i] > r:
                break
            if self._in(s, <int> lab[i]):
                self._agg_row(a, k, pos[i], <int> lab[i])
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
        return -1 if self._state_full() else 0

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

    def list_rows(self):
        """The rows of the LIST/ROWS measures of the last run's output, laid out per
        output row, then per such aggregate (the SQL:2016 worker's layout)."""
        return buf_to_numpy(&self.lists, False)

    def set_consts(self, cnp.ndarray consts):
        cdef cnp.ndarray c = np.ascontiguousarray(consts, dtype=np.float64)
        free(self.consts)
        self.consts = <double*> self._copy(c)

    # ------------------------------------------------------------------ streaming state
    # (export/import of the carry-over of an open partition; used by the CEP streaming
    # engine, cepsql/backends/streaming/engine.py, to keep it in Spark's state store)
