"""The condition VM: the pure stack instructions of DEFINE / MEASURES programs, shared by
the SQL:2016 matcher and the CEP evaluators. Loads (columns, CLASSIFIER, aggregates,
MATCH_NUMBER) differ per evaluator and stay in their own _eval.

Every stack slot has a null flag and two lanes: a double (DOUBLE/FLOAT, booleans,
string ranks) and an exact 128-bit integer (integral types, DECIMAL unscaled,
TIMESTAMP microseconds, DATE days, day-time intervals). The compiler knows each
slot's Spark type and emits typed instructions with the scales and precisions as
immediates, so no instruction inspects a type at run time (see exact128.h).

The interpreter (_stack_op and what it calls) is `inline` so every evaluator's no-GIL
loop compiles it in place (a cross-module call per instruction would cost); the lane's
set-up lives once in vm.pyx.
"""
from libc.math cimport fabs, sqrt, log, exp, floor, ceil, pow, log10, fmod, ldexp, trunc

from cepsql._ext.buffers cimport i64

# condition opcodes and aggregate function codes: compile/opcodes.py is the Python side (tests/test_opcodes.py
# checks the two agree)
cdef enum: C_CONST = 0
cdef enum: C_NULL = 1
cdef enum: C_LOAD = 2
cdef enum: C_LOAD_CLS = 3
cdef enum: C_MATCHNO = 4
cdef enum: C_AGG = 5
cdef enum: C_ADD = 10
cdef enum: C_SUB = 11
cdef enum: C_MUL = 12
cdef enum: C_DIV = 13
cdef enum: C_MOD = 14
cdef enum: C_NEG = 15
cdef enum: C_EQ = 20
cdef enum: C_NE = 21
cdef enum: C_LT = 22
cdef enum: C_LE = 23
cdef enum: C_GT = 24
cdef enum: C_GE = 25
cdef enum: C_AND = 30
cdef enum: C_OR = 31
cdef enum: C_NOT = 32
cdef enum: C_ISNULL = 33
cdef enum: C_ISNOTNULL = 34
cdef enum: C_JUMP = 40
cdef enum: C_JUMP_IF_NOT_TRUE = 41
cdef enum: C_JUMP_IF_NOT_NULL = 42
cdef enum: C_POP = 43
cdef enum: C_SHORT_AND = 44   # target: FALSE on top decides AND (kept), else go on
cdef enum: C_SHORT_OR = 45    # target: TRUE on top decides OR (kept), else go on
cdef enum: C_FUNC1 = 50
cdef enum: C_FUNC2 = 51
cdef enum: C_GREATEST = 52
cdef enum: C_LEAST = 53
cdef enum: C_TO_FLOAT = 54    # round the double lane to float32 (Spark's FLOAT results)
cdef enum: C_TO_INT = 55      # width: DOUBLE/FLOAT -> integral (Spark's CAST)
cdef enum: C_ROUND = 56       # digits, half_even, to_float: Spark's round/bround of a double
cdef enum: C_TO_LONG = 57     # floor/ceil's DOUBLE -> BIGINT (MathUtils.doubleToLong)
cdef enum: C_RAISE_IF = 58    # error: pop a boolean; TRUE is that run error (ANSI checks)
# exact lane (immediates after the opcode)
cdef enum: X_CONST = 60      # k
cdef enum: X_LOAD = 61       # column, ref (evaluator)
cdef enum: X_AGG = 62        # aggregate (evaluator)
cdef enum: X_DEC = 63        # op, sa, sb, sr, pr, pos: decimal + - * / % pmod
cdef enum: X_INT = 64        # op, width, kind (XK_*), pos: integral + - * % pmod at the width
cdef enum: X_NEG = 65        # width (0: decimal, never overflows), pos
cdef enum: X_CMP = 66        # op (0 = .. 5 >=), sa, sb
cdef enum: X_TO_DOUBLE = 67  # scale
cdef enum: X_RESCALE = 68    # sa, sr, pr (HALF_UP when dropping digits)
cdef enum: X_EXTREME = 69    # n, greatest (1) / least (0), same scale
cdef enum: X_ROUND = 70      # mode (0 half up, 1 floor, 2 ceil), sa, sr, pr: to scale sr
cdef enum: X_ABS = 71        # width (0: decimal), pos
cdef enum: X_SIGN = 72       # -> double lane
cdef enum: X_TO_BOOL = 73    # exact -> double-lane boolean (x != 0)
cdef enum: X_TO_FLOAT = 74   # scale: exact -> double lane, correctly rounded to float32
cdef enum: X_TO_INT = 75     # scale, width: truncate toward zero, fit the width (CAST)
# arithmetic sub-ops of X_DEC / X_INT
cdef enum: XO_ADD = 0
cdef enum: XO_SUB = 1
cdef enum: XO_MUL = 2
cdef enum: XO_DIV = 3
cdef enum: XO_MOD = 4
cdef enum: XO_PMOD = 5
# X_INT operand kinds: what an overflow is (pos: the expression's offset in the SQL, -1)
cdef enum: XK_INTEGRAL = 0   # NULL, or an error under ANSI
cdef enum: XK_INTERVAL = 1   # interval +- interval: INTERVAL_ARITHMETIC_OVERFLOW in any mode
cdef enum: XK_LONG = 2       # timestamp +- interval, interval * n: Java's long overflow, any mode
# VM runtime errors (ANSI mode); without ANSI an overflow or a division by zero is NULL
cdef enum: VM_ERR_OVERFLOW = 1
cdef enum: VM_ERR_DIV_ZERO = 2
cdef enum: VM_ERR_CAST_OVERFLOW = 3
cdef enum: VM_ERR_INTERVAL_OVERFLOW = 5  # day-time interval arithmetic or sum (any ANSI mode)
cdef enum: VM_ERR_LONG_OVERFLOW = 6      # XK_LONG arithmetic (any ANSI mode)
cdef enum: ERR_WORDS = 8                 # ExactLane.err_ins: the failing instruction's words

cdef extern from "exact128.h" nogil:
    ctypedef long long x_i128 "__int128"
    int XS_OK, XS_OVERFLOW, XS_DIV_ZERO
    int x_dec_add(x_i128 a, int sa, x_i128 b, int sb, int subtract, int sr, int pr, x_i128* out)
    int x_dec_mul(x_i128 a, int sa, x_i128 b, int sb, int sr, int pr, x_i128* out)
    int x_dec_div(x_i128 a, int sa, x_i128 b, int sb, int sr, int pr, x_i128* out)
    int x_dec_mod(x_i128 a, int sa, x_i128 b, int sb, int sr, int pr, x_i128* out)
    int x_dec_cmp(x_i128 a, int sa, x_i128 b, int sb)
    int x_dec_rescale(x_i128 a, int sa, int sr, int pr, x_i128* out)
    int x_dec_round(x_i128 a, int sa, int sr, int mode, int pr, x_i128* out)
    int x_int_fit(x_i128 v, int width, int wrap, x_i128* out)
    int x_int_op(int op, x_i128 a, x_i128 b, int width, int wrap, x_i128* out)
    double x_to_double(x_i128 v, int scale)
    float x_to_float(x_i128 v, int scale)
    int x_dec_trunc(x_i128 a, int sa, x_i128* out)


cdef extern from "spark_round.h" nogil:
    double x_spark_round(double x, int digits, int half_even, int to_float)



cdef struct ExactLane:
    x_i128* xs              # exact lane of the value stack
    x_i128* consts          # exact constants
    int n_consts
    const x_i128* cols      # exact column matrix [column, row] (evaluator sets per run)
    int ansi                # spark.sql.ansi.enabled: overflow / division by zero raise
    int error               # first runtime error of the run (VM_ERR_*), 0 = none
    # where that error arose, for Spark's words and the expression's position
    # (worker.raise_vm_error): the instruction's words (opcode, immediates; an aggregate:
    # X_AGG, -1, its function, its lane) and its operands
    int err_ins[ERR_WORDS]
    x_i128 err_a
    x_i128 err_b
    int* dlane              # DEFINE aggregates: exact, arg scale, result scale, precision
    int* mlane              # MEASURES aggregates, likewise


cdef int _lane_init(ExactLane* x, int stack) noexcept nogil
cdef void _lane_free(ExactLane* x) noexcept nogil
cdef void _lane_set_consts(ExactLane* x, object consts, int ansi, object dlane, object mlane) except *


cdef class ConditionHost:
    """An evaluator running the condition VM: its exact lane and the methods the Python
    side sets it up with (both matchers), and a VM another evaluator may call (the
    shared DAG calls the owner pattern's CepMatcher): a typed virtual call instead of raw
    addresses."""
    cdef ExactLane xl            # exact lane of the stack, constants and columns
    cdef object xcols_ref        # keeps the exact column matrix alive during a run
    cdef bint eval_explicit(self, int c, int label, i64* pos, i64* lab, i64 m, i64 r,
                            i64 ps, i64 pe) noexcept nogil


cdef inline bint _lane_fail(ExactLane* x, int status, unsigned char* isnull) noexcept nogil:
    """An overflow or a division by zero: NULL, and an error for the run under ANSI."""
    isnull[0] = 1
    if x.ansi and x.error == 0:
        x.error = VM_ERR_DIV_ZERO if status == XS_DIV_ZERO else VM_ERR_OVERFLOW
    return 0


cdef inline void _error_at(ExactLane* x, int before, const int* ins, int n, x_i128 a,
                           x_i128 b) noexcept nogil:
    """Keep the failing instruction (its n words) and its operands when it raised the
    run's first error (before: the error until then)."""
    cdef int i
    if before != 0 or x.error == 0:
        return
    for i in range(ERR_WORDS):
        x.err_ins[i] = ins[i] if i < n else 0
    x.err_a = a
    x.err_b = b


cdef inline bint _cast_fail(ExactLane* x, unsigned char* isnull) noexcept nogil:
    """A CAST that overflows its integral type: NULL, an error for the run under ANSI."""
    isnull[0] = 1
    if x.ansi and x.error == 0:
        x.error = VM_ERR_CAST_OVERFLOW
    return 0


cdef inline x_i128 _double_to_int(double v, int width, ExactLane* xl,
                                  unsigned char* isnull) noexcept nogil:
    """Spark's CAST of a DOUBLE (or FLOAT) to an integral type. ANSI: an overflow (or NaN)
    is an error, tested as floor/ceil against the bounds in double (so 2^63 still casts
    to BIGINT's maximum). Otherwise the JVM's conversion: saturate to INT (BIGINT for
    BIGINT), NaN -> 0, then keep the low bits for SMALLINT/TINYINT."""
    cdef double hi = ldexp(1.0, width - 1) - 1.0, lo = -ldexp(1.0, width - 1)
    cdef double top = ldexp(1.0, 63 if width == 64 else 31)
    cdef x_i128 r
    if xl.ansi and (v != v or floor(v) > hi or ceil(v) < lo):
        _cast_fail(xl, isnull)
        return 0
    if v != v:
        return 0
    if v >= top:
        r = ((<x_i128> 1) << (63 if width == 64 else 31)) - 1
    elif v <= -top:
        r = -((<x_i128> 1) << (63 if width == 64 else 31))
    else:
        r = <x_i128> trunc(v)
    x_int_fit(r, width, 1, &r)
    return r


cdef inline x_i128 _double_to_long(double v, ExactLane* xl,
                                   unsigned char* isnull) noexcept nogil:
    """floor/ceil's result as Spark's BIGINT (MathUtils.doubleToLong): NaN -> 0; beyond
    the BIGINT range an ARITHMETIC_OVERFLOW under ANSI, else the JVM's saturation."""
    cdef double top = ldexp(1.0, 63)
    if v != v:
        return 0
    if v > top or v < -top:
        if xl.ansi:
            return _lane_fail(xl, XS_OVERFLOW, isnull)
    if v >= top:
        return ((<x_i128> 1) << 63) - 1
    if v <= -top:
        return -((<x_i128> 1) << 63)
    return <x_i128> v


cdef inline int _dcmp(double a, double b) noexcept nogil:
    """Spark's double order: NaN equals NaN and is above every other value; -0.0 = 0.0."""
    if a == a and b == b:
        return (a > b) - (a < b)
    return (a != a) - (b != b)


cdef inline double _cmp_result(int op, int c) noexcept nogil:
    """op 0..5 (= <> < <= > >=) applied to a three-way comparison c."""
    if op == 0:
        return c == 0
    if op == 1:
        return c != 0
    if op == 2:
        return c < 0
    if op == 3:
        return c <= 0
    if op == 4:
        return c > 0
    return c >= 0

cdef enum: A_COUNT_STAR = 0
cdef enum: A_COUNT = 1
cdef enum: A_SUM = 2
cdef enum: A_AVG = 3
cdef enum: A_MIN = 4
cdef enum: A_MAX = 5

cdef inline int _stack_op(int op, const int* code, int pc, double* vs, unsigned char* ns,
                          ExactLane* xl, int* sp_io) noexcept nogil:
    """Execute the stack instruction at pc; returns the next pc, or -1 when the program
    ends (a jump to -1) or the opcode is unknown."""
    cdef int sp = sp_io[0]
    cdef int n, i
    cdef double a, b, v
    cdef unsigned char na, nb
    if op >= X_CONST:
        return _exact_op(op, code, pc, vs, ns, xl, sp_io)
    if op >= C_ADD and op <= C_MOD:
        sp -= 1
        a = vs[sp - 1]
        b = vs[sp]
        na = ns[sp - 1] | ns[sp]
        if op == C_ADD:
            v = a + b
        elif op == C_SUB:
            v = a - b
        elif op == C_MUL:
            v = a * b
        elif b == 0.0:  # division by zero: NULL (an error under ANSI)
            v = 0.0
            if not na:
                _lane_fail(xl, XS_DIV_ZERO, &na)
            na = 1
        elif op == C_DIV:
            v = a / b
        else:
            v = fmod(a, b)
        vs[sp - 1] = v
        ns[sp - 1] = na
        pc += 1
    elif op == C_NEG:
        vs[sp - 1] = -vs[sp - 1]
        pc += 1
    elif op >= C_EQ and op <= C_GE:
        sp -= 1
        a = vs[sp - 1]
        b = vs[sp]
        if a == a and b == b:  # no NaN: IEEE order is Spark's order
            if op == C_EQ:
                v = a == b
            elif op == C_NE:
                v = a != b
            elif op == C_LT:
                v = a < b
            elif op == C_LE:
                v = a <= b
            elif op == C_GT:
                v = a > b
            else:
                v = a >= b
        else:
            v = _cmp_result(op - C_EQ, (a != a) - (b != b))
        vs[sp - 1] = v
        ns[sp - 1] = ns[sp - 1] | ns[sp]
        pc += 1
    elif op == C_AND:
        sp -= 1
        na = ns[sp - 1]
        nb = ns[sp]
        # false wins over null
        if (not na and vs[sp - 1] == 0.0) or (not nb and vs[sp] == 0.0):
            vs[sp - 1] = 0.0
            ns[sp - 1] = 0
        elif na or nb:
            ns[sp - 1] = 1
        else:
            vs[sp - 1] = 1.0
        pc += 1
    elif op == C_OR:
        sp -= 1
        na = ns[sp - 1]
        nb = ns[sp]
        if (not na and vs[sp - 1] != 0.0) or (not nb and vs[sp] != 0.0):
            vs[sp - 1] = 1.0
            ns[sp - 1] = 0
        elif na or nb:
            ns[sp - 1] = 1
        else:
            vs[sp - 1] = 0.0
        pc += 1
    elif op == C_NOT:
        vs[sp - 1] = vs[sp - 1] == 0.0
        pc += 1
    elif op == C_ISNULL:
        vs[sp - 1] = ns[sp - 1]
        ns[sp - 1] = 0
        pc += 1
    elif op == C_ISNOTNULL:
        vs[sp - 1] = not ns[sp - 1]
        ns[sp - 1] = 0
        pc += 1
    elif op == C_JUMP:
        if code[pc + 1] < 0:
            return -1
        pc = code[pc + 1]
    elif op == C_JUMP_IF_NOT_TRUE:
        sp -= 1
        if ns[sp] or vs[sp] == 0.0:
            pc = code[pc + 1]
        else:
            pc += 2
    elif op == C_JUMP_IF_NOT_NULL:
        if not ns[sp - 1]:
            pc = code[pc + 1]
        else:
            sp -= 1
            pc += 2
    elif op == C_POP:
        sp -= 1
        pc += 1
    elif op == C_SHORT_AND or op == C_SHORT_OR:
        # Spark evaluates the right side of AND/OR only when the left does not decide,
        # so its errors (ANSI) are raised only then
        if not ns[sp - 1] and ((vs[sp - 1] != 0.0) == (op == C_SHORT_OR)):
            pc = code[pc + 1]
        else:
            pc += 2
    elif op == C_FUNC1:
        vs[sp - 1] = _func1(code[pc + 1], vs[sp - 1], &ns[sp - 1])
        pc += 2
    elif op == C_FUNC2:
        sp -= 1
        vs[sp - 1] = _func2(code[pc + 1], vs[sp - 1], vs[sp], &ns[sp - 1], ns[sp])
        pc += 2
    elif op == C_TO_FLOAT:
        vs[sp - 1] = <double> (<float> vs[sp - 1])
        pc += 1
    elif op == C_TO_INT:
        if not ns[sp - 1]:
            xl.xs[sp - 1] = _double_to_int(vs[sp - 1], code[pc + 1], xl, &ns[sp - 1])
        pc += 2
    elif op == C_ROUND:
        if not ns[sp - 1]:
            vs[sp - 1] = x_spark_round(vs[sp - 1], code[pc + 1], code[pc + 2], code[pc + 3])
        pc += 4
    elif op == C_RAISE_IF:
        sp -= 1
        if not ns[sp] and vs[sp] != 0.0 and xl.error == 0:
            xl.error = code[pc + 1]
        pc += 2
    elif op == C_TO_LONG:
        if not ns[sp - 1]:
            xl.xs[sp - 1] = _double_to_long(vs[sp - 1], xl, &ns[sp - 1])
        pc += 1
    elif op == C_GREATEST or op == C_LEAST:
        n = code[pc + 1]
        sp -= n
        na = 1
        v = 0.0
        for i in range(n):
            if not ns[sp + i]:
                if na or (op == C_GREATEST and _dcmp(vs[sp + i], v) > 0) or (
                        op == C_LEAST and _dcmp(vs[sp + i], v) < 0):
                    v = vs[sp + i]
                na = 0
        vs[sp] = v
        ns[sp] = na
        sp += 1
        pc += 2
    else:
        return -1
    sp_io[0] = sp
    return pc


cdef inline double _func1(int f, double x, unsigned char* isnull) noexcept nogil:
    if f == 0:
        return fabs(x)
    if f == 1:
        if x < 0:
            isnull[0] = 1
            return 0.0
        return sqrt(x)
    if f == 2:
        if x <= 0:
            isnull[0] = 1
            return 0.0
        return log(x)
    if f == 3:
        return exp(x)
    if f == 4:
        return floor(x)
    if f == 5:
        return ceil(x)
    if f == 6:
        return (x > 0) - (x < 0)
    if f == 7:
        if x <= 0:
            isnull[0] = 1
            return 0.0
        return log10(x)
    if f == 8:
        return -x
    return x


cdef inline double _func2(int f, double x, double y, unsigned char* isnull, unsigned char ny) noexcept nogil:
    cdef double scale, r
    isnull[0] = isnull[0] | ny
    if f == 0:
        return pow(x, y)
    if f == 1:
        # Spark's round: half away from zero
        scale = pow(10.0, y)
        r = floor(fabs(x) * scale + 0.5) / scale
        return r if x >= 0 else -r
    if y == 0.0:
        isnull[0] = 1
        return 0.0
    r = fmod(x, y)
    if f >= 3 and r < 0:  # pmod: Spark's (r + n) % n, the sum rounded to FLOAT for FLOAT
        r = fmod(<double> (<float> (r + y)) if f == 4 else r + y, y)
    return r


cdef inline int _exact_op(int op, const int* code, int pc, double* vs, unsigned char* ns,
                          ExactLane* xl, int* sp_io) noexcept nogil:
    """The exact-lane instructions (loads and aggregates excepted)."""
    cdef int sp = sp_io[0]
    cdef int n, i, st, best, before
    cdef x_i128* xs = xl.xs
    cdef x_i128 r
    cdef unsigned char na
    if op == X_CMP:
        sp -= 1
        vs[sp - 1] = _cmp_result(code[pc + 1],
                                 x_dec_cmp(xs[sp - 1], code[pc + 2], xs[sp], code[pc + 3]))
        ns[sp - 1] = ns[sp - 1] | ns[sp]
        pc += 4
    elif op == X_CONST:
        xs[sp] = xl.consts[code[pc + 1]]
        ns[sp] = 0
        sp += 1
        pc += 2
    elif op == X_DEC or op == X_INT:
        sp -= 1
        na = ns[sp - 1] | ns[sp]
        r = 0
        if not na:
            before = xl.error
            if op == X_INT:
                st = x_int_op(code[pc + 1], xs[sp - 1], xs[sp], code[pc + 2],
                              not xl.ansi and code[pc + 3] == XK_INTEGRAL, &r)
                if st == XS_OVERFLOW and code[pc + 3] != XK_INTEGRAL:
                    na = 1  # Spark raises these in any ANSI mode
                    if xl.error == 0:
                        xl.error = VM_ERR_INTERVAL_OVERFLOW if code[pc + 3] == XK_INTERVAL \
                            else VM_ERR_LONG_OVERFLOW
                elif st != XS_OK:
                    _lane_fail(xl, st, &na)
            else:
                st = _dec_op(code[pc + 1], xs[sp - 1], code[pc + 2], xs[sp], code[pc + 3],
                             code[pc + 4], code[pc + 5], &r)
                if st != XS_OK:
                    _lane_fail(xl, st, &na)
            if st != XS_OK:
                _error_at(xl, before, code + pc, 5 if op == X_INT else 7, xs[sp - 1], xs[sp])
        xs[sp - 1] = r
        ns[sp - 1] = na
        pc += 5 if op == X_INT else 7
    elif op == X_NEG or op == X_ABS:
        if not ns[sp - 1] and (op == X_NEG or xs[sp - 1] < 0):
            if code[pc + 1] == 0:
                xs[sp - 1] = -xs[sp - 1]
            elif x_int_fit(-xs[sp - 1], code[pc + 1], not xl.ansi, &r) != XS_OK:
                before = xl.error
                _lane_fail(xl, XS_OVERFLOW, &ns[sp - 1])
                _error_at(xl, before, code + pc, 3, xs[sp - 1], 0)
            else:
                xs[sp - 1] = r
        pc += 3
    elif op == X_TO_DOUBLE:
        vs[sp - 1] = x_to_double(xs[sp - 1], code[pc + 1])
        pc += 2
    elif op == X_TO_FLOAT:
        vs[sp - 1] = x_to_float(xs[sp - 1], code[pc + 1])
        pc += 2
    elif op == X_TO_INT:
        if not ns[sp - 1]:
            x_dec_trunc(xs[sp - 1], code[pc + 1], &r)
            if x_int_fit(r, code[pc + 2], not xl.ansi, &r) != XS_OK:
                _cast_fail(xl, &ns[sp - 1])
                r = 0
            xs[sp - 1] = r
        pc += 3
    elif op == X_TO_BOOL:
        vs[sp - 1] = xs[sp - 1] != 0
        pc += 1
    elif op == X_SIGN:
        vs[sp - 1] = (xs[sp - 1] > 0) - (xs[sp - 1] < 0)
        pc += 1
    elif op == X_RESCALE or op == X_ROUND:
        if not ns[sp - 1]:
            if op == X_RESCALE:
                st = x_dec_rescale(xs[sp - 1], code[pc + 1], code[pc + 2], code[pc + 3], &r)
            else:
                st = x_dec_round(xs[sp - 1], code[pc + 2], code[pc + 3], code[pc + 1],
                                 code[pc + 4], &r)
            if st != XS_OK:
                _lane_fail(xl, st, &ns[sp - 1])
                r = 0
            xs[sp - 1] = r
        pc += 4 if op == X_RESCALE else 5
    elif op == X_EXTREME:
        n = code[pc + 1]
        sp -= n
        best = -1
        for i in range(n):
            if not ns[sp + i]:
                if best < 0 or ((xs[sp + i] > xs[sp + best]) if code[pc + 2]
                                else (xs[sp + i] < xs[sp + best])):
                    best = i
        xs[sp] = xs[sp + best] if best >= 0 else 0
        ns[sp] = best < 0
        sp += 1
        pc += 3
    else:
        return -1
    sp_io[0] = sp
    return pc


cdef inline int _dec_op(int op, x_i128 a, int sa, x_i128 b, int sb, int sr, int pr,
                        x_i128* out) noexcept nogil:
    cdef int st
    if op == XO_ADD or op == XO_SUB:
        return x_dec_add(a, sa, b, sb, op == XO_SUB, sr, pr, out)
    if op == XO_MUL:
        return x_dec_mul(a, sa, b, sb, sr, pr, out)
    if op == XO_DIV:
        return x_dec_div(a, sa, b, sb, sr, pr, out)
    st = x_dec_mod(a, sa, b, sb, sr, pr, out)
    if op == XO_PMOD and st == XS_OK and out[0] < 0:  # pmod: (a % b + b) % b
        st = x_dec_add(out[0], sr, b, sb, 0, sr if sr > sb else sb, 38, out)
        if st == XS_OK:
            st = x_dec_mod(out[0], sr if sr > sb else sb, b, sb, sr, pr, out)
    return st
