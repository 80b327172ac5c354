# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""R7: which stored matches are selected (strategy, SKIP, match order) and their output
rows, numbered as the stream requires (see match_order for the sort)."""
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

import numpy as np

cnp.import_array()


cdef class CepOutput(CepNot):
    """R7 selection and output rows of the stored matches."""
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
            if not self.compact:
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
        self.m_lab.n = 0 if self.compact else l
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
            if self.compact:
                if self._emit_compact(self.m_pos.data + o, l, self.match_no, out):
                    free(order)
                    return -1
            elif self._emit_match(self.m_pos.data + o, self._untag(o, l), l, self.match_no,
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
        self.matches_output += 1
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

    # ------------------------------------------------------------------ compact

    def _set_compact(self):
        """Decide whether closed partitions may run compact (issue 24 A1): ONE ROW PER
        MATCH without row lists, no window, NOT, iteration group, tree plan, SKIP PAST
        LAST ROW, DISTINCT DEFINE aggregate or second sequence (whose equal assignments
        are deduplicated by their rows), not SKIP_TILL_ANY_MATCH (whose runs need
        merging), and every conjunct decided at take time (its other variables are
        mandatory earlier components). Then each run folds what the output reads into
        its record, after the computation vector: [first row + 1], per leaf its count
        and the rows it may read (FIRST: the loff-th; LAST: the last loff + 1), per
        MEASURES aggregate AGG_W words; RW grows by that."""
        cdef int q, seq, j, c, i, label, at, func
        cdef u64 bound
        free(self.ms_leaf)
        free(self.ms_agg)
        self.ms_leaf = NULL
        self.ms_agg = NULL
        self.compact_ok = 0
        if self.planned or self.n_negs or self.g_first != NULL or self.window_kind != 0 \
                or self.all_rows or self.with_unmatched or self.select_past_last \
                or self.dedup or self.strategy == S_ANY or self.comp_tags:
            return
        for q in range(self.n_daggs):
            if _agg_listed(self.daggs[q * 3 + 1]):
                return
        for q in range(self.n_maggs):
            func = self.maggs[q * 4 + 1]
            if func == A_LIST or _agg_listed(func):
                return
        for q in range(self.n_leaves):
            if self.leaves[q * 6 + 5] not in (0, 1) or self.leaves[q * 6 + 2] > 15 or \
                    (self.leaves[q * 6 + 5] == 1 and self.leaves[q * 6 + 3] != 0):
                return
        for seq in range(self.n_seq):
            bound = 0
            for j in range(self.seq_start[seq], self.seq_start[seq + 1]):
                label = self.comps[j * 4 + 1]
                for i in range(self.lab_conj_start[label], self.lab_conj_start[label + 1]):
                    c = self.lab_conj[i]
                    if self.conj_mask[c] & ~(bound | ((<u64> 1) << label)):
                        return
                if self.comps[j * 4 + 2] > 0:
                    bound |= (<u64> 1) << label
        self.ms_leaf = <int*> malloc((self.n_leaves + 1) * sizeof(int))
        self.ms_agg = <int*> malloc((self.n_maggs + 1) * sizeof(int))
        if self.ms_leaf == NULL or self.ms_agg == NULL:
            raise MemoryError("cepsql CEP matcher ran out of memory")
        self.ms_base = R_HDR + self.S
        at = self.ms_base + 1
        for q in range(self.n_leaves):
            self.ms_leaf[q] = at
            at += 2 if self.leaves[q * 6 + 1] == 0 else 2 + self.leaves[q * 6 + 2]
        for q in range(self.n_maggs):
            self.ms_agg[q] = at
            at += AGG_W
        self.RW = at
        free(self.tmpst)
        free(self.startst)
        self.tmpst = <i64*> malloc((self.RW + 1) * sizeof(i64))
        self.startst = <i64*> malloc((self.RW + 1) * sizeof(i64))
        if self.tmpst == NULL or self.startst == NULL:
            raise MemoryError("cepsql CEP matcher ran out of memory")
        self.compact_ok = 1

    cdef void _fold_take(self, i64* run, i64 r, int label) noexcept nogil:
        """A compact run takes row r as label: its first row, leaves and aggregates."""
        cdef int q, s, k
        cdef i64* w
        cdef i64 loff, base
        if run[self.ms_base] == 0:
            run[self.ms_base] = r + 1
        for q in range(self.n_leaves):
            s = self.leaves[q * 6]
            if not self._in(s, label):
                continue
            w = run + self.ms_leaf[q]
            loff = self.leaves[q * 6 + 2]
            if self.leaves[q * 6 + 1] == 0:
                if w[0] == loff:
                    w[1] = r * 64 + label
            else:
                k = <int> loff
                while k > 0:
                    w[1 + k] = w[k]
                    k -= 1
                w[1] = r * 64 + label
            w[0] += 1
        for q in range(self.n_maggs):
            s = self.maggs[q * 4]
            if not self._in(s, label):
                continue
            k = self.maggs[q * 4 + 2]
            w = run + self.ms_agg[q]
            if k < 0:
                _agg_step(w, self.maggs[q * 4 + 1], self.xl.mlane + 4 * q, NULL, NULL, NULL,
                          r, 1)
            else:
                base = k * self.n_rows
                _agg_step(w, self.maggs[q * 4 + 1], self.xl.mlane + 4 * q, self.vals + base,
                          self.xl.cols + base, self.nulls + base, r, 1)

    cdef int _store_compact(self, i64* run, int seq, i64 r) noexcept nogil:
        """A compact run completes at row r: store its output row (as _emit_measures
        would compute it from the match's rows). Two matches with the same first and
        last row would need their rows to be ordered (_cmp_match): tie_hit stops the
        loops and run() evaluates the partition again with buffer nodes."""
        cdef i64 first = run[self.ms_base] - 1, j, e, loff
        cdef int q
        cdef i64* w
        if first < self.f_lo or first >= self.f_hi:
            return 0
        if self.tie_row[first] == r + 1:
            self.tie_hit = 1
            self.oom = 1
            return -1
        self.tie_row[first] = r + 1
        if buf_push(&self.m_off, self.m_pos.n) or buf_push(&self.m_st, 0) or \
                buf_push(&self.m_sq, seq) or buf_push(&self.m_chk, self.pproc) or \
                buf_push(&self.m_pos, first):
            self.oom = 1
            return -1
        for q in range(self.n_leaves):
            w = run + self.ms_leaf[q]
            loff = self.leaves[q * 6 + 2]
            j = -1
            if w[0] > loff:
                e = w[1] if self.leaves[q * 6 + 1] == 0 else w[1 + loff]
                j = (e >> 6) + self.leaves[q * 6 + 3]
                if j < self.ps or j >= self.pe:
                    j = -1
                elif self.leaves[q * 6 + 5] == 1:
                    j = e & 63
            if buf_push(&self.m_pos, j):
                self.oom = 1
                return -1
        for q in range(self.n_maggs):
            if _push_aggregate(&self.m_pos, run + self.ms_agg[q], self.maggs[q * 4 + 1],
                               self.xl.mlane + 4 * q, &self.xl):
                self.oom = 1
                return -1
        if buf_push(&self.m_pos, r) or \
                buf_push(&self.m_len, self.m_pos.n - self.m_off.data[self.m_off.n - 1]):
            self.oom = 1
            return -1
        self.matches_found += 1
        return -1 if self._state_full() else 0

    cdef int _emit_compact(self, i64* rec, i64 l, i64 number, Buf* out) noexcept nogil:
        """Output a compact match's row (_store_compact's layout)."""
        cdef i64 i
        self.matches_output += 1
        if buf_push(&out[0], rec[l - 1]) or buf_push(&out[1], number):
            return -1
        for i in range(self.n_leaves):
            if buf_push(&out[2], rec[1 + i]):
                return -1
        for i in range(1 + self.n_leaves, l - 1):
            if buf_push(&out[3], rec[i]):
                return -1
        return 0
