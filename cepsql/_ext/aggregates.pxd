"""Aggregates over pattern variables, shared by the SQL:2016 matcher and the CEP
evaluators: the running state of one aggregate, a row step, and the value.

State: AGG_W i64 words per aggregate, zeroed at the start of a match attempt:
  [0] rows  [1] non-NULL rows  [2:4] sum (128-bit, or a double in [2]; a BIGINT sum
  keeps Spark's 64-bit running sum in [2], wrapped, and in [3] whether it overflowed at
  any row: Spark's Add raises there under ANSI and wraps without it)
  [4:6] the min or max (128-bit or double; MEASURES keep its row in [4])
  AVG over integers keeps Spark's double sum (input order) in [4].
lane (aggregate_exact in conditions.py): exact, argument scale, result scale, result
precision (0: BIGINT, wrapped or checked at 64 bits; -1: AVG of integers, a double).
A new aggregate function adds its code to A_* (and aggregates.FUNC_CODES), its step to
_agg_step and its value to _agg_value; more state words need a larger AGG_W.

All `inline`: the steps run inside each evaluator's no-GIL take loop.
"""
from libc.string cimport memcpy
from libc.math cimport sqrt

from cepsql._ext.buffers cimport i64, Buf, buf_push, NULL_BITS, _bits_to_double, _double_to_bits
from cepsql._ext.vm cimport *

cdef enum: AGG_W = 6
# Spark's variance family (DEFINE): [1] non-NULL rows, [2] mean and [3] m2 as doubles,
# updated row by row as Spark's CentralMomentAgg does
cdef enum: A_VAR_SAMP = 7
cdef enum: A_VAR_POP = 8
cdef enum: A_STDDEV_SAMP = 9
cdef enum: A_STDDEV_POP = 10
# max_by/min_by (DEFINE): [1] non-NULL orderings, [2:4] the extreme ordering (128-bit or
# a double), [4:6] the value at its row (128-bit, NULL: high word NULL_HI; or a double in
# [4] with [5] = 1 for NULL). lane: ordering exact, ordering scale, value column, value
# exact. The evaluators step them with _agg_step_by (two columns).
cdef enum: A_MAX_BY = 11
cdef enum: A_MIN_BY = 12
# DISTINCT (DEFINE): a flag on the function code. Such an aggregate keeps no running
# state: the evaluator lists the rows matched so far (its history / explicit match) and
# _agg_distinct folds the first row of each distinct non-NULL value. lane[0] tells the
# lane the column's values are in (COUNT too).
cdef enum: A_DISTINCT = 64
# element_at(array_agg(x), i) (DEFINE): listed like DISTINCT; lane: column exact, the
# 1-based index (negative: from the end), 0, NULL out of range even under ANSI
cdef enum: A_ELEMENT = 13
cdef enum: VM_ERR_INDEX = 4  # element_at out of range under ANSI (worker.raise_vm_error)


cdef inline bint _agg_listed(int func) noexcept nogil:
    """Whether a DEFINE aggregate is computed from the listed rows (no running state)."""
    return (func & A_DISTINCT) != 0 or func == A_ELEMENT
cdef extern from *:
    """
    #define CEPSQL_NULL_HI (-0x7FFFFFFFFFFFFFFFLL - 1)
    """
    const i64 NULL_HI "CEPSQL_NULL_HI"   # high word of a NULL exact MEASURES value

cdef extern from "exact128.h" nogil:
    x_i128 X_SUM_OVERFLOW
    void x_sum_add(x_i128* s, x_i128 v)
    bint __builtin_add_overflow(i64 a, i64 b, i64* out)


cdef inline x_i128 _get128(const i64* w) noexcept nogil:
    cdef x_i128 v
    memcpy(&v, w, 16)
    return v


cdef inline void _put128(i64* w, x_i128 v) noexcept nogil:
    memcpy(w, &v, 16)


cdef inline void _moment_step(i64* a, double x) noexcept nogil:
    """One non-NULL row of Spark's CentralMomentAgg update (n, mean, m2)."""
    cdef double new_n = <double> (a[1] + 1)
    cdef double mean = _bits_to_double(a[2])
    cdef double delta = x - mean
    cdef double delta_n = delta / new_n
    a[2] = _double_to_bits(mean + delta_n)
    a[3] = _double_to_bits(_bits_to_double(a[3]) + delta * (delta - delta_n))
    a[1] += 1


cdef inline void _moment_value(const i64* a, int func, double* dv,
                               unsigned char* isnull) noexcept nogil:
    """Spark's variance/stddev from the state (a[1] > 0): the sample forms are NULL over
    one row."""
    cdef double n = <double> a[1]
    cdef double var
    cdef bint sample = func == A_VAR_SAMP or func == A_STDDEV_SAMP
    if sample and n == 1.0:
        isnull[0] = 1
        return
    var = _bits_to_double(a[3]) / (n - 1.0 if sample else n)
    dv[0] = sqrt(var) if (func == A_STDDEV_SAMP or func == A_STDDEV_POP) else var


cdef inline void _agg_step(i64* a, int func, const int* lane, const double* dcol,
                           const x_i128* xcol, const unsigned char* ncol, i64 row,
                           bint by_row) noexcept nogil:
    """Add row to the state a. dcol/xcol/ncol: the column's lanes and nulls (NULL for
    COUNT(*)). by_row: min/max keep the row (MEASURES) instead of the value."""
    cdef double d
    cdef x_i128 x
    a[0] += 1
    if ncol == NULL or ncol[row]:
        return
    if func == A_COUNT:  # counts non-null rows only: no value lane is read
        a[1] += 1
        return
    if func >= A_VAR_SAMP:
        _moment_step(a, x_to_double(xcol[row], lane[1]) if lane[0] else dcol[row])
        return
    if lane[0]:
        x = xcol[row]
        if func == A_MIN or func == A_MAX:
            if by_row:
                if a[1] == 0 or (x < xcol[a[4]] if func == A_MIN else x > xcol[a[4]]):
                    a[4] = row
            elif a[1] == 0 or (x < _get128(a + 4) if func == A_MIN else x > _get128(a + 4)):
                _put128(a + 4, x)
        elif func == A_AVG and lane[3] < 0:
            a[4] = _double_to_bits(_bits_to_double(a[4]) + x_to_double(x, 0))
        elif lane[3] == 0:  # SUM of integers, AVG of a day-time interval: 64-bit sums
            if __builtin_add_overflow(a[2], <i64> xcol[row], &a[2]):
                a[3] = 1
        elif func == A_SUM or func == A_AVG:
            x = _get128(a + 2)
            x_sum_add(&x, xcol[row])
            _put128(a + 2, x)
    else:
        d = dcol[row]
        if func == A_MIN or func == A_MAX:
            if by_row:
                if a[1] == 0 or _dcmp(d, dcol[a[4]]) * (1 if func == A_MAX else -1) > 0:
                    a[4] = row
            elif a[1] == 0 or _dcmp(d, _bits_to_double(a[4])) * (1 if func == A_MAX else -1) > 0:
                a[4] = _double_to_bits(d)
        else:
            a[2] = _double_to_bits(_bits_to_double(a[2]) + d)
    a[1] += 1


cdef inline void _agg_step_by(i64* a, int func, const int* lane, const double* ycol,
                              const x_i128* yxcol, const unsigned char* yncol,
                              const double* vcol, const x_i128* vxcol,
                              const unsigned char* vncol, i64 row) noexcept nogil:
    """max_by/min_by: row's ordering y replaces the extreme when it is not NULL and not
    worse (Spark's MaxBy/MinBy keep the newer row on ties); its value goes with it."""
    cdef int c = 1
    cdef x_i128 y
    a[0] += 1
    if yncol[row]:
        return
    if a[1] > 0:
        if lane[0]:
            y = _get128(a + 2)
            c = (yxcol[row] > y) - (yxcol[row] < y)
        else:
            c = _dcmp(ycol[row], _bits_to_double(a[2]))
        if func == A_MIN_BY:
            c = -c
    if c >= 0:
        if lane[0]:
            _put128(a + 2, yxcol[row])
        else:
            a[2] = _double_to_bits(ycol[row])
        if lane[3]:
            if vncol[row]:
                a[4] = 0
                a[5] = NULL_HI
            else:
                _put128(a + 4, vxcol[row])
        else:
            a[4] = _double_to_bits(vcol[row])
            a[5] = vncol[row]
    a[1] += 1


cdef inline void _agg_value(const i64* a, int func, const int* lane, ExactLane* xl,
                            double* dv, x_i128* xv, unsigned char* isnull) noexcept nogil:
    """The aggregate's value in its result lane (min/max as stored: value or row)."""
    cdef x_i128 s = 0
    cdef int st = XS_OK
    cdef int before
    isnull[0] = 0
    dv[0] = 0.0
    xv[0] = 0
    if func == A_COUNT_STAR or func == A_COUNT:
        xv[0] = a[0] if func == A_COUNT_STAR else a[1]
        dv[0] = <double> xv[0]
        return
    if a[1] == 0:
        isnull[0] = 1
        return
    if func == A_MAX_BY or func == A_MIN_BY:
        if (a[5] == NULL_HI) if lane[3] else (a[5] != 0):
            isnull[0] = 1
        elif lane[3]:
            xv[0] = _get128(a + 4)
        else:
            dv[0] = _bits_to_double(a[4])
        return
    if func >= A_VAR_SAMP:
        _moment_value(a, func, dv, isnull)
        return
    if func == A_MIN or func == A_MAX:
        if lane[0]:
            xv[0] = _get128(a + 4)
        else:
            dv[0] = _bits_to_double(a[4])
        return
    if not lane[0]:
        dv[0] = _bits_to_double(a[2])
        if func == A_AVG:
            dv[0] = dv[0] / a[1]
        return
    if func == A_AVG and lane[3] < 0:
        dv[0] = _bits_to_double(a[4]) / a[1]
        return
    if func == A_SUM and lane[3] == 0:
        xv[0] = a[2]
        if a[3] and xl.ansi:
            before = xl.error
            _lane_fail(xl, XS_OVERFLOW, isnull)
            _agg_error_at(xl, before, func, lane, a[2])
            xv[0] = 0
        return
    if func == A_AVG and lane[3] == 0:
        # a day-time interval: Spark adds in 64 bits and overflows whatever the ANSI mode
        # (INTERVAL_ARITHMETIC_OVERFLOW), then divides rounding HALF_UP (1 and 2 us: 2 us)
        if a[3]:
            isnull[0] = 1
            if xl.error == 0:
                xl.error = VM_ERR_INTERVAL_OVERFLOW
        else:  # the mean of 64-bit values fits 19 digits
            x_dec_div(a[2], 0, a[1], 0, 0, 19, xv)
        return
    s = _get128(a + 2)
    if s == X_SUM_OVERFLOW:
        st = XS_OVERFLOW
    elif func == A_SUM:
        if lane[3] == 0:
            st = x_int_fit(s, 64, not xl.ansi, xv)
        elif x_dec_rescale(s, lane[1], lane[2], lane[3], xv) != XS_OK:
            st = XS_OVERFLOW
    else:
        st = x_dec_div(s, lane[1], a[1], 0, lane[2], lane[3], xv)
    if st != XS_OK:
        before = xl.error
        _lane_fail(xl, st, isnull)
        _agg_error_at(xl, before, func, lane, s)
        xv[0] = 0


cdef inline void _agg_error_at(ExactLane* xl, int before, int func, const int* lane,
                               x_i128 value) noexcept nogil:
    """Note an aggregate's error as the failing "instruction" (vm._error_at): X_AGG, -1,
    the function, its lane, and the value that did not fit (X_SUM_OVERFLOW: unknown)."""
    cdef int ins[7]
    cdef int i
    ins[0] = X_AGG
    ins[1] = -1
    ins[2] = func
    for i in range(4):
        ins[3 + i] = lane[i]
    _error_at(xl, before, ins, 7, value, 0)


cdef inline int _push_aggregate(Buf* out, const i64* a, int func, const int* lane,
                                ExactLane* xl) noexcept nogil:
    """Two output words of a MEASURES aggregate: COUNT, or the row of MIN/MAX (-1 NULL),
    or a double's bits (NULL_BITS), or an exact value's 128 bits (NULL: high word
    INT64_MIN, which no 38-digit value has)."""
    cdef double d
    cdef x_i128 x
    cdef unsigned char isnull
    if func == A_MIN or func == A_MAX:
        return buf_push(out, a[4] if a[1] > 0 else -1) or buf_push(out, 0)
    _agg_value(a, func, lane, xl, &d, &x, &isnull)
    if func == A_COUNT_STAR or func == A_COUNT:
        return buf_push(out, <i64> x) or buf_push(out, 0)
    if lane[0] and lane[3] >= 0:
        if isnull:
            return buf_push(out, 0) or buf_push(out, NULL_HI)
        return buf_push(out, <i64> x) or buf_push(out, <i64> (x >> 64))
    return buf_push(out, NULL_BITS if isnull else _double_to_bits(d)) or buf_push(out, 0)


cdef inline int _push_null_aggregate(Buf* out, int func, const int* lane) noexcept nogil:
    """The two words of a NULL aggregate (unmatched rows)."""
    if func == A_SUM or func == A_AVG:
        if lane[0] and lane[3] >= 0:
            return buf_push(out, 0) or buf_push(out, NULL_HI)
        return buf_push(out, NULL_BITS) or buf_push(out, 0)
    return buf_push(out, -1) or buf_push(out, 0)


cdef inline int _label_column(int col, int label) noexcept nogil:
    """The VM column an aggregate reads on a row labelled label: col itself, or (col <=
    -2: its argument reads CLASSIFIER()) column -col - 2 + label of the block holding the
    argument's value for each label (compile.conditions, _label_block)."""
    return col if col > -2 else -col - 2 + label


cdef inline void _agg_define_row(i64* a, const int* daggs, int k, const ExactLane* xl,
                                 const double* vals, const unsigned char* nulls,
                                 i64 n_rows, i64 r, int label) noexcept nogil:
    """Add row r, labelled label, to DEFINE aggregate k's running state a (daggs: set,
    function, column per aggregate; the VM's column matrices, n_rows rows per column)."""
    cdef int func = daggs[k * 3 + 1]
    cdef int col = _label_column(daggs[k * 3 + 2], label)
    cdef i64 base = col * n_rows
    cdef const int* lane = xl.dlane + 4 * k
    cdef i64 vbase
    if _agg_listed(func):
        return  # evaluated over the listed rows (_agg_distinct)
    if func == A_MAX_BY or func == A_MIN_BY:
        vbase = _label_column(lane[2], label) * n_rows
        _agg_step_by(a, func, lane, vals + base, xl.cols + base, nulls + base,
                     vals + vbase, xl.cols + vbase, nulls + vbase, r)
    elif col < 0:
        _agg_step(a, func, lane, NULL, NULL, NULL, r, 0)
    else:
        _agg_step(a, func, lane, vals + base, xl.cols + base, nulls + base, r, 0)


cdef inline bint _same_value(const int* lane, const double* dcol, const x_i128* xcol,
                             i64 r1, i64 r2) noexcept nogil:
    """Spark's DISTINCT equality of two non-NULL values: exact (128-bit) on the exact
    lane; doubles with NaN = NaN and -0.0 = 0.0 (NormalizeFloatingNumbers); string ranks."""
    cdef double a, b
    if lane[0]:
        return xcol[r1] == xcol[r2]
    a = dcol[r1]
    b = dcol[r2]
    return a == b or (a != a and b != b)


cdef inline void _agg_distinct(i64* rows, const i64* labs, i64 n, const int* daggs, int k,
                               ExactLane* xl, const double* vals, const unsigned char* nulls,
                               i64 n_rows, double* dv, x_i128* xv,
                               unsigned char* isnull) noexcept nogil:
    """DEFINE aggregate k (DISTINCT, or ELEMENT) over rows[0..n) in match order, labelled
    labs[0..n) (a CLASSIFIER() column block reads each row's label's column): each
    distinct non-NULL value is stepped once, at its first row (ELEMENT: the non-NULL, or
    distinct, values are kept and the index picks one). rows is scratch: it is turned
    into cells of the column matrices (column * n_rows + row) and its prefix is
    overwritten with the cells kept. O(n * distinct values)."""
    cdef bint distinct = (daggs[k * 3 + 1] & A_DISTINCT) != 0
    cdef int func = daggs[k * 3 + 1] & ~A_DISTINCT
    cdef int code = daggs[k * 3 + 2]
    cdef const int* lane = xl.dlane + 4 * k
    cdef const double* dcol = vals
    cdef const x_i128* xcol = xl.cols
    cdef const unsigned char* ncol = nulls
    cdef i64 i, j, kept = 0, row
    cdef i64 a[AGG_W]
    for i in range(AGG_W):
        a[i] = 0
    for i in range(n):
        rows[i] += _label_column(code, <int> labs[i]) * n_rows
    for i in range(n):
        row = rows[i]
        if ncol[row]:
            continue
        j = 0
        while distinct and j < kept and not _same_value(lane, dcol, xcol, rows[j], row):
            j += 1
        if distinct and j < kept:
            continue
        rows[kept] = row
        kept += 1
        if func != A_ELEMENT:
            _agg_step(a, func, lane, dcol, xcol, ncol, row, 0)
    if func != A_ELEMENT:
        _agg_value(a, func, lane, xl, dv, xv, isnull)
        return
    j = lane[1] - 1 if lane[1] > 0 else kept + lane[1]
    dv[0] = 0.0
    xv[0] = 0
    isnull[0] = 0
    if j < 0 or j >= kept:
        isnull[0] = 1
        if xl.ansi and not lane[3] and xl.error == 0:
            xl.error = VM_ERR_INDEX
    elif lane[0]:
        xv[0] = xcol[rows[j]]
    else:
        dv[0] = dcol[rows[j]]
