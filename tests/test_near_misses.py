"""Near misses equal a brute-force search on tiny inputs: for every start row the matcher
tried without a match, the longest label sequence that is a prefix of a word of the
pattern and whose DEFINEs all hold, row by row."""
from __future__ import annotations

import re
from itertools import product

import pandas as pd
from hypothesis import HealthCheck, given, settings, strategies as st

import cepsql
from cepsql.parse import find_match_recognize
from cepsql.reference.expr import evaluate
from cepsql.reference.pattern import PatternMatcher
from cepsql.reference.sql import ReferenceQuery, next_start, partitioned_rows
from support.strategies import streams

# (PATTERN, the same as a Python regex over one letter per row)
PATTERNS = [("A B+ C", "AB+C"), ("A+ B C", "A+BC"), ("A (B | C)+ A", "A(B|C)+A"),
            ("A B? C{2}", "AB?C{2}")]
DEFINES = ["B AS B.price > PREV(B.price), C AS C.price < PREV(C.price)",
           "A AS A.vol > 0.2, B AS B.price >= FIRST(A.price), C AS C.tag = 'x'",
           "B AS B.price > LAST(A.price) AND B.vol < 0.9, C AS C.price <= A.price"]
MAX_ROWS = 7
# the longest word needed: a prefix as long as the input plus the shortest tail that ends a
# word (two letters: A+ B C after MAX_ROWS A's). With MAX_WORD = 9 and 8-row inputs the
# brute force missed the 8-A prefix the search rightly reports (CI drew it)
MAX_WORD = MAX_ROWS + 2


def _viable_prefixes(regex: str) -> set[str]:
    words = ("".join(w) for n in range(1, MAX_WORD + 1) for w in product("ABC", repeat=n))
    return {w[:i] for w in words if re.fullmatch(regex, w) for i in range(len(w) + 1)}


PREFIXES = {regex: _viable_prefixes(regex) for _, regex in PATTERNS}


def _brute_force(sql: str, regex: str, table) -> dict[tuple, int]:
    spec = find_match_recognize(sql)[0].spec
    query = ReferenceQuery(spec, table.column_names)
    out = {}
    for rows in partitioned_rows(spec, table.to_pylist(), query.colmap):
        key = tuple(rows[0][k.name] for k in spec.partition_by)

        def holds(start: int, labels: str) -> bool:
            for i in range(len(labels)):
                cond = query.defines.get(labels[i])
                ctx = query.context(rows, start=start, labels=tuple(labels[:i + 1]),
                                    current=start + i, match_number=1, in_define=True)
                if cond is not None and evaluate(cond, ctx) is not True:
                    return False
            return True

        matcher = PatternMatcher(spec.pattern, len(rows),
                                 lambda s, r, labels: holds(s, "".join(labels)))
        pos = 0
        while pos < len(rows):
            labels = matcher.match(pos)
            if labels is not None:
                pos = next_start(spec, pos, labels)
                continue
            out[(key, pos)] = max(len(p) for p in PREFIXES[regex]
                                  if len(p) <= len(rows) - pos and holds(pos, p))
            pos += 1
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=st.sampled_from(PATTERNS), define=st.sampled_from(DEFINES),
       table=streams(max_rows=MAX_ROWS))
def test_near_misses_equal_brute_force(pattern, define, table):
    sql = (f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES "
           f"count(*) AS n PATTERN ({pattern[0]}) DEFINE {define})")
    want = _brute_force(sql, pattern[1], table)
    got = cepsql.near_misses(sql, k=1000, t=table)
    assert {((p,), a): n for p, a, n in zip(got["part"], got["attempt"], got["length"])} \
        == want, sql
    lengths = list(got["length"])
    assert lengths == sorted(lengths, reverse=True)
    top = cepsql.near_misses(sql, k=2, t=table)
    assert list(top["length"]) == lengths[:2]


def test_near_miss_names_where_it_stopped():
    data = {"ts": list(range(6)), "price": [5, 4, 3, 4, 6, 1]}
    q = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES count(*) AS n
      PATTERN (A B+ C) DEFINE B AS B.price < PREV(B.price), C AS C.price > 10)"""
    top = cepsql.near_misses(q, 1, t=pd.DataFrame(data)).iloc[0]
    assert (top["attempt"], top["length"], top["rows"], top["path"]) == (0, 3, "0, 1, 2", "A B B")
    assert (top["stopped_at"], top["at_row"], top["reason"]) == ("B", 3, "failed")
    assert top["conjunct"] == "B.price < PREV(B.price)"


def test_near_misses_per_partition():

    data = pd.DataFrame({"p": ["x"] * 4 + ["y"] * 4, "ts": list(range(4)) * 2,
                         "price": [4, 3, 2, 1, 1, 2, 3, 4]})
    q = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES count(*) AS n
      PATTERN (A B+ C) DEFINE B AS B.price < PREV(B.price), C AS C.price > 10)"""
    overall = cepsql.near_misses(q, 1, t=data)
    assert list(overall["p"]) == ["x"]
    each = cepsql.near_misses(q, 1, per_partition=True, t=data)
    assert list(each["p"]) == ["x", "y"]
