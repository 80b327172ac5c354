"""Infer PARTITION BY keys that a CEP-mode clause implies, so it runs on all cores.

``DEFINE b AS b.vehicle = a.vehicle, c AS c.vehicle = a.vehicle`` means every match lies
inside one vehicle: partitioning by vehicle cannot change the result, and it lets the
backends spread the work over many tasks (without PARTITION BY, one task does all).

The inference must be *exact*, so it fires only when all of these hold (see
docs/cep_mode.md, "Parallelism without PARTITION BY", for the argument):

* CEP mode with STRATEGY SKIP_TILL_ANY_MATCH or SKIP_TILL_NEXT_MATCH (the contiguity
  strategies look at the neighbouring rows of other keys), no PARTITION BY;
* no PREV/NEXT anywhere, no unqualified FIRST/LAST/aggregate, no MATCH_NUMBER() in
  MEASURES, no WITH UNMATCHED ROWS, no WITHIN n ROWS, no explicit AFTER MATCH SKIP PAST
  LAST ROW (R7 selects over the whole input: a match of one key is not output when it
  starts before a match of another key completes; TO NEXT ROW is allowed);
* on one input column c, the DEFINE conjuncts ``x.c = y.c`` (top-level AND operands,
  plain current-row references) force every row of every accepted match to share one
  non-NULL value of c (rule R2: a conjunct of V's DEFINE compares V's *current* row, or
  the *last* row of another variable; NULL = x is not true):
    - SKIP_TILL_ANY_MATCH: for every set of variables a match can consist of, the
      conjuncts of those variables' DEFINEs connect them, and a variable that can take
      several rows in one match compares its own current row;
    - SKIP_TILL_NEXT_MATCH: every take except a run's first compares the taken row with
      a variable the run has already bound (rule R5 evaluates only such conjuncts when
      taking; a run that could take a row of another key first would skip differently);
* every NOT(...) variable compares its own row with a positive variable (directly or
  through other NOT variables), so rows of other keys never violate a NOT.

The rewritten spec carries the keys as PartitionKey(ColumnRef(c), INFERRED_KEY_PREFIX +
c); ``visible_partitions`` tells the planner which keys to leave out of the output.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import permutations

from cepsql.algebra.expressions import (
    Aggregate,
    BinaryOp,
    Classifier,
    ColumnRef,
    Expr,
    MatchNumber,
    Navigation,
    RowValue,
    walk,
)
from cepsql.algebra.pattern import (
    Alternation,
    Anchor,
    Concat,
    Empty,
    Exclusion,
    Negation,
    PatternNode,
    Permute,
    Quantified,
    Var,
)
from cepsql.algebra.rowrefs import bind_rows
from cepsql.algebra.spec import MatchRecognizeSpec, PartitionKey
from cepsql.errors import CepError
from cepsql.analyze.conjuncts import split_conjuncts

__all__ = [
    "INFERRED_KEY_PREFIX",
    "infer_partition_keys",
    "inference_blocker",
    "is_inferred_key",
    "visible_partitions",
    "with_inferred_partitions",
]

INFERRED_KEY_PREFIX = "__cep_inferred_"
STRATEGIES = ("SKIP_TILL_ANY_MATCH", "SKIP_TILL_NEXT_MATCH")
MAX_SHAPES = 4096      # presence sets / bound sets examined before giving up
MANY = 2               # "can take more than one row" (exact counts do not matter)


# --- public API ------------------------------------------------------------------------

def infer_partition_keys(spec: MatchRecognizeSpec,
                         input_columns: Sequence[str] | None = None
                         ) -> list[tuple[str, str]] | None:
    """[(column, reason)] of input columns PARTITION BY may use without changing the
    result, or None. ``input_columns`` (the input schema's names) resolves the column
    case-insensitively to the schema's spelling and rejects names that are not columns."""
    if inference_blocker(spec) is not None:
        return None
    try:
        edges = _equality_edges(spec)
    except CepError:
        return None  # an invalid clause: the planner reports it
    positives, negated = _pattern_variables(spec.pattern)
    if positives & negated or not positives:
        return None
    by_lower = {c.lower(): c for c in input_columns} if input_columns is not None else None
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for column in [e.column for e in edges]:
        key = column.lower()
        if key in seen:
            continue
        seen.add(key)
        mine = [e for e in edges if e.column.lower() == key]
        if by_lower is not None and key not in by_lower:
            continue
        if not _linked(spec, mine, positives, negated):
            continue
        name = by_lower[key] if by_lower is not None else column
        texts = ", ".join(dict.fromkeys(e.text for e in mine))
        reason = f"{texts} keep every match inside one {name} ({spec.strategy})"
        out.append((name, reason))
    return out or None


def with_inferred_partitions(spec: MatchRecognizeSpec,
                             input_columns: Sequence[str] | None = None
                             ) -> tuple[MatchRecognizeSpec, list[tuple[str, str]]]:
    """(spec with the inferred keys as PARTITION BY, [(column, reason)]); the spec is
    returned unchanged with [] when nothing can be inferred."""
    keys = infer_partition_keys(spec, input_columns)
    if not keys:
        return spec, []
    partition = tuple(PartitionKey(ColumnRef(None, col), INFERRED_KEY_PREFIX + col)
                      for col, _ in keys)
    return replace(spec, partition_by=partition), keys


def is_inferred_key(key: PartitionKey) -> bool:
    """Whether a PARTITION BY item was added by with_inferred_partitions."""
    return key.name.startswith(INFERRED_KEY_PREFIX)


def visible_partitions(spec: MatchRecognizeSpec, partition_cols: Sequence[str]
                       ) -> tuple[MatchRecognizeSpec, list[str]]:
    """(spec, partition columns) as the user wrote them: inferred keys removed. The
    planner builds the final projection from these, so an inferred key adds no output
    column (ONE ROW) and stays in its input position (ALL ROWS)."""
    keep = [i for i, k in enumerate(spec.partition_by) if not is_inferred_key(k)]
    if len(keep) == len(spec.partition_by):
        return spec, list(partition_cols)
    return (replace(spec, partition_by=tuple(spec.partition_by[i] for i in keep)),
            [partition_cols[i] for i in keep])


def whole_input_output(spec: MatchRecognizeSpec) -> str | None:
    """Why the output depends on the matches of the whole input at once (so it cannot be
    computed per partition or per slice), or None."""
    skip = spec.after_match_skip
    if skip.explicit and skip.kind != "TO_NEXT_ROW":
        return ("AFTER MATCH SKIP PAST LAST ROW outputs a match only if it starts after the "
                "previous output match of the whole input completes")
    if spec.rows_per_match == "ALL" and spec.all_rows_option == "WITH_UNMATCHED":
        return "WITH UNMATCHED ROWS"
    for m in spec.measures:
        if any(isinstance(e, MatchNumber) for e in walk(m.expr)):
            return "MATCH_NUMBER() numbers the matches of the whole input"
    return None


def inference_blocker(spec: MatchRecognizeSpec) -> str | None:
    """Why no key can be inferred from the clause's form (None: the DEFINEs decide)."""
    if spec.strategy not in STRATEGIES:
        return "only SKIP_TILL_ANY_MATCH / SKIP_TILL_NEXT_MATCH ignore rows of other keys"
    if spec.partition_by:
        return "PARTITION BY is written"
    if spec.window is not None and spec.window.kind != "time":
        return "WITHIN n ROWS counts positions of the whole input"
    reason = whole_input_output(spec)
    if reason:
        return reason
    for expr in list(spec.defines.values()) + [m.expr for m in spec.measures]:
        reason = _cross_row_reason(expr)
        if reason:
            return reason
    return None


# --- form checks -----------------------------------------------------------------------

def _cross_row_reason(expr: Expr) -> str | None:
    """PREV/NEXT (reads neighbouring rows, of any key), or an unqualified FIRST/LAST/
    aggregate (excluded to stay on the safe side: R2 ranges them over the match rows)."""
    for e in walk(expr):
        if isinstance(e, Navigation):
            if e.kind in ("PREV", "NEXT"):
                return f"{e.kind} reads neighbouring rows of other keys"
            if _unqualified(e.arg):
                return f"unqualified {e.kind}(...)"
        elif isinstance(e, Aggregate) and (e.star_var == "" or (e.star_var is None and (
                not e.args or any(_unqualified(a) for a in e.args)))):
            return f"unqualified aggregate {e.name}(...)"
    return None


def _unqualified(expr: Expr) -> bool:
    return any((isinstance(e, ColumnRef) and e.var is None) or
               (isinstance(e, Classifier) and e.var is None) for e in walk(expr))


# --- equality conjuncts ----------------------------------------------------------------

class _Edge:
    """A DEFINE conjunct ``x.c = y.c`` of ``owner``: x and y are primary variables (an
    unqualified side is the owner's current row); ``own`` is the other side when one
    side is the owner's current row (every owner row equals that variable's last row)."""

    __slots__ = ("column", "own", "owner", "text", "x", "y")

    def __init__(self, owner: str, x: str, y: str, column: str, text: str):
        self.owner, self.x, self.y, self.column, self.text = owner, x, y, column, text
        self.own = y if x == owner else (x if y == owner else None)


def _equality_edges(spec: MatchRecognizeSpec) -> list[_Edge]:
    primaries = set(spec.variables)
    known = primaries | set(spec.subsets)
    edges: list[_Edge] = []
    for owner, cond in spec.defines.items():
        if owner not in primaries:
            continue
        for conj in split_conjuncts(cond):
            if not (isinstance(conj, BinaryOp) and conj.op == "="):
                continue
            bound = bind_rows(conj, in_define=True, final_default=False, known_vars=known)
            left, right = _plain_side(bound.left, owner), _plain_side(bound.right, owner)
            if left is None or right is None:
                continue
            (x, cx), (y, cy) = left, right
            if cx.lower() != cy.lower() or x == y or x not in primaries or y not in primaries:
                continue
            edges.append(_Edge(owner, x, y, cx, f"{x}.{cx} = {y}.{cy}"))
    return edges


def _plain_side(expr: Expr, owner: str) -> tuple[str, str] | None:
    """(variable, column) of ``v.col`` / ``LAST(v.col)`` / unqualified ``col``."""
    if not isinstance(expr, RowValue) or not isinstance(expr.value, ColumnRef):
        return None
    ref = expr.ref
    if ref.logical != "LAST" or ref.logical_offset or ref.physical_offset:
        return None
    return (owner if ref.var is None else ref.var), expr.value.column


# --- the pattern -------------------------------------------------------------------------

def _pattern_variables(node: PatternNode) -> tuple[set[str], set[str]]:
    """(positive variables, NOT variables)."""
    pos: set[str] = set()
    neg: set[str] = set()

    def walk_(n: PatternNode, negated: bool) -> None:
        if isinstance(n, Var):
            (neg if negated else pos).add(n.name)
        elif isinstance(n, (Concat, Alternation, Permute)):
            for i in n.items:
                walk_(i, negated)
        elif isinstance(n, Negation):
            walk_(n.child, True)
        elif isinstance(n, (Quantified, Exclusion)):
            walk_(n.child, negated)

    walk_(node, False)
    return pos, neg


def _max_rows(node: PatternNode, var: str) -> int:
    """How many rows ``var`` can take in one match, capped at MANY."""
    if isinstance(node, Var):
        return int(node.name == var)
    if isinstance(node, (Concat, Permute)):
        return min(MANY, sum(_max_rows(i, var) for i in node.items
                             if not isinstance(i, Negation)))
    if isinstance(node, Alternation):
        return max(_max_rows(i, var) for i in node.items)
    if isinstance(node, Quantified):
        one = _max_rows(node.child, var)
        return min(MANY, one * (MANY if node.max is None else node.max))
    if isinstance(node, Exclusion):
        return _max_rows(node.child, var)
    return 0


class _TooMany(Exception):
    pass


def _presence(node: PatternNode) -> set[frozenset]:
    """Every set of positive variables one match of node can consist of."""
    if isinstance(node, Var):
        return {frozenset((node.name,))}
    if isinstance(node, (Empty, Anchor, Negation)):
        return {frozenset()}
    if isinstance(node, Exclusion):
        return _presence(node.child)
    if isinstance(node, Alternation):
        return _cap(set().union(*(_presence(i) for i in node.items)))
    if isinstance(node, (Concat, Permute)):
        out = {frozenset()}
        for item in node.items:
            out = _cap({a | b for a in out for b in _presence(item)})
        return out
    if isinstance(node, Quantified):
        child = _presence(node.child)
        if node.max == 0:
            return {frozenset()}
        # unions of k >= 1 iterations; repeating an iteration's set adds nothing, so
        # the unions of up to max sets cover every k in [min, max]
        out = {frozenset()} if node.min == 0 else set()
        cur = child
        rounds = len(_pattern_variables(node.child)[0]) + 1
        for _ in range(rounds if node.max is None else min(rounds, node.max)):
            out |= cur
            cur = _cap({a | b for a in cur for b in child})
        return _cap(out)
    raise _TooMany  # unknown node: give up


def _cap(sets: set) -> set:
    if len(sets) > MAX_SHAPES:
        raise _TooMany
    return sets


# --- the exactness conditions ----------------------------------------------------------

def _linked(spec: MatchRecognizeSpec, edges: list[_Edge], positives: set[str],
            negated: set[str]) -> bool:
    try:
        if spec.strategy == "SKIP_TILL_ANY_MATCH":
            ok = _any_match_linked(spec.pattern, edges)
        else:
            ok = _takes_linked(spec.pattern, edges)
    except _TooMany:
        return False
    return ok and _negations_linked(edges, positives, negated)


def _any_match_linked(pattern: PatternNode, edges: list[_Edge]) -> bool:
    """Every match (any variable set it can consist of) has one value on all its rows."""
    for present in _presence(pattern):
        if len(present) == 0:
            continue  # empty matches are never output (R1)
        active = [e for e in edges if e.owner in present]
        if any(e.x not in present or e.y not in present for e in active):
            continue  # a conjunct reads an absent variable: NULL, no such match
        if not _connected(present, active):
            return False
        for var in present:
            if _max_rows(pattern, var) > 1 and not any(
                    e.owner == var and e.own is not None for e in active):
                return False  # rows before the variable's last one are unconstrained
    return True


def _connected(nodes: frozenset, edges: list[_Edge]) -> bool:
    parent = {n: n for n in nodes}

    def find(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n
    for e in edges:
        parent[find(e.x)] = find(e.y)
    return len({find(n) for n in nodes}) == 1


def _takes_linked(pattern: PatternNode, edges: list[_Edge]) -> bool:
    """R5 (SKIP_TILL_NEXT_MATCH): every take but a run's first checks the taken row
    against a variable the run has already bound."""
    failures: list[str] = []

    def can_take(var: str, bound: frozenset) -> None:
        if not bound:
            return  # a run's first row: runs start at every row, of every key
        if not any(e.owner == var and e.own is not None and e.own != var and e.own in bound
                   for e in edges):
            failures.append(var)

    def after(node: PatternNode, states: set[frozenset]) -> set[frozenset]:
        if failures:
            return states
        if isinstance(node, Var):
            for b in states:
                can_take(node.name, b)
            return _cap({b | {node.name} for b in states})
        if isinstance(node, (Empty, Anchor, Negation)):
            return states
        if isinstance(node, Exclusion):
            return after(node.child, states)
        if isinstance(node, Alternation):
            return _cap(set().union(*(after(i, states) for i in node.items)))
        if isinstance(node, Concat):
            for item in node.items:
                states = after(item, states)
            return states
        if isinstance(node, Permute):
            positives = [i for i in node.items if not isinstance(i, Negation)]
            out: set[frozenset] = set()
            for order in permutations(positives):
                cur = states
                for item in order:
                    cur = after(item, cur)
                out = _cap(out | cur)
            return out
        if isinstance(node, Quantified):
            cur = states
            for _ in range(node.min):
                cur = after(node.child, cur)
            out = set(cur)
            steps = None if node.max is None else node.max - node.min
            while steps is None or steps > 0:
                nxt = after(node.child, cur)
                if nxt <= out:
                    break  # every state of out has been expanded already
                out = _cap(out | nxt)
                cur = nxt
                if steps is not None:
                    steps -= 1
            return out
        raise _TooMany

    after(pattern, {frozenset()})
    return not failures


def _negations_linked(edges: list[_Edge], positives: set[str], negated: set[str]) -> bool:
    """Each NOT variable's rows equal a positive variable's row (through other NOT
    variables), so a NOT is violated by rows of the match's own key only."""
    linked = set(positives)
    changed = True
    while changed:
        changed = False
        for var in negated - linked:
            if any(e.owner == var and e.own is not None and e.own in linked for e in edges):
                linked.add(var)
                changed = True
    return negated <= linked
