"""Spark's get_json_object on one value, for the in-process evaluator (arrow_eval).

Why here: Arrow has no JSON-path kernel, so the function runs per row on Python values;
the text it returns must be Spark's (Jackson's): a string unquoted, a number as Java
prints a double or a long, an object or array as compact JSON, NULL for JSON null, for
malformed JSON and for a path that finds nothing.

Paths: ``$`` followed by ``.name``, ``['name']`` and ``[n]`` steps. Spark's wildcards
(``[*]``, ``.*``) are refused by ``parse_json_path`` (the caller raises at the call).
"""
from __future__ import annotations

import json
import math
import re
from decimal import Decimal

__all__ = ["parse_json_path", "json_object_at", "java_double"]

_STEP = re.compile(r"\.([^.\[\]*]+)|\['((?:[^'\\]|\\.)*)'\]|\[(\d+)\]")


def parse_json_path(path: str) -> tuple[str | int, ...] | None:
    """The steps of a path (names and indices), or None when Spark would give NULL for
    every row (not starting with ``$``, malformed) or it uses a wildcard (raised by the
    caller: ``"*" in path``)."""
    if not path.startswith("$"):
        return None
    steps: list[str | int] = []
    at = 1
    while at < len(path):
        m = _STEP.match(path, at)
        if m is None:
            return None
        name, quoted, index = m.groups()
        steps.append(int(index) if index is not None else quoted if quoted is not None else name)
        at = m.end()
    return tuple(steps)


def json_object_at(text: str | None, steps: tuple[str | int, ...]) -> str | None:
    """get_json_object(text, path) for the path's steps (parse_json_path)."""
    if text is None:
        return None
    try:
        value = json.loads(text, parse_constant=_reject)
    except (ValueError, RecursionError):
        return None
    for step in steps:
        if isinstance(step, int) and isinstance(value, list) and step < len(value):
            value = value[step]
        elif isinstance(step, str) and isinstance(value, dict) and step in value:
            value = value[step]
        else:
            return None
    if value is None:
        return None
    return value if isinstance(value, str) else _json_text(value)


def _reject(name: str) -> float:
    raise ValueError(name)  # NaN / Infinity are not JSON: Spark gives NULL


def _json_text(value: object) -> str:
    """Compact JSON as Jackson writes it (numbers as Java prints them)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(_json_text(v) for v in value) + "]"
    return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _json_text(v)
                          for k, v in value.items()) + "}"


def java_double(x: float) -> str:
    """Java's Double.toString(x): shortest digits, plain between 1e-3 and 1e7, else
    ``d.dddE[-]n``; always a fraction digit."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    digits_t, exp = Decimal(repr(abs(x))).as_tuple()[1:]
    digits = "".join(map(str, digits_t)).rstrip("0") or "0"
    point = len(digits_t) + exp  # position of the decimal point after the first digits
    if 1e-3 <= abs(x) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        whole, frac = digits[:point].ljust(point, "0"), digits[point:]
        return f"{sign}{whole}.{frac or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"
