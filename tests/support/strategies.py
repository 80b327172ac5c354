"""Hypothesis strategies: small event streams and random MATCH_RECOGNIZE queries over them.

Streams are pyarrow tables over table ``t`` with columns part, ts, price, vol, tag.
Queries are SQL text (SQL:2016 mode) with random patterns over variables A..D,
DEFINE and MEASURES drawn from templates, and every output/skip mode that cannot
make the result depend on ORDER BY ties. Sizes stay small so property tests are fast.
"""
from __future__ import annotations

import pyarrow as pa
from hypothesis import strategies as st

VARIABLES = ("A", "B", "C", "D")

STREAM_SCHEMA = pa.schema([("part", pa.string()), ("ts", pa.int64()), ("price", pa.int64()),
                           ("vol", pa.float64()), ("tag", pa.string())])

# --- streams -------------------------------------------------------------------------


@st.composite
def streams(draw, max_rows: int = 25, unique_ts: bool = True) -> pa.Table:
    """A shuffled stream; with unique_ts every ts differs (so ORDER BY ts has no ties),
    otherwise ts has ties and occasional nulls."""
    n = draw(st.integers(0, max_rows))
    if unique_ts:
        ts = draw(st.permutations(list(range(1, n + 1))))
    else:
        ts = draw(st.lists(st.sampled_from([1, 2, 3, 4, 5, 6, None]), min_size=n, max_size=n))
    part = draw(st.lists(st.sampled_from(["a", "a", "b", "b", "c", None]), min_size=n, max_size=n))
    price = draw(st.lists(st.sampled_from(list(range(10)) + [None]), min_size=n, max_size=n))
    vol = draw(st.lists(st.sampled_from([0.5, 1.0, 1.5, 2.25, 3.0, 4.75, None]),
                        min_size=n, max_size=n))
    tag = draw(st.lists(st.sampled_from(["x", "y", "z"]), min_size=n, max_size=n))
    return pa.table({"part": part, "ts": ts, "price": price, "vol": vol, "tag": tag},
                    schema=STREAM_SCHEMA)


# --- patterns ------------------------------------------------------------------------
# A pattern is drawn as a small tree, then rendered; the tree also gives the variables.

QUANTIFIERS = ["", "", "", "", "*", "+", "?", "*?", "+?", "??", "{2}", "{1,2}", "{0,2}",
               "{2,}", "{1,3}?", "{0,1}"]


def _render(node) -> str:
    kind = node[0]
    if kind == "var":
        return node[1]
    if kind == "anchor":
        return node[1]
    if kind == "empty":
        return "()"
    if kind == "quant":
        inner = node[1]
        text = _render(inner)
        if inner[0] in ("concat", "alt"):
            text = f"({text})"
        return text + node[2]
    if kind == "concat":
        return " ".join(f"({_render(i)})" if i[0] == "alt" else _render(i) for i in node[1])
    if kind == "alt":
        return " | ".join(_render(i) for i in node[1])
    if kind == "group":
        return f"({_render(node[1])})"
    if kind == "exclude":
        return "{- " + _render(node[1]) + " -}"
    if kind == "permute":
        return "PERMUTE(" + ", ".join(_render(i) for i in node[1]) + ")"
    raise ValueError(kind)


def _variables(node) -> list[str]:
    if node[0] == "var":
        return [node[1]]
    if node[0] in ("concat", "alt", "permute"):
        return [v for item in node[1] for v in _variables(item)]
    if node[0] in ("quant", "group", "exclude"):
        return _variables(node[1])
    return []


def _has(node, kind: str) -> bool:
    if node[0] == kind:
        return True
    if node[0] in ("concat", "alt", "permute"):
        return any(_has(i, kind) for i in node[1])
    if node[0] in ("quant", "group", "exclude"):
        return _has(node[1], kind)
    return False


def _draw_factor(draw, budget: int, depth: int):
    """One quantifiable item using at most ``budget`` variables."""
    choices = ["var"] * 4
    if budget >= 2 and depth < 2:
        choices += ["group_concat", "group_alt", "group_alt"]
    if depth < 2 and budget >= 2:
        choices += ["permute"]
    kind = draw(st.sampled_from(choices))
    quant = draw(st.sampled_from(QUANTIFIERS))
    if kind == "var":
        item = ("var", draw(st.sampled_from(VARIABLES)))
    elif kind == "group_concat":
        item = _draw_concat(draw, budget, depth + 1)
    elif kind == "group_alt":
        item = _draw_alt(draw, budget, depth + 1)
    else:
        k = draw(st.integers(2, min(3, budget)))
        item = ("permute", tuple(("var", v) for v in draw(
            st.lists(st.sampled_from(VARIABLES), min_size=k, max_size=k))))
    if quant and item[0] == "concat" and len(item[1]) == 1:
        item = item[1][0]
    if quant and item[0] == "quant":
        item = ("group", item)  # (A+)* rather than A+* (which is not valid syntax)
    return ("quant", item, quant) if quant else item


def _split_budget(draw, budget: int, k: int) -> list[int]:
    sizes = [1] * k
    for _ in range(budget - k):
        sizes[draw(st.integers(0, k - 1))] += draw(st.integers(0, 1))
    return sizes


def _draw_concat(draw, budget: int, depth: int):
    k = draw(st.integers(1, min(3, budget)))
    items = [_draw_factor(draw, b, depth) for b in _split_budget(draw, budget, k)]
    return ("concat", tuple(items)) if len(items) > 1 else items[0]


def _draw_alt(draw, budget: int, depth: int):
    if budget < 2:
        return _draw_concat(draw, budget, depth)
    left = draw(st.integers(1, budget - 1))
    return ("alt", (_draw_concat(draw, left, depth), _draw_concat(draw, budget - left, depth)))


@st.composite
def pattern_trees(draw, max_items: int = 5):
    """A pattern tree with at most ``max_items`` variable occurrences."""
    if draw(st.integers(0, 30)) == 0:
        return ("empty",)
    budget = draw(st.integers(1, max_items))
    tree = _draw_concat(draw, budget, 0)
    extra = draw(st.sampled_from(["", "", "", "", "", "^", "$", "exclude"]))
    items = list(tree[1]) if tree[0] == "concat" else [tree]
    if extra == "^":
        items.insert(0, ("anchor", "^"))
    elif extra == "$":
        items.append(("anchor", "$"))
    elif extra == "exclude" and len(items) >= 2:
        i = draw(st.integers(1, len(items) - 1))
        items[i] = ("exclude", items[i])
    return ("concat", tuple(items)) if len(items) > 1 else items[0]


def patterns(max_items: int = 5) -> st.SearchStrategy[str]:
    """PATTERN text over variables A..D."""
    return pattern_trees(max_items).map(_render)


# --- DEFINE and MEASURES ---------------------------------------------------------------
# {v}: the variable being defined / measured; {o}: another variable of the pattern.

DEFINE_TEMPLATES = [
    "{v}.price > PREV({v}.price)",
    "{v}.price < PREV({v}.price)",
    "{v}.price >= PREV({v}.price, 2)",
    "{v}.price < {o}.price",
    "{v}.price >= FIRST({o}.price)",
    "{v}.price > LAST({o}.price, 1)",
    "{v}.price - {o}.price > 2",
    "NEXT({v}.price) > {v}.price",
    "{v}.vol IS NULL",
    "{v}.vol IS NOT NULL AND {v}.vol > 1.5",
    "{v}.tag = 'x'",
    "{v}.tag <> 'y' OR {v}.price > 6",
    "{v}.price BETWEEN 3 AND 7",
    "{v}.price % 2 = 0",
    "{v}.price IN (1, 4, 8)",
    "{v}.price > PREV({v}.price) + 1",
    "price / 2 > 2",
    "{v}.vol * 2 < {v}.price",
    "CASE WHEN {v}.tag = 'z' THEN {v}.price > 3 ELSE {v}.price < 6 END",
    # cross-row CASE / COALESCE / null tests run in the condition VM
    "coalesce(PREV({v}.price), 0) < {v}.price",
    "{o}.price IS NULL OR {v}.price > {o}.price",
    "LAST({v}.price, 1) IS NULL",
    "CASE WHEN {v}.price > {o}.price THEN {v}.vol IS NULL ELSE NEXT({v}.price) > 3 END",
    "coalesce({o}.tag, {v}.tag) = 'x'",
    "greatest(PREV({v}.price), {o}.price) < {v}.price + 1",
    "abs({v}.price - FIRST({o}.price)) <= 2",
    "PREV(CLASSIFIER()) = '{o}' OR PREV(CLASSIFIER()) IS NULL",
]

DEFINE_AGGREGATE_TEMPLATES = [
    "count({v}.*) <= 2",
    "sum({v}.price) < 15",
    "avg({v}.price) > 3",
    "count_if({v}.price > 4) <= 1",
    "bool_and({v}.tag <> 'z')",
    "NOT bool_or({v}.vol > 3)",
    "every({v}.price IS NOT NULL) AND MATCH_NUMBER() % 2 = 1",
    "MATCH_NUMBER() <= 2",
    "count_if(CLASSIFIER() = '{o}') <= 1",
    "max(CLASSIFIER()) <= '{v}' OR min({v}.price + 0) > 4",
    "coalesce(stddev({v}.price), 0) < 2.5",
    "var_pop(vol) <= 1 AND stddev_pop({v}.vol) IS NOT NULL",
]

MEASURE_TEMPLATES = [
    "FIRST({v}.price)",
    "LAST({v}.price)",
    "FIRST({v}.price, 1)",
    "LAST({v}.price, 1)",
    "PREV({v}.price)",
    "NEXT({v}.price)",
    "PREV(FIRST({v}.price))",
    "NEXT(LAST({v}.price), 2)",
    "CLASSIFIER()",
    "MATCH_NUMBER()",
    "LAST({v}.price) - FIRST({v}.price)",
    "{v}.ts",
    "price",
    "FINAL LAST({v}.ts)",
    "FINAL FIRST({o}.price)",
    "RUNNING LAST({v}.vol)",
    "{v}.price * 2 + 1",
    "{v}.vol / 2",
    "coalesce({v}.price, -1)",
    "PREV(CLASSIFIER())",
]

MEASURE_AGGREGATE_TEMPLATES = [
    "count(*)",
    "count({v}.*)",
    "count({v}.vol)",
    "sum({v}.price)",
    "max({v}.price)",
    "min({v}.tag)",
    "avg({v}.vol)",
    "FINAL count(*)",
    "FINAL sum({v}.price)",
    # aggregates folded over the matcher's row lists (DISTINCT, Spark's extra aggregates,
    # CLASSIFIER() / MATCH_NUMBER() in arguments)
    "count(DISTINCT {v}.price)",
    "sum(DISTINCT {v}.vol)",
    "FINAL avg(DISTINCT {v}.price)",
    "stddev({v}.vol)",
    "var_pop({v}.price)",
    "FINAL stddev_pop(price)",
    "count_if({v}.price > 4)",
    "bool_and({v}.tag = 'x')",
    "FINAL bool_or({v}.vol > 2)",
    "max_by({v}.ts, {v}.price)",
    "min_by({v}.tag, {v}.vol)",
    "listagg({v}.tag, ',')",
    "FINAL string_agg(DISTINCT tag || CLASSIFIER(), '')",
    "sum(MATCH_NUMBER() * 100 + {v}.price)",
    "listagg(CLASSIFIER())",
    "count_if(CLASSIFIER() = '{o}')",
    "max(CLASSIFIER())",
]


def _fill(draw, template: str, variables: list[str], v: str | None = None) -> str:
    """Instantiate a template; ``v`` fixed (a DEFINE's own variable) or drawn."""
    v = draw(st.sampled_from(variables)) if v is None else v
    o = draw(st.sampled_from(variables))
    return template.format(v=v, o=o)


@st.composite
def queries(draw, *, max_items: int = 5, aggregates: bool = True,
            define_aggregates: bool = True, skip_to_variable: bool = True,
            table: str = "t") -> str:
    """MATCH_RECOGNIZE SQL text over ``table`` (columns of ``streams``)."""
    tree = draw(pattern_trees(max_items))
    variables = sorted(set(_variables(tree))) or ["A"]
    if not _variables(tree):
        tree = ("concat", (tree, ("quant", ("var", "A"), "?")))  # DEFINE needs a variable
    define_pool = DEFINE_TEMPLATES + (DEFINE_AGGREGATE_TEMPLATES if define_aggregates else [])
    defined = draw(st.lists(st.sampled_from(variables), min_size=1, unique=True))
    defines = [f"{v} AS {_fill(draw, draw(st.sampled_from(define_pool)), variables, v)}"
               for v in sorted(defined)]
    measure_pool = MEASURE_TEMPLATES + (MEASURE_AGGREGATE_TEMPLATES if aggregates else [])
    n_measures = draw(st.integers(1, 3))
    measures = [f"{_fill(draw, draw(st.sampled_from(measure_pool)), variables)} AS m{i}"
                for i in range(n_measures)]

    subset = ""
    if len(variables) >= 2 and draw(st.integers(0, 5)) == 0:
        members = draw(st.lists(st.sampled_from(variables), min_size=2, max_size=2, unique=True))
        subset = f"SUBSET U = ({', '.join(sorted(members))})"
        measures.append(draw(st.sampled_from(
            ["LAST(U.price)", "FIRST(U.ts)", "CLASSIFIER(U)", "count(U.*)" if aggregates
             else "LAST(U.ts)"])) + f" AS m{n_measures}")

    rows = draw(st.sampled_from(["ONE ROW PER MATCH", "ALL ROWS PER MATCH",
                                 "ALL ROWS PER MATCH SHOW EMPTY MATCHES",
                                 "ALL ROWS PER MATCH OMIT EMPTY MATCHES",
                                 "ALL ROWS PER MATCH WITH UNMATCHED ROWS"]))
    if "UNMATCHED" in rows and _has(tree, "exclude"):
        rows = "ALL ROWS PER MATCH"  # the standard forbids exclusion with unmatched rows
    skips = ["AFTER MATCH SKIP PAST LAST ROW", "AFTER MATCH SKIP TO NEXT ROW", ""] * 3
    if skip_to_variable:  # rarer: these often raise the standard's run-time errors
        skips += [f"AFTER MATCH SKIP TO LAST {variables[-1]}",
                  f"AFTER MATCH SKIP TO FIRST {variables[-1]}"]
    skip = draw(st.sampled_from(skips))
    partition = draw(st.sampled_from(["PARTITION BY part", "PARTITION BY part", ""]))

    lines = [f"SELECT * FROM {table} MATCH_RECOGNIZE (", partition, "ORDER BY ts",
             "MEASURES " + ", ".join(measures), rows, skip, f"PATTERN ({_render(tree)})",
             subset, "DEFINE " + ", ".join(defines), ")"]
    return "\n".join(line for line in lines if line)
