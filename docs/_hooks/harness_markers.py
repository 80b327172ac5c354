"""MkDocs hook: hide the docs tests' harness markers from readers.

tests/test_docs.py runs every code block of the site; a block whose first line is a
marker such as ``# run: subprocess`` tells it how. Readers copy blocks, so the rendered
page shows the block without that line (the Markdown source keeps it for the tests).
"""
from __future__ import annotations

import re

#: a fence opening, then a first line ``# run: <how>``, which is dropped
MARKER = re.compile(r"^(?P<fence>```[^\n]*\n)# run: [\w-]+[ \t]*\n", re.M)


def on_page_markdown(markdown: str, **_: object) -> str:
    """The page's Markdown without harness markers (MkDocs calls this for every page)."""
    return MARKER.sub(r"\g<fence>", markdown)
