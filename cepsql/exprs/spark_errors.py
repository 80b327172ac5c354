"""Spark's own words for the run-time errors of arithmetic (Spark 4.3, without its
SQLSTATE suffix), in one place: the in-process evaluator (arrow_eval) and the condition
VM's errors (runtime.worker.raise_vm_error) both word their errors with these, so an
expression fails with the same message on every path.
"""
from __future__ import annotations

from decimal import ROUND_DOWN, Context, Decimal

__all__ = ["TRY_FUNCTION", "LONG_OVERFLOW", "DIVIDE_BY_ZERO", "REMAINDER_BY_ZERO",
           "arithmetic_overflow", "binary_arithmetic_overflow", "interval_overflow",
           "decimal_out_of_range", "shown_product", "cast_overflow"]

#: operator -> the try_ function Spark's overflow errors suggest
TRY_FUNCTION = {"+": "try_add", "-": "try_subtract", "*": "try_multiply"}
_BYPASS = 'If necessary set "spark.sql.ansi.enabled" to "false" to bypass this error.'
#: Java's Math.addExact / multiplyExact (TIMESTAMP +- INTERVAL, INTERVAL * n), any mode
LONG_OVERFLOW = "long overflow"
DIVIDE_BY_ZERO = ("[DIVIDE_BY_ZERO] Division by zero. Use `try_divide` to tolerate divisor "
                  f"being 0 and return NULL instead. {_BYPASS}")
REMAINDER_BY_ZERO = ("[REMAINDER_BY_ZERO] Remainder by zero. Use `try_mod` to tolerate "
                     f"divisor being 0 and return NULL instead. {_BYPASS}")


def arithmetic_overflow(op: str | None = None) -> str:
    """INT / BIGINT a op b under ANSI (op None: a unary minus or abs, no suggestion)."""
    if op not in TRY_FUNCTION:
        return f"[ARITHMETIC_OVERFLOW] overflow. {_BYPASS}"
    return (f"[ARITHMETIC_OVERFLOW] overflow. Use '{TRY_FUNCTION[op]}' to tolerate overflow "
            f"and return NULL instead. {_BYPASS}")


def binary_arithmetic_overflow(x: int, op: str, y: int) -> str:
    """SMALLINT / TINYINT a op b under ANSI: Spark names the operands (with an S suffix
    for TINYINT too, as Spark 4.3 prints them)."""
    return (f"[BINARY_ARITHMETIC_OVERFLOW] {x}S {op} {y}S caused overflow. Use "
            f"`{TRY_FUNCTION[op]}` to ignore overflow problem and return NULL.")


def interval_overflow(op: str) -> str:
    """Interval arithmetic (and interval sums) leaving 64 bits, in any ANSI mode."""
    return ("[INTERVAL_ARITHMETIC_OVERFLOW.WITH_SUGGESTION] Integer overflow while operating "
            f"with intervals. Use `{TRY_FUNCTION.get(op, 'try_add')}` to tolerate overflow "
            "and return NULL instead.")


# the value Spark's message shows for an overflowing DECIMAL product (checked against
# Spark 4.3): rounded down to 39 significant digits (sums and differences: exact)
_PRODUCT = Context(prec=39, rounding=ROUND_DOWN)


def shown_product(exact: Decimal) -> Decimal:
    """The value decimal_out_of_range shows for an exact DECIMAL product."""
    return _PRODUCT.plus(exact)


def decimal_out_of_range(value: Decimal, precision: int, scale: int) -> str:
    """A DECIMAL result beyond its type under ANSI (Spark's Decimal.toPrecision)."""
    return (f"[NUMERIC_VALUE_OUT_OF_RANGE.WITH_SUGGESTION]  {value:f} cannot be represented "
            f"as Decimal({precision}, {scale}). {_BYPASS[:-1]}, and return NULL instead.")


#: an integer type's bit width -> (Spark's SQL name, its values' suffix in Spark's messages)
_INTEGER_TYPES = {8: ("TINYINT", "Y"), 16: ("SMALLINT", "S"), 32: ("INT", ""), 64: ("BIGINT", "L")}


def cast_overflow(value: int, source_bits: int, target_bits: int) -> str:
    """An integer CAST whose value leaves the target type (both told by their bit
    width), under ANSI."""
    (source, suffix), (target, _) = _INTEGER_TYPES[source_bits], _INTEGER_TYPES[target_bits]
    return (f'[CAST_OVERFLOW] The value {value}{suffix} of the type "{source}" cannot be '
            f'cast to "{target}" due to an overflow. Use `try_cast` to tolerate overflow and '
            "return NULL instead.")


def cast_invalid_input(text: str, target_sql: str) -> str:
    """A string CAST whose value does not parse as the target type, under ANSI (Spark
    shows the value as written, spaces included)."""
    target = target_sql.upper().replace(", ", ",")   # DECIMAL(5,1), as Spark prints it
    return (f"[CAST_INVALID_INPUT] The value '{text}' of the type \"STRING\" cannot be cast "
            f"to \"{target}\" because it is malformed. Correct the value as per the syntax, or "
            "change its target type. Use `try_cast` to tolerate malformed input and return "
            "NULL instead.")
