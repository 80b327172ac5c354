"""Global plans over pattern shapes the stock generator does not make: OR disjuncts,
AND inside SEQ, NOT inside AND, Kleene closures with conditions on their previous
element, conjuncts over three variables, aggregates, unqualified columns and PREV --
every algorithm's plan must pass the validator."""
from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from cepsql.parse import find_match_recognize
from cepsql.sharing import plan_workload, workload_pattern
from support.sharing_validate import check_global_plan

SCHEMA = pa.schema([("ts", pa.timestamp("us")), ("symbol", pa.string()),
                    ("price", pa.float64()), ("diff", pa.float64())])
SYMBOLS = ("A", "B", "C", "D")
SHAPES = ("SEQ({0}, {1}, {2})", "AND({0}, {1}, {2})", "SEQ({0}, AND({1}, {2}))",
          "OR(SEQ({0}, {1}), SEQ({0}, {2}))", "SEQ({0}, KL({1}), {2})",
          "AND({0}, {1}, NOT(n), {2})", "SEQ({0}, NOT(n), {1}, {2})",
          "SEQ({0}, {1}, KL({2}, 1, 2))", "AND(KL({0}), {1}, KL({2}, 1, 3))")
EXTRA = ("{y}.diff < {x}.diff", "{x}.diff > {y}.diff", "{x}.price + {y}.price < 200",
         "{x}.diff + {y}.diff < {z}.diff", "price > 90", "{y}.price > PREV({y}.price)",
         "avg({x}.diff) < 1", "{y}.diff < {x}.diff + 1")


@st.composite
def view_sql(draw):
    names = draw(st.permutations(["p", "q", "r"]))
    shape = draw(st.sampled_from(SHAPES))
    pattern = shape.format(*names)
    syms = draw(st.lists(st.sampled_from(SYMBOLS), min_size=3, max_size=3))
    conds = {v: [f"{v}.symbol = '{s}'"] for v, s in zip(names, syms)}
    for _ in range(draw(st.integers(0, 3))):
        x, y, z = draw(st.permutations(names))
        text = draw(st.sampled_from(EXTRA)).format(x=x, y=y, z=z)
        if "KL" in pattern and "avg" in text:
            continue
        conds[draw(st.sampled_from(names))].append(text)
    if "KL(" in pattern:
        k = names[1]
        if draw(st.booleans()):
            conds[k].append(f"{k}.price > LAST({k}.price, 1)")
    if "NOT(n)" in pattern:
        conds["n"] = ["n.symbol = 'D'"]
    window = draw(st.sampled_from(["INTERVAL '5' SECOND", "INTERVAL '9' SECOND"]))
    defines = ", ".join(f"{v} AS " + " AND ".join(c) for v, c in conds.items())
    return ("SELECT * FROM ticks MATCH_RECOGNIZE (ORDER BY ts MEASURES count(*) AS n "
            f"STRATEGY SKIP_TILL_ANY_MATCH PATTERN ({pattern}) WITHIN {window} "
            f"DEFINE {defines})")


@settings(max_examples=40, deadline=None)
@given(sqls=st.lists(view_sql(), min_size=2, max_size=8), seed=st.integers(0, 99))
def test_random_shapes_give_valid_plans(sqls, seed):
    patterns = [workload_pattern(find_match_recognize(s)[0].spec, SCHEMA, name=f"v{i}")
                for i, s in enumerate(sqls)]
    for algorithm in ("NONE", "PREFIX", "SA", "TABU:VERTEX3"):
        plan = plan_workload(patterns, algorithm=algorithm, seed=seed, max_iterations=40)
        check_global_plan(plan, patterns)
        assert len(plan.bindings) == sum(len(p.terms) for p in patterns if p.shareable)
        if algorithm in ("SA", "TABU:VERTEX3"):
            assert plan.cost <= plan.independent_cost * (1 + 1e-9)
