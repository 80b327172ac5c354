"""The planned tree evaluator of CEP mode (_set_plan) and the finishing of the shared DAG's
candidates (set_candidates)."""
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


cdef class CepTree(CepOutput):

    cdef inline bint _plain(self, int comp) noexcept nogil:
        return self.comps[comp * 4 + 2] == 1 and self.comps[comp * 4 + 3] == 1
    cdef void _plan_clear(self) noexcept nogil
    cdef int _plan_store(self, int node, i64* pos, i64* cmp, i64 m, i64 mn) noexcept nogil
    cdef void _plan_compact(self, int node, i64 r) noexcept nogil
    cdef void _plan_rebase(self, i64 d) noexcept nogil
    cdef bint _leaf_ok(self, int leaf, int label, i64 r, bint rowlocal_only) noexcept nogil
    cdef int _plan_rows(self, i64 start, i64 stop) noexcept nogil
    cdef int _ext_rows(self, i64 start, i64 stop) noexcept nogil

    cdef inline int _sibling(self, int node, int parent) noexcept nogil:
        cdef int sib = self.pl_node[parent * 5 + 1]
        return self.pl_node[parent * 5 + 2] if sib == node else sib

    cdef inline bint _is_kleene_leaf(self, int node) noexcept nogil:
        return self.pl_node[node * 5 + 3] >= 0 and not self._plain(self.pl_node[node * 5 + 3])
    cdef int _kleene_arrival(self, int leaf, i64 r) noexcept nogil
    cdef bint _reads_at(self, int node, int label) noexcept nogil
    cdef int _up(self, int node, i64* pos, i64* cmp, i64 stride, i64 m,
                 i64 mn) noexcept nogil
    cdef int _join(self, int parent, i64* ip, i64* ic, i64 ist, i64 im, i64 imin,
                   i64* jp, i64* jc, i64 jst, i64 jm, i64 jmin) noexcept nogil
    cdef int _closures(self, int leaf, i64* xp, i64* xc, i64 xst, i64 xm, i64 end_row,
                       int parent, int then_leaf, i64 then_end) noexcept nogil
    cdef int _element_ok(self, _KleeneCtx* x, i64* tp, i64 n) noexcept nogil
    cdef int _closure_done(self, _KleeneCtx* x, i64* tp, i64 n) noexcept nogil
    cdef int _plan_finish(self, int term, i64* rows, i64* cmp, i64 stride,
                          i64 m) noexcept nogil
