"""Spark SQL identifiers as text: the one quoting rule every piece of generated SQL uses
(parse/ splices generated view names and aliases, exprs/ renders column references,
the backends name columns and views), so a name with a backquote, a dot, a space or
non-ASCII letters reads back as exactly that one name."""
from __future__ import annotations

__all__ = ["quote_identifier", "quote_name"]


def quote_identifier(name: str) -> str:
    """Backquote one identifier (one name part), doubling embedded backquotes."""
    return "`" + name.replace("`", "``") + "`"


def quote_name(parts: tuple[str, ...] | list[str]) -> str:
    """A multipart name (``db.view``) as Spark SQL text, every part quoted."""
    return ".".join(quote_identifier(p) for p in parts)
