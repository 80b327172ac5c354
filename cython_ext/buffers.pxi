# Growable int64 output buffers and double<->int64 bit casts, shared (textually included)
# by the SQL:2016 matcher and the CEP evaluator. NULL_BITS marks a NULL double result.

cdef const i64 NULL_BITS = 0x7FF8DEADBEEF0001


cdef struct Buf:
    i64* data
    i64 n
    i64 cap


cdef inline int buf_reserve(Buf* b, i64 extra) noexcept nogil:
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


cdef inline double _bits_to_double(i64 x) noexcept nogil:
    cdef double d
    memcpy(&d, &x, sizeof(double))
    return d


cdef inline i64 _double_to_bits(double d) noexcept nogil:
    cdef i64 x
    memcpy(&x, &d, sizeof(double))
    return x


cdef object buf_to_numpy(Buf* b, bint release):
    """The buffer's values as a new int64 numpy array (always a copy: the buffer stays
    reusable). release: the caller is done with the buffer, free its memory here (the
    buffer is left empty); otherwise it stays owned, and later freed, by its holder."""
    cdef cnp.ndarray out = np.empty(b.n, dtype=np.int64)
    if b.n > 0:
        memcpy(cnp.PyArray_DATA(out), b.data, b.n * sizeof(i64))
    if release:
        free(b.data)
        b.data = NULL
        b.n = 0
        b.cap = 0
    return out
