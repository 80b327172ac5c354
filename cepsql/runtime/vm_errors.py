"""The condition VM's run-time errors in Spark's words, at the expression that raised them.

Why: the VM reports its first error as a code plus the failing instruction's words and
operands (``ConditionHost.vm_error``); the instruction carries its operator, its type's
width / scales / precision and the expression's offset in the SQL (compile/conditions.py
emits them), so the message is the one Spark gives for the same expression
(exprs.spark_errors) and the error points at it. Aggregates know no offset: the driver
locates those (runtime/error_position.py).
"""
from __future__ import annotations

from decimal import ROUND_HALF_UP, Context, Decimal

from cepsql.compile.opcodes import (A_AVG, A_SUM, VM_ERR_CAST_OVERFLOW, VM_ERR_DIV_ZERO,
                                    VM_ERR_INDEX, VM_ERR_INTERVAL_OVERFLOW,
                                    VM_ERR_LONG_OVERFLOW, VM_ERR_OVERFLOW, XO, X_ABS, X_AGG,
                                    X_DEC, X_INT, X_NEG)
from cepsql.exprs.spark_errors import (DIVIDE_BY_ZERO, LONG_OVERFLOW, REMAINDER_BY_ZERO,
                                       arithmetic_overflow, binary_arithmetic_overflow,
                                       decimal_out_of_range, interval_overflow,
                                       shown_product)

__all__ = ["vm_error_message"]

_OPS = {code: op for op, code in XO.items()}
# the value Spark's message shows (checked against Spark 4.3): a product as
# spark_errors.shown_product, a quotient rounded HALF_UP to the result's scale, sums exact
_EXACT = Context(prec=200)

# what the VM said before it named the instruction (an error whose instruction is unknown)
_GENERIC = {
    VM_ERR_OVERFLOW: (
        "[ARITHMETIC_OVERFLOW] arithmetic overflow in a DEFINE condition or an aggregate over "
        "pattern variables (a DECIMAL result exceeds its precision or an integer its width); "
        "set spark.sql.ansi.enabled=false to get NULL instead"),
    VM_ERR_DIV_ZERO: (
        "[DIVIDE_BY_ZERO] division by zero in a DEFINE condition; set "
        "spark.sql.ansi.enabled=false to get NULL instead"),
    VM_ERR_INDEX: (
        "[INVALID_ARRAY_INDEX_IN_ELEMENT_AT] element_at(array_agg(...), i) in a DEFINE "
        "condition: the index is out of the list's bounds; use try_element_at, or set "
        "spark.sql.ansi.enabled=false to get NULL instead"),
    VM_ERR_INTERVAL_OVERFLOW: interval_overflow("+"),
    VM_ERR_LONG_OVERFLOW: LONG_OVERFLOW,
    VM_ERR_CAST_OVERFLOW: (
        "[CAST_OVERFLOW] a value in a DEFINE condition cannot be cast to its integral type "
        "due to an overflow; set spark.sql.ansi.enabled=false for Spark's legacy cast (the "
        "low bits of an integer or DECIMAL, the nearest bound for a DOUBLE)"),
}


def vm_error_message(code: int, words: tuple[int, ...], a: int, b: int
                     ) -> tuple[str, int | None] | None:
    """(message, offset of the expression or None) of the VM error ``code`` raised by the
    instruction ``words`` on operands a, b; None for no error."""
    if not code:
        return None
    opcode = words[0] if words else 0
    if opcode == X_INT:
        return _integral(code, _OPS.get(words[1], "+"), words[2], a, b), _pos(words[4])
    if opcode == X_DEC:
        return _decimal(code, words, a, b), _pos(words[6])
    if opcode in (X_NEG, X_ABS) and code == VM_ERR_OVERFLOW:
        return arithmetic_overflow(), _pos(words[2])
    if opcode == X_AGG and words[1] == -1:
        return _aggregate(code, words[2], words[3:7], a), None
    return _GENERIC.get(code, f"condition VM error {code}"), None


def _pos(word: int) -> int | None:
    return None if word < 0 else word


def _integral(code: int, op: str, width: int, a: int, b: int) -> str:
    if code == VM_ERR_DIV_ZERO:
        return REMAINDER_BY_ZERO
    if code == VM_ERR_INTERVAL_OVERFLOW:
        return interval_overflow(op)
    if code == VM_ERR_LONG_OVERFLOW:
        return LONG_OVERFLOW
    if width >= 32:
        return arithmetic_overflow(op)
    return binary_arithmetic_overflow(a, op, b)


def _decimal(code: int, words: tuple[int, ...], a: int, b: int) -> str:
    op, sa, sb, sr, pr = _OPS.get(words[1], "+"), *words[2:6]
    if code == VM_ERR_DIV_ZERO:
        return DIVIDE_BY_ZERO if op == "/" else REMAINDER_BY_ZERO
    x, y = _unscaled(a, sa), _unscaled(b, sb)
    if op == "+":
        value = _EXACT.add(x, y)
    elif op == "-":
        value = _EXACT.subtract(x, y)
    elif op == "*":
        value = shown_product(_EXACT.multiply(x, y))
    elif op == "/":
        value = _EXACT.divide(x, y).quantize(Decimal(1).scaleb(-sr), ROUND_HALF_UP, _EXACT)
    else:  # % and pmod: Java's remainder (the dividend's sign), as Python's Decimal
        value = _EXACT.remainder(x, y)
    return decimal_out_of_range(value, pr, sr)


def _unscaled(value: int, scale: int) -> Decimal:
    """The DECIMAL whose unscaled value and scale these are, exactly."""
    return Decimal(value).scaleb(-scale, _EXACT)


def _aggregate(code: int, func: int, lane: tuple[int, ...], value: int) -> str:
    """An aggregate's error: lane = exact, argument scale, result scale, result precision
    (0: a 64-bit sum)."""
    if code == VM_ERR_OVERFLOW and func == A_SUM and lane[3] == 0:
        return arithmetic_overflow("+")
    known = -(10 ** 38) < value < 10 ** 38  # not the VM's "beyond 128 bits" sentinel
    if code == VM_ERR_OVERFLOW and func == A_SUM and lane[0] and known:
        return decimal_out_of_range(_unscaled(value, lane[1]), lane[3], lane[2])
    if code == VM_ERR_OVERFLOW and func == A_AVG:
        return _GENERIC[code]
    return _GENERIC.get(code, f"condition VM error {code}")
