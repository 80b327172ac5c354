# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Kleene-closure enumeration of tree plans (declared in cepsql/_ext/closures.pxd),
compiled once for the planned CepMatcher and the shared DAG."""


cdef i64 closure_candidates(ClosureWalk* w, i64* cand, i64 n, const i64* xrows, i64 xst,
                            i64 xm, i64 lo_b, i64 hi_b) noexcept nogil:
    """Keep in place, in order, the live element rows cand[0..n) a closure in the
    context of X (rows xrows, stride xst, xm of them) may take: strictly between the
    order bounds lo_b / hi_b (-1: none), not after end_row, not one of X's rows, and
    fitting the window with X. Returns how many are kept; 0 when none ends at end_row."""
    cdef i64 k, a, row, nc = 0
    cdef bint skip
    for k in range(n):
        row = cand[k]
        if row <= lo_b or (hi_b >= 0 and row >= hi_b):
            continue
        if w.end_row >= 0 and row > w.end_row:
            continue
        skip = False
        for a in range(xm):
            if xrows[a * xst] == row:
                skip = True
                break
        if skip:
            continue
        if xm > 0 and not w.fits(w.owner, w.ctx, w.xmin if w.xmin < row else row,
                                 w.xmax if w.xmax > row else row):
            continue
        cand[nc] = row
        nc += 1
    if nc == 0 or (w.end_row >= 0 and cand[nc - 1] != w.end_row):
        return 0
    return nc


cdef int walk_closures(ClosureWalk* w, const i64* cand, i64 nc, i64* idx,
                       i64* rows) noexcept nogil:
    """Every closure over the candidate rows cand[0..nc) (increasing), depth-first:
    an element is kept when w.check accepts it on the elements so far (the conditions
    read the closure RUNNING), each closure of an admitted size (ending at end_row when
    set) goes to w.emit. idx and rows hold nc + 1 entries. 0, or -1 when emit failed."""
    cdef i64 depth = 0, row, tm
    cdef i64 xmin = w.xmin, xmax = w.xmax
    idx[0] = -1
    while True:
        idx[depth] += 1
        if idx[depth] >= nc:
            if depth == 0:
                break
            depth -= 1
            continue
        row = cand[idx[depth]]
        rows[depth] = row
        if depth > 0 and not w.fits(w.owner, w.ctx,
                                    xmin if (xmin >= 0 and xmin < rows[0]) else rows[0],
                                    xmax if xmax > row else row):
            depth -= 1   # later candidates are later still: none fits at this depth
            continue
        tm = depth + 1
        if not w.check(w.owner, w.ctx, rows, tm):
            continue
        if tm >= w.lo_n and (w.end_row < 0 or row == w.end_row):
            if w.emit(w.owner, w.ctx, rows, tm):
                return -1
        if (w.hi_n < 0 or tm < w.hi_n) and not (w.end_row >= 0 and row == w.end_row):
            depth += 1
            idx[depth] = idx[depth - 1]
    return 0
