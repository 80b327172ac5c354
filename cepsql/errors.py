"""User-facing errors. Every mistake in user input surfaces as a CepError subclass
that names the problem and, when known, its line:column in the SQL text."""
from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Iterator


class CepError(Exception):
    """Base class of every error cepsql raises for bad user input or environment."""

    def __init__(self, message: str, sql: str | None = None, line: int | None = None,
                 col: int | None = None, pos: int | None = None):
        self.message = message
        self.sql = sql
        self.pos = pos
        if line is None and pos is not None and sql is not None:
            line, col = position_of(sql, pos)
        self.line = line
        self.col = col
        super().__init__(self._render())

    def with_sql(self, sql: str) -> "CepError":
        """The same error located in sql (for errors raised before the text was known)."""
        if self.sql is not None:
            return self
        return type(self)(self.message, sql=sql, pos=self.pos)

    def _render(self) -> str:
        if self.line is None:
            return self.message
        return f"{self.message} (line {self.line}, column {self.col})"

    def caret_snippet(self) -> str:
        """The offending SQL line with a caret under the column, for CLIs."""
        if self.sql is None or self.line is None:
            return ""
        lines = self.sql.splitlines() or [""]
        text = lines[min(self.line, len(lines)) - 1]
        return f"{text}\n{' ' * max((self.col or 1) - 1, 0)}^"


class CepSyntaxError(CepError):
    """The SQL text does not follow the MATCH_RECOGNIZE grammar."""


class CepAnalysisError(CepError):
    """The SQL is well formed but refers to unknown variables, columns or functions,
    or uses a construct in a place the standard forbids."""


class CepUnsupportedError(CepError):
    """A valid construct that this engine cannot evaluate in the requested context."""


class CepRuntimeError(CepError):
    """An error the standard defines at run time (e.g. skipping to the first row of a match)."""


class CepEnvironmentError(CepError):
    """The machine lacks something cepsql needs (e.g. Java for Spark)."""


def position_of(sql: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of a character offset in sql."""
    offset = max(0, min(offset, len(sql)))
    line = sql.count("\n", 0, offset) + 1
    col = offset - (sql.rfind("\n", 0, offset) + 1) + 1
    return line, col


# --- errors crossing Spark's Python-worker boundary --------------------------------------
# A CepError raised inside a Spark task reaches the driver only as the text of Spark's
# PythonException. ``transported`` makes that text carry the error's class, message and
# position (one tagged JSON line); ``decode_error`` turns the text back into the CepError
# on the driver (cepsql/backends/spark/task_errors.py hooks it into pyspark's error conversion).

WIRE_TAG = "[cepsql-error] "


def encode_error(err: CepError) -> str:
    """One line naming err's class, message and position (for the worker -> driver trip)."""
    return WIRE_TAG + json.dumps({"type": type(err).__name__, "message": err.message,
                                  "sql": err.sql, "pos": err.pos, "line": err.line,
                                  "col": err.col, "site": getattr(err, "site", None)})


def decode_error(text: str) -> CepError | None:
    """The CepError encoded in text (e.g. a PythonException's message), or None."""
    start = text.rfind(WIRE_TAG)
    if start < 0:
        return None
    try:
        data, _ = json.JSONDecoder().raw_decode(text, start + len(WIRE_TAG))
        cls = _ERROR_TYPES[data["type"]]
        err = cls(data["message"], sql=data.get("sql"), line=data.get("line"),
                  col=data.get("col"), pos=data.get("pos"))
    except (ValueError, KeyError, TypeError):
        return None
    if data.get("site") is not None:
        err.site = str(data["site"])
    return err


@contextmanager
def error_site(site: str | None) -> Iterator[None]:
    """Inside Spark tasks: mark a CepError not yet located in its text (no line: no
    position, or only an offset) with ``site``, the id under which the driver remembered
    the clause's text and spec (a task has neither), so the driver can locate it there
    (backends/spark/task_errors.py)."""
    try:
        yield
    except CepError as err:
        if site is not None and err.line is None and \
                getattr(err, "site", None) is None:
            err.site = site
        raise


class _Transported:
    """Mixin of the copy raised inside a task: same CepError class, message + wire line."""

    def __init__(self, original: CepError):
        Exception.__init__(self, f"{original}\n{encode_error(original)}")
        self.message, self.sql, self.pos = original.message, original.sql, original.pos
        self.line, self.col = original.line, original.col
        self.site = getattr(original, "site", None)

    def __str__(self) -> str:
        return str(self.args[0])


@contextmanager
def transported() -> Iterator[None]:
    """Inside Spark tasks: re-raise a CepError so its text carries the wire line."""
    try:
        yield
    except CepError as err:
        if isinstance(err, _Transported):
            raise
        cls = type(err)
        carrier = type(cls.__name__, (_Transported, cls), {"__module__": cls.__module__,
                                                           "__qualname__": cls.__qualname__})
        raise carrier(err) from None


_ERROR_TYPES = {cls.__name__: cls for cls in (CepError, CepSyntaxError, CepAnalysisError,
                                              CepUnsupportedError, CepRuntimeError,
                                              CepEnvironmentError)}
