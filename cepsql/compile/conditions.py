"""Compile localized DEFINE conditions into bytecode for the Cython condition VM.

The VM is a stack machine over (value, null flag) slots with two value lanes (see
cepsql/_ext/vm.pxd): a double lane for DOUBLE/FLOAT, booleans and string
ranks, and an exact 128-bit lane for integral types, DECIMAL (unscaled), TIMESTAMP
(microseconds), DATE (days) and day-time intervals. The compiler infers every node's
Spark type (algebra/types.py) and emits typed instructions, so arithmetic and comparisons
give exactly Spark's answer: integral overflow at the type's width, DECIMAL precision
and scale by Spark's DecimalPrecision rules with HALF_UP rounding, NULL (or, under ANSI
mode, an error) on overflow and division by zero, DOUBLE when a double is involved, and
NaN ordered as Spark orders it. Strings are ranks in a sorted dictionary built per chunk
(string literals the VM compares against are added to it).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from cepsql.algebra.expressions import (AggregateValue, Between, BinaryOp, Case, Cast, Classifier, ColumnRef, Expr,
                                   FunctionCall, InList, IsNull, Literal, MatchNumber, RowRef, RowValue,
                                   UnaryOp)
from cepsql.errors import CepAnalysisError, CepUnsupportedError
from cepsql.algebra import types as T
from cepsql.analyze.aggregate_functions import MOMENT_FUNCS, aggregate_lane
from cepsql.analyze.rowsets import RefTable
from cepsql.analyze.decompose import DIVISOR_GUARD
from cepsql.algebra.types import VmType
# the VM's numbers live in compile.opcodes (cython_ext follows them); re-exported here
from cepsql.compile.opcodes import (A_DISTINCT, C_ADD, C_AGG, C_AND, C_CONST, C_DIV, C_EQ,
                                    C_FUNC1, C_FUNC2, C_GE, C_GREATEST, C_GT, C_ISNOTNULL,
                                    C_ISNULL, C_JUMP, C_JUMP_IF_NOT_NULL, C_JUMP_IF_NOT_TRUE,
                                    C_LE, C_LEAST, C_LOAD, C_LOAD_CLS, C_LT, C_MATCHNO, C_MOD,
                                    C_MUL, C_NE, C_NEG, C_NOT, C_NULL, C_OR, C_RAISE_IF, C_ROUND, C_SHORT_AND, C_SHORT_OR, C_SUB,
                                    C_TO_FLOAT, C_TO_INT, C_TO_LONG, FUNC_CODES,
                                    VM_ERR_DIV_ZERO, XK_INTEGRAL, XK_INTERVAL, XK_LONG, XO,
                                    X_ABS, X_AGG, X_CMP, X_CONST, X_DEC,
                                    X_EXTREME, X_INT, X_LOAD, X_NEG, X_RESCALE, X_ROUND,
                                    X_SIGN, X_TO_DOUBLE, X_TO_FLOAT, X_TO_INT)

FUNC1 = {"abs": 0, "sqrt": 1, "ln": 2, "exp": 3, "floor": 4, "ceil": 5, "ceiling": 5,
         "sign": 6, "signum": 6, "log10": 7, "negative": 8, "positive": 9}
FUNC2 = {"power": 0, "pow": 0, "round": 1, "bround": 1, "mod": 2, "pmod": 3}
_PMOD_FLOAT = 4  # pmod's second remainder over a FLOAT sum
CROSS_ROW_FUNCTIONS = sorted({"coalesce", "nvl", "ifnull", "if", "greatest", "least",
                              *FUNC1, *FUNC2})
_ARITH = {"+": C_ADD, "-": C_SUB, "*": C_MUL, "/": C_DIV, "%": C_MOD}
_COMPARE = {"=": C_EQ, "<>": C_NE, "!=": C_NE, "<": C_LT, "<=": C_LE, ">": C_GT, ">=": C_GE}

NUM, STR, BOOL, CLS, NULL = "number", "string", "boolean", "classifier", "null"


def column_kind(dtype: pa.DataType) -> str:
    """How the VM sees an Arrow type; raises for types it cannot compare."""
    t = T.of_arrow(dtype)
    return {"boolean": BOOL, "string": STR}.get(t.name, NUM)


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
    xconsts: np.ndarray = None  # int64[n, 2]: the exact lane's 128-bit constants
    column_types: list[VmType] = None  # Spark type of each VM column
    aggregate_exact: np.ndarray = None  # int32[n, 4]: see aggregate_lane()
    ansi: bool = True           # spark.sql.ansi.enabled: overflow raises instead of NULL
    row_errors: bool = False    # a row-local part raises where it is tested (C_RAISE_IF)
    # int32[n, 2]: code offsets of aggregate arguments computed at the row (MATCH_NUMBER()
    # inside; SQL:2016 matcher): for the aggregate's column, for MAX_BY/MIN_BY's value
    # column (lane[2]); -1: read the column
    aggregate_programs: np.ndarray = None




@dataclass
class _Emitter:
    schema: pa.Schema
    refs: RefTable
    labels: list[str]
    code: list[int] = field(default_factory=list)
    consts: list[float] = field(default_factory=list)
    xconsts: list[int] = field(default_factory=list)
    string_consts: list[tuple[int, str]] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    types: list[VmType] = field(default_factory=list)
    depth: int = 0
    max_depth: int = 0
    reads_other_labels: bool = False
    aggs: list[list[int]] = field(default_factory=list)
    agg_exact: list[list[int]] = field(default_factory=list)
    row_local: bool = True  # of the condition being compiled
    ansi: bool = True  # spark.sql.ansi.enabled: also decides FLOAT/integer coercion
    row_errors: bool = False  # some row-local part raises at the rows it is tested on
    agg_args: list[tuple] = field(default_factory=list)  # per aggregate: computed arguments

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

    def xconst(self, value: int) -> None:
        if not -(1 << 127) <= value < (1 << 127):
            raise CepUnsupportedError(f"constant {value} exceeds 128 bits")
        self.xconsts.append(int(value))
        self.op(X_CONST, len(self.xconsts) - 1, delta=1)

    def column_index(self, name: str) -> tuple[int, VmType]:
        if name not in self.columns:
            idx = self.schema.get_field_index(name)
            if idx < 0:
                raise CepAnalysisError(f"unknown column {name}")
            dtype = self.schema.field(idx).type
            self.columns.append(name)
            self.kinds.append(column_kind(dtype))
            self.types.append(T.of_arrow(dtype))
        i = self.columns.index(name)
        return i, self.types[i]

    def scratch(self) -> "_Emitter":
        """A throwaway copy: compiling into it tells an expression's type."""
        return dataclasses.replace(
            self, code=[], consts=[], xconsts=[], string_consts=[], columns=list(self.columns),
            kinds=list(self.kinds), types=list(self.types), aggs=[list(a) for a in self.aggs],
            agg_exact=[list(a) for a in self.agg_exact], agg_args=list(self.agg_args),
            depth=0, max_depth=0)


def compile_conditions(defines: dict[str, Expr], labels: list[str], refs: RefTable,
                       schema: pa.Schema, extra_columns: list[str] = (), *,
                       ansi: bool = True) -> ConditionCode:
    """defines: label -> localized condition (see decompose.localize). extra_columns are
    also loaded into the VM's column matrix (for aggregates in MEASURES). ansi: Spark's
    spark.sql.ansi.enabled (overflow and division by zero raise instead of giving NULL)."""
    em = _Emitter(schema, refs, labels, ansi=ansi)
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
        t = _compile(em, cond)
        if t.name not in ("boolean", "null"):
            raise CepAnalysisError(f"DEFINE condition of {label} is not a boolean expression",
                                   pos=getattr(cond, "pos", None))
        em.op(C_JUMP, -1)  # end marker: the VM stops at a jump to -1
        row_local.append(int(em.row_local))
    extra = [em.column_index(c)[0] for c in extra_columns]
    programs = _argument_programs(em)
    return ConditionCode(
        code=np.asarray(em.code, dtype=np.int32), offsets=np.asarray(offsets, dtype=np.int32),
        consts=np.asarray(em.consts or [0.0], dtype=np.float64), string_consts=em.string_consts,
        columns=em.columns, column_kinds=em.kinds, max_stack=len(em.code) + 4,
        reads_other_labels=em.reads_other_labels,
        aggregates=np.asarray(em.aggs, dtype=np.int32).reshape(-1, 3),
        row_local=np.asarray(row_local, dtype=np.uint8),
        extra_columns=extra, xconsts=_split128(em.xconsts), column_types=em.types,
        aggregate_exact=np.asarray(em.agg_exact, dtype=np.int32).reshape(-1, 4), ansi=ansi,
        row_errors=em.row_errors, aggregate_programs=programs)


def _argument_programs(em: _Emitter) -> np.ndarray:
    """Append the code of every aggregate argument computed at the row (each ends at a
    jump to -1, like a condition); their offsets per aggregate."""
    out = np.full((len(em.aggs), 2), -1, dtype=np.int32)
    for k, pair in enumerate(em.agg_args):
        for i, expr in enumerate(pair):
            if expr is not None:
                out[k, i] = len(em.code)
                em.depth = 0
                _compile(em, expr)
                em.op(C_JUMP, -1)
    return out


def _split128(values: list[int]) -> np.ndarray:
    """128-bit integers as little-endian int64 halves (the VM's layout)."""
    out = np.zeros((max(len(values), 1), 2), dtype=np.int64)
    for i, v in enumerate(values):
        u = v & ((1 << 128) - 1)
        out[i] = np.array([u & ((1 << 64) - 1), u >> 64], dtype=np.uint64).view(np.int64)
    return out


def _type_of(em: _Emitter, e: Expr) -> VmType:
    return _compile(em.scratch(), e)


def _compile_as(em: _Emitter, e: Expr, target: VmType) -> VmType:
    """Emit e converted to target (Spark's implicit cast)."""
    t = _compile(em, e)
    _convert(em, t, target, e)
    return target


def _convert(em: _Emitter, t: VmType, target: VmType, e: Expr) -> None:
    if t == target or t.name == "null" or target.name == "null":
        return
    if target.name == "double":
        if t.exact and t.numeric:
            em.op(X_TO_DOUBLE, t.scale)
        elif t.name not in ("double", "float", "boolean"):
            raise CepAnalysisError(f"cannot use {t} as a double", pos=getattr(e, "pos", None))
        return
    if target.name == "float":
        if t.exact and t.numeric:
            em.op(X_TO_FLOAT, t.scale)  # one rounding, not through double
        elif t.name == "double":
            em.op(C_TO_FLOAT)
        elif t.name != "boolean":
            raise CepAnalysisError(f"cannot use {t} as a float", pos=getattr(e, "pos", None))
        return
    if target.name == "decimal" and t.numeric and t.exact:
        d = T.as_decimal(t, _int_literal(e))
        if d.scale != target.scale or d.precision - d.scale > target.precision - target.scale:
            em.op(X_RESCALE, d.scale, target.scale, target.precision)
        return
    if target.integral and t.integral:
        return  # widening: the 128-bit lane holds every integral value
    raise CepAnalysisError(f"cannot convert {t} to {target}", pos=getattr(e, "pos", None))


def _compile(em: _Emitter, e: Expr) -> VmType:
    """Emit code leaving e's value on the stack; returns its Spark type."""
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
            return T.CLASSIFIER
        assert isinstance(e.value, ColumnRef)
        col, t = em.column_index(e.value.column)
        em.op(X_LOAD if t.exact else C_LOAD, col, ref, delta=1)
        return t
    if isinstance(e, MatchNumber):  # Spark's BIGINT (the matcher counts in a double)
        em.row_local = False
        em.op(C_MATCHNO, delta=1)
        em.op(C_TO_INT, 64)
        return T.BIGINT
    if isinstance(e, AggregateValue):
        return _aggregate(em, e)
    if isinstance(e, BinaryOp):
        return _binary(em, e)
    if isinstance(e, UnaryOp):
        if e.op == "NOT":
            _expect(_compile(em, e.operand), ("boolean", "null"), e, "NOT needs a boolean")
            em.op(C_NOT)
            return T.BOOLEAN
        lit = _int_literal(e)
        if lit is not None:
            em.xconst(lit)
            return T.integer_literal(lit)
        t = _compile(em, e.operand)
        return _negate(em, t, e)
    if isinstance(e, IsNull):
        _compile(em, e.operand)
        em.op(C_ISNOTNULL if e.negated else C_ISNULL)
        return T.BOOLEAN
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
        return _cast(em, e)
    if isinstance(e, FunctionCall):
        return _function(em, e)
    raise CepUnsupportedError(
        f"{type(e).__name__} is not supported in DEFINE conditions", pos=getattr(e, "pos", None))


def _negate(em: _Emitter, t: VmType, e: Expr) -> VmType:
    if t.name in ("double", "float", "null"):
        em.op(C_NEG)
    elif t.numeric or t.name == "interval":
        em.op(X_NEG, t.width if t.integral else 0, _pos(e))
    else:
        raise CepAnalysisError("unary minus needs a number", pos=e.pos)
    return t


def _pos(e: Expr) -> int:
    """e's offset in the SQL text as an immediate (-1: unknown): the VM reports it with
    the error the instruction raises (runtime.worker.raise_vm_error)."""
    pos = getattr(e, "pos", None)
    return -1 if pos is None else int(pos)


def _int_literal(e: Expr) -> int | None:
    """The value of an integer literal, also written with a leading minus."""
    if isinstance(e, Literal) and e.type == "int" and e.value is not None:
        return int(e.value)
    if isinstance(e, UnaryOp) and e.op == "-":
        inner = _int_literal(e.operand)
        return None if inner is None else -inner
    return None


def _literal(em: _Emitter, e: Literal) -> VmType:
    if e.type == "null" or e.value is None:
        em.op(C_NULL, delta=1)
        return T.NULL
    if e.type == "bool":
        em.const(1.0 if e.value else 0.0)
        return T.BOOLEAN
    if e.type == "int":
        em.xconst(int(e.value))
        return T.integer_literal(int(e.value))
    if e.type == "decimal":
        t, unscaled = T.decimal_literal(str(e.value))
        em.xconst(unscaled)
        return t
    if e.type == "interval":  # day-time intervals, in microseconds like timestamps
        em.xconst(int(e.value))
        return T.INTERVAL
    if e.type == "double":
        em.const(float(e.value))
        return T.DOUBLE
    if e.type == "string":
        em.const(0.0)
        em.string_consts.append((len(em.consts) - 1, str(e.value)))
        return T.STRING
    if e.type == "month_interval":
        raise CepUnsupportedError(
            "a year-month interval can only be added to or subtracted from the timestamp or "
            "date of one row (e.g. A.ts + INTERVAL '1' MONTH); a difference of two rows is a "
            "day-time interval", pos=e.pos)
    raise CepUnsupportedError(
        f"{e.type} literal compared across rows is not supported in DEFINE", pos=e.pos)


def _binary(em: _Emitter, e: BinaryOp) -> VmType:
    op = e.op.upper()
    if op in ("AND", "OR"):
        # short-circuit like Spark: the right side runs only when the left does not decide
        _expect(_compile(em, e.left), ("boolean", "null"), e, f"{op} needs boolean operands")
        jump = em.op(C_SHORT_AND if op == "AND" else C_SHORT_OR, 0)
        _expect(_compile(em, e.right), ("boolean", "null"), e, f"{op} needs boolean operands")
        em.op(C_AND if op == "AND" else C_OR, delta=-1)
        em.code[jump + 1] = len(em.code)
        return T.BOOLEAN
    if op in _COMPARE:
        return _compare(em, op, e)
    if op in _ARITH:
        return _arithmetic(em, op, e.left, e.right, e)
    raise CepUnsupportedError(f"operator {e.op} over values of different rows is not "
                              "supported in DEFINE", pos=e.pos)


def _arithmetic(em: _Emitter, op: str, left: Expr, right: Expr, e: Expr) -> VmType:
    """+ - * / % (and pmod) with Spark's result type and overflow rules."""
    lt, rt = _type_of(em, left), _type_of(em, right)
    names = {lt.name, rt.name}
    if not all(t.numeric or t.name in ("null", "timestamp", "date", "interval")
               for t in (lt, rt)):
        raise CepAnalysisError(f"'{op}' needs numeric operands", pos=e.pos)
    if names & {"timestamp", "date", "interval"}:
        return _datetime_arithmetic(em, op, left, right, lt, rt, e)
    if "null" in names:
        other = rt if lt.name == "null" else lt
        _compile(em, left)
        _compile(em, right)
        if other.name in ("double", "float", "null") or (op == "/" and other.integral):
            em.op(_ARITH.get(op, C_MOD), delta=-1)
            if other.name == "float" and op != "/":
                return T.FLOAT
            return T.DOUBLE if other.name != "null" else T.NULL
        em.op(X_INT, XO[op], 64, XK_INTEGRAL, _pos(e), delta=-1)  # a NULL operand: NULL
        return other if op != "/" else T.DOUBLE
    floating = T.DOUBLE if "double" in names else (
        T.float_partner(rt if lt.name == "float" else lt, em.ansi) if "float" in names else None)
    if floating is not None and op == "/":
        floating = T.DOUBLE  # Spark's Divide takes DOUBLE or DECIMAL
    if floating is not None or (op == "/" and lt.integral and rt.integral):
        floating = floating or T.DOUBLE
        _compile_as(em, left, floating)
        _compile_as(em, right, floating)
        if op == "pmod":
            em.op(C_FUNC2, _PMOD_FLOAT if floating.name == "float" else FUNC2["pmod"],
                  delta=-1)
        else:
            em.op(_ARITH[op], delta=-1)
        if floating.name == "float":  # Spark computes in float32: one rounding per op
            em.op(C_TO_FLOAT)
        return floating
    _compile(em, left)
    _compile(em, right)
    if lt.integral and rt.integral:
        out = T.wider_integral(lt, rt)
        em.op(X_INT, XO[op], out.width, XK_INTEGRAL, _pos(e), delta=-1)
        return out
    a, b = T.as_decimal(lt, _int_literal(left)), T.as_decimal(rt, _int_literal(right))
    out = T.arithmetic_type("%" if op == "pmod" else op, a, b)
    em.op(X_DEC, XO[op], a.scale, b.scale, out.scale, out.precision, _pos(e), delta=-1)
    return out


def _datetime_arithmetic(em, op, left, right, lt, rt, e) -> VmType:
    """TIMESTAMP +/- INTERVAL, TIMESTAMP - TIMESTAMP, INTERVAL +/- INTERVAL,
    DATE +/- integer (date_add)."""
    pair = (lt.name, rt.name)
    out = None
    if op in ("+", "-") and pair in (("timestamp", "interval"), ("interval", "interval")):
        out = lt
    elif op == "+" and pair == ("interval", "timestamp"):
        out = rt
    elif op == "-" and pair == ("timestamp", "timestamp"):
        out = T.INTERVAL
    elif op in ("+", "-") and lt.name == "date" and rt.name in ("int", "short", "byte"):
        out = T.DATE
    elif op == "+" and rt.name == "date" and lt.name in ("int", "short", "byte"):
        out = T.DATE
    elif op in ("*", "/") and lt.name == "interval" and rt.integral and op == "*":
        out = T.INTERVAL
    elif "null" in pair:
        out = lt if rt.name == "null" else rt
    if out is None:
        raise CepUnsupportedError(f"{lt} {op} {rt} over values of different rows is not "
                                  "supported in DEFINE", pos=e.pos)
    _compile(em, left)
    _compile(em, right)
    kind = XK_INTERVAL if pair == ("interval", "interval") else \
        XK_INTEGRAL if "null" in pair or "date" in pair else XK_LONG
    em.op(X_INT, XO[op], 32 if out.name == "date" else 64, kind, _pos(e), delta=-1)
    return out


def _compare(em: _Emitter, op: str, e: BinaryOp) -> VmType:
    if _is_string_literal(e.right) or _is_string_literal(e.left):
        classifier_side = e.left if _is_string_literal(e.right) else e.right
        literal_side = e.right if _is_string_literal(e.right) else e.left
        if _is_classifier(classifier_side):
            return _classifier_compare(em, op, classifier_side, literal_side, e)
    lt, rt = _type_of(em, e.left), _type_of(em, e.right)
    if lt.name == "classifier" or rt.name == "classifier":
        if op not in ("=", "<>", "!="):
            raise CepUnsupportedError("CLASSIFIER() values can only be tested for equality",
                                      pos=e.pos)
    code = _COMPARE[op] - C_EQ
    known = [t for t in (lt, rt) if t.name != "null"]
    if len(known) == 2 and lt != rt:
        if lt.numeric and rt.numeric:
            if lt.floating or rt.floating:  # FLOAT with an integer: FLOAT unless ANSI
                w = T.common_type([lt, rt], em.ansi)
                _compile_as(em, e.left, w)
                _compile_as(em, e.right, w)
                em.op(_COMPARE[op], delta=-1)
                return T.BOOLEAN
            if lt.integral and rt.integral:
                _compile(em, e.left)
                _compile(em, e.right)
                em.op(X_CMP, code, 0, 0, delta=-1)
                return T.BOOLEAN
            # both cast to the wider decimal type (bounded to 38 digits: may overflow)
            a, b = T.as_decimal(lt, _int_literal(e.left)), T.as_decimal(rt, _int_literal(e.right))
            w = T.wider_decimal(a, b)
            _compile_as(em, e.left, w)
            _compile_as(em, e.right, w)
            em.op(X_CMP, code, w.scale, w.scale, delta=-1)
            return T.BOOLEAN
        if {lt.name, rt.name} <= {"boolean", "double", "float", "byte", "short", "int",
                                  "bigint", "decimal"}:
            _compile_as(em, e.left, T.DOUBLE)
            _compile_as(em, e.right, T.DOUBLE)
            em.op(_COMPARE[op], delta=-1)
            return T.BOOLEAN
        raise CepAnalysisError(f"cannot compare {lt} with {rt}", pos=e.pos)
    t = known[0] if known else T.NULL
    _compile(em, e.left)
    _compile(em, e.right)
    if t.exact:
        em.op(X_CMP, code, t.scale, t.scale, delta=-1)
    else:
        em.op(_COMPARE[op], delta=-1)
    return T.BOOLEAN


def _classifier_compare(em: _Emitter, op: str, cls_side: Expr, lit: Literal, e: Expr) -> VmType:
    if op not in ("=", "<>", "!="):
        raise CepUnsupportedError("CLASSIFIER() values can only be tested for equality",
                                  pos=e.pos)
    _compile(em, cls_side)
    label = str(lit.value)
    em.const(em.labels.index(label) if label in em.labels else -2)
    em.op(_COMPARE[op], delta=-1)
    return T.BOOLEAN


def _common(em: _Emitter, exprs: list[Expr], e: Expr, what: str) -> VmType:
    try:
        return T.common_type([_type_of(em, x) for x in exprs], em.ansi)
    except TypeError:
        raise CepAnalysisError(f"{what} have incompatible types", pos=e.pos) from None


def _case(em: _Emitter, e: Case) -> VmType:
    results = [r for _, r in e.whens] + ([] if e.default is None else [e.default])
    out = _common(em, results, e, "CASE branches")
    end_jumps = []
    for cond, result in e.whens:
        test = cond if e.operand is None else BinaryOp("=", e.operand, cond, e.pos)
        _expect(_compile(em, test), ("boolean", "null"), e, "CASE WHEN needs a boolean condition")
        skip = em.op(C_JUMP_IF_NOT_TRUE, 0, delta=-1)
        _compile_as(em, result, out)
        em.depth -= 1
        end_jumps.append(em.op(C_JUMP, 0))
        em.code[skip + 1] = len(em.code)
    if e.default is None:
        em.op(C_NULL, delta=1)
    else:
        _compile_as(em, e.default, out)
    for j in end_jumps:
        em.code[j + 1] = len(em.code)
    return out


def _cast(em: _Emitter, e: Cast) -> VmType:
    target = e.to.lower().replace(" ", "")
    base = target.split("(")[0]
    if base == "double":
        return _compile_as(em, e.operand, T.DOUBLE)
    if base in ("float", "real"):
        return _compile_as(em, e.operand, T.FLOAT)
    if base in _INTEGRAL_CASTS:
        return _cast_integral(em, e, VmType(_INTEGRAL_CASTS[base]))
    if base in ("decimal", "numeric", "dec"):
        args = target[len(base):].strip("()").split(",") if "(" in target else []
        p = int(args[0]) if args and args[0] else 10
        s = int(args[1]) if len(args) > 1 else 0
        t = _type_of(em, e.operand)
        if (t.numeric and t.exact) or t.name == "null":
            return _compile_as(em, e.operand, T.decimal(p, s))
    raise CepUnsupportedError(
        f"CAST to {e.to} over values of different rows is not supported in DEFINE",
        pos=e.pos)


_INTEGRAL_CASTS = {"tinyint": "byte", "byte": "byte", "smallint": "short", "short": "short",
                   "int": "int", "integer": "int", "bigint": "bigint", "long": "bigint"}


def _cast_integral(em: _Emitter, e: Cast, target: VmType) -> VmType:
    """CAST to TINYINT/SMALLINT/INT/BIGINT as Spark casts: DECIMAL and DOUBLE/FLOAT
    truncate toward zero; a value outside the type is an error ([CAST_OVERFLOW]) under
    ANSI, otherwise the low bits (integers, DECIMAL) or the JVM's saturating conversion
    (DOUBLE/FLOAT, NaN -> 0)."""
    t = _compile(em, e.operand)
    if t.name == "null":
        return target
    if t.integral and t.width <= target.width:
        return target  # widening: the 128-bit lane holds the value as it is
    if t.integral or t.name == "decimal":
        em.op(X_TO_INT, t.scale, target.width)
    elif t.name in ("double", "float", "boolean"):
        em.op(C_TO_INT, target.width)
    else:
        raise CepUnsupportedError(
            f"CAST of {t} to {e.to} over values of different rows is not supported in DEFINE "
            "(numbers cast to integral types; any CAST works when its argument comes from "
            "one row)", pos=e.pos)
    return target


def _function(em: _Emitter, e: FunctionCall) -> VmType:
    name = e.name.lower()
    if name == DIVISOR_GUARD:  # decompose.localize: raise where the row divides by zero
        guard, value = e.args
        if em.ansi:
            _compile(em, guard)
            em.op(C_RAISE_IF, VM_ERR_DIV_ZERO, delta=-1)
            em.row_errors = True
        return _compile(em, value)
    if name == "if" and len(e.args) == 3:  # Spark's if(c, a, b): CASE WHEN c THEN a ELSE b
        return _case(em, Case(None, ((e.args[0], e.args[1]),), e.args[2], e.pos))
    if name in ("coalesce", "nvl", "ifnull"):
        out = _common(em, list(e.args), e, "COALESCE arguments")
        jumps = []
        for i, arg in enumerate(e.args):
            _compile_as(em, arg, out)
            if i < len(e.args) - 1:
                jumps.append(em.op(C_JUMP_IF_NOT_NULL, 0, delta=-1))
        for j in jumps:
            em.code[j + 1] = len(em.code)
        return out
    if name in ("greatest", "least"):
        out = _common(em, list(e.args), e, f"{name} arguments")
        if out.name not in ("null", "double", "float") and not out.exact:
            raise CepAnalysisError(f"{name} needs numeric arguments", pos=e.pos)
        for arg in e.args:
            _compile_as(em, arg, out)
        if out.exact:
            em.op(X_EXTREME, len(e.args), int(name == "greatest"), delta=1 - len(e.args))
        else:
            em.op(C_GREATEST if name == "greatest" else C_LEAST, len(e.args),
                  delta=1 - len(e.args))
        return out
    if name in FUNC1 and len(e.args) == 1:
        return _function1(em, name, e)
    if name in FUNC2 and len(e.args) in (1, 2):
        return _function2(em, name, e)
    raise CepUnsupportedError(
        f"function {e.name} over values of different rows is not supported in DEFINE "
        "(any Spark function works when all its arguments come from one row); functions "
        f"that combine different rows: {', '.join(CROSS_ROW_FUNCTIONS)}", pos=e.pos)


def _function1(em: _Emitter, name: str, e: FunctionCall) -> VmType:
    t = _type_of(em, e.args[0])
    _expect(t, ("double", "float", "null", "byte", "short", "int", "bigint", "decimal"), e,
            f"{name} needs a numeric argument")
    if not t.exact:
        _compile_as(em, e.args[0], T.DOUBLE)
        em.op(C_FUNC1, FUNC1[name])
        if name in ("floor", "ceil", "ceiling") and t.name != "null":
            em.op(C_TO_LONG)  # Spark: BIGINT (NaN -> 0, overflow per ANSI)
            return T.BIGINT
        if t.name == "float" and name in ("abs", "negative", "positive"):
            return T.FLOAT  # the float's own value, with its sign changed or not
        return T.DOUBLE if t.name != "null" else T.NULL
    _compile(em, e.args[0])
    if name == "abs":
        em.op(X_ABS, t.width if t.integral else 0, _pos(e))
        return t
    if name in ("negative", "positive"):
        return _negate(em, t, e) if name == "negative" else t
    if name in ("sign", "signum"):
        em.op(X_SIGN)
        return T.DOUBLE
    if name in ("floor", "ceil", "ceiling"):
        if t.integral:
            return T.BIGINT
        out = T.bounded(t.precision - t.scale + 1, 0)
        em.op(X_ROUND, 1 if name == "floor" else 2, t.scale, 0, out.precision)
        return out if t.scale else t
    em.op(X_TO_DOUBLE, t.scale)
    em.op(C_FUNC1, FUNC1[name])
    return T.DOUBLE


def _function2(em: _Emitter, name: str, e: FunctionCall) -> VmType:
    x = e.args[0]
    t = _type_of(em, x)
    if name in ("mod", "pmod") and len(e.args) == 2:
        return _arithmetic(em, "%" if name == "mod" else "pmod", x, e.args[1], e)
    digits = _int_literal(e.args[1]) if len(e.args) == 2 else 0
    rounding = name in ("round", "bround")
    if rounding and t.exact and t.numeric and digits is not None and digits >= 0:
        _compile(em, x)
        if t.integral or digits >= t.scale:
            return t
        out = T.decimal(min(t.precision - t.scale + 1 + digits, T.MAX_PRECISION), digits)
        em.op(X_ROUND, 3 if name == "bround" else 0, t.scale, digits, out.precision)
        return out
    if rounding and digits is not None and t.numeric:
        # Spark rounds the double's decimal string (see spark_round.h); FLOAT stays FLOAT
        _compile_as(em, x, T.DOUBLE)
        em.op(C_ROUND, digits, int(name == "bround"), int(t.name == "float"))
        return T.FLOAT if t.name == "float" else T.DOUBLE
    if name == "bround":
        raise CepUnsupportedError("bround() over values of different rows needs a constant "
                                  "scale", pos=e.pos)
    for arg in e.args:
        _expect(_compile_as(em, arg, T.DOUBLE), ("double", "null"), e,
                f"{name} needs numeric arguments")
    if len(e.args) == 1:  # round(x) = round(x, 0)
        em.const(0.0)
    em.op(C_FUNC2, FUNC2[name], delta=-1)
    return T.DOUBLE


def _aggregate(em: _Emitter, e: AggregateValue) -> VmType:
    col, t = (-1, None) if e.column is None else em.column_index(e.column)
    if e.computed and (e.distinct or e.func == "ELEMENT"):  # listed rows read columns
        raise CepUnsupportedError(f"{e.func.lower()}() over listed rows cannot read "
                                  "MATCH_NUMBER() in DEFINE", pos=e.pos)
    if e.per_label:
        col, t = _label_block(em, e, 1)
    value_at_row = e.computed[0] if e.computed else None
    if value_at_row is not None:
        col, t = -1, _type_of(em, value_at_row)
    if e.func in ("SUM", "AVG") and not (t.numeric or t.name == "interval"):
        raise CepAnalysisError(f"{e.func.lower()}() needs a numeric argument", pos=e.pos)
    if e.func in MOMENT_FUNCS and not t.numeric:
        raise CepAnalysisError(f"{e.func.lower()}() needs a numeric argument", pos=e.pos)
    if e.func in ("MAX_BY", "MIN_BY"):
        return _aggregate_by(em, e, col, t)
    if e.func == "ELEMENT":
        return _aggregate_element(em, e, col, t)
    lane, out = aggregate_lane(e.func, t)
    set_id = em.refs.sets.set_id(e.var)
    em.row_local = False
    func = FUNC_CODES[e.func]
    if e.distinct:
        # the evaluators walk the rows matched so far (the thread's history): DISTINCT
        # state is the set of rows, not a fixed vector. Values compare in the column's lane.
        func |= A_DISTINCT
        em.reads_other_labels = True
        if e.func == "COUNT":
            lane = [int(t.exact), 0, 0, 0]
    em.aggs.append([set_id, func, col])
    em.agg_exact.append(lane)
    em.agg_args.append((value_at_row, None))
    em.op(X_AGG if out.exact else C_AGG, len(em.aggs) - 1, delta=1)
    return out


def _aggregate_element(em: _Emitter, e: AggregateValue, col: int, t: VmType) -> VmType:
    """element_at over the listed rows (like DISTINCT: the thread's history): lane =
    [column exact, 1-based index (negative from the end), 0, NULL out of range]."""
    em.row_local = False
    em.reads_other_labels = True
    em.aggs.append([em.refs.sets.set_id(e.var),
                    FUNC_CODES["ELEMENT"] | (A_DISTINCT if e.distinct else 0), col])
    em.agg_args.append((None, None))
    em.agg_exact.append([int(t.exact), e.index, 0, int(e.null_out_of_range)])
    em.op(X_AGG if t.exact else C_AGG, len(em.aggs) - 1, delta=1)
    return t


def _aggregate_by(em: _Emitter, e: AggregateValue, col: int, t: VmType) -> VmType:
    """max_by/min_by: the aggregate reads its ordering column; its lane names the value
    column: [ordering exact, ordering scale, value column, value exact]."""
    by_at_row = e.computed[1] if e.computed else None
    if by_at_row is not None:
        by_col, by_t = -1, _type_of(em, by_at_row)
    else:
        by_col, by_t = _label_block(em, e, 2) if e.per_label else em.column_index(e.by)
    for what, typ in (("value", t), ("ordering", by_t)):
        if typ.name in ("string", "classifier"):
            raise CepUnsupportedError(
                f"{e.func.lower()}() in DEFINE needs a numeric, boolean or date/time {what} "
                f"(got {typ}); MEASURES take any type", pos=e.pos)
    em.row_local = False
    em.aggs.append([em.refs.sets.set_id(e.var), FUNC_CODES[e.func], by_col])
    em.agg_args.append((by_at_row, e.computed[0] if e.computed else None))
    em.agg_exact.append([int(by_t.exact), by_t.scale, col, int(t.exact)])
    em.op(X_AGG if t.exact else C_AGG, len(em.aggs) - 1, delta=1)
    return t


def _label_block(em: _Emitter, e: AggregateValue, which: int) -> tuple[int, VmType]:
    """An argument reading CLASSIFIER(): its column per label (``e.per_label``) laid out
    as one block of VM columns in label order; the evaluators read column first + label
    on a row labelled label (aggregates.pxd, _label_column), so the code is -first - 2.
    Labels the aggregate never steps hold the first label's column."""
    names = {part[0]: part[which] for part in e.per_label}
    default = e.per_label[0][which]
    first, t = em.column_index(default)
    # every label's column registered first: column_index appends a column it has not
    # seen, which inside the loop below would shift the block
    located = [em.column_index(names.get(label, default)) for label in em.labels]
    block = len(em.columns)
    for i, lt in located:
        if lt != t:
            raise CepUnsupportedError(
                f"{e.func.lower()}() in DEFINE reads CLASSIFIER() in an argument whose type "
                f"differs per variable ({t} and {lt}); CAST the argument to one type",
                pos=e.pos)
        em.columns.append(em.columns[i])
        em.kinds.append(em.kinds[i])
        em.types.append(lt)
    return -block - 2, t


def aggregate_column(code: int) -> int:
    """The VM column a DEFINE aggregate's column code names (-1: none); a CLASSIFIER()
    block (_label_block) names its first column, all of one type."""
    return code if code > -2 else -code - 2


def _is_string_literal(e: Expr) -> bool:
    return isinstance(e, Literal) and e.type == "string"


def _is_classifier(e: Expr) -> bool:
    return isinstance(e, RowValue) and isinstance(e.value, Classifier)


def _expect(t: VmType, allowed: tuple[str, ...], e: Expr, message: str) -> None:
    if t.name not in allowed:
        raise CepAnalysisError(message, pos=getattr(e, "pos", None))
