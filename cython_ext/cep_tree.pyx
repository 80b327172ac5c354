# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The planned evaluator (_set_plan): a tree of joins over leaf instances instead of runs,
each node keeping the instances of its sub-pattern; a Kleene leaf's closures are
enumerated by closures.walk_closures. Also finishes the candidates the shared DAG forms
for this pattern (set_candidates, _ext_rows) as it finishes its own trees'."""
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

import numpy as np

# dead instances a scan may skip beyond its live ones before it compacts the store (_up)
cdef enum:
    DEAD_SLACK = 256

cnp.import_array()


cdef bint _cep_fits(void* owner, void* ctx, i64 lo, i64 hi) noexcept nogil:
    return (<CepTree> owner)._fits(lo, hi)


cdef int _cep_element_ok(void* owner, void* ctx, i64* rows, i64 n) noexcept nogil:
    return (<CepTree> owner)._element_ok(<_KleeneCtx*> ctx, rows, n)


cdef int _cep_closure(void* owner, void* ctx, i64* rows, i64 n) noexcept nogil:
    return (<CepTree> owner)._closure_done(<_KleeneCtx*> ctx, rows, n)


cdef class CepTree(CepOutput):
    """The planned tree evaluator and the shared DAG's candidates."""
    def _set_plan(self, cnp.ndarray nodes, cnp.ndarray leaf_of, cnp.ndarray after,
                 cnp.ndarray conj_start, cnp.ndarray conj, cnp.ndarray late,
                 cnp.ndarray rowlocal, cnp.ndarray neg_start, cnp.ndarray neg):
        """Switch to planned evaluation (arrays from compile.cep_plan_arrays.plan_arrays)."""
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
        return -1 if self._state_full() else 0

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

    cdef int _kleene_arrival(self, int leaf, i64 r) noexcept nogil:
        """Row r joined a Kleene leaf: every closure ending at r, formed in the context of
        each live sibling instance (so the conditions linking the closure to the
        sibling's variables prune the enumeration), or alone at the root. With a Kleene
        sibling one of the two walks alone and is the other's context: the sibling
        when the parent's conditions on our variable read it, else ours; none when the
        sibling's rows must all follow ours (its rows arrive later, a closure of it
        alone would be enumerated for nothing: exponentially many, issue 24 A2)."""
        cdef int parent = self.pl_node[leaf * 5 + 4], sib, comp, sib_comp, base
        cdef i64 k, off
        cdef Buf* s
        cdef Buf* e
        if parent < 0:
            return self._closures(leaf, NULL, NULL, 1, 0, r, -1, -1, -1)
        sib = self._sibling(leaf, parent)
        if self._is_kleene_leaf(sib):
            comp = self.pl_node[leaf * 5 + 3]
            sib_comp = self.pl_node[sib * 5 + 3]
            base = self.seq_start[self.pl_node[leaf * 5]]
            if (self.pl_after[comp] >> (sib_comp - base)) & 1:
                return 0
            if self._reads_at(parent, self.comps[sib_comp * 4 + 1]) and \
                    not self._reads_at(parent, self.comps[comp * 4 + 1]):
                # ours ending at r (alone), then the sibling's in its context
                return self._closures(leaf, NULL, NULL, 1, 0, r, parent, sib, -1)
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

    cdef bint _reads_at(self, int node, int label) noexcept nogil:
        """Whether node checks a conjunct of label's variable (one reading its sibling)."""
        cdef int k
        for k in range(self.pl_cs[node], self.pl_cs[node + 1]):
            if self.conj_label[self.pl_c[k]] == label:
                return True
        return False

    cdef int _up(self, int node, i64* pos, i64* cmp, i64 stride, i64 m,
                 i64 mn) noexcept nogil:
        """A new instance of node: to the root's check, or joined with the sibling's.
        A scan that skipped more instances out of the window than it joined compacts the
        sibling's store: the row-count trigger of _plan_rows compares with the live count
        of the last compaction, which after a burst of instances lets a store hold many
        times its live ones until a chunk's end compacts it (issue 25's chunk-size gap)."""
        cdef int parent = self.pl_node[node * 5 + 4], sib
        cdef i64 k, off, dead = 0, n
        cdef Buf* s
        cdef Buf* e
        if parent < 0:
            return self._plan_finish(self.pl_node[node * 5], pos, cmp, stride, m)
        sib = self._sibling(node, parent)
        if self._is_kleene_leaf(sib):
            return self._closures(sib, pos, cmp, stride, m, -1, parent, -1, -1)
        s = &self.nd_inst[sib]
        e = &self.nd_ent[sib]
        n = s.n // 3
        for k in range(n):
            if not self._alive(s.data[3 * k + 2], self.cur_row):
                dead += 1
                continue
            off = s.data[3 * k]
            if self._join(parent, pos, cmp, stride, m, mn, e.data + 2 * off,
                          e.data + 2 * off + 1, 2, s.data[3 * k + 1], s.data[3 * k + 2]):
                return -1
        if dead > n - dead + DEAD_SLACK:
            self._plan_compact(sib, self.cur_row)
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
        w.ticks = &self.countdown
        w.stopped = &self.signalled
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
