"""Order of the stored CEP matches (R7), re-entrant: the comparator takes its context
explicitly. libc qsort has no user pointer, so sorting through it needed module-level
state that two evaluators sorting at once (one per thread) would overwrite. Compiled once
in match_order.pyx."""
from cepsql._ext.buffers cimport i64

cdef enum: SORT_RUN = 16   # runs this short are insertion-sorted before merging


cdef struct MatchOrder:
    const i64* off      # match -> offset of its rows in pos / lab
    const i64* len      # match -> number of rows
    const i64* pos      # row positions of every stored match, concatenated
    const i64* lab      # labels, parallel to pos
    const int* rank     # label -> rank in the pattern (order of the assignments)
    int last_first      # 1: last row decides first (selection), 0: first row (numbering)


cdef int _cmp_match(const MatchOrder* c, i64 a, i64 b) noexcept nogil
cdef int _sort_matches(i64* order, i64 n, const MatchOrder* c) noexcept nogil
