"""Keep PySpark's JSON error log lines out of the console for errors cepsql converts.

PySpark logs every SQL error with a query context as a JSON line on stderr
(``SQLQueryContextLogger`` / ``DataFrameQueryContextLogger``) when the exception object is
built. When the failing call came from cepsql, cepsql raises its own error instead, with
the position in the user's SQL, so the JSON line only repeats it in a form made for log
collectors. The filter drops exactly those records: ones logged while a cepsql frame is on
the stack, and ones about an error cepsql will convert when an action (collect, show...)
raises it later, without a cepsql frame (DIVIDE_BY_ZERO in the SQL around a clause:
task_errors.statement_error locates it). Errors of the user's own ``spark.sql`` calls are
logged as PySpark does.
"""
from __future__ import annotations

import logging
import sys

from cepsql.backends.spark.task_errors import statement_error

LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
_MAX_DEPTH = 80


class _FromCepsql(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        frame = sys._getframe(1)
        for _ in range(_MAX_DEPTH):
            if frame is None:
                return True
            name = frame.f_globals.get("__name__", "")
            if name.startswith("cepsql.") and name != __name__:
                return False
            if frame.f_code.co_name == "_log_exception" and _converted(frame.f_locals):
                return False
            frame = frame.f_back
        return True


def _converted(local_vars: dict) -> bool:
    """Whether the exception PySpark is logging (``self`` of its _log_exception) is one
    cepsql's error hook turns into a located CepError."""
    error = local_vars.get("self")
    if not isinstance(error, Exception):
        return False
    try:
        return statement_error(error) is not None
    except Exception:  # noqa: BLE001  (never fail PySpark's logging)
        return False


def install() -> None:
    """Attach the filter once per logger (idempotent)."""
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # pragma: no cover - PySpark without its logger module
        return
    for name in LOGGERS:
        logger = PySparkLogger.getLogger(name)
        if not any(isinstance(f, _FromCepsql) for f in logger.filters):
            logger.addFilter(_FromCepsql())
