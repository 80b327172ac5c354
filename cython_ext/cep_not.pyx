# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""NOT sub-programs (R6): a NOT check negates a small program of linear sequences over the
rows of its region (between the components around it), searched depth-first with
any-match semantics; row-local labels are counted once per row (_neg_count)."""
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

import numpy as np

cnp.import_array()


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


cdef class CepNot(CepCore):
    """NOT sub-programs (R6) over a match's regions."""
    def _set_not_programs(self, cnp.ndarray sub_start, cnp.ndarray seq_start,
                         cnp.ndarray comps, cnp.ndarray early):
        """What each NOT negates (compile.cep_expand.pack_not_programs): per program its linear
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
    # SKIP_TILL_ANY_MATCH with a cost-based plan (cepsql/planning/evaluator_choice.py): per OR-free
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
