"""R7 selection of the stored CEP matches and their output rows (MEASURES, ALL ROWS,
WITH UNMATCHED ROWS)."""
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


cdef class CepOutput(CepNot):
    cdef i64* _order(self, int lo, int hi, i64* n_out) noexcept nogil
    cdef MatchOrder _match_order(self, int last_first) noexcept nogil
    cdef i64 _group(self, i64* order, i64 i, i64 n, const MatchOrder* c,
                    i64* pick) noexcept nogil
    cdef int _select_ready(self) noexcept nogil
    cdef void _drop_gone(self) noexcept nogil
    cdef int _emit_ready(self, Buf* out, i64 future) noexcept nogil
    cdef i64* _untag(self, i64 o, i64 l) noexcept nogil
    cdef int _emit_unmatched(self, i64 row, Buf* out) noexcept nogil
    cdef int _emit_match(self, i64* pos, i64* lab, i64 m, i64 number, Buf* out) noexcept nogil
    cdef int _emit_measures(self, i64* pos, i64* lab, i64 m, i64 upto, Buf* out) noexcept nogil
    cdef void _fold_take(self, i64* run, i64 r, int label) noexcept nogil
    cdef int _store_compact(self, i64* run, int seq, i64 r) noexcept nogil
    cdef int _emit_compact(self, i64* rec, i64 l, i64 number, Buf* out) noexcept nogil
