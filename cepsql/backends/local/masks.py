"""Row-local DEFINE conditions as whole-column masks: the condition VM's bytecode
(compile/conditions.py) run once per instruction over all rows with numpy, instead of once
per row in the Cython VM. Only the double-lane instructions that cannot fail are covered
(loads of the current row and of physical PREV/NEXT rows, constants, + - * and unary
minus, DECIMAL literals used as doubles, comparisons with Spark's NaN order, AND/OR/NOT with SQL's three-valued logic, IS
[NOT] NULL, CAST to FLOAT), one numpy kernel per opcode in ``KERNELS`` (keyed by
compile.opcodes, the VM's own numbers); any other instruction makes ``vector_masks``
return None and the VM decides, so the masks are always the VM's (property-tested in
tests/test_inproc_masks.py). Every step is a numpy kernel over the column: no Python
object per row."""
from __future__ import annotations

import operator

import numpy as np

from cepsql.compile.conditions import ConditionCode
from cepsql.compile.opcodes import (C_ADD, C_AND, C_CONST, C_EQ, C_GE, C_GT, C_ISNOTNULL,
                                    C_ISNULL, C_JUMP, C_LE, C_LOAD, C_LT, C_MUL, C_NE, C_NEG,
                                    C_NOT, C_NULL, C_OR, C_SHORT_AND, C_SHORT_OR, C_SUB,
                                    C_TO_FLOAT, X_CONST, X_TO_DOUBLE)

__all__ = ["KERNELS", "vector_masks"]

_COMPARE = {C_EQ: operator.eq, C_NE: operator.ne, C_LT: operator.lt, C_LE: operator.le,
            C_GT: operator.gt, C_GE: operator.ge}
_ARITH = {C_ADD: operator.add, C_SUB: operator.sub, C_MUL: operator.mul}
_LAST = 1  # RefTable.encode's logical code of LAST


class _Unsupported(Exception):
    """An instruction outside the vectorised subset: the VM runs the condition."""


def vector_masks(code: ConditionCode, refs: np.ndarray, values: np.ndarray,
                 nulls: np.ndarray, consts: np.ndarray, bounds: np.ndarray,
                 n_labels: int) -> np.ndarray | None:
    """uint8[n_labels, n_rows] as ``SqlMatcher.row_local_masks`` computes it (1 where the
    DEFINE holds, 0 also for NULL; 1 everywhere without DEFINE, 0 for labels whose DEFINE
    is not row-local), over the VM's columns (values float64[k, n], nulls uint8[k, n]) and
    partitions [bounds[p], bounds[p+1]); None when a DEFINE needs the VM."""
    n = values.shape[1]
    out = np.zeros((n_labels, n), dtype=np.uint8)
    run = _Program(code, refs, values, nulls, consts, np.asarray(bounds, dtype=np.int64))
    for label in range(n_labels):
        start = int(code.offsets[label])
        if start < 0:
            out[label] = 1
        elif code.row_local[label]:
            try:
                out[label] = run.mask(start)
            except _Unsupported:
                return None
    return out


class _Program:
    """One evaluation of a label's bytecode over all rows: a stack of (values, nulls),
    nulls None when no row is NULL."""

    def __init__(self, code: ConditionCode, refs: np.ndarray, values: np.ndarray,
                 nulls: np.ndarray, consts: np.ndarray, bounds: np.ndarray):
        self.ops = code.code
        self.xconsts = code.xconsts
        self.refs, self.values, self.nulls, self.consts = refs, values, nulls, consts
        self.bounds = bounds
        self.n = values.shape[1]
        self.loaded: dict[tuple[int, int], tuple[np.ndarray, np.ndarray | None]] = {}
        self.clean: set[int] = set()  # ids of loaded arrays without NaN (kept in loaded)

    def mask(self, pc: int) -> np.ndarray:
        stack: list[tuple[np.ndarray, np.ndarray | None]] = []
        ops = self.ops
        while pc is not None:
            kernel = KERNELS.get(int(ops[pc]))
            if kernel is None:
                raise _Unsupported(int(ops[pc]))
            pc = kernel(self, stack, pc)
        value, null = stack[-1]
        truth = np.broadcast_to(_truth(value), (self.n,))
        return truth if null is None else truth & ~null

    # one numpy kernel per opcode (KERNELS): pops and pushes the stack, returns the next
    # instruction (None: the condition's end)
    def _load(self, stack, pc):
        stack.append(self.load(int(self.ops[pc + 1]), int(self.ops[pc + 2])))
        return pc + 3

    def _const(self, stack, pc):
        stack.append((np.float64(self.consts[int(self.ops[pc + 1])]), None))
        return pc + 2

    def _exact_const(self, stack, pc):
        if int(self.ops[pc + 2]) != X_TO_DOUBLE:  # only a DECIMAL literal used as a double
            raise _Unsupported(X_CONST)
        stack.append((np.float64(self.exact_const(int(self.ops[pc + 1]), int(self.ops[pc + 3]))),
                      None))
        return pc + 4

    def _null(self, stack, pc):
        stack.append((np.float64(0.0), np.ones(self.n, dtype=bool)))
        return pc + 1

    def _compare(self, stack, pc):
        b, nb = stack.pop()
        a, na = stack.pop()
        nan = not (self.nan_free(a) and self.nan_free(b))
        stack.append((_compare(int(self.ops[pc]), a, b, nan), _either(na, nb)))
        return pc + 1

    def _arith(self, stack, pc):
        b, nb = stack.pop()
        a, na = stack.pop()
        with np.errstate(all="ignore"):  # inf - inf is NaN, as in the VM
            value = _ARITH[int(self.ops[pc])](_as_double(a), _as_double(b))
        stack.append((value, _either(na, nb)))
        return pc + 1

    def _neg(self, stack, pc):
        a, na = stack.pop()
        stack.append((-_as_double(a), na))
        return pc + 1

    def _to_float(self, stack, pc):
        a, na = stack.pop()
        stack.append((np.asarray(a, dtype=np.float32).astype(np.float64), na))
        return pc + 1

    def _logic(self, stack, pc):
        b, nb = stack.pop()
        a, na = stack.pop()
        stack.append(_and(a, na, b, nb) if int(self.ops[pc]) == C_AND else _or(a, na, b, nb))
        return pc + 1

    def _not(self, stack, pc):
        a, na = stack.pop()
        stack.append((~_truth(a), na))
        return pc + 1

    def _is_null(self, stack, pc):
        a, na = stack.pop()
        isnull = np.zeros(self.n, dtype=bool) if na is None else na
        stack.append((isnull if int(self.ops[pc]) == C_ISNULL else ~isnull, None))
        return pc + 1

    def _short(self, stack, pc):
        return pc + 2  # only skips work whose errors cannot occur in this subset

    def _jump(self, stack, pc):
        if int(self.ops[pc + 1]) >= 0:
            raise _Unsupported(C_JUMP)
        return None

    def exact_const(self, index: int, scale: int) -> float:
        """The exact lane's constant as X_TO_DOUBLE gives it: the nearest double to
        unscaled / 10**scale (Python's int division rounds correctly, as the VM does)."""
        lo, hi = (int(x) for x in self.xconsts[index])
        return ((hi << 64) + (lo & ((1 << 64) - 1))) / 10 ** scale

    def load(self, column: int, ref: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Column at the row a row-local reference denotes (NULL outside the partition)."""
        set_id, logical, loff, poff = (int(x) for x in self.refs[ref][:4])
        if set_id >= 0 or logical != _LAST or loff != 0:
            raise _Unsupported(C_LOAD)
        key = (column, poff)
        if key not in self.loaded:
            self.loaded[key] = self._shifted(column, poff)
            if not np.isnan(self.values[column]).any():  # shifts fill with 0.0
                self.clean.add(id(self.loaded[key][0]))
        return self.loaded[key]

    def nan_free(self, a) -> bool:
        """Whether a stack value is known to hold no NaN (comparisons then skip Spark's
        NaN order): booleans, NaN-free constants and loads of NaN-free columns."""
        if a.dtype == np.bool_:
            return True
        if a.ndim == 0:
            return not np.isnan(a)
        return id(a) in self.clean

    def _shifted(self, column: int, poff: int) -> tuple[np.ndarray, np.ndarray | None]:
        x = self.values[column]
        null = self.nulls[column].view(bool)
        if poff == 0:
            return x, (null if null.any() else None)
        n = self.n
        v = np.zeros(n, dtype=np.float64)
        isnull = np.ones(n, dtype=bool)
        if abs(poff) < n:
            if poff < 0:
                v[-poff:], isnull[-poff:] = x[:n + poff], null[:n + poff]
            else:
                v[:n - poff], isnull[:n - poff] = x[poff:], null[poff:]
        # rows whose PREV/NEXT row lies in another partition read NULL
        starts, ends = self.bounds[:-1], self.bounds[1:]
        edge = starts if poff < 0 else ends - 1
        step = 1 if poff < 0 else -1
        for t in range(min(abs(poff), n)):
            at = edge + step * t
            inside = (at >= starts) & (at < ends)
            isnull[at[inside]] = True
        return v, isnull


#: the condition VM's opcodes (compile.opcodes) the masks compute -> their numpy kernel;
#: an opcode not here makes vector_masks return None (the VM decides)
KERNELS = {C_LOAD: _Program._load, C_CONST: _Program._const, X_CONST: _Program._exact_const,
           C_NULL: _Program._null, C_NEG: _Program._neg, C_TO_FLOAT: _Program._to_float,
           C_NOT: _Program._not, C_AND: _Program._logic, C_OR: _Program._logic,
           C_ISNULL: _Program._is_null, C_ISNOTNULL: _Program._is_null,
           C_SHORT_AND: _Program._short, C_SHORT_OR: _Program._short, C_JUMP: _Program._jump,
           **dict.fromkeys(_COMPARE, _Program._compare), **dict.fromkeys(_ARITH, _Program._arith)}


def _either(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    return a if b is None else a | b


def _as_double(a):
    return a.astype(np.float64) if a.dtype == np.bool_ else a


def _truth(a) -> np.ndarray:
    """Truth of a VM boolean (a double lane value: nonzero is TRUE)."""
    return a if a.dtype == np.bool_ else a != 0.0


def _compare(op: int, a, b, nan: bool = True) -> np.ndarray:
    """Spark's double order: NaN equals NaN and is above every number; -0.0 equals 0.0.
    nan False: neither operand holds a NaN (IEEE order is then Spark's)."""
    if a.dtype != b.dtype:
        a, b = _as_double(a), _as_double(b)
    with np.errstate(invalid="ignore"):
        result = _COMPARE[op](a, b)
    if not nan:
        return result
    a, b = _as_double(a), _as_double(b)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    either = nan_a | nan_b
    if np.any(either):
        order = nan_a.astype(np.int8) - nan_b.astype(np.int8)
        result = np.where(either, _COMPARE[op](order, 0), result)
    return result


def _and(a, na, b, nb):
    """Three-valued AND: FALSE wins over NULL."""
    ta, tb = _truth(a), _truth(b)
    false_a = ~ta if na is None else ~ta & ~na
    false_b = ~tb if nb is None else ~tb & ~nb
    null = _either(na, nb)
    return ta & tb, (None if null is None else null & ~(false_a | false_b))


def _or(a, na, b, nb):
    """Three-valued OR: TRUE wins over NULL."""
    ta, tb = _truth(a), _truth(b)
    true_a = ta if na is None else ta & ~na
    true_b = tb if nb is None else tb & ~nb
    value = true_a | true_b
    null = _either(na, nb)
    return value, (None if null is None else null & ~value)
