"""Mutants of valid MATCH_RECOGNIZE queries, and what running one gives: rows or a
cepsql error positioned in the mutant's own text (issue 24). Shared by tests/test_fuzz.py
(few examples, both paths) and benchmarks/fuzz_errors.py (thousands, in-process)."""
from __future__ import annotations

import random
import re
from dataclasses import dataclass
from importlib import resources

import pyarrow as pa

from cepsql.backends.local.engine import run_local
from cepsql.datagen import generate_rfid, generate_shipments, generate_ticks
from cepsql.errors import CepError

TOKEN = re.compile(r"'(?:[^']|'')*'|`(?:[^`]|``)*`|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\w+|--[^\n]*|"
                   r"\s+|.", re.S)

ODD_LITERALS = ("99999999999999999999", "2147483648", "1e400", "-0.0", "NULL", "''",
                "'\x00'", "1/0", "INTERVAL '1' DAY", "X'00'", "CAST('x' AS INT)",
                "TIMESTAMP '2020-01-01'", "ARRAY(1, 2)", "'é'", "0.5e-400", "TRUE")
ODD_IDENTIFIERS = ("`a``b`", "`t.col`", "`${x}`", "ünï", "`select`", "`\x00`", "_", "x1y")
ODD_TEXT = ("\x00", ")", "(", ",", ";", "*", "+", "'", "`", "{", "}", "--", "/*", "|", "..")

SMALL_TICKS = """SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.price) AS low, LAST(B.price) AS high, MATCH_NUMBER() AS mn,
    COUNT(B.*) AS n, CLASSIFIER() AS c
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C?)
  DEFINE B AS B.price > PREV(B.price), C AS C.volume < 2 * A.volume
) AS m WHERE n > 1"""
SMALL_CEP = """SELECT symbol, ta, tb FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES a.ts AS ta, LAST(b.ts) AS tb
  ONE ROW PER MATCH
  STRATEGY SKIP_TILL_NEXT_MATCH
  PATTERN (SEQ(a, KL(b)))
  WITHIN INTERVAL '5' SECOND
  DEFINE a AS a.volume > 500, b AS b.price > a.price
)"""
SMALL_ALL_ROWS = """WITH t AS (SELECT symbol, ts, price FROM ticks WHERE volume > 100)
SELECT * FROM t MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES RUNNING SUM(D.price) AS s, PREV(U.price, 2) AS p2
  ALL ROWS PER MATCH
  PATTERN (D+ U{1,3})
  DEFINE D AS D.price < PREV(D.price), U AS U.price >= LAST(D.price) + 0.01
) ORDER BY symbol, ts"""


def seed_queries() -> list[str]:
    """Valid queries: the shipped examples (CREATE VIEW statements left out) and a few
    small ones over ticks."""
    out = []
    for path in sorted(resources.files("cepsql.examples").iterdir()):
        if path.name.endswith(".sql"):
            text = "\n".join(l for l in path.read_text().splitlines() if not l.startswith("--"))
            text = text.strip().rstrip(";")
            if text.upper().startswith("SELECT"):
                out.append(text)
    return out + [SMALL_TICKS, SMALL_CEP, SMALL_ALL_ROWS]


def seed_tables(n_rows: int = 60) -> dict[str, pa.Table]:
    """Small inputs for the seeds (few rows keep a mutant's run short)."""
    return {"ticks": generate_ticks(n_rows, n_symbols=3), "rfid": generate_rfid(n_rows, n_tags=5),
            "shipments": generate_shipments(n_rows)}


def tokens(sql: str) -> list[str]:
    return TOKEN.findall(sql)


def mutate(sql: str, rng: random.Random) -> str:
    """One random mutation of sql (token deleted, duplicated, swapped or replaced, an odd
    literal, identifier or character inserted, an expression nested deeply)."""
    toks = tokens(sql)
    solid = [i for i, t in enumerate(toks) if not t.isspace()]
    i = rng.choice(solid)
    kind = rng.randrange(9)
    if kind == 0:
        del toks[i]
    elif kind == 1:
        toks.insert(i, toks[i] + " ")
    elif kind == 2:
        j = solid[min(solid.index(i) + 1, len(solid) - 1)]
        toks[i], toks[j] = toks[j], toks[i]
    elif kind == 3:
        toks.insert(i, " " + rng.choice(ODD_LITERALS) + " ")
    elif kind == 4:
        numbers = [k for k in solid if toks[k][0].isdigit()] or [i]
        toks[rng.choice(numbers)] = rng.choice(("99999999999999999999", "2147483648", "0",
                                                "1e400", "4294967296", "65536"))
    elif kind == 5:
        words = [k for k in solid if toks[k][0].isalpha()] or [i]
        toks[rng.choice(words)] = rng.choice(ODD_IDENTIFIERS)
    elif kind == 6:
        toks.insert(i, rng.choice(ODD_TEXT))
    elif kind == 7:
        depth = rng.choice((3, 40, 120))
        toks[i] = "(" * depth + toks[i] + ")" * depth
    else:
        k = rng.randrange(len(sql) + 1)
        return sql[:k] + rng.choice(("\x00", "\ufeff", "\t", "\r\n")) + sql[k:]
    return "".join(toks)


@dataclass(frozen=True)
class Outcome:
    """What one run gave: rows (``table``), a cepsql error, or another exception."""
    table: pa.Table | None = None
    error: BaseException | None = None

    @property
    def kind(self) -> str:
        if self.error is None:
            return "rows"
        return "cep" if isinstance(self.error, CepError) else "other"


def positioned(err: CepError, sql: str) -> bool:
    """Whether err names a line:column inside sql (the text the user wrote)."""
    if err.line is None or err.col is None:
        return False
    lines = sql.split("\n")
    if not 1 <= err.line <= len(lines):
        return False
    return 1 <= err.col <= len(lines[err.line - 1]) + 1


def run_in_process(sql: str, tables: dict[str, pa.Table]) -> Outcome:
    try:
        return Outcome(table=run_local(sql, tables))
    except Exception as e:  # noqa: BLE001  (the point is to see every kind)
        return Outcome(error=e)
