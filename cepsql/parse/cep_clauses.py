"""CEP-mode clause values: STRATEGY names and WITHIN windows.

Kept apart from the token-walking parser so the rules (valid names, unit sizes,
what counts as a positive window) are stated once and testable without SQL.
"""
from __future__ import annotations

from decimal import Decimal, InvalidOperation

from cepsql.algebra.limits import MAX_INT64
from cepsql.algebra.spec import Window
from cepsql.errors import CepSyntaxError, CepUnsupportedError

STRATEGIES = ("STRICT_CONTIGUITY", "PARTITION_CONTIGUITY", "SKIP_TILL_NEXT_MATCH",
              "SKIP_TILL_ANY_MATCH")

# unit -> microseconds; singular and plural accepted
_UNIT_MICROS = {"MICROSECOND": 1, "MILLISECOND": 1_000, "SECOND": 1_000_000,
                "MINUTE": 60_000_000, "HOUR": 3_600_000_000, "DAY": 86_400_000_000}


def strategy_name(text: str, pos: int) -> str:
    """The canonical strategy name, or CepSyntaxError listing the valid ones."""
    name = text.upper()
    if name not in STRATEGIES:
        raise CepSyntaxError(f"unknown STRATEGY {text}; expected one of {', '.join(STRATEGIES)}",
                             pos=pos)
    return name


def unit_micros(text: str, pos: int) -> int:
    """Microseconds in one ``text`` unit (MINUTE or MINUTES ...)."""
    unit = text.upper()
    if unit.endswith("S") and unit[:-1] in _UNIT_MICROS:
        unit = unit[:-1]
    if unit in ("MONTH", "YEAR"):
        raise CepUnsupportedError(
            f"WITHIN INTERVAL needs a fixed length; {text} is a calendar unit (use DAY, "
            "HOUR, MINUTE, SECOND or MILLISECOND)", pos=pos)
    if unit not in _UNIT_MICROS:
        raise CepSyntaxError(f"unknown WITHIN INTERVAL unit {text}; expected MILLISECOND, "
                             "SECOND, MINUTE, HOUR or DAY", pos=pos)
    return _UNIT_MICROS[unit]


def time_window(amount: str, amount_pos: int, unit: str, unit_pos: int) -> Window:
    """WITHIN INTERVAL amount unit -> Window('time', micros); amount may be a decimal
    (``'1.5' HOUR``) as long as the result is a positive whole number of microseconds."""
    try:
        value = Decimal(amount.strip())
    except InvalidOperation:
        raise CepSyntaxError(f"WITHIN INTERVAL amount must be a number, found {amount!r}",
                             pos=amount_pos) from None
    micros = value * unit_micros(unit, unit_pos)
    if not micros.is_finite() or micros <= 0:
        raise CepSyntaxError("WITHIN window must be positive", pos=amount_pos)
    if micros > MAX_INT64:  # Spark: INTERVAL_ARITHMETIC_OVERFLOW beyond int64 microseconds
        raise CepSyntaxError("WITHIN window too large (at most 106751991 days)", pos=amount_pos)
    if micros != micros.to_integral_value():
        raise CepSyntaxError("WITHIN window must be a whole number of microseconds",
                             pos=amount_pos)
    return Window("time", int(micros))


def rows_window(count: str, pos: int) -> Window:
    """WITHIN n ROWS -> Window('rows', n), n a positive integer."""
    if not count.isdigit():
        raise CepSyntaxError(f"WITHIN ... ROWS needs a positive integer, found {count!r}",
                             pos=pos)
    n = int(count)
    if n <= 0:
        raise CepSyntaxError("WITHIN window must be positive", pos=pos)
    if n > MAX_INT64:
        raise CepSyntaxError(f"WITHIN window too large (at most {MAX_INT64} rows)", pos=pos)
    return Window("rows", n)
