"""A workload like SIGMOD 2019's stock experiment (section 6.1) and a matching stream.

Each pattern: 3-7 variables, each one stock symbol (an event type) drawn from a pool with
Zipf-skewed arrival rates; SEQ or AND; predicates on about half of the variable pairs
comparing the price-difference attribute (``x.diff + k < y.diff``, the same predicate
for the same symbol pair in every pattern, so patterns overlap the way the paper's do);
about 20% of the patterns carry a NOT or a Kleene variable; windows of a few minutes
(different windows share through window mark-points). Patterns are SQL text of
``CREATE TEMPORARY VIEW ... MATCH_RECOGNIZE (... STRATEGY SKIP_TILL_ANY_MATCH ... WITHIN
...)`` statements over a ``ticks(ts, symbol, price, diff)`` table; ``stream`` draws such
a table (pyarrow) with the same rates, ``statistics`` gives the planner the rates and
selectivities the generator knows (no sampling needed).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from cepsql.stats.model import PatternStatistics

__all__ = ["SyntheticPattern", "SyntheticWorkload", "TICKS_SCHEMA", "signature_density",
           "stock_workload"]

TICKS_SCHEMA = pa.schema([("ts", pa.timestamp("us")), ("symbol", pa.string()),
                          ("price", pa.float64()), ("diff", pa.float64())])
#: offsets k of ``x.diff + k < y.diff`` (diff ~ N(0, 1): selectivity Phi(-k / sqrt 2))
OFFSETS = (0.0, 0.5, 1.0, 2.0)
VARIABLES = "abcdefghij"
_UNIT_SECONDS = {"SECOND": 1.0, "MINUTE": 60.0}


@dataclass
class SyntheticPattern:
    """One generated pattern view."""
    name: str
    symbols: list[str]                    # per variable
    operator: str                         # SEQ | AND
    special: tuple[str, int] | None       # ("NOT" | "KL", variable index)
    predicates: list[tuple[int, int, float]]   # (x, y, k): x.diff + k < y.diff
    window: int
    window_unit: str = "SECOND"
    kleene_max: int = 3

    def sql(self, table: str = "ticks") -> str:
        names = [VARIABLES[i] for i in range(len(self.symbols))]
        items = []
        for i, v in enumerate(names):
            if self.special == ("NOT", i):
                items.append(f"NOT({v})")
            elif self.special == ("KL", i):
                items.append(f"KL({v}, 1, {self.kleene_max})")
            else:
                items.append(v)
        positive = [v for i, v in enumerate(names) if self.special != ("NOT", i)]
        conds = {v: [f"{v}.symbol = '{s}'"] for v, s in zip(names, self.symbols)}
        for x, y, k in self.predicates:
            later = names[max(x, y)]
            left = f"{names[x]}.diff {'-' if k < 0 else '+'} {abs(k):g}" if k else \
                f"{names[x]}.diff"
            conds[later].append(f"{left} < {names[y]}.diff")
        defines = ",\n    ".join(f"{v} AS " + " AND ".join(c) for v, c in conds.items())
        first, last = positive[0], positive[-1]
        return (f"CREATE OR REPLACE TEMPORARY VIEW {self.name} AS SELECT * FROM {table} "
                "MATCH_RECOGNIZE (\n"
                "  ORDER BY ts\n"
                f"  MEASURES FIRST({first}.ts) AS first_ts, LAST({last}.ts) AS last_ts\n"
                "  ONE ROW PER MATCH\n"
                "  STRATEGY SKIP_TILL_ANY_MATCH\n"
                f"  PATTERN ({self.operator}({', '.join(items)}))\n"
                f"  WITHIN INTERVAL '{self.window}' {self.window_unit}\n"
                f"  DEFINE {defines})")


@dataclass
class SyntheticWorkload:
    patterns: list[SyntheticPattern]
    symbols: list[str]
    rates: dict[str, float]               # events per second per symbol
    offsets: dict[tuple[str, str], float] = field(default_factory=dict)

    @property
    def statements(self) -> list[str]:
        return [p.sql() for p in self.patterns]

    def statistics_of(self, p: SyntheticPattern):
        """The planning stage's statistics callable for pattern p (known values)."""
        def stats(spec) -> PatternStatistics:
            names = [VARIABLES[i].upper() for i in range(len(p.symbols))]
            rates = {v: self.rates[s] for v, s in zip(names, p.symbols)}
            sels = {}
            for x, y, k in p.predicates:
                sels[(names[min(x, y)], names[max(x, y)])] = _phi(-k / math.sqrt(2.0))
            rates = {v: rates[v] for v in spec.variables if v in rates}
            return PatternStatistics(rates=rates, selectivities=sels,
                                     unary_selectivity={v: 1.0 for v in rates},
                                     sample_rows=0, seconds=0.0, truncated=False,
                                     window_units=p.window * _UNIT_SECONDS[p.window_unit])
        return stats

    def workload_patterns(self):
        """WorkloadPatterns of every view (parsed from the SQL text)."""
        from cepsql.parse import find_match_recognize
        from cepsql.parse.statements import parse_create_view
        from cepsql.sharing.patterns import workload_pattern
        out = []
        for p in self.patterns:
            view = parse_create_view(p.sql())
            spec = find_match_recognize(view.query_text)[0].spec
            out.append(workload_pattern(spec, TICKS_SCHEMA, self.statistics_of(p),
                                        name=view.name))
        return out

    def stream(self, rows: int, seed: int = 0, events_per_second: float | None = None
               ) -> pa.Table:
        """``rows`` ticks with the workload's symbol rates; diff = price change of the
        symbol (about N(0, 1)), timestamps at the total rate."""
        rng = np.random.default_rng(seed)
        total = events_per_second or sum(self.rates.values())
        probs = np.array([self.rates[s] for s in self.symbols])
        sym = rng.choice(len(self.symbols), size=rows, p=probs / probs.sum())
        gaps = rng.exponential(1e6 / total, size=rows)
        ts = (np.cumsum(gaps)).astype(np.int64) + 1_700_000_000_000_000
        diff = rng.normal(0.0, 1.0, size=rows)
        price = np.empty(rows)
        for s in range(len(self.symbols)):
            mask = sym == s
            price[mask] = 100.0 + np.cumsum(diff[mask])
        return pa.table({"ts": pa.array(ts.astype("datetime64[us]")),
                         "symbol": pa.array(np.array(self.symbols)[sym]),
                         "price": price, "diff": diff}, schema=TICKS_SCHEMA)


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _phi_inverse(p: float) -> float:
    """The standard normal quantile (bisection on _phi; p in (0, 1))."""
    lo, hi = -10.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2.0
        if _phi(mid) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def stock_workload(n_patterns: int, *, seed: int = 0, symbols: int = 30,
                   sizes: tuple[int, int] = (3, 7), zipf: float = 1.1,
                   special_fraction: float = 0.2, and_fraction: float = 0.3,
                   windows: tuple[int, ...] = (5, 10, 15), window_unit: str = "SECOND",
                   kleene_max: int = 3,
                   events_per_second: float = 20.0,
                   selectivities: tuple[float, float] | None = None,
                   uniform_types: bool = False, density: float | None = None,
                   rate_diff: float | None = None) -> SyntheticWorkload:
    """n_patterns views over a pool of ``symbols`` skewed-rate stock symbols; Kleene
    variables are bounded (KL(x, 1, kleene_max)) so that any-match evaluation over real
    streams stays feasible.

    ``selectivities``: None gives every symbol pair's predicate one of the coarse offsets
    OFFSETS (selectivity 0.08-0.5: dense matches, what the tests want); (lo, hi) draws
    each pair's selectivity log-uniformly from [lo, hi] -- the paper measured 0.003 to
    0.92 on its stock data -- and sets the offset k to match it (k = -sqrt 2 *
    Phi^-1(sel), rounded to 0.01; a negative k is written ``x.diff - |k|``).
    ``uniform_types``: a pattern's symbols drawn uniformly from the pool (the paper picks
    event types without regard to their rates); False draws them in proportion to their
    rates, so patterns crowd on the busiest symbols (more overlap, far more matches).

    The paper's two workload parameters (section 6.1, appendix D); None keeps the
    generator above unchanged (same draws for the same seed):
    ``density``: target MPG density (average fraction of the other patterns a pattern is
    an MPG neighbour of). Patterns take two-symbol sub-patterns (the pair, same predicate
    everywhere) from a shared pool of POOL_PAIRS disjoint pairs, each with probability q;
    q is bisected so that the sub-pattern overlap density (``signature_density``, the
    graph's edge rule on symbols) reaches the target -- the graph's own measure is
    ``graph.mpg_density``; the target may be out of reach (q = 1 caps it).
    ``rate_diff``: the maximal normalized arrival-rate difference of a pattern -- (max -
    min rate of its symbols) / (max - min rate of the pool) <= rate_diff."""
    if density is not None or rate_diff is not None:
        return _tuned_workload(n_patterns, seed, symbols, sizes, zipf, special_fraction,
                               and_fraction, windows, window_unit, kleene_max,
                               events_per_second, selectivities, uniform_types, density,
                               rate_diff)
    rng = np.random.default_rng(seed)
    names, weights, rates, offsets = _pool(rng, symbols, zipf, events_per_second,
                                           selectivities)
    pick = None if uniform_types else weights / weights.sum()
    out = []
    for n in range(n_patterns):
        size = int(rng.integers(sizes[0], sizes[1] + 1))
        chosen = [names[i] for i in rng.choice(symbols, size=size, replace=False, p=pick)]
        out.append(_pattern(rng, n, chosen, offsets, special_fraction, and_fraction,
                            windows, window_unit, kleene_max))
    return SyntheticWorkload(out, names, rates, offsets)


def _pool(rng, symbols, zipf, events_per_second, selectivities):
    """Symbol names, Zipf weights, rates and one predicate offset per symbol pair."""
    names = [f"S{i:02d}" for i in range(symbols)]
    weights = 1.0 / np.arange(1, symbols + 1) ** zipf
    rates = dict(zip(names, events_per_second * weights / weights.sum()))
    offsets: dict[tuple[str, str], float] = {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if selectivities is None:
                k = float(rng.choice(OFFSETS))
            else:
                lo, hi = math.log(selectivities[0]), math.log(selectivities[1])
                k = round(-math.sqrt(2.0) * _phi_inverse(math.exp(rng.uniform(lo, hi))), 2)
            offsets[(a, b) if rng.random() < 0.5 else (b, a)] = k
    return names, weights, rates, offsets


def _pattern(rng, n, chosen, offsets, special_fraction, and_fraction, windows,
             window_unit, kleene_max, fixed: tuple = ()) -> SyntheticPattern:
    """One pattern over the symbols ``chosen``: operator, NOT/KL, predicates on about
    half of the pairs; ``fixed``: variable pairs that must carry their predicate (the
    shared sub-patterns: the same pair gets the same predicate in every pattern)."""
    size = len(chosen)
    operator = "AND" if rng.random() < and_fraction else "SEQ"
    special = None
    if rng.random() < special_fraction:
        special = ("NOT" if rng.random() < 0.5 else "KL", int(rng.integers(0, size)))
        if special[0] == "NOT" and operator == "SEQ" and special[1] in (0, size - 1):
            # a NOT between two SEQ neighbours (a pattern of two gets a KL instead)
            special = ("NOT", int(rng.integers(1, size - 1))) if size > 2 else \
                ("KL", special[1])
    positive = [i for i in range(size) if special != ("NOT", i)]
    pairs = [(x, y) for xi, x in enumerate(positive) for y in positive[xi + 1:]]
    rng.shuffle(pairs)
    picked = pairs[:max(1, len(pairs) // 2)]
    if fixed:
        picked = [p for p in fixed if p[0] in positive and p[1] in positive] + \
            [p for p in picked if p not in fixed]
    preds = []
    for x, y in picked:
        key = (chosen[x], chosen[y])
        if key in offsets:
            preds.append((x, y, offsets[key]))
        else:
            preds.append((y, x, offsets[(chosen[y], chosen[x])]))
    return SyntheticPattern(f"w{n}", chosen, operator, special, sorted(preds),
                            int(rng.choice(windows)), window_unit, kleene_max)


#: disjoint two-symbol sub-patterns in the shared pool of a density-tuned workload
POOL_PAIRS = 4


def signature_density(patterns: list[SyntheticPattern]) -> float:
    """The MPG density the generator aims at: the mean fraction of the other patterns
    sharing a two-symbol sub-pattern (both symbols, plain variables, the same predicate
    or none between them) -- the graph's edge rule on the generator's side."""
    sigs = []
    for p in patterns:
        plain = [i for i in range(len(p.symbols)) if p.special is None or p.special[1] != i]
        cond = {(min(x, y), max(x, y)) for x, y, _ in p.predicates}
        sigs.append({(frozenset((p.symbols[x], p.symbols[y])), (x, y) in cond)
                     for xi, x in enumerate(plain) for y in plain[xi + 1:]})
    n = len(patterns)
    if n < 2:
        return 0.0
    return sum(sum(1 for j in range(n) if j != i and sigs[i] & sigs[j])
               for i in range(n)) / (n * (n - 1))


def _tuned_workload(n_patterns, seed, symbols, sizes, zipf, special_fraction, and_fraction,
                    windows, window_unit, kleene_max, events_per_second, selectivities,
                    uniform_types, density, rate_diff) -> SyntheticWorkload:
    """stock_workload with a target density and/or rate band: q (the probability of
    taking each pool sub-pattern) bisected on signature_density; every candidate workload
    drawn from the same seed."""
    def build(q: float) -> SyntheticWorkload:
        return _draw(n_patterns, seed, symbols, sizes, zipf, special_fraction,
                     and_fraction, windows, window_unit, kleene_max, events_per_second,
                     selectivities, uniform_types, q, rate_diff)
    if density is None:
        return build(0.0)
    lo, hi = 0.0, 1.0
    best = build(1.0)
    if signature_density(best.patterns) <= density:
        return best
    best_gap = float("inf")
    for _ in range(10):
        q = (lo + hi) / 2.0
        wl = build(q)
        got = signature_density(wl.patterns)
        if abs(got - density) < best_gap:
            best, best_gap = wl, abs(got - density)
        if got < density:
            lo = q
        else:
            hi = q
    return best


def _draw(n_patterns, seed, symbols, sizes, zipf, special_fraction, and_fraction, windows,
          window_unit, kleene_max, events_per_second, selectivities, uniform_types, q,
          rate_diff) -> SyntheticWorkload:
    rng = np.random.default_rng(seed)
    names, weights, rates, offsets = _pool(rng, symbols, zipf, events_per_second,
                                           selectivities)
    r = np.array([rates[s] for s in names])
    width = float("inf") if rate_diff is None else rate_diff * float(r.max() - r.min())
    # the pool: pairs of rate-neighbouring symbols (so a narrow band can still hold one)
    adjacent = [(2 * i, 2 * i + 1) for i in range(symbols // 2)
                if abs(r[2 * i] - r[2 * i + 1]) <= width]
    take = min(POOL_PAIRS, len(adjacent))
    pool = [adjacent[i] for i in rng.choice(len(adjacent), size=take, replace=False)] \
        if take else []
    pick = None if uniform_types else weights / weights.sum()
    out = []
    for n in range(n_patterns):
        size = int(rng.integers(sizes[0], sizes[1] + 1))
        chosen: list[int] = []
        shared: list[tuple[int, int]] = []
        for k in rng.permutation(len(pool)):
            a, b = pool[k]
            if rng.random() < q and len(chosen) + 2 <= size:
                if _window_holds(r, chosen + [a, b], size, width):
                    chosen += [a, b]
                    shared.append((a, b))
        need = size - len(chosen)
        rest = [i for i in range(symbols) if i not in chosen]
        if math.isinf(width):
            band = rest
        else:
            # rate windows [r_s, r_s + width] holding the symbols so far and enough others
            fits = []
            for s in range(symbols):
                inside = [i for i in rest if r[s] <= r[i] <= r[s] + width]
                if all(r[s] <= r[i] <= r[s] + width for i in chosen) and len(inside) >= need:
                    fits.append(inside)
            if fits:
                band = fits[int(rng.integers(len(fits)))]
            else:   # no window holds the pattern: the nearest rates (a wider pattern)
                mid = float(np.mean([r[i] for i in chosen])) if chosen else float(r.mean())
                band = sorted(rest, key=lambda i: abs(r[i] - mid))[:need]
        p = None if pick is None else pick[band] / pick[band].sum()
        chosen += [int(i) for i in rng.choice(band, size=need, replace=False, p=p)]
        order = [chosen[i] for i in rng.permutation(len(chosen))]
        for a, b in shared:   # a shared pair keeps one order in every pattern (SEQ)
            ia, ib = order.index(a), order.index(b)
            if ia > ib:
                order[ia], order[ib] = b, a
        fixed = tuple((order.index(a), order.index(b)) for a, b in shared)
        out.append(_pattern(rng, n, [names[i] for i in order], offsets, special_fraction,
                            and_fraction, windows, window_unit, kleene_max, fixed))
    return SyntheticWorkload(out, names, rates, offsets)


def _window_holds(r, members: list[int], size: int, width: float) -> bool:
    """Some rate window [r_s, r_s + width] holds ``members`` and ``size`` symbols."""
    if math.isinf(width):
        return True
    lo, hi = min(r[i] for i in members), max(r[i] for i in members)
    return any(r[s] <= lo and hi <= r[s] + width
               and int(((r >= r[s]) & (r <= r[s] + width)).sum()) >= size
               for s in range(len(r)))
