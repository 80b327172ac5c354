"""The run-based SASE+ NFA^b of CEP mode and the per-partition driver (see cep_nfa.pyx)."""
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


cdef class CepRuns(CepTree):
    cdef bint _take_ok(self, i64* run, int label, i64 r) noexcept nogil
    cdef i64 _new_node(self, i64 row, int label, i64 a, i64 b, i64 first) noexcept nogil
    cdef void _update(self, i64* st, i64 r, int label) noexcept nogil
    cdef int _push_run(self, Buf* L, i64* proto, int comp, i64 cnt, u64 closure) noexcept nogil
    cdef int _take(self, i64* run, i64 r) noexcept nogil
    cdef int _proceed_dynamic(self, i64* proto, int comp, int end, i64 node, i64 r,
                              u64 closure) noexcept nogil
    cdef int _walk(self, Buf* L, i64* proto, int j, i64 it, int end, i64 node, i64 r,
                   u64 closure, bint entered) noexcept nogil
    cdef int _enter(self, Buf* L, i64* proto, int first, i64 it, bint looped, int end,
                    i64 node, i64 r, u64 closure, u64 allow) noexcept nogil
    cdef int _cross(self, Buf* L, i64* proto, int last, i64 it, int end, i64 node, i64 r,
                    u64 closure) noexcept nogil

    cdef inline i64 _iter_class(self, i64* run) noexcept nogil:
        """Iterations that decide a run's future: beyond an unbounded group's min all
        counts are equivalent."""
        cdef int comp = <int> run[R_COMP]
        if self.g_first == NULL or self.g_first[comp] < 0:
            return 0
        if self.g_max[comp] < 0 and run[R_ITER] >= self.g_min[comp]:
            return self.g_min[comp]
        return run[R_ITER]
    cdef void _merge_fresh(self) noexcept nogil
    cdef int _emit_paths(self, i64 node, int seq, i64 last) noexcept nogil
    cdef int _paths(self, i64 node) noexcept nogil
    cdef int _finish(self, i64 m) noexcept nogil
    cdef bint _guard_takes(self, i64* run, i64 r) noexcept nogil
    cdef int _partition(self, i64 start, i64 stop) noexcept nogil
    cdef void _clear_nodes(self) noexcept nogil
    cdef int _compact(self, i64 r) noexcept nogil
    cdef void _reset(self) noexcept nogil
    cdef i64 _future_first(self) noexcept nogil
    cdef int _rebase(self, i64 d) noexcept nogil
