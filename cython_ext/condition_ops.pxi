# The pure stack instructions of the condition VM, shared (textually included) by the
# SQL:2016 matcher and the CEP evaluator. Loads (columns, CLASSIFIER, aggregates,
# MATCH_NUMBER) differ per evaluator and stay in their own _eval.

# condition opcodes (cepsql/runtime/conditions.py) and aggregate functions
# (cepsql/runtime/aggregates.py)
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
cdef enum: C_FUNC1 = 50
cdef enum: C_FUNC2 = 51
cdef enum: C_GREATEST = 52
cdef enum: C_LEAST = 53
cdef enum: A_COUNT_STAR = 0
cdef enum: A_COUNT = 1
cdef enum: A_SUM = 2
cdef enum: A_AVG = 3
cdef enum: A_MIN = 4
cdef enum: A_MAX = 5

cdef inline int _stack_op(int op, const int* code, int pc, double* vs, unsigned char* ns,
                          int* sp_io) noexcept nogil:
    """Execute the stack instruction at pc; returns the next pc, or -1 when the program
    ends (a jump to -1) or the opcode is unknown."""
    cdef int sp = sp_io[0]
    cdef int n, i
    cdef double a, b, v
    cdef unsigned char na, nb
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
        elif op == C_DIV:
            if b == 0.0:
                na = 1
                v = 0.0
            else:
                v = a / b
        else:
            if b == 0.0:
                na = 1
                v = 0.0
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
    elif op == C_FUNC1:
        vs[sp - 1] = _func1(code[pc + 1], vs[sp - 1], &ns[sp - 1])
        pc += 2
    elif op == C_FUNC2:
        sp -= 1
        vs[sp - 1] = _func2(code[pc + 1], vs[sp - 1], vs[sp], &ns[sp - 1], ns[sp])
        pc += 2
    elif op == C_GREATEST or op == C_LEAST:
        n = code[pc + 1]
        sp -= n
        na = 1
        v = 0.0
        for i in range(n):
            if not ns[sp + i]:
                if na or (op == C_GREATEST and vs[sp + i] > v) or (
                        op == C_LEAST and vs[sp + i] < v):
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


cdef double _func1(int f, double x, unsigned char* isnull) noexcept nogil:
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


cdef double _func2(int f, double x, double y, unsigned char* isnull, unsigned char ny) noexcept nogil:
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
    if f == 3 and r < 0:
        r += fabs(y)
    return r
