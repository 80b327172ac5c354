"""Every number the compilers hand to the Cython evaluators, defined once on this side.

cython_ext repeats them as ``cdef enum`` constants (condition_ops.pxi, aggregate_ops.pxi,
matcher.pyx, cep.pyx, shared_dag.pyx); tests/test_opcodes.py parses those and fails
when a number here and there differ, or when cython_ext has a constant of one of these
families that is missing here. Change a number here and in cython_ext together.
"""
from __future__ import annotations

# --- condition VM (condition_ops.pxi): the double lane ------------------------------
C_CONST, C_NULL, C_LOAD, C_LOAD_CLS, C_MATCHNO, C_AGG = 0, 1, 2, 3, 4, 5
C_ADD, C_SUB, C_MUL, C_DIV, C_MOD, C_NEG = 10, 11, 12, 13, 14, 15
C_EQ, C_NE, C_LT, C_LE, C_GT, C_GE = 20, 21, 22, 23, 24, 25
C_AND, C_OR, C_NOT, C_ISNULL, C_ISNOTNULL = 30, 31, 32, 33, 34
C_JUMP, C_JUMP_IF_NOT_TRUE, C_JUMP_IF_NOT_NULL, C_POP = 40, 41, 42, 43
C_SHORT_AND, C_SHORT_OR = 44, 45
C_FUNC1, C_FUNC2, C_GREATEST, C_LEAST, C_TO_FLOAT, C_TO_INT = 50, 51, 52, 53, 54, 55
C_ROUND, C_TO_LONG, C_RAISE_IF = 56, 57, 58

# --- condition VM: the exact (128-bit) lane ------------------------------------------
X_CONST, X_LOAD, X_AGG, X_DEC, X_INT, X_NEG, X_CMP = 60, 61, 62, 63, 64, 65, 66
X_TO_DOUBLE, X_RESCALE, X_EXTREME, X_ROUND, X_ABS, X_SIGN, X_TO_BOOL = 67, 68, 69, 70, 71, 72, 73
X_TO_FLOAT, X_TO_INT = 74, 75
XO_ADD, XO_SUB, XO_MUL, XO_DIV, XO_MOD, XO_PMOD = 0, 1, 2, 3, 4, 5
#: X_DEC / X_INT operator operand
XO = {"+": XO_ADD, "-": XO_SUB, "*": XO_MUL, "/": XO_DIV, "%": XO_MOD, "pmod": XO_PMOD}

# --- run errors the VM reports (runtime.worker.raise_vm_error words them) ------------
VM_ERR_OVERFLOW, VM_ERR_DIV_ZERO, VM_ERR_CAST_OVERFLOW, VM_ERR_INDEX = 1, 2, 3, 4
VM_ERR_INTERVAL_OVERFLOW = 5  # day-time interval arithmetic or sum (avg) overflows, any mode
VM_ERR_LONG_OVERFLOW = 6      # TIMESTAMP +- INTERVAL, INTERVAL * n overflow (Java's), any mode
#: X_INT operand kinds: integral (ANSI decides), interval +- interval, other long arithmetic
XK_INTEGRAL, XK_INTERVAL, XK_LONG = 0, 1, 2

# --- aggregate function codes (condition_ops.pxi, aggregate_ops.pxi, the evaluators) -
A_COUNT_STAR, A_COUNT, A_SUM, A_AVG, A_MIN, A_MAX, A_LIST = 0, 1, 2, 3, 4, 5, 6
A_VAR_SAMP, A_VAR_POP, A_STDDEV_SAMP, A_STDDEV_POP = 7, 8, 9, 10  # DEFINE only
A_MAX_BY, A_MIN_BY = 11, 12   # DEFINE only: the value at the last row holding the extreme
A_ELEMENT = 13                # DEFINE only: element_at(array_agg(x), i)
A_DISTINCT = 64               # flag on a DEFINE aggregate's function code
#: normalized aggregate name -> function code
FUNC_CODES = {"COUNT_STAR": A_COUNT_STAR, "COUNT": A_COUNT, "SUM": A_SUM, "AVG": A_AVG,
              "MIN": A_MIN, "MAX": A_MAX, "LIST": A_LIST,
              "ROWS": A_LIST,  # ROWS: a LIST that feeds a gathered aggregate (no output column)
              "VAR_SAMP": A_VAR_SAMP, "VAR_POP": A_VAR_POP, "STDDEV_SAMP": A_STDDEV_SAMP,
              "STDDEV_POP": A_STDDEV_POP, "MAX_BY": A_MAX_BY, "MIN_BY": A_MIN_BY,
              "ELEMENT": A_ELEMENT}

# --- SQL:2016 matcher program (matcher.pyx) ----------------------------------------
OP_LABEL = 0      # a = label id: consume the current row if the label's DEFINE holds
OP_SPLIT = 1      # try a, then b
OP_JUMP = 2       # go to a
OP_DONE = 3       # match found
OP_ANCHOR_START = 4
OP_ANCHOR_END = 5
OP_SAVE = 6       # slot a := current position
OP_LOOP_BACK = 7  # go to b if current position > slot a (progress), else fall through
OP_EXCL_BEGIN = 8
OP_EXCL_END = 9
OP_PERM_BEGIN = 10  # slot a := 0 (no item used); b = n: the searched PERMUTE (n items)
OP_PERM_NEXT = 11   # a = slot << 6 | n: all n items used -> slot a := -1, go to b; else next
OP_PERM_TRY = 12    # a = slot << 6 | i: item i unused -> mark it and go to b; then next
OP_FAIL = 13        # the thread dies
OP_CLEAR = 14       # slot a := -1 (a loop's progress slot, dead past the loop's exit)
# a bounded quantifier too large to unroll: an iteration counter in slot a
OP_COUNT_BEGIN = 15   # slot a := 0 iterations
OP_COUNT_LOOP = 16    # a = slot << 1 | reluctant, b = exit (slot := -1 there); body at pc + 2
OP_COUNT_BOUNDS = 17  # a = min, b = max iterations: data of the COUNT_LOOP before it
OP_COUNT_NEXT = 18    # slot a += 1, go to b (its COUNT_LOOP)

SKIP_PAST_LAST, SKIP_NEXT_ROW, SKIP_TO_FIRST, SKIP_TO_LAST = 0, 1, 2, 3
#: AFTER MATCH SKIP kind -> matcher skip mode
SKIP_CODES = {"PAST_LAST_ROW": SKIP_PAST_LAST, "TO_NEXT_ROW": SKIP_NEXT_ROW,
              "TO_FIRST": SKIP_TO_FIRST, "TO_LAST": SKIP_TO_LAST}
#: ALL ROWS PER MATCH option -> matcher empty-match mode
EMPTY_CODES = {"SHOW_EMPTY": 0, "OMIT_EMPTY": 1, "WITH_UNMATCHED": 2}

# --- CEP evaluator (cep.pyx) and shared DAG (shared_dag.pyx) -----------------------
S_STRICT, S_PARTITION, S_NEXT, S_ANY = 0, 1, 2, 3
#: STRATEGY -> cep.pyx selection strategy
STRATEGY_CODES = {"STRICT_CONTIGUITY": S_STRICT, "PARTITION_CONTIGUITY": S_PARTITION,
                  "SKIP_TILL_NEXT_MATCH": S_NEXT, "SKIP_TILL_ANY_MATCH": S_ANY}
K_ORDER, K_CONJ, K_KCONJ = 0, 1, 2   # shared DAG check kinds
U_LEFT, U_RIGHT, U_ROOT = 0, 1, 2    # shared DAG instance uses
