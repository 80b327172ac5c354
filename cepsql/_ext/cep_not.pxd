"""NOT sub-programs of the CEP evaluator (R6): whether a match's NOT regions hold."""
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


cdef class CepNot(CepCore):
    cdef int _neg_ok(self, int q, i64* pos, i64* lab, i64 m, i64 from_row) noexcept nogil
    cdef int _neg_iter_ok(self, int q, i64* pos, i64* lab, i64 m, i64 from_row) noexcept nogil
    cdef int _neg_region(self, int q, int sub, i64* pos, i64* lab, i64 m, i64 lo_r, i64 hi_r,
                         bint has_lo, bint has_hi, i64 from_row) noexcept nogil

    cdef inline bint _label_rowlocal(self, int nlab) noexcept nogil:
        """Whether every conjunct of label nlab reads the current row only (planned mode)."""
        cdef int i
        for i in range(self.lab_conj_start[nlab], self.lab_conj_start[nlab + 1]):
            if not self.c_rowlocal[self.lab_conj[i]]:
                return False
        return True
    cdef int _neg_count(self, int q, int nlab, i64* pos, i64 m, i64 lo_r, i64 hi_r,
                        bint closed_region) noexcept nogil
    cdef void _neg_fill(self, int q, int nlab, i64 hi) noexcept nogil
    cdef int _plain_columns(self, int nlab, int* cols, int cap) noexcept nogil

    cdef inline bint _column_true(self, int col, i64 r) noexcept nogil:
        """Column col of row r is non-NULL and non-zero (as the VM reads it)."""
        if self.col_vals != NULL:
            return not self.col_nulls[col][r] and self.col_vals[col][r] != 0.0
        return not self.nulls[col * self.n_rows + r] and \
            self.vals[col * self.n_rows + r] != 0.0
    cdef int _neg_program(self, int sub, i64* pos, i64* lab, i64 m, i64 lo_r, i64 hi_r,
                          bint closed_region) noexcept nogil
    cdef int _nt_search(self, int s, int j, i64 cnt, i64 x0, i64* reg, i64 nreg, i64* tp,
                        i64* tl, i64 tm, i64* placed, i64 k) noexcept nogil
