# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Streaming state export / import of the CEP evaluator: the open partition's runs, buffer
and undecided matches as int64 words, checked for consistency on import."""
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
from cepsql._ext.cep_nfa cimport *

import numpy as np

cnp.import_array()


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


cdef class CepState(CepRuns):
    """Streaming state export / import of the open partition."""
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
