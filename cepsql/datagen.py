"""Deterministic synthetic stock ticks for the demo, the examples, tests and benchmarks.

Why synthetic: the project must not depend on outside data at run time, and benchmarks
need streams of any size. The stream is shaped like a real tick feed where it matters
for row pattern recognition: skewed per-symbol arrival rates (so partitions differ in
size), strictly increasing timestamps (so ORDER BY ts has no ties), per-symbol random
walks (so rises, drops and V-shapes occur) and occasional volume spikes.

Everything is vectorized numpy (2M rows in a fraction of a second) and depends only on
``seed``: the same arguments always give the same table.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

__all__ = ["TICKS_SCHEMA", "START", "generate_ticks", "ticks_to_pandas", "symbol_names"]

#: Schema of every table generate_ticks returns.
TICKS_SCHEMA = pa.schema([
    ("symbol", pa.string()),
    ("ts", pa.timestamp("us")),
    ("price", pa.float64()),
    ("volume", pa.int64()),
])

#: Timestamp of the first tick (market open), naive, microsecond precision.
START = np.datetime64("2024-01-02T09:30:00", "us")

#: Ratio between the arrival rates of the most and the least frequent symbol.
SKEW_RATIO = 45.0

#: Mean gap between consecutive ticks (any symbol), in microseconds: ~100 ticks/second.
MEAN_GAP_US = 10_000

_TICKERS = (
    "AAPL", "MSFT", "AMZN", "GOOG", "NVDA", "META", "TSLA", "AMD", "INTC", "NFLX",
    "ORCL", "CSCO", "ADBE", "QCOM", "IBM", "CRM", "PYPL", "AVGO", "TXN", "MU",
)


def symbol_names(n_symbols: int) -> list[str]:
    """Ticker names, most frequent first: real-looking for the first 20, then S020, S021, ..."""
    if n_symbols < 1:
        raise ValueError("n_symbols must be at least 1")
    names = list(_TICKERS[:n_symbols])
    names += [f"S{i:03d}" for i in range(len(names), n_symbols)]
    return names


def _arrival_weights(n_symbols: int) -> np.ndarray:
    """Zipf-like weights 1/(i+1)^s with s chosen so that max/min == SKEW_RATIO."""
    if n_symbols == 1:
        return np.ones(1)
    s = np.log(SKEW_RATIO) / np.log(n_symbols)
    w = 1.0 / np.arange(1, n_symbols + 1, dtype=np.float64) ** s
    return w / w.sum()


def generate_ticks(n_rows: int, n_symbols: int = 20, seed: int = 7) -> pa.Table:
    """A deterministic tick stream of n_rows rows over n_symbols symbols.

    Columns: ``symbol`` (string; symbol i arrives with weight 1/(i+1)^s, the first ~45x
    as often as the last), ``ts`` (timestamp[us], strictly increasing over the whole
    table, starting 2024-01-02 09:30:00), ``price`` (double, a per-symbol geometric
    random walk rounded to cents, always >= 0.01) and ``volume`` (int64, round lots
    500-1500 with rare 8-40x spikes). Rows are in ``ts`` order.
    """
    n_rows = int(n_rows)
    if n_rows < 0:
        raise ValueError("n_rows must be >= 0")
    names = symbol_names(n_symbols)
    rng = np.random.default_rng(seed)

    # Symbols: skewed categorical draw (searchsorted over the cumulative weights).
    cdf = np.cumsum(_arrival_weights(n_symbols))
    cdf[-1] = 1.0
    sym = np.searchsorted(cdf, rng.random(n_rows), side="right").astype(np.int32)

    # Timestamps: positive integer gaps, so ts is strictly increasing.
    gaps = 1 + rng.exponential(MEAN_GAP_US - 1, n_rows).astype(np.int64)
    ts = START.astype(np.int64) + np.cumsum(gaps) - gaps[0] if n_rows else np.zeros(0, np.int64)

    # Prices: per-symbol geometric random walk. Grouped cumsum: stable sort by symbol,
    # cumulative sum, subtract each group's running total at its start, scatter back.
    start_price = np.round(rng.uniform(20.0, 500.0, n_symbols), 2)
    steps = rng.normal(0.0, 0.0008, n_rows)
    order = np.argsort(sym, kind="stable")
    cs = np.cumsum(steps[order])
    counts = np.bincount(sym, minlength=n_symbols)
    ends = np.cumsum(counts)
    before = np.concatenate(([0.0], cs))[ends - counts]  # cumsum just before each group
    walk = np.empty(n_rows)
    walk[order] = cs - np.repeat(before, counts)
    price = np.round(start_price[sym] * np.exp(walk), 2)
    np.maximum(price, 0.01, out=price)

    # Volumes: 500..1500 shares, with ~0.5% spikes of 8-40x (so a 5x jump is a real spike).
    volume = rng.integers(5, 16, n_rows, dtype=np.int64) * 100
    spike = rng.random(n_rows) < 0.005
    volume[spike] *= rng.integers(8, 41, int(spike.sum()), dtype=np.int64)

    symbol_col = _string_column(names, sym)
    return pa.Table.from_arrays(
        [symbol_col, pa.array(ts, pa.timestamp("us")), pa.array(price, pa.float64()),
         pa.array(volume, pa.int64())],
        schema=TICKS_SCHEMA,
    )


def _string_column(names: list[str], codes: np.ndarray) -> pa.Array:
    """names[codes] as an Arrow string array, built from buffers (2x faster than take)."""
    encoded = [name.encode() for name in names]
    width = max(len(e) for e in encoded)
    lengths = np.array([len(e) for e in encoded], dtype=np.int32)
    table = np.zeros((len(encoded), width), dtype=np.uint8)
    for i, e in enumerate(encoded):
        table[i, :len(e)] = np.frombuffer(e, dtype=np.uint8)
    row_lengths = lengths[codes]
    offsets = np.zeros(len(codes) + 1, dtype=np.int32)
    np.cumsum(row_lengths, out=offsets[1:])
    data = table[codes][np.arange(width)[None, :] < row_lengths[:, None]]
    return pa.StringArray.from_buffers(len(codes), pa.py_buffer(offsets), pa.py_buffer(data))


def ticks_to_pandas(table: pa.Table | int, n_symbols: int = 20, seed: int = 7) -> pd.DataFrame:
    """The ticks as a pandas DataFrame (ts as datetime64[us]).

    Accepts a table from generate_ticks, or a row count to generate one with
    (n_symbols, seed), so local callers of cepsql.match_recognize need one call.
    """
    if not isinstance(table, pa.Table):
        table = generate_ticks(int(table), n_symbols=n_symbols, seed=seed)
    df = table.to_pandas()
    if df["ts"].dtype != "datetime64[us]":
        df["ts"] = df["ts"].astype("datetime64[us]")
    return df
