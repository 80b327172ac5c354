# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Stable sorting of stored CEP matches by MatchOrder (declared in match_order.pxd)."""
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport memcpy


cdef int _cmp_match(const MatchOrder* c, i64 a, i64 b) noexcept nogil:
    """Matches a and b by (last row if last_first), first row, last row, positions,
    length, label ranks; 0 only for the same assignment of rows (ranks are distinct)."""
    cdef i64 oa = c.off[a], ob = c.off[b], la = c.len[a], lb = c.len[b]
    cdef i64 x, y, i, n
    if c.last_first:
        x = c.pos[oa + la - 1]
        y = c.pos[ob + lb - 1]
        if x != y:
            return -1 if x < y else 1
    x = c.pos[oa]
    y = c.pos[ob]
    if x != y:
        return -1 if x < y else 1
    if not c.last_first:
        x = c.pos[oa + la - 1]
        y = c.pos[ob + lb - 1]
        if x != y:
            return -1 if x < y else 1
    n = la if la < lb else lb
    for i in range(n):
        if c.pos[oa + i] != c.pos[ob + i]:
            return -1 if c.pos[oa + i] < c.pos[ob + i] else 1
    if la != lb:
        return -1 if la < lb else 1
    for i in range(n):
        x = c.rank[c.lab[oa + i] & 0xFFFF]   # stored labels may carry a component tag
        y = c.rank[c.lab[ob + i] & 0xFFFF]
        if x != y:
            return -1 if x < y else 1
    return 0


cdef void _insertion_sort(i64* order, i64 lo, i64 hi, const MatchOrder* c) noexcept nogil:
    cdef i64 i, j, v
    for i in range(lo + 1, hi):
        v = order[i]
        j = i
        while j > lo and _cmp_match(c, order[j - 1], v) > 0:
            order[j] = order[j - 1]
            j -= 1
        order[j] = v


cdef void _merge(const i64* src, i64* dst, i64 lo, i64 mid, i64 hi,
                 const MatchOrder* c) noexcept nogil:
    """Merge src[lo:mid] and src[mid:hi] into dst[lo:hi]; ties take the left one."""
    cdef i64 p = lo, q = mid, k = lo
    while p < mid and q < hi:
        if _cmp_match(c, src[q], src[p]) < 0:
            dst[k] = src[q]
            q += 1
        else:
            dst[k] = src[p]
            p += 1
        k += 1
    while p < mid:
        dst[k] = src[p]
        p += 1
        k += 1
    while q < hi:
        dst[k] = src[q]
        q += 1
        k += 1


cdef inline i64 _primary_row(const MatchOrder* c, i64 a) noexcept nogil:
    """The row _cmp_match compares first: the last row (last_first) or the first."""
    if c.last_first:
        return c.pos[c.off[a] + c.len[a] - 1]
    return c.pos[c.off[a]]


cdef int _sort_matches(i64* order, i64 n, const MatchOrder* c) noexcept nogil:
    """Stable sort of match indices (equal matches keep their stored order, so the
    result does not depend on the platform's qsort); -1 when out of memory. Many
    matches over a narrow range of rows are first bucketed by the row _cmp_match
    compares first (a stable counting sort), then each bucket is merge-sorted: the same
    order as merge-sorting them all, with a fraction of the comparisons."""
    cdef i64 lo, hi, span, i, k, r, start
    cdef i64* count
    cdef i64* tmp
    if n <= 4 * SORT_RUN:
        return _merge_sort(order, n, c)
    lo = hi = _primary_row(c, order[0])
    for i in range(1, n):
        r = _primary_row(c, order[i])
        if r < lo:
            lo = r
        elif r > hi:
            hi = r
    span = hi - lo + 1
    if span > 2 * n:
        return _merge_sort(order, n, c)
    count = <i64*> calloc(span + 1, sizeof(i64))
    tmp = <i64*> malloc(n * sizeof(i64))
    if count == NULL or tmp == NULL:
        free(count)
        free(tmp)
        return -1
    for i in range(n):
        count[_primary_row(c, order[i]) - lo + 1] += 1
    for k in range(span):
        count[k + 1] += count[k]     # count[k]: the first slot of bucket k
    for i in range(n):
        k = _primary_row(c, order[i]) - lo
        tmp[count[k]] = order[i]
        count[k] += 1                # ends as the end of bucket k
    memcpy(order, tmp, n * sizeof(i64))
    free(tmp)
    start = 0
    for k in range(span):
        if count[k] - start > 1 and _merge_sort(order + start, count[k] - start, c):
            free(count)
            return -1
        start = count[k]
    free(count)
    return 0


cdef int _merge_sort(i64* order, i64 n, const MatchOrder* c) noexcept nogil:
    """Stable merge sort of match indices by _cmp_match; -1 when out of memory."""
    cdef i64 lo, width
    cdef i64* tmp
    cdef i64* src = order
    cdef i64* dst
    cdef i64* t
    lo = 0
    while lo < n:
        _insertion_sort(order, lo, lo + SORT_RUN if lo + SORT_RUN < n else n, c)
        lo += SORT_RUN
    if n <= SORT_RUN:
        return 0
    tmp = <i64*> malloc(n * sizeof(i64))
    if tmp == NULL:
        return -1
    dst = tmp
    width = SORT_RUN
    while width < n:
        lo = 0
        while lo < n:
            if lo + width >= n:
                memcpy(dst + lo, src + lo, (n - lo) * sizeof(i64))
            else:
                _merge(src, dst, lo, lo + width,
                       lo + 2 * width if lo + 2 * width < n else n, c)
            lo += 2 * width
        t = src
        src = dst
        dst = t
        width *= 2
    if src != order:
        memcpy(order, src, n * sizeof(i64))
    free(tmp)
    return 0
