"""Hypothesis strategies for CEP-mode queries (STRATEGY / WITHIN / SEQ AND OR NOT KL).

Streams come from ``strategies.streams`` capped at 14 rows with unique ts (so ORDER BY ts
has no ties and the any-match enumeration of the reference stays tractable);
``cep_streams(unique_ts=False, with_nulls=True)`` gives ties in ts and nulls in every
column instead. Queries
are SQL text over table ``t(part, ts, price, vol, tag)``; ts is numeric, so
``WITHIN INTERVAL 'n' SECOND`` spans n ts units (numbers count as seconds).

Patterns draw at most one unbounded Kleene closure and use each variable once, which
keeps SKIP_TILL_ANY_MATCH enumeration small (a closure over <= 14 rows).
"""
from __future__ import annotations

import pyarrow as pa
from hypothesis import strategies as st

from support.strategies import STREAM_SCHEMA, streams

STRATEGIES = ("STRICT_CONTIGUITY", "PARTITION_CONTIGUITY", "SKIP_TILL_NEXT_MATCH",
              "SKIP_TILL_ANY_MATCH")
MAX_ROWS = 14


def cep_streams(max_rows: int = MAX_ROWS, unique_ts: bool = True, with_nulls: bool = False):
    """Small streams for CEP-mode property tests.

    By default ts is unique. ``unique_ts=False`` draws ts with ties (several rows per ts;
    the engine and the reference break them by the remaining columns, ascending, nulls
    first). ``with_nulls=True`` also makes tag nullable and nulls in ts (with ties),
    part, price and vol more frequent.
    """
    max_rows = min(max_rows, MAX_ROWS)
    if unique_ts and not with_nulls:
        return streams(max_rows=max_rows, unique_ts=True)
    return _tied_streams(max_rows, unique_ts, with_nulls)


@st.composite
def _tied_streams(draw, max_rows: int, unique_ts: bool, with_nulls: bool) -> pa.Table:
    n = draw(st.integers(0, max_rows))

    def column(values: list, null_weight: int) -> list:
        pool = list(values) + [None] * (null_weight if with_nulls else 0)
        return draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n))

    if unique_ts:
        ts = draw(st.permutations(list(range(1, n + 1))))
    else:  # about two rows per ts value, so ties are common
        ts = column(list(range(1, max(n // 2, 1) + 2)), 1)
    table = {
        "part": column(["a", "a", "b", "b", "c"], 1),
        "ts": ts,
        "price": column(list(range(10)), 3),
        "vol": column([0.5, 1.0, 1.5, 2.25, 3.0, 4.75], 2),
        "tag": column(["x", "y", "z"], 2),
    }
    return pa.table(table, schema=STREAM_SCHEMA)


# --- patterns ----------------------------------------------------------------------------
# A tree: ('var', name) | ('kl', child, lo, hi) | ('seq'|'and'|'or', [children]) | ('not', name)
# | ('notp', tree): NOT of a composite pattern

@st.composite
def _tree(draw, names: list[str], depth: int, kleene_left: list[int],
          composite_nots: bool = True):
    """A positive pattern over the variables popped from ``names``."""
    if depth == 0 or len(names) < 2 or draw(st.booleans()):
        name = names.pop(0)
        node = ("var", name)
        if draw(st.integers(0, 3)) == 0:
            bounded = kleene_left[0] == 0 or draw(st.booleans())
            if bounded:
                lo = draw(st.integers(0, 2))
                node = ("kl", node, lo, draw(st.integers(max(lo, 1), 3)))
            else:
                kleene_left[0] -= 1
                node = ("kl", node, draw(st.sampled_from([0, 1, 1, 2])), None)
        return node
    op = draw(st.sampled_from(["seq", "seq", "and", "or", "klseq"]))
    if op == "klseq":   # KL of a SEQ or an OR (R6b): iterations over two variables
        first = ("var", names.pop(0))
        second = ("var", names.pop(0))
        if draw(st.integers(0, 3)) == 0:
            second = ("kl", second, 1, 2)
        body = (draw(st.sampled_from(["seq", "seq", "or"])), [first, second])
        if kleene_left[0] > 0 and draw(st.booleans()):
            kleene_left[0] -= 1
            return ("kl", body, draw(st.sampled_from([0, 1, 1])), None)
        lo = draw(st.integers(0, 1))
        return ("kl", body, lo, draw(st.integers(max(lo, 1), 2)))
    k = draw(st.integers(2, min(3, len(names))))
    items = []
    for _ in range(k):
        if not names:
            break
        items.append(draw(_tree(names, depth - 1, kleene_left, composite_nots)))
    if len(items) == 1:
        return items[0]
    if op in ("seq", "and") and names and draw(st.integers(0, 2)) == 0:
        at = draw(st.integers(0, len(items)))
        items.insert(at, draw(_negation(names)) if composite_nots else ("not", names.pop(0)))
    return (op, items)


@st.composite
def _negation(draw, names: list[str]):
    """NOT(var), or NOT of a small composite pattern (R6a): SEQ/AND/OR of two variables
    or a bounded closure of one."""
    if len(names) < 2 or draw(st.integers(0, 2)) > 0:
        return ("not", names.pop(0))
    kind = draw(st.sampled_from(["seq", "and", "or", "kl"]))
    if kind == "kl":
        lo = draw(st.integers(1, 2))
        return ("notp", ("kl", ("var", names.pop(0)), lo, 2))
    return ("notp", (kind, [("var", names.pop(0)), ("var", names.pop(0))]))


def render(node, regex: bool = False) -> str:
    """Operator syntax; with regex, SEQ and KL use the regex forms where possible."""
    kind = node[0]
    if kind == "var":
        return node[1]
    if kind == "not":
        return f"NOT({node[1]})"
    if kind == "notp":
        return f"NOT({render(node[1])})"
    if kind == "kl":
        _, child, lo, hi = node
        inner = render(child, regex)
        if regex and child[0] == "var":
            if (lo, hi) == (1, None):
                return inner + "+"
            return inner + ("{%d,}" % lo if hi is None else "{%d,%d}" % (lo, hi))
        return f"KL({inner})" if (lo, hi) == (1, None) else (
            f"KL({inner}, {lo})" if hi is None else f"KL({inner}, {lo}, {hi})")
    items = [render(i, regex) for i in node[1]]
    if kind == "seq" and regex:
        return "(" + " ".join(items) + ")"
    return f"{kind.upper()}(" + ", ".join(items) + ")"


def variables(node) -> list[str]:
    kind = node[0]
    if kind in ("var", "not"):
        return [node[1]]
    if kind in ("kl", "notp"):
        return variables(node[1])
    return [v for i in node[1] for v in variables(i)]


def kleene_vars(node) -> set[str]:
    kind = node[0]
    if kind == "notp":
        return set()
    if kind == "kl":
        return set(variables(node[1]))
    if kind in ("seq", "and", "or"):
        return set().union(*(kleene_vars(i) for i in node[1]))
    return set()


@st.composite
def cep_patterns(draw):
    """(pattern tree, pattern text). A top-level NOT-only pattern is never drawn."""
    names = ["A", "B", "C", "D", "E"]
    tree = draw(_tree(names, draw(st.integers(0, 2)), [1]))
    if tree[0] == "var" and draw(st.booleans()):
        tree = ("seq", [tree])
    return tree, render(tree, regex=draw(st.booleans()))


# --- conditions and the query ---------------------------------------------------------

_SINGLE = ["tag = 'x'", "tag <> 'z'", "price > 3", "price <= 6", "vol >= 1.5",
           "price IS NOT NULL", "{v}.price < 8", "PREV({v}.price) < {v}.price"]
_CROSS = ["{v}.price > {o}.price", "{v}.vol <= {o}.vol", "{v}.tag = {o}.tag"]
_KLEENE = ["count({v}.*) = 1 OR {v}.price >= LAST({v}.price, 1)",
           "{v}.price >= avg({v}.price)", "count({v}.*) <= 2",
           "count_if({v}.price > 5) <= 1", "bool_and({v}.tag <> 'z')",
           "NOT bool_or({v}.vol > 4)"]
# Conditions whose truth depends on how nulls are handled (with_nulls streams).
_NULLISH = ["tag IS NULL", "{v}.tag IS NOT NULL AND {v}.tag <> 'y'", "COALESCE({v}.price, 0) < 5",
            "{v}.price + {v}.vol > 4", "NOT ({v}.price > 4)", "{v}.tag IN ('x', 'z')"]
_NULLISH_CROSS = ["COALESCE({v}.price, -1) >= COALESCE({o}.price, -1)",
                  "{v}.tag <> {o}.tag", "{v}.price > LAST({o}.price)"]


@st.composite
def _define(draw, var: str, others: list[str], kleene: bool,
            null_conditions: bool = False) -> str | None:
    choice = draw(st.integers(0, 5))
    if choice == 0:
        return None
    single = _SINGLE + _NULLISH if null_conditions else _SINGLE
    cross = _CROSS + _NULLISH_CROSS if null_conditions else _CROSS
    parts = [draw(st.sampled_from(single)).format(v=var)]
    if others and draw(st.integers(0, 2)) == 0:
        parts.append(draw(st.sampled_from(cross)).format(v=var, o=draw(st.sampled_from(others))))
    if kleene and draw(st.booleans()):
        parts.append("(" + draw(st.sampled_from(_KLEENE)).format(v=var) + ")")
    return " AND ".join(parts)


@st.composite
def cep_queries(draw, strategy: str | None = None, null_conditions: bool = False) -> str:
    """A CEP-mode SELECT over t (strategy drawn unless given); with null_conditions the
    DEFINEs also draw null-sensitive conditions (IS NULL, COALESCE, NOT, IN, arithmetic)."""
    tree, text = draw(cep_patterns())
    names = variables(tree)
    kl = kleene_vars(tree)
    strategy = strategy or draw(st.sampled_from(STRATEGIES))
    defines = []
    for v in names:
        cond = draw(_define(v, [o for o in names if o != v], v in kl, null_conditions))
        if cond is not None:
            defines.append(f"{v} AS {cond}")
    first = names[0]
    measures = ["count(*) AS n", f"FIRST({first}.ts) AS t0", "LAST(ts) AS t1",
                "MATCH_NUMBER() AS mn"]
    measures = draw(st.lists(st.sampled_from(measures), min_size=1, max_size=3, unique=True))
    rows = draw(st.sampled_from(["ONE ROW PER MATCH", "ONE ROW PER MATCH", "ALL ROWS PER MATCH"]))
    if rows.startswith("ALL"):
        measures = [m for m in measures if not m.startswith("LAST(ts)")] or ["count(*) AS n"]
        measures.append("CLASSIFIER() AS cls")
    skip = draw(st.sampled_from(["", "", "AFTER MATCH SKIP PAST LAST ROW"]))
    window = draw(st.sampled_from(["", "WITHIN 3 ROWS", "WITHIN 5 ROWS",
                                   "WITHIN INTERVAL '4' SECOND", "WITHIN INTERVAL 6 SECONDS"]))
    if kl and strategy == "SKIP_TILL_ANY_MATCH" and not window:
        window = "WITHIN 6 ROWS"   # keeps any-match enumeration of a closure small
    partition = draw(st.sampled_from(["PARTITION BY part", "PARTITION BY part", ""]))
    define = ("DEFINE " + ", ".join(defines)) if defines else ""
    return (f"SELECT * FROM t MATCH_RECOGNIZE ({partition} ORDER BY ts "
            f"MEASURES {', '.join(measures)} {rows} {skip} STRATEGY {strategy} "
            f"PATTERN ({text}) {window} {define})")


# --- a bounded repetition next to a navigating closure (issue 24 A2) ------------------

_CHAINED = ["{k}.price >= COALESCE(LAST({k}.price, 1), {r}.price)",
            "{k}.tag = COALESCE(LAST({k}.tag, 1), {r}.tag)",
            "COALESCE(LAST({k}.price, 1), {r}.price) <> {k}.price"]


@st.composite
def repeat_then_closure_queries(draw, strategy: str | None = None) -> str:
    """SEQ(R{n}, KL(K)) (or KL(K) first, or a third variable around them) where K's DEFINE
    navigates its own closure and falls back to R: the shape that once enumerated every
    closure of K without R (a hang on 40 rows, issue 24 A2)."""
    n = draw(st.integers(1, 3))
    lo = draw(st.sampled_from([n, 1 if n > 1 else n]))
    rep = "R{%d}" % n if lo == n else "R{%d,%d}" % (lo, n)
    kl = draw(st.sampled_from(["KL(K)", "K+", "KL(K, 1, 3)", "KL(K, 2)"]))
    items = draw(st.sampled_from([[rep, kl], [kl, rep], [rep, kl, "C"], ["C", rep, kl]]))
    strategy = strategy or draw(st.sampled_from(STRATEGIES))
    defines = [f"R AS R.{draw(st.sampled_from(_SINGLE[:5]))}",
               "K AS " + draw(st.sampled_from(_CHAINED)).format(k="K", r="R")]
    if "C" in items:
        defines.append("C AS C.price > R.price")
    measures = draw(st.lists(st.sampled_from(
        ["count(*) AS n", "FIRST(R.ts) AS t0", "LAST(K.ts) AS t1", "count(K.*) AS nk",
         "MATCH_NUMBER() AS mn"]), min_size=1, max_size=3, unique=True))
    window = draw(st.sampled_from(["WITHIN 6 ROWS", "WITHIN INTERVAL '5' SECOND"]))
    partition = draw(st.sampled_from(["PARTITION BY part", ""]))
    return (f"SELECT * FROM t MATCH_RECOGNIZE ({partition} ORDER BY ts "
            f"MEASURES {', '.join(measures)} ONE ROW PER MATCH STRATEGY {strategy} "
            f"PATTERN (SEQ({', '.join(items)})) {window} DEFINE {', '.join(defines)})")
