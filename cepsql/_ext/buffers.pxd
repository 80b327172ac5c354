"""Growable int64 buffers and double<->int64 bit casts: the one storage idea every
evaluator shares (run NFA, SQL:2016 matcher, shared DAG). Everything here is `inline`
so each evaluator's no-GIL loops compile it in place; NULL_BITS marks a NULL double
result stored in an int64 word."""
cimport numpy as cnp
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy

ctypedef long long i64
ctypedef unsigned long long u64

cdef extern from *:
    """
    #define CEPSQL_NULL_BITS 0x7FF8DEADBEEF0001LL
    """
    const i64 NULL_BITS "CEPSQL_NULL_BITS"


cdef struct Buf:
    i64* data
    i64 n
    i64 cap


cdef inline int buf_reserve(Buf* b, i64 extra) noexcept nogil:
    """Room for `extra` more words; -1 when out of memory (b unchanged)."""
    cdef i64* p
    cdef i64 cap
    if b.n + extra <= b.cap:
        return 0
    cap = b.cap * 2 + 64
    while cap < b.n + extra:
        cap *= 2
    p = <i64*> realloc(b.data, cap * sizeof(i64))
    if p == NULL:
        return -1
    b.data = p
    b.cap = cap
    return 0


cdef inline int buf_push(Buf* b, i64 v) noexcept nogil:
    if b.n == b.cap and buf_reserve(b, 1):
        return -1
    b.data[b.n] = v
    b.n += 1
    return 0


cdef inline int grow_i64(i64** p, i64 n) noexcept nogil:
    """Resize the block *p to n words; -1 when out of memory (*p unchanged, still
    owned by the caller), unlike `p = realloc(p, ...)` which would lose it."""
    cdef i64* q = <i64*> realloc(p[0], n * sizeof(i64))
    if q == NULL:
        return -1
    p[0] = q
    return 0


cdef inline double _bits_to_double(i64 x) noexcept nogil:
    cdef double d
    memcpy(&d, &x, sizeof(double))
    return d


cdef inline i64 _double_to_bits(double d) noexcept nogil:
    cdef i64 x
    memcpy(&x, &d, sizeof(double))
    return x


cdef inline object buf_to_numpy(Buf* b, bint release):
    """The buffer's values as a new int64 numpy array (always a copy: the buffer stays
    reusable). release: the caller is done with the buffer, free its memory here (the
    buffer is left empty); otherwise it stays owned, and later freed, by its holder.
    The calling module must have run cnp.import_array()."""
    cdef cnp.npy_intp n = b.n
    cdef cnp.ndarray out = cnp.PyArray_EMPTY(1, &n, cnp.NPY_INT64, 0)
    if b.n > 0:
        memcpy(cnp.PyArray_DATA(out), b.data, b.n * sizeof(i64))
    if release:
        free(b.data)
        b.data = NULL
        b.n = 0
        b.cap = 0
    return out
