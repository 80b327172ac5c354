"""Kleene-closure enumeration of tree plans: the one implementation both tree evaluators
use (the planned CepMatcher and the shared DAG). The walk owns the order (depth-first
over increasing rows), the admitted sizes and the window pruning; the evaluator supplies
through a ClosureWalk what differs: its window test, its element checks and what it does
with a closure (join it with the sibling's instance, hand it to the root, or make it the
context of the sibling Kleene leaf's closures)."""
from cepsql._ext.buffers cimport i64

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


cdef i64 closure_candidates(ClosureWalk* w, i64* cand, i64 n, const i64* xrows, i64 xst,
                            i64 xm, i64 lo_b, i64 hi_b) noexcept nogil
cdef int walk_closures(ClosureWalk* w, const i64* cand, i64 nc, i64* idx,
                       i64* rows) noexcept nogil
