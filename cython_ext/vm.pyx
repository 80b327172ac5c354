# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The condition VM's exact lane set-up and the ConditionHost interface, compiled once
(cepsql/_ext/vm.pxd declares them and holds the inline interpreter)."""
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport memcpy

import numpy as np
cimport numpy as cnp

cnp.import_array()


cdef object _int128(x_i128 v):
    """A 128-bit value as a Python int."""
    cdef long long lo = <long long> v   # the low 64 bits (two's complement)
    cdef long long hi = <long long> (v >> 64)
    return (int(hi) << 64) | (int(lo) & ((1 << 64) - 1))


cdef int _lane_init(ExactLane* x, int stack) noexcept nogil:
    """A lane for a value stack of `stack` slots; nonzero when out of memory."""
    cdef int i
    x.xs = <x_i128*> malloc((stack + 8) * sizeof(x_i128))
    x.consts = <x_i128*> calloc(1, sizeof(x_i128))
    x.n_consts = 0
    x.cols = NULL
    x.ansi = 1
    x.error = 0
    for i in range(ERR_WORDS):
        x.err_ins[i] = 0
    x.err_a = 0
    x.err_b = 0
    x.dlane = <int*> calloc(4, sizeof(int))
    x.mlane = <int*> calloc(4, sizeof(int))
    return x.xs == NULL or x.consts == NULL or x.dlane == NULL or x.mlane == NULL


cdef void _lane_free(ExactLane* x) noexcept nogil:
    free(x.xs)
    free(x.consts)
    free(x.dlane)
    free(x.mlane)
    x.xs = NULL
    x.consts = NULL
    x.dlane = NULL
    x.mlane = NULL


cdef int* _int_copy(object arr) except NULL:
    cdef cnp.ndarray a = np.ascontiguousarray(arr, dtype=np.int32).ravel()
    cdef int* p = <int*> calloc(max(a.shape[0], 4), sizeof(int))
    if p == NULL:
        raise MemoryError("cepsql condition VM ran out of memory")
    if a.shape[0]:
        memcpy(p, cnp.PyArray_DATA(a), a.shape[0] * sizeof(int))
    return p


cdef void _lane_set_consts(ExactLane* x, object consts, int ansi, object dlane,
                           object mlane) except *:
    """consts: int64[n, 2] (little-endian halves of each 128-bit constant); dlane, mlane:
    int32[n, 4] lanes of the DEFINE and MEASURES aggregates."""
    cdef cnp.ndarray c = np.ascontiguousarray(consts, dtype=np.int64).reshape(-1, 2)
    free(x.dlane)
    free(x.mlane)
    x.dlane = x.mlane = NULL
    x.dlane = _int_copy(dlane)
    x.mlane = _int_copy(mlane)
    free(x.consts)
    x.n_consts = c.shape[0]
    x.consts = <x_i128*> malloc(max(x.n_consts, 1) * sizeof(x_i128))
    if x.consts == NULL:
        x.n_consts = 0
        raise MemoryError("cepsql condition VM ran out of memory")
    if x.n_consts:
        memcpy(x.consts, cnp.PyArray_DATA(c), x.n_consts * sizeof(x_i128))
    x.ansi = ansi


cdef class ConditionHost:
    """Base of the evaluators that run the condition VM (the SQL:2016 matcher and the CEP
    matcher); as a VM the shared DAG calls, the base accepts nothing."""

    def _set_exact(self, consts, int ansi, dlane, mlane):
        """Exact constants (int64[n, 2] halves of 128-bit values), the ANSI flag, and
        the lanes (int32[n, 4]) of the DEFINE and MEASURES aggregates."""
        _lane_set_consts(&self.xl, consts, ansi, dlane, mlane)

    def set_exact_columns(self, cols):
        """The exact column matrix for the next run: int64[n_columns, n_rows, 2], the
        128-bit value of every exact-lane column (other columns' rows are unused)."""
        cdef cnp.ndarray c = np.ascontiguousarray(cols, dtype=np.int64)
        self.xcols_ref = c
        self.xl.cols = <const x_i128*> cnp.PyArray_DATA(c) if c.size else NULL

    def vm_error(self):
        """The first runtime error of the condition VM since the last call, cleared: 0 for
        none, else (code, words, a, b): its VM_ERR_* code, the failing instruction's words
        (opcode and immediates, or an aggregate's; all 0 when unknown) and its operands
        (runtime.worker.raise_vm_error words Spark's error from them)."""
        err = self.xl.error
        self.xl.error = 0
        if err == 0:
            return 0
        words = tuple(self.xl.err_ins[i] for i in range(ERR_WORDS))
        a, b = _int128(self.xl.err_a), _int128(self.xl.err_b)
        for i in range(ERR_WORDS):
            self.xl.err_ins[i] = 0
        return err, words, a, b

    cdef bint eval_explicit(self, int c, int label, i64* pos, i64* lab, i64 m, i64 r,
                            i64 ps, i64 pe) noexcept nogil:
        return False
