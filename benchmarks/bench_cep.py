"""CEP-mode benchmark: SASE+'s experiment workload (Agrawal et al., SIGMOD 2008, section 6).

The paper's query template (Table 1, Expt 1/2, merging in Expt 5/6)::

    PATTERN(STOCK+ a[], STOCK b)
    WHERE ES {[symbol] AND a[1].price % 500 == 0 AND P_a[i] AND b.volume < 150}
    WITHIN W

and its cepsql form (CEP mode, in-process ``cepsql.match_recognize``)::

    SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
      MEASURES FIRST(a.ts) AS t0, count(a.*) AS n, b.ts AS tb ONE ROW PER MATCH
      STRATEGY <ES> PATTERN (a+ b) WITHIN <W> ROWS
      DEFINE a AS (count(a.*) > 1 OR a.price % 500 = 0) AND (count(a.*) = 1 OR <P>),
             b AS b.volume < 150)

* ``[symbol]`` (every event of a match has the same symbol) is ``PARTITION BY symbol``.
* ``a[1].price % 500 == 0``: ``count(a.*) > 1 OR a.price % 500 = 0``. By rule R2
  (docs/cep_mode.md) ``count(a.*)`` in a's DEFINE counts the a rows up to and including
  the current one, so the test applies to the first a row only. ``P_a[i]`` is written as
  ``count(a.*) = 1 OR <P>`` because the paper's iterator predicate starts at i = 2.
* ``P_a[i]`` (Table 1) in cepsql, each exact (``--check`` verifies this, see below):

  ======  ================================  ==================================================
  p1      True                              (the conjunct is left out)
  p2      a[i].price > a[i-1].price         ``a.price > LAST(a.price, 1)`` (the previous a row)
  p3-min  a[i].price > min(a[..i-1].price)  ``a.price > min(a.price)``: R2's min includes the
                                            current row x, and x > min(prev + {x}) iff
                                            x > min(prev)
  p3-avg  a[i].price > avg(a[..i-1].price)  ``a.price > avg(a.price)``: with n previous rows of
                                            sum S, x > (S + x) / (n + 1) iff x > S / n
  p3-max  a[i].price > max(a[..i-1].price)  ``a.price >= max(a.price) AND
                                            a.price > LAST(a.price, 1)``
  ======  ================================  ==================================================

  p3-max: a max that includes the current row x can only give x >= max(prev); alone,
  ``a.price >= max(a.price)`` would also take ties x = max(prev) (with integer prices and
  a 15% chance that a price stays the same, ties are common). But every earlier a row of
  a run or a match passed the same predicate, so the a prices rise strictly and
  max(a[..i-1]) = a[i-1]: the paper's p3-max takes exactly the rows p2 takes (the paper
  observes that they "perform similarly"). The LAST conjunct makes the formulation exact;
  the max conjunct is kept so the run carries the max aggregate in its computation state
  as the paper's p3-max runs do.
* ES: (s2) partition contiguity = ``STRATEGY PARTITION_CONTIGUITY``, (s3) skip till next
  match = ``STRATEGY SKIP_TILL_NEXT_MATCH``.
* W: the paper's W is a *partition window* (section 4.2: the events of one partition a run
  has to consider, estimated as time window x events per time unit x partition fraction;
  section 6: "used to bound the number of events in each partition that are needed in
  query processing", 500-2000 events). cepsql's ``WITHIN n ROWS`` counts positions in the
  ORDER BY order of the PARTITION BY partition (R3: last position - first position < n),
  so ``WITHIN W ROWS`` is exactly a partition window of W events: a match starting at the
  k-th event of its symbol ends at the latest at its (k + W - 1)-th event.

Stream (``stock_stream``), as in section 6: one event type with symbol, price, volume; the
symbol and volume uniform (symbols 0..S-1, default S = 2 as in the paper; volume 1..1000);
per symbol the price is an integer random walk that rises by 1 with probability p
(``--p-increase``, Table 1: 0.7 default, or 0.55), falls by 1 or stays with (1 - p) / 2
each, and wraps around in the paper's range [1, 1000] (1000 + 1 -> 1, 1 - 1 -> 1000;
start uniform). Wrapping keeps the trend and makes the long-run price distribution
uniform on 1..1000, so ``price % 500 == 0`` (prices 500 and 1000) holds for ~2/1000 of the
events, in bursts of a few events each time the walk crosses 500 or 1000. The paper does
not give its rate; 2/1000 is that of a uniform price in [1, 1000], and with it the
average match lengths come close to the paper's Table 2 (W = 500: ~248 for p1 and p3-min
under s2 and s3, ~136 for p2 under s3; Table 2: 250, 250, 140). ``b.volume < 150`` holds
for 149/1000 = 14.9% of events. ``ts`` is the event's index in the merged stream
(unique, increasing). The header line prints the measured rates.

cepsql semantics = SASE+'s NFA^b under skip till next match (s3): after a take in a
Kleene state that can take more, the state ignores the rows it cannot take, and every
row the next state takes meanwhile branches off (the proceed edge peeks at the row
read: take-proceed and ignore-proceed branching) until the Kleene state takes a row
(rule R5 in docs/cep_mode.md). So b ranges over every event with volume < 150 after the
last a up to and including the event the run takes as the next a. ``--check`` compares
cepsql with a direct model of that NFA^b (and prints the count of the simpler "first b
after the prefix" rule for contrast).

Measurements, per P, ES and W (``--preds``, ``--strategies``, ``--windows``): the best of
``--repeat`` runs of ``cepsql.match_recognize`` (parsing, planning, sorting, evaluation,
output) on a pandas DataFrame of ``--length`` x W events per symbol (the paper: 200 x W;
default 50 x W to stay within a minute or two; ``--rows`` fixes one length for every W;
every W uses a prefix of one stream), with run merging (SASE+ 5.2.2) on and
off (``cepsql.planner_options(run_merging=False)``; ``cepsql.planner.runMerging`` on
Spark); events/s = rows / time; matches; average match length (a rows + b) and output complexity (sum of match
lengths, the paper's Figure 8(c)); runs created / merged from the evaluator's counters
(``run_local(..., stats=RunStatistics())``); merge speed-up = time off / time on. Unlike
the paper's Expt 6, match construction stays on (cepsql has no switch for it).

Run merging (SASE+ 5.2.2, cython_ext/cep.pyx) merges runs created at the same event whose
sequence, component, count class, bound variables and computation vector are equal. The
vector holds what the take conditions read: here count(a.*) (the a[1] test and the
i >= 2 guard), the last a rows (p2, p3-max) and the a.price aggregates (p3: rows, sum,
min, max). So two runs merge only when they hold the same number of a rows with the same
prices: in this workload, runs started at two events both priced 500 (or 1000) that go
on to take the same events (p2, p3: the first run does not take the second start, which
does not rise above it). Under p1 the earlier run takes every later event, so counts
always differ and nothing merges, whereas SASE+'s p1 runs have an empty computation
state and all merge (the paper's Table 3: 48-75% of the runs). The few merges still pay:
a merged run forks once where two did, so runs created drop much more than runs merged.

SKIP_TILL_ANY_MATCH (not in the paper's experiment; exponential in W for ``a+``; and run
on the planned evaluator, which does not merge runs) is left out.

``--check`` (also run by tests/test_bench_cep_workload.py on a small stream) compares, for
every P and ES on a stream that crosses price 500 often, with small windows:
(1) cepsql.match_recognize vs the reference oracle (cepsql/reference/cep.py),
(2) cepsql vs a direct Python model of the template with the paper's literal predicates
(real max over the previous a rows, exact average) under SASE+'s NFA^b rules (= R5),
(3) cepsql with run merging on vs off, and prints (4) the count under the simpler
"first b after the prefix" rule for contrast (equal to (2) under s2).

    python benchmarks/bench_cep.py                 # 50 x W events per symbol, ~1 min
    python benchmarks/bench_cep.py --length 200    # the paper's stream length, minutes
    python benchmarks/bench_cep.py --rows 20000 --windows 500 --preds p2,p3-min --repeat 3
    python benchmarks/bench_cep.py --check [--check-rows 400]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import cepsql
from cepsql.backends.local.engine import run_local, to_pandas
from cepsql.runtime.run_stats import RunStatistics

PRICE_RANGE = 1000      # prices 1..1000 (the paper's range)
START_MODULUS = 500     # a[1].price % 500 == 0
VOLUME_RANGE = 1000     # volumes 1..1000 (the paper's range)
B_VOLUME_BELOW = 150    # b.volume < 150

STRATEGIES = {"s2": "PARTITION_CONTIGUITY", "s3": "SKIP_TILL_NEXT_MATCH"}

# the iterator predicate P_a[i] (i >= 2) as a DEFINE conjunct of a; None = True
PREDICATES: dict[str, str | None] = {
    "p1": None,
    "p2": "a.price > LAST(a.price, 1)",
    "p3-min": "a.price > min(a.price)",
    "p3-max": "a.price >= max(a.price) AND a.price > LAST(a.price, 1)",
    "p3-avg": "a.price > avg(a.price)",
}


# the paper's literal predicates: (prices of a[1..i-1], a[i].price) -> take a[i]?
def _p1(prev: Sequence[int], x: int) -> bool:
    return True


def _p2(prev: Sequence[int], x: int) -> bool:
    return x > prev[-1]


def _p3_min(prev: Sequence[int], x: int) -> bool:
    return x > min(prev)


def _p3_max(prev: Sequence[int], x: int) -> bool:
    return x > max(prev)


def _p3_avg(prev: Sequence[int], x: int) -> bool:
    return x * len(prev) > sum(prev)  # x > sum / n, exact on integers


PAPER_PREDICATES: dict[str, Callable[[Sequence[int], int], bool]] = {
    "p1": _p1, "p2": _p2, "p3-min": _p3_min, "p3-max": _p3_max, "p3-avg": _p3_avg}


# ---------------------------------------------------------------------------- stream

def stock_stream(rows: int, symbols: int = 2, p_increase: float = 0.7, seed: int = 7,
                 start_prices: Sequence[int] | None = None) -> pd.DataFrame:
    """Section 6's STOCK stream: columns symbol (string), ts, price, volume (int64).

    Per symbol an integer walk: +1 with probability p_increase, -1 or 0 with
    (1 - p_increase) / 2 each, wrapped into 1..PRICE_RANGE; symbol and volume uniform.
    ``start_prices`` (one per symbol) overrides the uniform start (``check`` starts near
    500 so that short streams contain starts)."""
    rng = np.random.default_rng(seed)
    symbol = rng.integers(0, symbols, rows)
    u = rng.random(rows)
    step = np.where(u < p_increase, 1, np.where(u < (1 + p_increase) / 2, -1, 0))
    if start_prices is None:
        start_prices = rng.integers(1, PRICE_RANGE + 1, symbols)
    price = np.empty(rows, dtype=np.int64)
    for s in range(symbols):
        mine = symbol == s
        walk = (int(start_prices[s]) - 1) + np.cumsum(step[mine])
        price[mine] = 1 + np.mod(walk, PRICE_RANGE)
    return pd.DataFrame({
        "symbol": np.char.add("S", symbol.astype(str)),
        "ts": np.arange(rows, dtype=np.int64),
        "price": price,
        "volume": rng.integers(1, VOLUME_RANGE + 1, rows),
    })


# ---------------------------------------------------------------------------- query

def define_a(pred: str) -> str:
    """a's DEFINE: the a[1] test and the iterator predicate (both from the second a on)."""
    first = f"(count(a.*) > 1 OR a.price % {START_MODULUS} = 0)"
    iterator = PREDICATES[pred]
    return first if iterator is None else f"{first} AND (count(a.*) = 1 OR {iterator})"


def query(pred: str, strategy: str, window: int, table: str = "ticks") -> str:
    """The template as a cepsql query; strategy is s2/s3 or a STRATEGY keyword."""
    strategy = STRATEGIES.get(strategy, strategy)
    return (f"SELECT * FROM {table} MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
            "MEASURES FIRST(a.ts) AS t0, count(a.*) AS n, b.ts AS tb ONE ROW PER MATCH "
            f"STRATEGY {strategy} PATTERN (a+ b) WITHIN {window} ROWS "
            f"DEFINE a AS {define_a(pred)}, b AS b.volume < {B_VOLUME_BELOW})")


# ---------------------------------------------------------------------------- check

Match = tuple  # (symbol, t0, n, tb): first a's ts, number of a rows, b's ts


def model_matches(df: pd.DataFrame, pred: str, strategy: str, window: int,
                  rules: str = "cepsql") -> Counter:
    """The template evaluated directly with the paper's literal predicates.

    rules="cepsql": the simpler first-b rule (b = first qualifying event after the last
    a under s3; cepsql's rule before it followed SASE+'s proceed edges);
    rules="sase": SASE+'s NFA^b (cepsql's R5) (under s3, b = any qualifying event after the last a up
    to the event taken as the next a). Both: a run starts at every event with
    price % 500 == 0; a[i+1] is the next event (s2) or the first later event (s3) that
    passes P; the match lies within ``window`` events of its partition."""
    strategy = {v: k for k, v in STRATEGIES.items()}.get(strategy, strategy)
    test = PAPER_PREDICATES[pred]
    out: Counter = Counter()
    for sym, part in df.groupby("symbol", sort=True):
        part = part.sort_values("ts")
        ts, price = part["ts"].tolist(), part["price"].tolist()
        is_b = [v < B_VOLUME_BELOW for v in part["volume"].tolist()]
        n = len(ts)
        for start in range(n):
            if price[start] % START_MODULUS:
                continue
            end = min(n, start + window)  # positions start .. end - 1
            prefix = [price[start]]
            last = start
            if strategy == "s3" and rules == "cepsql":
                while True:
                    b = next((j for j in range(last + 1, end) if is_b[j]), None)
                    if b is not None:
                        out[(sym, ts[start], len(prefix), ts[b])] += 1
                    a = next((j for j in range(last + 1, end) if test(prefix, price[j])), None)
                    if a is None:
                        break
                    prefix.append(price[a])
                    last = a
                continue
            for j in range(start + 1, end):  # s2, or s3 under SASE+'s rules
                if is_b[j]:
                    out[(sym, ts[start], len(prefix), ts[j])] += 1
                if test(prefix, price[j]):
                    prefix.append(price[j])
                elif strategy == "s2":
                    break
    return out


def _engine_matches(out: pd.DataFrame) -> Counter:
    return Counter((s, int(t0), int(n), int(tb)) for s, t0, n, tb in
                   out[["symbol", "t0", "n", "tb"]].itertuples(index=False, name=None))


def _differing(x: Counter, y: Counter) -> int:
    """Matches in one multiset and not in the other."""
    return sum(((x - y) + (y - x)).values())


def check_stream(rows: int = 400, seed: int = 3) -> pd.DataFrame:
    """A short stream that hits price 500 often: 4 symbols starting just below 500, with
    a weaker trend (p_increase 0.5) so that the walks linger around 500."""
    return stock_stream(rows, symbols=4, p_increase=0.5, seed=seed,
                        start_prices=[494, 496, 498, 500])


def check(rows: int = 400, windows: Sequence[int] = (6, 30), seed: int = 3,
          preds: Sequence[str] = tuple(PREDICATES), strategies: Sequence[str] = ("s2", "s3"),
          verbose: bool = False) -> list[str]:
    """Problems found (empty: every formulation is exact); see the module docstring."""
    import pyarrow as pa

    from cepsql.parse import find_match_recognize
    from cepsql.reference.cep import evaluate_reference_cep

    df = check_stream(rows, seed)
    table = pa.Table.from_pandas(df, preserve_index=False)
    problems = []
    for pred in preds:
        for es in strategies:
            for window in windows:
                sql = query(pred, es, window)
                with cepsql.planner_options(run_merging=True):
                    got = _engine_matches(cepsql.match_recognize(sql, ticks=df))
                with cepsql.planner_options(run_merging=False):
                    unmerged = _engine_matches(cepsql.match_recognize(sql, ticks=df))
                names, ref_rows = evaluate_reference_cep(find_match_recognize(sql)[0].spec,
                                                         table)
                col = {n: i for i, n in enumerate(names)}
                ref = Counter((r[col["symbol"]], int(r[col["t0"]]), int(r[col["n"]]),
                               int(r[col["tb"]])) for r in ref_rows)
                model = model_matches(df, pred, es, window, "sase")
                first_b = model_matches(df, pred, es, window, "cepsql")
                label = f"{pred} {es} W={window}"
                if got != unmerged:
                    problems.append(f"{label}: merging on/off gives {sum(got.values())} / "
                                    f"{sum(unmerged.values())} matches, "
                                    f"{_differing(got, unmerged)} differ")
                if got != ref:
                    problems.append(f"{label}: cepsql {sum(got.values())} matches, reference "
                                    f"{sum(ref.values())}, {_differing(got, ref)} differ")
                if got != model:
                    problems.append(f"{label}: cepsql {sum(got.values())} matches, paper "
                                    f"predicates {sum(model.values())}, "
                                    f"{_differing(got, model)} differ")
                if es == "s2" and first_b != model:
                    problems.append(f"{label}: the two models differ under s2")
                if verbose:
                    print(f"{label:18} cepsql {sum(got.values()):5d}  reference "
                          f"{sum(ref.values()):5d}  SASE+ NFA^b model "
                          f"{sum(model.values()):5d}  first-b rule {sum(first_b.values()):5d}",
                          flush=True)
    return problems


# ---------------------------------------------------------------------------- timing

def measure(sql: str, df: pd.DataFrame, merge: bool, repeat: int):
    """(best seconds, output, the evaluator's counters of the last run) with merging on
    or off (``to_pandas(run_local(...))`` is what cepsql.match_recognize runs)."""
    best, out, stats = float("inf"), None, RunStatistics()
    with cepsql.planner_options(run_merging=merge):
        for _ in range(repeat):
            stats = RunStatistics()
            t0 = time.perf_counter()
            out = to_pandas(run_local(sql, {"ticks": df}, stats=stats))
            best = min(best, time.perf_counter() - t0)
    return best, out, stats.last


def _same_matches(x: pd.DataFrame, y: pd.DataFrame) -> bool:
    cols = ["symbol", "t0", "n", "tb"]
    if len(x) != len(y):
        return False
    xs = x[cols].sort_values(cols, ignore_index=True)
    ys = y[cols].sort_values(cols, ignore_index=True)
    return xs.equals(ys)


HEADER = (f"{'P':7} {'ES':3} {'W':>5} {'events':>8} {'merge':>5} {'sec':>8} {'events/s':>10} "
          f"{'matches':>9} {'avg len':>8} {'output cx':>11} {'runs':>10} {'merged':>9} "
          f"{'merged%':>7} {'speedup':>7}")


def _row(pred, es, window, merge, sec, rows, out, st, speedup) -> str:
    matches = len(out)
    total = int(out["n"].sum()) + matches if matches else 0
    created, merged = st.get("runs_created", 0), st.get("runs_merged", 0)
    share = 100.0 * merged / created if created else 0.0
    return (f"{pred:7} {es:3} {window:5d} {rows:8d} {'on' if merge else 'off':>5} {sec:8.3f} "
            f"{rows / sec:10.0f} {matches:9d} {total / max(matches, 1):8.1f} {total:11d} "
            f"{created:10d} {merged:9d} {share:7.2f} {speedup:>7}")


def stream_rows(window: int, symbols: int, length: int, rows: int | None) -> int:
    """Events for window W: ``rows`` if given, else ``length`` x W per symbol."""
    return rows if rows else length * window * symbols


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--length", type=int, default=50,
                    help="events per symbol, as a multiple of W (the paper: 200)")
    ap.add_argument("--rows", type=int, default=None,
                    help="events in the stream for every W (overrides --length)")
    ap.add_argument("--symbols", type=int, default=2)
    ap.add_argument("--p-increase", type=float, default=0.7)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--windows", default="500,1000,2000")
    ap.add_argument("--preds", default=",".join(PREDICATES))
    ap.add_argument("--strategies", default="s2,s3")
    ap.add_argument("--repeat", type=int, default=1, help="runs per measurement, best kept")
    ap.add_argument("--check", action="store_true",
                    help="verify the formulations (reference oracle, paper model) and exit")
    ap.add_argument("--check-rows", type=int, default=400)
    args = ap.parse_args(argv)
    preds = args.preds.split(",")
    strategies = args.strategies.split(",")
    for p in preds:
        if p not in PREDICATES:
            ap.error(f"unknown predicate {p!r} (one of {', '.join(PREDICATES)})")
    for s in strategies:
        if s not in STRATEGIES:
            ap.error(f"unknown strategy {s!r} (s2, s3)")
    if args.check:
        problems = check(args.check_rows, preds=preds, strategies=strategies, verbose=True)
        for p in problems:
            print("MISMATCH", p)
        print("check ok" if not problems else f"check FAILED ({len(problems)})")
        return 1 if problems else 0

    windows = [int(w) for w in args.windows.split(",")]
    sizes = {w: stream_rows(w, args.symbols, args.length, args.rows) for w in windows}
    stream = stock_stream(max(sizes.values()), args.symbols, args.p_increase, args.seed)
    print(f"stream: {len(stream)} events (each W uses a prefix), {args.symbols} symbols, "
          f"p_increase {args.p_increase}; price % {START_MODULUS} == 0: "
          f"{(stream['price'] % START_MODULUS == 0).mean():.4%}; "
          f"volume < {B_VOLUME_BELOW}: {(stream['volume'] < B_VOLUME_BELOW).mean():.2%}")
    print(HEADER)
    cepsql.match_recognize(query("p2", "s3", 10), ticks=stream.head(200))  # warm-up
    failed = 0
    for window in windows:
        df = stream.head(sizes[window])
        for pred in preds:
            for es in strategies:
                sql = query(pred, es, window)
                times, outs = {}, {}
                for merge in (True, False):
                    sec, outs[merge], st = measure(sql, df, merge, args.repeat)
                    times[merge] = sec
                    speedup = "" if merge else f"{times[False] / times[True]:.2f}"
                    print(_row(pred, es, window, merge, sec, len(df), outs[merge], st,
                               speedup), flush=True)
                if not _same_matches(outs[True], outs[False]):
                    failed += 1
                    print(f"MATCH MISMATCH: {pred} {es} W={window}: merging on and off "
                          "differ", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
