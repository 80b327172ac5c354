"""Keep PySpark's JSON error log lines out of the console for errors cepsql converts.

PySpark logs every SQL error with a query context as a JSON line on stderr
(``SQLQueryContextLogger`` / ``DataFrameQueryContextLogger``) when the exception object is
built. When the failing call came from cepsql, cepsql raises its own error instead, with
the position in the user's SQL, so the JSON line only repeats it in a form made for log
collectors. The filter drops exactly those records: ones logged while a cepsql frame is on
the stack. Errors of the user's own ``spark.sql`` calls are logged as PySpark does.
"""
from __future__ import annotations

import logging
import sys

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
            frame = frame.f_back
        return True


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
