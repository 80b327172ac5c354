"""Spark's errors about the statement cepsql handed to ``spark.sql``, located in the text
the user wrote.

Why: spark.sql runs the statement with each MATCH_RECOGNIZE clause replaced by a
generated view name (and cep_match / cep_view calls expanded), so Spark's own positions
("line 1, pos 57", a query context's start index) count characters of that rewritten
text. Aligning the two texts (they are equal outside the replaced spans) maps a position
back; one inside a replacement maps to the start of what it replaced.
"""
from __future__ import annotations

import re
from difflib import SequenceMatcher

from cepsql.backends.spark.frames import GENERATED_NAME

# pyspark's SQL formatter binds each DataFrame spark.sql(text, **frames) reads to a temp
# view "_pyspark_<32 hex digits>": Spark's positions count characters of that text
_BOUND_VIEW = re.compile(r"_pyspark_[0-9a-f]{32}")
_STAND_IN = "_pyspark_" + "0" * 32
_LINE_POS = re.compile(r"\(?line (\d+),? pos(?:ition)? (\d+)\)?;?")
_CONTEXT = re.compile(r"\n?== SQL.*", re.S)
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+")


def seen_text(text: str, frames) -> str:
    """text as Spark parses it after sql_with_frames binds ``frames`` (same length and
    positions; the bound views' random names replaced by one stand-in)."""
    return GENERATED_NAME.sub(lambda m: _STAND_IN if m.group(0) in frames else m.group(0),
                              text)


def _same(a: str, b: str) -> bool:
    return _BOUND_VIEW.sub(_STAND_IN, a) == _BOUND_VIEW.sub(_STAND_IN, b)


def context_offset(error: Exception, text: str) -> int | None:
    """The start in text of the first SQL query context of Spark's error whose fragment
    is found there; None when it has none (or they point into another text)."""
    getter = getattr(error, "getQueryContext", None)
    try:
        contexts = getter() if getter is not None else []
    except Exception:  # noqa: BLE001  (a JVM error without contexts)
        contexts = []
    for ctx in contexts:
        try:
            start, fragment = ctx.startIndex(), ctx.fragment()
        except Exception:  # noqa: BLE001  (a DataFrame context has no index)
            continue
        if fragment and start is not None and start >= 0 and \
                _same(text[start:start + len(fragment)], fragment):
            return start
    return None


def spark_offset(error: Exception, text: str) -> int | None:
    """The character offset in text that Spark's error points at: its first SQL query
    context, else the "line L, pos P" of its message (P counts from 0); None if neither."""
    start = context_offset(error, text)
    if start is not None:
        return start
    found = _LINE_POS.search(str(error))
    if found is None:
        return None
    line, col = int(found.group(1)), int(found.group(2))
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        return None
    return sum(len(x) + 1 for x in lines[:line - 1]) + min(col, len(lines[line - 1]))


def user_offset(rewritten: str, original: str, offset: int) -> tuple[int, bool]:
    """offset in rewritten mapped into original, and whether it fell in text cepsql
    generated (then it maps to the start of the span that text replaced)."""
    matcher = SequenceMatcher(None, rewritten, original, autojunk=False)
    for tag, r_lo, r_hi, o_lo, o_hi in matcher.get_opcodes():
        if r_lo <= offset < r_hi or (offset == r_hi == len(rewritten)):
            if tag == "equal":
                return o_lo + (offset - r_lo), False
            return o_lo, True
    return len(original), False


def spark_message(error: Exception) -> str:
    """Spark's message without its position and query-context snippet (cepsql gives the
    position in the user's text instead) nor its SQLSTATE suffix (as the in-process
    evaluator words the same error, exprs.spark_errors)."""
    text = _CONTEXT.sub("", str(error)).strip()
    first = text.splitlines()[0] if text else type(error).__name__
    return _SQLSTATE.sub("", _LINE_POS.sub("", first)).strip().rstrip(";").strip()


def located(error: Exception, rewritten: str, original: str) -> tuple[str, int | None, bool]:
    """(message, offset in original or None, whether the offset lies in generated text)."""
    offset = spark_offset(error, rewritten)
    if offset is None:
        return spark_message(error), None, False
    pos, generated = user_offset(rewritten, original, offset)
    return spark_message(error), pos, generated

