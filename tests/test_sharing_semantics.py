"""A global plan computes exactly every pattern's matches: a small interpreter runs the
DAG as the contract describes it (leaves take their event type's rows, a join combines
one instance of each child, applies its checks and its window, a root applies its
pattern's remaining checks) and its result is compared, per pattern, with brute-force
enumeration of the pattern's variable assignments on a tiny stream. The synthetic
workload's conditions (symbol equalities, ``x.diff + k < y.diff``) are all this
interpreter evaluates; NOT/KL patterns are left to the evaluator's own tests."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cepsql.algebra.expressions import BinaryOp, Literal, RowValue
from cepsql.sharing import plan_workload
from support.sharing_synthetic import stock_workload

OPS = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
       ">=": lambda a, b: a >= b, "=": lambda a, b: a == b, "<>": lambda a, b: a != b,
       "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def value(e, rows_of: dict, own: str, table: list[dict]):
    if isinstance(e, Literal):
        return float(e.value) if e.type == "decimal" else e.value
    if isinstance(e, RowValue):
        return table[rows_of[e.ref.var or own]][e.value.column]
    if isinstance(e, BinaryOp):
        op = e.op.upper()
        if op == "AND":
            return value(e.left, rows_of, own, table) and value(e.right, rows_of, own, table)
        return OPS[op](value(e.left, rows_of, own, table), value(e.right, rows_of, own, table))
    raise TypeError(type(e).__name__)


def conjunct_holds(pattern, k: int, rows_of: dict, table) -> bool:
    c = pattern.conjuncts[k]
    return bool(value(c.expr, rows_of, c.var, table))


def within(rows, window, table) -> bool:
    ts = [table[r]["ts"] for r in rows]
    return max(ts) - min(ts) <= window


def run_plan(plan, patterns, table) -> dict[int, set]:
    """Per pattern, its matches as frozensets of (variable, row) pairs."""
    instances = []
    for n in plan.nodes:
        owner = patterns[n.owner]
        if n.is_leaf:
            cands = [(r,) for r in range(len(table))]
        else:
            cands = [a + b for a in instances[n.left] for b in instances[n.right]
                     if not set(a) & set(b)]
        out = []
        for inst in cands:
            rows_of = dict(zip(n.owner_vars, inst))
            ok = all(conjunct_holds(owner, k, rows_of, table) if kind == "conjunct"
                     else rows_of[k[0]] < rows_of[k[1]] for kind, k in n.checks)
            if ok and (n.window is None or within(inst, n.window, table)):
                out.append(inst)
        instances.append(out)
    found: dict[int, set] = {}
    for b in plan.bindings:
        p = patterns[b.pattern]
        got = found.setdefault(b.pattern, set())
        for inst in instances[b.root]:
            rows_of = dict(zip(b.slot_vars, inst))
            ok = True
            for kind, k in b.extra_checks:
                if kind == "conjunct":
                    ok = ok and conjunct_holds(p, k, rows_of, table)
                elif kind == "order":
                    ok = ok and rows_of[k[0]] < rows_of[k[1]]
                elif kind == "window":
                    ok = ok and within(inst, p.window, table)
                else:
                    raise AssertionError(f"unexpected check {kind} in a NOT-free workload")
            if ok:
                got.add(frozenset(rows_of.items()))
    return found


def brute_force(p, table) -> set:
    """Every assignment of distinct rows to the pattern's variables that satisfies all
    DEFINE conjuncts, the SEQ order and the window."""
    (term,) = p.terms
    out = set()
    for rows in itertools.permutations(range(len(table)), len(term.vars)):
        rows_of = dict(zip(term.vars, rows))
        if any(rows[i] >= rows[j] for i, j in term.term.precedes):
            continue
        if not within(rows, p.window, table):
            continue
        if all(conjunct_holds(p, k, rows_of, table) for k in range(len(p.conjuncts))):
            out.add(frozenset(rows_of.items()))
    return out


def tiny_case(seed: int, n: int):
    wl = stock_workload(n, seed=seed, symbols=3, sizes=(2, 3), special_fraction=0.0,
                        windows=(2, 4), events_per_second=2.0)
    patterns = wl.workload_patterns()
    stream = wl.stream(11, seed=seed)
    table = [{"ts": int(r["ts"].timestamp() * 1_000_000), "symbol": r["symbol"],
              "diff": r["diff"], "price": r["price"]} for r in stream.to_pylist()]
    return patterns, table


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 8),
       algorithm=st.sampled_from(["NONE", "PREFIX", "SA", "TABU", "SA:VERTEX3"]))
def test_the_dag_computes_every_patterns_matches(seed, n, algorithm):
    patterns, table = tiny_case(seed, n)
    plan = plan_workload(patterns, algorithm=algorithm, seed=seed, max_iterations=80)
    got = run_plan(plan, patterns, table)
    for i, p in enumerate(patterns):
        assert got.get(i, set()) == brute_force(p, table), (i, p.spec.pattern_text)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_interpreter_sees_matches_and_shared_nodes(seed):
    """The check above is not vacuous: the tiny cases have matches and shared joins."""
    total, shared = 0, 0
    for s in range(seed * 10, seed * 10 + 6):
        patterns, table = tiny_case(s, 6)
        plan = plan_workload(patterns, algorithm="TABU", seed=s, max_iterations=120)
        total += sum(len(m) for m in run_plan(plan, patterns, table).values())
        shared += sum(1 for i in plan.shared_nodes() if not plan.nodes[i].is_leaf)
    assert total > 0 and shared > 0
