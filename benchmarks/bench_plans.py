"""Cost-based CEP planning, end to end: every plan algorithm on the pattern sets of
Kolchinsky & Schuster, VLDB 2018, section 6 (and the rare-last-event sequence of the
DEBS 2015 lazy-evaluation experiments), run by cepsql's in-process evaluators.

    python benchmarks/bench_plans.py                        # defaults, a few minutes
    python benchmarks/bench_plans.py --events 100000 --per-size 3 --repeat 3
    python benchmarks/bench_plans.py --sets SEQ,RARE --sizes 3,5 --isolate

Stream: ``cepsql.datagen.generate_stock_stream`` (20 symbols, Poisson arrivals at 1-45
events per second, random-walk prices, ``difference`` = price change since the symbol's
previous update, the attribute the paper's predicates compare).

Pattern sets (sizes 3..7, one variable per symbol, ``STRATEGY SKIP_TILL_ANY_MATCH``,
``WITHIN INTERVAL 'w' SECOND``): SEQ, NEG (a SEQ with one NOT inside), AND, KL (a SEQ
with one Kleene closure, on a slow symbol), OR (two SEQs of that size), and RARE (a
3-sequence whose last variable has the rarest symbol). About size/2 cross-variable
predicates per sequence, ``y.difference - x.difference > c`` or ``abs(y.difference -
x.difference) < c``, with c calibrated on the stream so that selectivities spread over
0.002..0.9 (the paper's range); the achieved selectivities are measured with
``cepsql.stats.estimate_from_table`` and printed. The window w of every pattern is the
largest that keeps TRIVIAL's estimated cost (Cost_ord: expected partial matches per
window) under ``--trivial-cost``, so the worst plan stays runnable.

Per pattern and per algorithm (the nine of ``cepsql.planning.ALGORITHMS`` and
``default``, i.e. cepsql's own choice): plan cost, evaluation time (best of --repeat),
events/s, throughput normalized to TRIVIAL and to EFREQ, matches (identical across
algorithms, else a loud MISMATCH line and exit status 1), peak partial matches (evaluator
counters, ``RunStatistics`` of the run or the worker's ``last_stats``) and peak RSS growth. Writes
benchmarks/results/plans.md (tables), plans.svg (grouped bars of normalized throughput
per set) and plans.json (raw numbers).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import pyarrow as pa
from pyarrow import feather

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from cepsql.datagen import generate_stock_stream, stock_rates  # noqa: E402
from cepsql.planning import ALGORITHMS, PatternStats, reduce_pattern  # noqa: E402
from cepsql.runtime.workers import bind_worker  # noqa: E402

RESULTS = os.path.join(ROOT, "benchmarks", "results")
ALGOS = [*ALGORITHMS, "default"]
SETS = ("SEQ", "NEG", "AND", "KL", "OR", "RARE")
LETTERS = "abcdefghijklmn"
#: evaluator counter keys that count partial matches, best first (the planned evaluators may
#: add their own; the in-order evaluator has peak_runs)
PM_KEYS = ("peak_partial_matches", "peak_pm", "peak_instances", "peak_stored_pm", "peak_runs")


# --------------------------------------------------------------------------- patterns

@dataclass
class Predicate:
    left: str           # earlier variable of the pair (in pattern order)
    right: str
    form: str           # 'gt' : right - left > c ; 'abs' : abs(right - left) < c
    const: float
    target: float       # selectivity aimed at
    calibrated: float   # selectivity of the chosen constant over random row pairs
    home: str           # variable whose DEFINE holds it

    def sql(self) -> str:
        diff = f"{self.right}.difference - {self.left}.difference"
        if self.form == "gt":
            return f"{diff} > {self.const:.3f}"
        return f"abs({diff}) < {self.const:.3f}"


@dataclass
class Case:
    name: str
    set: str
    size: int
    branches: list[list[str]]          # positive and negated variables per SEQ, in order
    symbols: dict[str, str]
    special: dict[str, str] = field(default_factory=dict)   # var -> 'KL' | 'NOT'
    predicates: list[Predicate] = field(default_factory=list)
    window: float = 1.0
    measured: dict = field(default_factory=dict)   # estimate_from_table results

    def pattern_text(self) -> str:
        def item(v: str) -> str:
            kind = self.special.get(v)
            return f"KL({v})" if kind == "KL" else f"NOT({v})" if kind == "NOT" else v
        seqs = [", ".join(item(v) for v in b) for b in self.branches]
        if self.set == "AND":
            return f"AND({seqs[0]})"
        if len(seqs) == 1:
            return f"SEQ({seqs[0]})"
        return "OR(" + ", ".join(f"SEQ({s})" for s in seqs) + ")"

    def sql(self, window: float | None = None) -> str:
        w = self.window if window is None else window
        measures = []
        for b in self.branches:
            for v in b:
                kind = self.special.get(v)
                if kind == "NOT":
                    continue
                if kind == "KL":
                    measures += [f"FIRST({v}.ts) AS {v}_first", f"LAST({v}.ts) AS {v}_last",
                                 f"count({v}.*) AS {v}_n"]
                else:
                    measures.append(f"{v}.ts AS {v}_ts")
        defines = []
        for b in self.branches:
            for v in b:
                conds = [f"{v}.symbol = '{self.symbols[v]}'"]
                conds += [p.sql() for p in self.predicates if p.home == v]
                defines.append(f"{v} AS " + " AND ".join(conds))
        return ("SELECT * FROM ticks MATCH_RECOGNIZE (\n"
                "  ORDER BY ts\n"
                f"  MEASURES {', '.join(measures)}\n"
                "  ONE ROW PER MATCH\n"
                "  STRATEGY SKIP_TILL_ANY_MATCH\n"
                f"  PATTERN ({self.pattern_text()})\n"
                f"  WITHIN INTERVAL '{_fmt_window(w)}' SECOND\n"
                f"  DEFINE {', '.join(defines)}\n)")


def _fmt_window(w: float) -> str:
    return f"{w:.3f}".rstrip("0").rstrip(".")


class Calibrator:
    """Predicate constants for target selectivities, from the stream's own differences."""

    def __init__(self, table: pa.Table, seed: int, pairs: int = 40_000):
        sym = np.asarray(table.column("symbol").to_numpy(zero_copy_only=False))
        diff = table.column("difference").to_numpy()
        self.by_symbol = {s: diff[sym == s] for s in np.unique(sym)}
        self.rng = np.random.default_rng(seed)
        self.pairs = pairs

    def make(self, left: str, right: str, sym_left: str, sym_right: str, target: float,
             form: str, home: str) -> Predicate:
        x = self.rng.choice(self.by_symbol[sym_left], self.pairs)
        y = self.rng.choice(self.by_symbol[sym_right], self.pairs)
        d = y - x if form == "gt" else np.abs(y - x)
        # differences are whole cents: put the constant between two cents, so float noise
        # in y - x never decides a comparison
        cents = np.unique(np.round(d * 100))
        consts = (cents + 0.5) / 100
        if form == "gt":
            achieved = 1.0 - np.searchsorted(np.sort(d), consts, side="right") / len(d)
        else:
            achieved = np.searchsorted(np.sort(d), consts, side="right") / len(d)
        ok = achieved > 0
        consts, achieved = consts[ok], achieved[ok]
        best = int(np.argmin(np.abs(np.log(achieved) - math.log(target))))
        return Predicate(left, right, form, float(consts[best]), target,
                         float(achieved[best]), home)


def _targets(rng: random.Random, lo: float = 0.002, hi: float = 0.9):
    """Selectivity targets: both ends of the paper's range first, then log-uniform."""
    yield lo
    yield hi
    while True:
        yield math.exp(rng.uniform(math.log(lo), math.log(hi)))


def build_cases(table: pa.Table, rates: dict[str, float], args) -> list[Case]:
    """The patterns of args.sets. All sets are built (in SETS order) and then filtered,
    so a pattern depends on the seed, sizes and per-size count only, not on --sets."""
    rng = random.Random(args.seed)
    cal = Calibrator(table, args.seed)
    targets = _targets(random.Random(args.seed + 1))
    by_rate = sorted(rates, key=rates.get)           # slowest first
    cases = []
    for set_name in SETS:
        sizes = [3] if set_name == "RARE" else args.sizes
        for size in sizes:
            for k in range(1 if set_name == "RARE" else args.per_size):
                name = f"{set_name}-{size}" + (f"#{k + 1}" if args.per_size > 1 and
                                                set_name != "RARE" else "")
                cases.append(_case(name, set_name, size, rng, cal, targets, rates, by_rate))
    return [c for c in cases if c.set in args.sets]


def _case(name, set_name, size, rng, cal, targets, rates, by_rate) -> Case:
    n_branches = 2 if set_name == "OR" else 1
    letters = iter(LETTERS)
    branches = [[next(letters) for _ in range(size)] for _ in range(n_branches)]
    variables = [v for b in branches for v in b]
    special: dict[str, str] = {}
    if set_name == "KL":
        special[branches[0][rng.randrange(1, size - 1)]] = "KL"
    if set_name == "NEG":
        special[branches[0][rng.randrange(1, size - 1)]] = "NOT"
    if set_name == "RARE":
        # the most frequent, a mid-rate, then the rarest symbol last (DEBS 2015 section 7)
        symbols = dict(zip(variables, [by_rate[-1], by_rate[len(by_rate) * 3 // 4], by_rate[0]]))
    else:
        # a closure takes one of the five slowest symbols (ANY_MATCH output is 2^(r w))
        pinned = {v: rng.choice(by_rate[:5]) for v, k in special.items() if k == "KL"}
        rest = [s for s in rates if s not in pinned.values()]
        others = [v for v in variables if v not in pinned]
        drawn = {**dict(zip(others, rng.sample(rest, len(others)))), **pinned}
        symbols = {v: drawn[v] for v in variables}
    case = Case(name, set_name, size, branches, symbols, special)
    for b in branches:
        pairs = [(b[i], b[j]) for i in range(len(b)) for j in range(i + 1, len(b))]
        if set_name == "RARE":
            chosen = [(b[0], b[1]), (b[1], b[2])]
            goals = [0.5, 0.01]
        else:
            negated = [v for v in b if special.get(v) == "NOT"]
            chosen = []
            if negated:  # the negated variable is compared with its predecessor
                i = b.index(negated[0])
                chosen.append((b[i - 1], b[i]))
                pairs = [p for p in pairs if negated[0] not in p]
            count = max(1, size // 2)
            chosen += rng.sample(pairs, min(count - len(chosen), len(pairs)))
            goals = [next(targets) for _ in chosen]
        for (x, y), goal in zip(chosen, goals):
            home = x if special.get(x) else y
            form = "gt" if len(case.predicates) % 2 == 0 else "abs"
            case.predicates.append(cal.make(x, y, symbols[x], symbols[y], goal, form, home))
    return case


# --------------------------------------------------------------------------- windows

def _spec(sql: str):
    from cepsql.parse import find_match_recognize
    return find_match_recognize(sql)[0].spec


def _pattern_stats(case: Case, rates: dict[str, float], window: float) -> PatternStats:
    # the parser upper-cases pattern variables
    sels = {(p.left.upper(), p.right.upper()): p.calibrated for p in case.predicates}
    variables = [v for b in case.branches for v in b]
    return PatternStats(rates={v.upper(): rates[case.symbols[v]] for v in variables},
                        window=window, selectivities=sels)


def trivial_cost(case: Case, rates: dict[str, float], window: float) -> float:
    spec = _spec(case.sql(window))
    queries = reduce_pattern(spec.pattern, _pattern_stats(case, rates, window))
    return sum(ALGORITHMS["TRIVIAL"](q).cost for q in queries)


def tune_window(case: Case, rates: dict[str, float], budget: float, max_window: float) -> float:
    """The largest window on a 1-2-5-like grid whose TRIVIAL cost fits the budget."""
    grid = sorted({round(m * 10 ** e, 3) for e in range(-2, 3)
                   for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8)})
    best = grid[0]
    for w in grid:
        if w > max_window:
            break
        if trivial_cost(case, rates, w) <= budget:
            best = w
    return best


def measure_statistics(case: Case, table: pa.Table) -> None:
    """What cepsql's statistics stage estimates for the final query (rates per second,
    pair selectivities): recorded in case.measured."""
    from cepsql.stats import estimate_from_table
    st = estimate_from_table(_spec(case.sql()), table)
    case.measured = {"rates": {k.lower(): v for k, v in st.rates.items()},
                     "selectivities": {f"{a.lower()}~{b.lower()}": s
                                       for (a, b), s in st.selectivities.items()}}


# --------------------------------------------------------------------------- running

def _rss_reset() -> bool:
    """Reset the process's peak-RSS mark (Linux >= 4.0); False where unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _status_kb(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _fingerprint(table: pa.Table) -> str:
    """Order-independent digest of the output rows (timestamps as int64, NULL = -1)."""
    cols = []
    for name in sorted(table.column_names):
        col = table.column(name)
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.int64())
        cols.append(np.asarray(col.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64))
    if not cols or len(cols[0]) == 0:
        return "empty"
    rows = np.stack(cols, axis=1)
    rows = rows[np.lexsort(rows.T[::-1])]
    return hashlib.sha1(rows.tobytes()).hexdigest()[:12]


def plan_summary(sql: str, table: pa.Table, algorithm: str, plan_seconds: float) -> dict:
    """Cost and shape of the plan for algorithm, computed as cepsql's planner stage does
    (same statistics, same reduction, same choice rule; II_* are time-boxed, so their
    plan may differ from the run's in rare cases)."""
    from cepsql.planning import choose_plan
    from cepsql.stats import CACHE
    spec = _spec(sql)
    stats_of = lambda s: CACHE.get_or_estimate(s, table)  # noqa: E731
    try:
        from cepsql.planning.evaluator_choice import planner_stats
        pstats = planner_stats(spec, stats_of)[0]
    except ImportError:  # trees without the planner stage: the same conversion
        st = stats_of(spec)
        pstats = PatternStats(rates=dict(st.rates), window=st.window_units or 1.0,
                              selectivities=dict(st.selectivities))
    queries = reduce_pattern(spec.pattern, pstats)
    share = plan_seconds / len(queries)
    plans = []
    for q in queries:
        if q.size == 1:
            plans.append(choose_plan(q, "TRIVIAL"))
        elif algorithm != "default":
            plans.append(choose_plan(q, algorithm, budget_seconds=share))
        else:  # planning.evaluator_choice's default plan: the cheaper of the best order and tree plans
            o = choose_plan(q, None, kind="order", budget_seconds=share / 2)
            t = choose_plan(q, None, kind="tree", budget_seconds=share / 2)
            plans.append(t if t.cost < o.cost * (1 - 1e-9) else o)
    return {"cost": sum(p.cost for p in plans),
            "plan": " | ".join(_shape(p) for p in plans),
            "chosen": ",".join(sorted({p.algorithm for p in plans}))}


def _shape(plan) -> str:
    labels = [x.lower() for x in plan.query.labels] if plan.query is not None else None
    if plan.kind == "order":
        return ">".join(labels[i] if labels else str(i) for i in plan.order)

    def draw(node) -> str:
        if node.is_leaf:
            return labels[node.leaf] if labels else str(node.leaf)
        return f"({draw(node.left)} {draw(node.right)})"
    return draw(plan.root)


def run_algorithm(sql: str, table: pa.Table, algorithm: str, repeat: int,
                  plan_seconds: float, end_to_end: bool, slow_seconds: float = math.inf) -> dict:
    """One (pattern, algorithm) measurement in this process: the best of repeat runs
    (a run slower than slow_seconds is not repeated)."""
    import cepsql
    from cepsql.exprs.arrow_eval import evaluate_arrow
    from cepsql.backends.local.engine import run_local
    from cepsql.runtime.ordering import sort_table
    from cepsql.runtime.run_stats import RunStatistics
    from cepsql.compile.clause import plan_query
    from cepsql.planning.options import PlannerOptions
    from cepsql.stats import CACHE

    opt_alg = None if algorithm == "default" else algorithm
    spec = _spec(sql)
    stats_of = lambda s: CACHE.get_or_estimate(s, table)  # noqa: E731
    started = time.perf_counter()
    plan = plan_query(spec, table.schema, sql,
                      options=PlannerOptions(algorithm=opt_alg, plan_seconds=plan_seconds),
                      statistics=stats_of)
    plan_s = time.perf_counter() - started
    prepared = table
    for name, expr in plan.prepare_columns:
        prepared = prepared.append_column(name, evaluate_arrow(expr, table))
    bound = bind_worker(plan, prepared.schema)
    batches = sort_table(prepared, plan.sort_keys).combine_chunks().to_batches(65_536)

    best, out, counters, rss_kb, hwm_kb = float("inf"), None, {}, None, 0
    for _ in range(repeat):
        can_reset = _rss_reset()
        before = _status_kb("VmRSS")
        run_stats = RunStatistics()
        t0 = time.perf_counter()
        if end_to_end:
            with cepsql.planner_options(algorithm=opt_alg, plan_seconds=plan_seconds):
                result = run_local(sql, {"ticks": table}, stats=run_stats)
        else:
            result = list(bound.worker(iter(batches)))
        seconds = time.perf_counter() - t0
        peak = _status_kb("VmHWM") if can_reset else None
        if seconds < best:
            counters = run_stats.last if end_to_end else dict(bound.worker.last_stats or {})
            best, out = seconds, result
        if peak is not None and before is not None:
            rss_kb = max(rss_kb or 0, peak - before)
            hwm_kb = max(hwm_kb, peak)
        if seconds > slow_seconds:
            break
    if not end_to_end:
        raw = pa.Table.from_batches(out, schema=bound.worker_schema)
        out = pa.Table.from_arrays([evaluate_arrow(e, raw) for _, e in bound.final_projection],
                                   names=[n for n, _ in bound.final_projection])
    return {"seconds": best, "plan_seconds": plan_s, "matches": out.num_rows,
            "fingerprint": _fingerprint(out), "counters": counters,
            "rss_mb": None if rss_kb is None else rss_kb / 1024, "hwm_mb": hwm_kb / 1024}


def run_isolated(sql: str, data_path: str, algorithm: str, args) -> dict:
    """The same measurement in a fresh Python process (clean peak RSS, a time limit)."""
    job = {"sql": sql, "data": data_path, "algorithm": algorithm, "repeat": args.repeat,
           "plan_seconds": args.plan_seconds, "end_to_end": args.end_to_end,
           "slow_seconds": args.slow_seconds}
    try:
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"],
                              input=json.dumps(job), capture_output=True, text=True,
                              timeout=args.timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {args.timeout:g} s"}
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": tail[:200]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def child_main() -> int:
    job = json.loads(sys.stdin.read())
    table = feather.read_table(job["data"])
    loaded_kb = _status_kb("VmHWM") or 0  # start-up and loading, before any reset
    result = run_algorithm(job["sql"], table, job["algorithm"], job["repeat"],
                           job["plan_seconds"], job["end_to_end"], job["slow_seconds"])
    result["rss_peak_mb"] = max(loaded_kb / 1024, result["hwm_mb"])  # the whole process
    print(json.dumps(result, default=float))
    return 0


# --------------------------------------------------------------------------- report

def _geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def normalize(cases: list[Case], results: dict) -> None:
    """Adds events/s and the throughput ratios to TRIVIAL and EFREQ in place."""
    for case in cases:
        row = results[case.name]
        for r in row.values():
            if "seconds" in r:
                r["events_per_s"] = r["n_events"] / r["seconds"] if r["seconds"] > 0 else None
        for base in ("TRIVIAL", "EFREQ"):
            ref = row.get(base, {}).get("events_per_s")
            for r in row.values():
                eps = r.get("events_per_s")
                r[f"x_{base}"] = eps / ref if eps and ref else None


def pm_of(counters: dict) -> tuple[str, int] | None:
    for key in PM_KEYS:
        if key in counters:
            return key, counters[key]
    return None


def _n(x, fmt=".3g") -> str:
    return "-" if x is None else format(x, fmt)


def ran(cases: list[Case], results: dict) -> list[str]:
    """The algorithms measured, in ALGOS order."""
    return [a for a in ALGOS if any(a in results[c.name] for c in cases)]


def summary_by_set(cases: list[Case], results: dict, key: str) -> dict:
    out = {}
    for set_name in dict.fromkeys(c.set for c in cases):
        out[set_name] = {alg: _geomean([results[c.name].get(alg, {}).get(key)
                                        for c in cases if c.set == set_name])
                         for alg in ran(cases, results)}
    return out


def ordering_checks(cases: list[Case], results: dict) -> list[tuple[str, float | None, bool]]:
    """The papers' orderings, on the geometric mean of x_TRIVIAL over every pattern; a
    relation holds within 5% (identical plans differ only by noise)."""
    g = {alg: _geomean([results[c.name].get(alg, {}).get("x_TRIVIAL") for c in cases
                        if c.set != "RARE"]) for alg in ALGOS}
    rules = [("GREEDY >= EFREQ", "GREEDY", "EFREQ"), ("II_GREEDY >= EFREQ", "II_GREEDY", "EFREQ"),
             ("DP_LD >= EFREQ", "DP_LD", "EFREQ"), ("EFREQ >= TRIVIAL", "EFREQ", "TRIVIAL"),
             ("DP_LD >= GREEDY", "DP_LD", "GREEDY"), ("DP_B >= ZSTREAM_ORD", "DP_B", "ZSTREAM_ORD"),
             ("DP_B >= ZSTREAM", "DP_B", "ZSTREAM"), ("DP_B >= DP_LD", "DP_B", "DP_LD"),
             ("default >= DP_LD", "default", "DP_LD")]
    out = []
    for label, a, b in rules:
        ratio = g[a] / g[b] if g.get(a) and g.get(b) else None
        out.append((label, ratio, None if ratio is None else ratio >= 0.95))
    return out


def cost_time_correlation(cases: list[Case], results: dict) -> float | None:
    """Mean Spearman correlation, per pattern, between plan cost and evaluation time
    (VLDB 2018 Figure 6: cheaper plans should run faster)."""
    rhos = []
    for c in cases:
        pts = [(r["cost"], r["seconds"]) for r in results[c.name].values()
               if r.get("cost") is not None and r.get("seconds") is not None]
        if len(pts) < 3 or len({p[0] for p in pts}) < 2:
            continue
        ca, ta = (np.argsort(np.argsort(np.array(x))) for x in zip(*pts))
        if ca.std() == 0 or ta.std() == 0:
            continue
        rhos.append(float(np.corrcoef(ca, ta)[0, 1]))
    return statistics.fmean(rhos) if rhos else None


def render_markdown(cases, results, checks, rho, header: list[str]) -> str:
    lines = ["# bench_plans results", "", *header, ""]
    algos = ran(cases, results)
    for key, title in (("x_TRIVIAL", "throughput / TRIVIAL's"),
                       ("x_EFREQ", "throughput / EFREQ's")):
        lines += [f"## {title} (geometric mean over each set's patterns)", "",
                  "| set | " + " | ".join(algos) + " |", "|---" * (len(algos) + 1) + "|"]
        for set_name, row in summary_by_set(cases, results, key).items():
            lines.append(f"| {set_name} | " + " | ".join(_n(row[a], ".2f") for a in algos) + " |")
        lines.append("")
    lines += [("## the papers' orderings (geometric mean of throughput / TRIVIAL over all "
               "patterns but RARE)"), ""]
    for label, ratio, ok in checks:
        verdict = "n/a" if ok is None else "ok" if ok else "**not reproduced**"
        lines.append(f"- {label}: ratio {_n(ratio, '.2f')} {verdict}")
    lines += ["", (f"Mean per-pattern Spearman correlation of plan cost and evaluation time: "
                   f"{_n(rho, '.2f')} (positive = cheaper plans run faster)."), ""]
    lines += ["## per pattern", "",
              ("| pattern | algorithm | plan | cost | eval s | events/s | x TRIVIAL | x EFREQ "
               "| matches | peak PM | RSS+ MB | plan ms |"),
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cases:
        for alg in algos:
            r = results[c.name].get(alg, {})
            if "error" in r:
                lines.append(f"| {c.name} | {alg} | {r.get('plan', '')} | {_n(r.get('cost'))} "
                             f"| {r['error']} | | | | | | | |")
                continue
            pm = pm_of(r.get("counters", {}))
            lines.append(
                f"| {c.name} | {alg}{' (' + r['chosen'] + ')' if alg == 'default' else ''} "
                f"| `{r.get('plan', '')}` | {_n(r.get('cost'))} | {_n(r.get('seconds'), '.4f')} "
                f"| {_n(r.get('events_per_s'), ',.0f')} | {_n(r.get('x_TRIVIAL'), '.2f')} "
                f"| {_n(r.get('x_EFREQ'), '.2f')} | {r.get('matches', '-')} "
                f"| {'-' if pm is None else pm[1]} | {_n(r.get('rss_mb'), '.1f')} "
                f"| {_n(r.get('plan_seconds', 0) * 1000, '.0f')} |")
    lines += ["", "## patterns, windows and predicate selectivities", ""]
    for c in cases:
        lines.append(f"- **{c.name}** `{c.pattern_text()}` WITHIN {_fmt_window(c.window)} s, "
                     "symbols " + ", ".join(f"{v}={s}" for v, s in c.symbols.items()))
        for p in c.predicates:
            got = c.measured.get("selectivities", {}).get(f"{p.left}~{p.right}")
            lines.append(f"  - `{p.sql()}`: target {p.target:.3g}, calibrated "
                         f"{p.calibrated:.3g}, estimated by cepsql.stats {_n(got)}")
    return "\n".join(lines) + "\n"


PALETTE = {"TRIVIAL": "#7f7f7f", "EFREQ": "#bcbd22", "GREEDY": "#1f77b4", "II_RANDOM": "#aec7e8",
           "II_GREEDY": "#17becf", "DP_LD": "#2ca02c", "ZSTREAM": "#ff9896",
           "ZSTREAM_ORD": "#ff7f0e", "DP_B": "#d62728", "default": "#9467bd"}


def render_svg(cases: list[Case], results: dict, title: str) -> str:
    """Two panels of grouped bars (x TRIVIAL, x EFREQ), log-scaled y, written by hand."""
    panels = [("throughput / TRIVIAL", summary_by_set(cases, results, "x_TRIVIAL")),
              ("throughput / EFREQ", summary_by_set(cases, results, "x_EFREQ"))]
    sets = list(panels[0][1])
    algos = ran(cases, results)
    values = [v for _, data in panels for row in data.values() for v in row.values() if v]
    lo = 10 ** math.floor(math.log10(min(values + [1.0]) * 0.999))
    hi = 10 ** math.ceil(math.log10(max(values + [1.0]) * 1.001))
    if hi / lo < 10:
        hi = lo * 10
    bar, gap, left, top, ph = 9, 18, 70, 50, 260
    group_w = bar * len(algos) + gap
    width = max(left + group_w * len(sets) + 150, 560)
    height = top + len(panels) * (ph + 70) + 10
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'font-family="sans-serif" font-size="11">'),
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="22" font-size="14" font-weight="bold">{_esc(title)}</text>']

    def y_of(v: float, y0: float) -> float:
        return y0 + ph - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * ph

    for k, (label, data) in enumerate(panels):
        y0 = top + k * (ph + 70)
        out.append(f'<text x="{left}" y="{y0 - 8}" font-size="12">{_esc(label)} '
                   f'(geometric mean per set, log scale)</text>')
        decade = lo
        while decade <= hi * 1.0001:
            for m in (1, 2, 5):
                v = decade * m
                if v > hi * 1.0001:
                    break
                y = y_of(v, y0)
                out.append(f'<line x1="{left}" x2="{left + group_w * len(sets)}" y1="{y:.1f}" '
                           f'y2="{y:.1f}" stroke="{"#ccc" if m == 1 else "#eee"}"/>')
                if m == 1 or hi / lo <= 100:
                    out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" '
                               f'text-anchor="end">{v:g}</text>')
            decade *= 10
        y1 = y_of(1.0, y0)
        out.append(f'<line x1="{left}" x2="{left + group_w * len(sets)}" y1="{y1:.1f}" '
                   f'y2="{y1:.1f}" stroke="#333" stroke-dasharray="4 3"/>')
        for g, set_name in enumerate(sets):
            x0 = left + g * group_w + gap / 2
            for a, alg in enumerate(algos):
                v = data[set_name].get(alg)
                if not v:
                    continue
                y = y_of(v, y0)
                top_y, h = min(y, y1), abs(y1 - y)  # bars grow up or down from 1
                out.append(f'<rect x="{x0 + a * bar:.1f}" y="{top_y:.1f}" width="{bar - 1}" '
                           f'height="{max(h, 0.5):.1f}" fill="{PALETTE[alg]}">'
                           f'<title>{set_name} {alg}: {v:.3g}</title></rect>')
            out.append(f'<text x="{x0 + bar * len(algos) / 2:.1f}" y="{y0 + ph + 16}" '
                       f'text-anchor="middle">{_esc(set_name)}</text>')
        out.append(f'<line x1="{left}" x2="{left}" y1="{y0}" y2="{y0 + ph}" stroke="#333"/>')
    lx = left + group_w * len(sets) + 15
    for a, alg in enumerate(algos):
        y = top + a * 18
        out.append(f'<rect x="{lx}" y="{y}" width="12" height="12" fill="{PALETTE[alg]}"/>')
        out.append(f'<text x="{lx + 17}" y="{y + 10}">{_esc(alg)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# --------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=20_000, help="stream length")
    ap.add_argument("--symbols", type=int, default=20)
    ap.add_argument("--sets", default=",".join(SETS), help="comma list of " + ", ".join(SETS))
    ap.add_argument("--sizes", default="3,4,5,6,7")
    ap.add_argument("--per-size", type=int, default=1, help="patterns per set and size")
    ap.add_argument("--algorithms", default=",".join(ALGOS))
    ap.add_argument("--repeat", type=int, default=2, help="runs per measurement, best kept")
    ap.add_argument("--slow-seconds", type=float, default=10.0,
                    help="a run slower than this is not repeated")
    ap.add_argument("--trivial-cost", type=float, default=1000.0,
                    help="window budget: TRIVIAL's estimated cost per window")
    ap.add_argument("--max-window", type=float, default=30.0, help="seconds")
    ap.add_argument("--plan-seconds", type=float, default=None,
                    help="planner time budget, cepsql.planner.planSeconds (default: "
                         "PlannerOptions' own)")
    ap.add_argument("--end-to-end", action="store_true",
                    help="time cepsql.match_recognize's whole path (parse, statistics, plan, "
                         "sort, evaluate) instead of the evaluator alone")
    ap.add_argument("--isolate", action="store_true",
                    help="one fresh process per measurement: clean peak RSS and --timeout")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds, with --isolate")
    ap.add_argument("--seed", type=int, default=2018)
    ap.add_argument("--out", default=RESULTS, help="directory for plans.md/.svg/.json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child_main()
    if args.plan_seconds is None:
        from cepsql.planning.options import PlannerOptions
        args.plan_seconds = PlannerOptions().plan_seconds
    args.sets = [s.strip().upper() for s in args.sets.split(",") if s.strip()]
    args.sizes = [int(s) for s in args.sizes.split(",")]
    algos = [a.strip() if a.strip() == "default" else a.strip().upper()
             for a in args.algorithms.split(",")]
    unknown = set(args.sets) - set(SETS) | set(algos) - set(ALGOS)
    if unknown or min(args.sizes) < 3 or max(args.sizes) > 7:
        ap.error(f"unknown set/algorithm {sorted(unknown)} or size outside 3..7")

    table = generate_stock_stream(args.events, n_symbols=args.symbols, seed=args.seed,
                                  difference=True)
    rates = stock_rates(args.symbols, seed=args.seed)
    span = (table.column("ts")[-1].value - table.column("ts")[0].value) / 1e6
    cases = build_cases(table, rates, args)
    for case in cases:
        case.window = tune_window(case, rates, args.trivial_cost, args.max_window)
        measure_statistics(case, table)

    timing = ("end to end (the cepsql.match_recognize path)" if args.end_to_end
              else "evaluator only (prepared, sorted batches -> matches)")
    rss = ("a fresh process per run" if args.isolate
           else "in-process, high-water mark reset before each run")
    header = [(f"cepsql plan benchmark: {args.events:,} events over {span:.0f} s, "
               f"{args.symbols} symbols at {min(rates.values()):.0f}-"
               f"{max(rates.values()):.0f} events/s, {os.cpu_count()} CPUs, "
               f"Python {sys.version.split()[0]}"),
              (f"timing: {timing}, best of {args.repeat}; peak PM = first of "
               f"{', '.join(PM_KEYS)} in the evaluator's counters; RSS+ = peak RSS growth "
               f"during the run ({rss})")]
    print("\n".join(header))
    sels = [p.calibrated for c in cases for p in c.predicates]
    print(f"{len(cases)} patterns, {len(sels)} predicates, calibrated selectivities "
          f"{min(sels):.3g}..{max(sels):.3g}; windows "
          f"{min(c.window for c in cases):g}..{max(c.window for c in cases):g} s\n")

    tmp = tempfile.TemporaryDirectory(prefix="cepsql-plans-") if args.isolate else None
    data_path = None
    if tmp is not None:
        data_path = os.path.join(tmp.name, "stream.arrow")
        feather.write_feather(table, data_path, compression="uncompressed")

    results: dict[str, dict] = {}
    mismatches = []
    print(f"{'pattern':<10} {'algorithm':<12} {'cost':>10} {'eval s':>9} {'events/s':>11} "
          f"{'matches':>9} {'peak PM':>9} {'RSS+MB':>7}  plan")
    for case in cases:
        sql = case.sql()
        row = results.setdefault(case.name, {})
        fingerprints = {}
        for alg in algos:
            info = plan_summary(sql, table, alg, args.plan_seconds)
            if args.isolate:
                r = run_isolated(sql, data_path, alg, args)
            else:
                try:
                    r = run_algorithm(sql, table, alg, args.repeat, args.plan_seconds,
                                      args.end_to_end, args.slow_seconds)
                except Exception as exc:  # noqa: BLE001  (an unsupported shape: report, go on)
                    r = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"}
            r.update(info, n_events=args.events)
            row[alg] = r
            if "error" in r:
                print(f"{case.name:<10} {alg:<12} {r['cost']:>10.4g}  {r['error']}", flush=True)
                continue
            fingerprints[alg] = (r["matches"], r["fingerprint"])
            pm = pm_of(r["counters"])
            print(f"{case.name:<10} {alg:<12} {r['cost']:>10.4g} {r['seconds']:>9.4f} "
                  f"{args.events / r['seconds']:>11,.0f} {r['matches']:>9} "
                  f"{'-' if pm is None else pm[1]:>9} {_n(r['rss_mb'], '.1f'):>7}  "
                  f"{r['plan']}", flush=True)
        if len(set(fingerprints.values())) > 1:
            line = (f"!!!!!!!! MATCH MISMATCH in {case.name}: "
                    + ", ".join(f"{a}={m}/{f}" for a, (m, f) in fingerprints.items()))
            print(line, flush=True)
            mismatches.append(line)
    if tmp is not None:
        tmp.cleanup()

    normalize(cases, results)
    checks = ordering_checks(cases, results) if {"TRIVIAL", "EFREQ"} <= set(algos) else []
    rho = cost_time_correlation(cases, results)
    print("\nthroughput / TRIVIAL's (geometric mean per set)")
    print(f"{'set':<6}" + "".join(f"{a:>12}" for a in algos))
    for set_name, srow in summary_by_set(cases, results, "x_TRIVIAL").items():
        print(f"{set_name:<6}" + "".join(f"{_n(srow[a], '.2f'):>12}" for a in algos))
    print("\nthroughput / EFREQ's (geometric mean per set)")
    for set_name, srow in summary_by_set(cases, results, "x_EFREQ").items():
        print(f"{set_name:<6}" + "".join(f"{_n(srow[a], '.2f'):>12}" for a in algos))
    print("\nthe papers' orderings:")
    for label, ratio, ok in checks:
        verdict = "n/a" if ok is None else "ok" if ok else "NOT REPRODUCED"
        print(f"  {label:<22} {_n(ratio, '.2f'):>6}  {verdict}")
    print(f"plan cost vs evaluation time, mean Spearman rho: {_n(rho, '.2f')}")
    rare = [c for c in cases if c.set == "RARE"]
    if rare:
        x = results[rare[0].name].get("default", {}).get("x_TRIVIAL")
        print(f"target: default plan >= 5x TRIVIAL on the rare-last sequence: {_n(x, '.2f')}x "
              f"{'ok' if x and x >= 5 else 'NOT MET'}")

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "plans.md"), "w") as f:
        f.write(render_markdown(cases, results, checks, rho, header))
    with open(os.path.join(args.out, "plans.svg"), "w") as f:
        f.write(render_svg(cases, results, f"cepsql plan algorithms, {args.events:,} events"))
    with open(os.path.join(args.out, "plans.json"), "w") as f:
        json.dump({"header": header, "cases": [asdict(c) | {"sql": c.sql()} for c in cases],
                   "results": results, "checks": checks, "spearman": rho}, f, indent=1,
                  default=float)
    print(f"\nwrote {os.path.relpath(args.out)}/plans.md, plans.svg, plans.json")
    for line in mismatches:
        print(line)
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
