"""The global plan of a workload: a DAG of evaluator nodes shared by several patterns.

This is the contract between the sharing stage (which builds it: merge / prefix / tree
sharing, local search) and the runtime (which runs it in the shared DAG evaluator).

A *node* computes instances of a sub-pattern: tuples of rows, one per *slot*. A leaf has
one slot and takes the rows of one event type (a variable's single-row DEFINE). A join
combines one instance of its left child and one of its right child; its slots are the
left child's slots followed by the right child's. Each node applies a set of *checks*
(cross-variable DEFINE conjuncts and SEQ order constraints, both over its slots) and a
time window that is the largest of its consumers' windows (MOTTO's window mark-point);
every consumer filters by its own window and applies the checks it needs that the shared
node did not (MOTTO's operator transformation: e.g. a SEQ's order checks on top of a
shared AND node).

Each pattern of the workload has one *root* node; ``Binding`` maps the root's slots to
the pattern's variables. A pattern the DAG cannot run (SQL:2016 mode, in-order
strategies, shapes without a reduction) has no root: it runs its own evaluator in the
same pass (shared scan, shuffle, sort and row-local columns), listed in ``unshared``.
"""
from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

__all__ = ["Binding", "DagNode", "GlobalPlan"]


@dataclass(frozen=True)
class DagNode:
    """One node; ``left``/``right`` are indices of earlier nodes (-1 for a leaf)."""
    key: Hashable                 # canonical sub-pattern (equal keys = same instances)
    arity: int                    # number of slots (1 for a leaf)
    left: int = -1
    right: int = -1
    window: float | None = None   # largest consumer window (None = none)
    window_kind: int = 0          # 0 none, 1 rows (WITHIN n ROWS), 2 time (microseconds)
    # leaf of a Kleene variable KL(x, min, max): its instances are ordered row sets
    kleene: tuple[int, int] | None = None   # (min, max or -1)
    # the pattern + variable per slot the node's checks are compiled from (any consumer
    # gives the same checks modulo renaming -- that is what sharing the node means)
    owner: int = 0
    owner_vars: tuple[str, ...] = ()
    # checks applied here, as (kind, payload) in the owner's terms:
    # ("order", (var_i, var_j)) rows of var_i before rows of var_j;
    # ("conjunct", index into the owner's DEFINE conjunct list, numbered as plan_cep
    #  compiles them: spec.defines order, then each DEFINE's top-level AND conjuncts);
    # on a Binding also ("not", index into the term's negs) and ("window", None)
    checks: tuple[tuple[str, Hashable], ...] = ()

    @property
    def is_leaf(self) -> bool:
        return self.left < 0


@dataclass(frozen=True)
class Binding:
    """Pattern ``pattern``'s root: its variable per root slot and the checks the root
    applies on top of the shared node's (its own remaining order checks, conjuncts, NOTs),
    in the pattern's own terms."""
    pattern: int
    root: int
    slot_vars: tuple[str, ...]
    extra_checks: tuple[tuple[str, Hashable], ...] = ()
    term: int = 0                 # which OR-free disjunct of the pattern (evaluator_choice.Term)


@dataclass
class GlobalPlan:
    """Nodes in topological order (children first), one Binding per shared pattern."""
    nodes: list[DagNode] = field(default_factory=list)
    bindings: list[Binding] = field(default_factory=list)
    unshared: list[int] = field(default_factory=list)   # patterns run on their own
    algorithm: str = "NONE"        # NONE | PREFIX | SA | TABU (| MPM / MPT variants)
    cost: float = 0.0              # cost over distinct nodes (a shared node once)
    independent_cost: float = 0.0  # sum of the patterns' own best plans' costs
    trivial_cost: float = 0.0      # no sharing, no reordering
    iterations: int = 0
    seconds: float = 0.0
    graph_edges: int = 0           # edges of the multi-pattern graph (pairs sharing 2+)
    alternatives: dict = field(default_factory=dict)   # algorithm tried -> its cost

    def consumers(self, node: int) -> list[int]:
        """Nodes (and, as ~pattern, roots) that read ``node``'s instances."""
        out = [i for i, n in enumerate(self.nodes) if node in (n.left, n.right)]
        out += [~b.pattern for b in self.bindings if b.root == node]
        return out

    def shared_nodes(self) -> list[int]:
        """Nodes with more than one consumer."""
        return [i for i in range(len(self.nodes)) if len(self.consumers(i)) > 1]
