"""Kleene-closure enumeration of tree plans: the one implementation both tree evaluators
use (the planned CepMatcher and the shared DAG). The walk owns the order (depth-first
over increasing rows), the admitted sizes and the window pruning; the evaluator supplies
through a ClosureWalk what differs: its window test, its element checks and what it does
with a closure (join it with the sibling's instance, hand it to the root, or make it the
context of the sibling Kleene leaf's closures). `inline`: each evaluator compiles
the walk with its own callbacks, which the C compiler then calls directly (the walk is
the hot loop of a Kleene leaf)."""
from cepsql._ext.buffers cimport i64
from cepsql._ext.interrupt cimport Countdown, interrupted

# fits(owner, lo, hi): rows lo..hi fit the window that bounds the closure
ctypedef bint (*closure_fits_fn)(void* owner, void* ctx, i64 lo, i64 hi) noexcept nogil
# check(owner, ctx, rows, n): rows[0..n) with rows[n-1] new passes the conditions (1) or not
# (0); emit(owner, ctx, rows, n): a closure of an admitted size, 0 or -1 (out of memory)
ctypedef int (*closure_rows_fn)(void* owner, void* ctx, i64* rows, i64 n) noexcept nogil


cdef struct ClosureWalk:
    void* owner            # the evaluator (borrowed for the walk)
    void* ctx              # its per-walk context
    closure_fits_fn fits
    closure_rows_fn check
    closure_rows_fn emit
    i64 lo_n               # admitted sizes: lo_n .. hi_n elements (hi_n < 0: unbounded)
    i64 hi_n
    i64 end_row            # closures must end at this row (-1: any)
    i64 xmin               # the context instance's first and last rows (-1: none)
    i64 xmax
    Countdown* ticks             # the evaluator's Ctrl-C countdown (interrupt.pxd) ...
    int* stopped           # ... and its flag, set when a signal handler raised


cdef inline i64 closure_candidates(ClosureWalk* w, i64* cand, i64 n, const i64* xrows,
                                   i64 xst, i64 xm, i64 lo_b, i64 hi_b) noexcept nogil:
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


cdef inline int walk_closures(ClosureWalk* w, const i64* cand, i64 nc, i64* idx,
                              i64* rows) noexcept nogil:
    """Every closure over the candidate rows cand[0..nc) (increasing), depth-first:
    an element is kept when w.check accepts it on the elements so far (the conditions
    read the closure RUNNING), each closure of an admitted size (ending at end_row when
    set) goes to w.emit. idx and rows hold nc + 1 entries. 0, or -1 when emit failed
    or Ctrl-C stopped the walk (w.stopped set; one row's closures can be exponential)."""
    cdef i64 depth = 0, row, tm
    cdef i64 xmin = w.xmin, xmax = w.xmax
    idx[0] = -1
    while True:
        if interrupted(w.ticks):
            w.stopped[0] = 1
            return -1
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
