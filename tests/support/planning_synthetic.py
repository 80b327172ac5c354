"""Random planning instances shaped like the paper's experiments (Section 6.2): arrival
rates 1-45 events per time unit, about n/2 predicates with selectivities 0.002-0.9,
sequence patterns. Used by the tests and benchmarks/bench_planning.py."""
from __future__ import annotations

import random

from cepsql.algebra.pattern import Concat, PatternNode, Permute, Var
from cepsql.planning.jqpg import PatternStats

__all__ = ["random_sequence", "random_stats"]


def random_stats(names: list[str], rng: random.Random, window: float = 1.0,
                 rate_range: tuple[float, float] = (1.0, 45.0),
                 sel_range: tuple[float, float] = (0.002, 0.9),
                 n_predicates: int | None = None) -> PatternStats:
    """Statistics for ``names`` with ``n_predicates`` (default ~n/2, at least 1) random
    pairwise predicates."""
    n = len(names)
    rates = {v: rng.uniform(*rate_range) for v in names}
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    k = max(1, n // 2) if n_predicates is None else n_predicates
    sels = {p: rng.uniform(*sel_range) for p in rng.sample(pairs, min(k, len(pairs)))}
    return PatternStats(rates=rates, window=window, selectivities=sels)


def random_sequence(n: int, rng: random.Random, conjunction: bool = False,
                    window: float = 1.0, **kw) -> tuple[PatternNode, PatternStats]:
    """SEQ (or AND) of n fresh variables V0..V{n-1} with random statistics."""
    names = [f"V{i}" for i in range(n)]
    items = tuple(Var(v) for v in names)
    node = Permute(items) if conjunction else Concat(items)
    return node, random_stats(names, rng, window=window, **kw)
