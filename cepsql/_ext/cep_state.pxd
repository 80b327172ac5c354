"""Streaming state of the CEP evaluator: export and import of the open partition."""
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


cdef class CepState(CepRuns):
    cdef bint _state_consistent(self)
    cdef bint _instances_consistent(self, Buf* inst, Buf* ent)
    cdef void _reset_state_bufs(self)
    cdef void _fill_state_bufs(self, Buf** bufs)
