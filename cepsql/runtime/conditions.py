"""Compile localized DEFINE conditions into bytecode for the Cython condition VM.

The VM is a stack machine over (double value, null flag) pairs. Every column it reads
is handed to it as float64 + null mask: numbers and booleans as they are, timestamps
as microseconds, dates as days, strings as ranks in a sorted dictionary built per
chunk (string literals the VM compares against are added to that dictionary, so
equality and ordering of ranks are those of the strings).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from ..algebra.expressions import (AggregateValue, Between, BinaryOp, Case, Cast, Classifier, ColumnRef, Expr,
                                   FunctionCall, InList, IsNull, Literal, MatchNumber, RowRef, RowValue,
                                   UnaryOp)
from ..errors import CepAnalysisError, CepUnsupportedError
from .rowsets import RefTable

# opcodes (keep in sync with cython_ext/matcher.pyx)
C_CONST, C_NULL, C_LOAD, C_LOAD_CLS, C_MATCHNO, C_AGG = 0, 1, 2, 3, 4, 5
C_ADD, C_SUB, C_MUL, C_DIV, C_MOD, C_NEG = 10, 11, 12, 13, 14, 15
C_EQ, C_NE, C_LT, C_LE, C_GT, C_GE = 20, 21, 22, 23, 24, 25
C_AND, C_OR, C_NOT, C_ISNULL, C_ISNOTNULL = 30, 31, 32, 33, 34
C_JUMP, C_JUMP_IF_NOT_TRUE, C_JUMP_IF_NOT_NULL, C_POP = 40, 41, 42, 43
C_FUNC1, C_FUNC2, C_GREATEST, C_LEAST = 50, 51, 52, 53

FUNC1 = {"abs": 0, "sqrt": 1, "ln": 2, "exp": 3, "floor": 4, "ceil": 5, "ceiling": 5,
         "sign": 6, "signum": 6, "log10": 7, "negative": 8, "positive": 9}
FUNC2 = {"power": 0, "pow": 0, "round": 1, "mod": 2, "pmod": 3}
_ARITH = {"+": C_ADD, "-": C_SUB, "*": C_MUL, "/": C_DIV, "%": C_MOD}
_COMPARE = {"=": C_EQ, "<>": C_NE, "!=": C_NE, "<": C_LT, "<=": C_LE, ">": C_GT, ">=": C_GE}

NUM, STR, BOOL, CLS, NULL = "number", "string", "boolean", "classifier", "null"


def column_kind(dtype: pa.DataType) -> str:
    """How the VM sees an Arrow type; raises for types it cannot compare."""
    if pa.types.is_boolean(dtype):
        return BOOL
    if (pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_decimal(dtype)
            or pa.types.is_temporal(dtype)):
        return NUM
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return STR
    raise CepUnsupportedError(f"cannot compare values of type {dtype} across rows")


@dataclass
class ConditionCode:
    """Bytecode of every label's DEFINE (offset -1: no DEFINE, always true)."""
    code: np.ndarray            # int32, all labels concatenated
    offsets: np.ndarray         # int32[n_labels]
    consts: np.ndarray          # float64
    string_consts: list[tuple[int, str]]  # const slot -> literal, resolved per chunk
    columns: list[str]          # VM column index -> prepared column name
    column_kinds: list[str]
    max_stack: int
    reads_other_labels: bool = False  # CLASSIFIER() of a row other than the current one
    aggregates: np.ndarray = None  # int32[n, 3]: set id, function code, VM column (-1)
    row_local: np.ndarray = None  # uint8[n_labels]: DEFINE depends on the row alone
    extra_columns: list[int] = None  # VM column of each requested extra column


@dataclass
class _Emitter:
    schema: pa.Schema
    refs: RefTable
    labels: list[str]
    code: list[int] = field(default_factory=list)
    consts: list[float] = field(default_factory=list)
    string_consts: list[tuple[int, str]] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    depth: int = 0
    max_depth: int = 0
    reads_other_labels: bool = False
    aggs: list[list[int]] = field(default_factory=list)
    row_local: bool = True  # of the condition being compiled

    def read(self, ref) -> None:
        """Note a row read: only current-row-relative physical reads keep a condition
        a function of the row alone (precomputable once per row)."""
        if ref.var is not None or ref.logical != "LAST" or ref.logical_offset != 0:
            self.row_local = False

    def op(self, opcode: int, *args: int, delta: int = 0) -> int:
        """Append an instruction; returns the index of its opcode (args follow it)."""
        at = len(self.code)
        self.code.append(opcode)
        self.code.extend(args)
        self.depth += delta
        self.max_depth = max(self.max_depth, self.depth)
        return at

    def const(self, value: float) -> None:
        self.consts.append(float(value))
        self.op(C_CONST, len(self.consts) - 1, delta=1)

    def column_index(self, name: str) -> tuple[int, str]:
        if name not in self.columns:
            idx = self.schema.get_field_index(name)
            if idx < 0:
                raise CepAnalysisError(f"unknown column {name}")
            self.columns.append(name)
            self.kinds.append(column_kind(self.schema.field(idx).type))
        i = self.columns.index(name)
        return i, self.kinds[i]


def compile_conditions(defines: dict[str, Expr], labels: list[str], refs: RefTable,
                       schema: pa.Schema, extra_columns: list[str] = ()) -> ConditionCode:
    """defines: label -> localized condition (see decompose.localize). extra_columns are
    also loaded into the VM's column matrix (for aggregates in MEASURES)."""
    em = _Emitter(schema, refs, labels)
    offsets = []
    row_local = []
    for label in labels:
        cond = defines.get(label)
        if cond is None:
            offsets.append(-1)
            row_local.append(0)
            continue
        offsets.append(len(em.code))
        em.depth = 0
        em.row_local = True
        kind = _compile(em, cond)
        if kind not in (BOOL, NULL):
            raise CepAnalysisError(f"DEFINE condition of {label} is not a boolean expression",
                                   pos=getattr(cond, "pos", None))
        em.op(C_JUMP, -1)  # end marker: the VM stops at a jump to -1
        row_local.append(int(em.row_local))
    return ConditionCode(
        code=np.asarray(em.code, dtype=np.int32), offsets=np.asarray(offsets, dtype=np.int32),
        consts=np.asarray(em.consts or [0.0], dtype=np.float64), string_consts=em.string_consts,
        columns=em.columns, column_kinds=em.kinds, max_stack=len(em.code) + 4,
        reads_other_labels=em.reads_other_labels,
        aggregates=np.asarray(em.aggs, dtype=np.int32).reshape(-1, 3),
        row_local=np.asarray(row_local, dtype=np.uint8),
        extra_columns=[em.column_index(c)[0] for c in extra_columns])


def _compile(em: _Emitter, e: Expr) -> str:
    """Emit code leaving e's value on the stack; returns its kind."""
    if isinstance(e, Literal):
        return _literal(em, e)
    if isinstance(e, RowValue):
        ref = em.refs.intern(e.ref)
        em.read(e.ref)
        if isinstance(e.value, Classifier):
            if e.ref != RowRef(None):
                em.reads_other_labels = True
                em.row_local = False
            em.op(C_LOAD_CLS, ref, delta=1)
            return CLS
        assert isinstance(e.value, ColumnRef)
        col, kind = em.column_index(e.value.column)
        em.op(C_LOAD, col, ref, delta=1)
        return kind
    if isinstance(e, MatchNumber):
        em.row_local = False
        em.op(C_MATCHNO, delta=1)
        return NUM
    if isinstance(e, AggregateValue):
        return _aggregate(em, e)
    if isinstance(e, BinaryOp):
        return _binary(em, e)
    if isinstance(e, UnaryOp):
        kind = _compile(em, e.operand)
        if e.op == "NOT":
            _expect(kind, (BOOL, NULL), e, "NOT needs a boolean")
            em.op(C_NOT)
            return BOOL
        _expect(kind, (NUM, NULL), e, "unary minus needs a number")
        em.op(C_NEG)
        return NUM
    if isinstance(e, IsNull):
        _compile(em, e.operand)
        em.op(C_ISNOTNULL if e.negated else C_ISNULL)
        return BOOL
    if isinstance(e, Between):
        low = BinaryOp(">=", e.operand, e.low, e.pos)
        high = BinaryOp("<=", e.operand, e.high, e.pos)
        both: Expr = BinaryOp("AND", low, high, e.pos)
        return _compile(em, UnaryOp("NOT", both, e.pos) if e.negated else both)
    if isinstance(e, InList):
        if not e.items:
            raise CepAnalysisError("IN list must not be empty", pos=e.pos)
        test: Expr = BinaryOp("=", e.operand, e.items[0], e.pos)
        for item in e.items[1:]:
            test = BinaryOp("OR", test, BinaryOp("=", e.operand, item, e.pos), e.pos)
        return _compile(em, UnaryOp("NOT", test, e.pos) if e.negated else test)
    if isinstance(e, Case):
        return _case(em, e)
    if isinstance(e, Cast):
        kind = _compile(em, e.operand)
        target = e.to.lower()
        if kind in (NUM, BOOL, NULL) and target.split("(")[0] in (
                "double", "float", "decimal", "real", "numeric"):
            return NUM
        raise CepUnsupportedError(
            f"CAST to {e.to} over values of different rows is not supported in DEFINE",
            pos=e.pos)
    if isinstance(e, FunctionCall):
        return _function(em, e)
    raise CepUnsupportedError(
        f"{type(e).__name__} is not supported in DEFINE conditions", pos=getattr(e, "pos", None))


def _literal(em: _Emitter, e: Literal) -> str:
    if e.type == "null" or e.value is None:
        em.op(C_NULL, delta=1)
        return NULL
    if e.type == "bool":
        em.const(1.0 if e.value else 0.0)
        return BOOL
    if e.type in ("int", "double", "decimal", "interval"):
        em.const(float(e.value))  # intervals in microseconds, like timestamps in the VM
        return NUM
    if e.type == "string":
        em.const(0.0)
        em.string_consts.append((len(em.consts) - 1, str(e.value)))
        return STR
    raise CepUnsupportedError(
        f"{e.type} literal compared across rows is not supported in DEFINE", pos=e.pos)


def _binary(em: _Emitter, e: BinaryOp) -> str:
    op = e.op.upper()
    if op in ("AND", "OR"):
        for side in (e.left, e.right):
            _expect(_compile(em, side), (BOOL, NULL), e, f"{op} needs boolean operands")
        em.op(C_AND if op == "AND" else C_OR, delta=-1)
        return BOOL
    if op in _COMPARE:
        if _is_string_literal(e.right) or _is_string_literal(e.left):
            classifier_side = e.left if _is_string_literal(e.right) else e.right
            literal_side = e.right if _is_string_literal(e.right) else e.left
            if _is_classifier(classifier_side):
                return _classifier_compare(em, op, classifier_side, literal_side, e)
        lk = _compile(em, e.left)
        rk = _compile(em, e.right)
        if NULL not in (lk, rk) and {lk, rk} != {lk} and {lk, rk} != {NUM, BOOL}:
            raise CepAnalysisError(f"cannot compare {lk} with {rk}", pos=e.pos)
        if CLS in (lk, rk) and op not in ("=", "<>", "!="):
            raise CepUnsupportedError("CLASSIFIER() values can only be tested for equality",
                                      pos=e.pos)
        em.op(_COMPARE[op], delta=-1)
        return BOOL
    if op in _ARITH:
        for side in (e.left, e.right):
            _expect(_compile(em, side), (NUM, NULL), e, f"'{op}' needs numeric operands")
        em.op(_ARITH[op], delta=-1)
        return NUM
    raise CepUnsupportedError(f"operator {e.op} over values of different rows is not "
                              "supported in DEFINE", pos=e.pos)


def _classifier_compare(em: _Emitter, op: str, cls_side: Expr, lit: Literal, e: Expr) -> str:
    if op not in ("=", "<>", "!="):
        raise CepUnsupportedError("CLASSIFIER() values can only be tested for equality",
                                  pos=e.pos)
    _compile(em, cls_side)
    label = str(lit.value)
    em.const(em.labels.index(label) if label in em.labels else -2)
    em.op(_COMPARE[op], delta=-1)
    return BOOL


def _case(em: _Emitter, e: Case) -> str:
    end_jumps = []
    kinds = set()
    for cond, result in e.whens:
        test = cond if e.operand is None else BinaryOp("=", e.operand, cond, e.pos)
        _expect(_compile(em, test), (BOOL, NULL), e, "CASE WHEN needs a boolean condition")
        skip = em.op(C_JUMP_IF_NOT_TRUE, 0, delta=-1)
        kinds.add(_compile(em, result))
        em.depth -= 1
        end_jumps.append(em.op(C_JUMP, 0))
        em.code[skip + 1] = len(em.code)
    if e.default is None:
        em.op(C_NULL, delta=1)
    else:
        kinds.add(_compile(em, e.default))
    for j in end_jumps:
        em.code[j + 1] = len(em.code)
    kinds.discard(NULL)
    if len(kinds) > 1 and kinds != {NUM, BOOL}:
        raise CepAnalysisError("CASE branches have incompatible types", pos=e.pos)
    return kinds.pop() if kinds else NULL


def _function(em: _Emitter, e: FunctionCall) -> str:
    name = e.name.lower()
    if name in ("coalesce", "nvl", "ifnull"):
        jumps = []
        kinds = set()
        for i, arg in enumerate(e.args):
            kinds.add(_compile(em, arg))
            if i < len(e.args) - 1:
                jumps.append(em.op(C_JUMP_IF_NOT_NULL, 0, delta=-1))
        for j in jumps:
            em.code[j + 1] = len(em.code)
        kinds.discard(NULL)
        if len(kinds) > 1:
            raise CepAnalysisError("COALESCE arguments have incompatible types", pos=e.pos)
        return kinds.pop() if kinds else NULL
    if name in ("greatest", "least"):
        for arg in e.args:
            _expect(_compile(em, arg), (NUM, NULL), e, f"{name} needs numeric arguments")
        em.op(C_GREATEST if name == "greatest" else C_LEAST, len(e.args),
              delta=1 - len(e.args))
        return NUM
    if name in FUNC1 and len(e.args) == 1:
        _expect(_compile(em, e.args[0]), (NUM, NULL), e, f"{name} needs a numeric argument")
        em.op(C_FUNC1, FUNC1[name])
        return NUM
    if name in FUNC2 and len(e.args) in (1, 2):
        for arg in e.args:
            _expect(_compile(em, arg), (NUM, NULL), e, f"{name} needs numeric arguments")
        if len(e.args) == 1:  # round(x) = round(x, 0)
            em.const(0.0)
        em.op(C_FUNC2, FUNC2[name], delta=-1)
        return NUM
    raise CepUnsupportedError(
        f"function {e.name} over values of different rows is not supported in DEFINE "
        "(it is supported when all its arguments come from one row)", pos=e.pos)


def _aggregate(em: _Emitter, e: AggregateValue) -> str:
    from .aggregates import FUNC_CODES
    col, kind = (-1, NUM) if e.column is None else em.column_index(e.column)
    if e.func in ("SUM", "AVG", "VAR_SAMP", "VAR_POP", "STDDEV_SAMP", "STDDEV_POP") and \
            kind != NUM:
        raise CepAnalysisError(f"{e.func.lower()}() needs a numeric argument", pos=e.pos)
    set_id = em.refs.sets.set_id(e.var)
    em.row_local = False
    em.aggs.append([set_id, FUNC_CODES[e.func], col])
    em.op(C_AGG, len(em.aggs) - 1, delta=1)
    return kind if e.func in ("MIN", "MAX") else NUM


def _is_string_literal(e: Expr) -> bool:
    return isinstance(e, Literal) and e.type == "string"


def _is_classifier(e: Expr) -> bool:
    return isinstance(e, RowValue) and isinstance(e.value, Classifier)


def _expect(kind: str, allowed: tuple[str, ...], e: Expr, message: str) -> None:
    if kind not in allowed:
        raise CepAnalysisError(message, pos=getattr(e, "pos", None))
