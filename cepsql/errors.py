"""User-facing errors. Every mistake in user input surfaces as a CepError subclass
that names the problem and, when known, its line:column in the SQL text."""
from __future__ import annotations


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
