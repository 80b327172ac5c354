"""Deterministic synthetic event streams for the demo, the examples, tests and benchmarks.

``generate_ticks``: stock ticks (SASE+ Figure 1, Query 3, and the SQL examples).
``generate_rfid``: RFID readings of tagged items in a shop (Query 1, shoplifting).
``generate_shipments``: contamination alerts and shipments between sites (Query 2).
``generate_stock_stream``: one merged stream of per-symbol Poisson arrivals at rates of
1-45 events per second (the CEP planner benchmarks, VLDB 2018 section 6.2).

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
import pyarrow.compute as pc

__all__ = ["TICKS_SCHEMA", "RFID_SCHEMA", "SHIPMENTS_SCHEMA", "STOCK_SCHEMA", "START",
           "generate_ticks", "generate_rfid", "generate_shipments", "generate_stock_stream",
           "stock_rates", "ticks_to_pandas", "symbol_names", "tag_names", "site_names"]

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


# --------------------------------------------------------------------------- helpers

_US_PER_S = 1_000_000
_DAY_US = 86_400 * _US_PER_S


def _grouped_cumsum(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Cumulative sums restarting at every group (groups = consecutive runs of lengths)."""
    cs = np.cumsum(values)
    ends = np.cumsum(lengths)
    before = np.concatenate(([0], cs))[ends - lengths]
    return cs - np.repeat(before, lengths)


def _strictly_increasing(ts: np.ndarray) -> np.ndarray:
    """Sorted int64 times nudged forward by a microsecond where they tie (order kept)."""
    if len(ts) == 0:
        return ts
    step = np.arange(len(ts), dtype=np.int64)
    return np.maximum.accumulate(ts - step) + step


# --------------------------------------------------------------------------- RFID

#: Schema of every table generate_rfid returns.
RFID_SCHEMA = pa.schema([
    ("ts", pa.timestamp("us")),
    ("tag_id", pa.string()),
    ("reader", pa.string()),
])

_READERS = ["shelf", "register", "exit"]
_BROWSED, _BOUGHT, _STOLEN = 0, 1, 2


def tag_names(n_tags: int) -> list[str]:
    """RFID tag ids T00000, T00001, ..."""
    if n_tags < 1:
        raise ValueError("n_tags must be at least 1")
    return [f"T{i:05d}" for i in range(n_tags)]


def generate_rfid(n_rows: int, n_tags: int = 500, seed: int = 11,
                  shoplift_rate: float = 0.05) -> pa.Table:
    """A deterministic stream of RFID readings in a shop (SASE+ Query 1).

    Columns: ``ts`` (timestamp[us], strictly increasing, days from 2024-01-02),
    ``tag_id`` (string, T00000...) and ``reader`` ('shelf', 'register' or 'exit').
    Every tagged item goes through one life cycle a day, between 08:00 and midnight:
    one to three shelf readings minutes apart, then either nothing (browsed, 25%),
    a register then an exit reading (bought), or -- with probability
    ``shoplift_rate`` -- an exit reading without a register reading (shoplifted: what
    Query 1 finds). Life cycles of the ``n_tags`` tags fill day after day until the
    stream has ``n_rows`` rows (the last, latest life cycles may be cut). Rows are in
    ``ts`` order.
    """
    n_rows = int(n_rows)
    if n_rows < 0:
        raise ValueError("n_rows must be >= 0")
    if not 0.0 <= shoplift_rate <= 0.75:
        raise ValueError("shoplift_rate must be between 0 and 0.75")
    names = tag_names(n_tags)
    rng = np.random.default_rng(seed)

    # Life cycles: kind and number of shelf readings; enough of them for n_rows rows
    # (each has at least one row, so n_rows life cycles always suffice).
    m = max(n_rows, 1)
    u = rng.random(m)
    kind = np.where(u < 0.25, _BROWSED, np.where(u < 0.25 + shoplift_rate, _STOLEN, _BOUGHT))
    n_shelf = rng.integers(1, 4, m)
    length = n_shelf + np.select([kind == _BOUGHT, kind == _STOLEN], [2, 1], 0)
    m = int(np.searchsorted(np.cumsum(length), n_rows)) + 1 if n_rows else 0
    kind, n_shelf, length = kind[:m], n_shelf[:m], length[:m]

    # Life cycle l is tag l % n_tags on day l // n_tags, starting 08:00-14:00.
    cycle = np.arange(m, dtype=np.int64)
    day_start = START.astype("datetime64[D]").astype("datetime64[us]").astype(np.int64)
    begin = (day_start + (cycle // n_tags) * _DAY_US
             + rng.integers(8 * 3600, 14 * 3600, m) * _US_PER_S)

    # Events: position j inside the life cycle decides the reader.
    n_events = int(length.sum())
    owner = np.repeat(cycle, length)
    j = np.arange(n_events) - np.repeat(np.cumsum(length) - length, length)
    k = n_shelf[owner]
    kind_e = kind[owner]
    reader = np.where(j < k, 0, np.where((j == k) & (kind_e == _BOUGHT), 1, 2)).astype(np.int32)
    # Gaps before each reading, whole seconds, capped at 2 hours (a life cycle ends
    # before midnight): shelf ~15 min apart, register ~10 min later, exit ~3 min later.
    mean_gap = np.array([900.0, 600.0, 180.0])[reader]
    gap = np.minimum(1 + rng.exponential(1.0, n_events) * mean_gap, 7200).astype(np.int64)
    gap[j == 0] = 0
    ts = begin[owner] + _grouped_cumsum(gap, length) * _US_PER_S

    order = np.argsort(ts, kind="stable")[:n_rows]
    ts = _strictly_increasing(ts[order])
    tags = (owner[order] % n_tags).astype(np.int32)
    return pa.Table.from_arrays(
        [pa.array(ts, pa.timestamp("us")), _string_column(names, tags),
         _string_column(_READERS, reader[order])],
        schema=RFID_SCHEMA,
    )


# --------------------------------------------------------------------------- shipments

#: Schema of every table generate_shipments returns.
SHIPMENTS_SCHEMA = pa.schema([
    ("ts", pa.timestamp("us")),
    ("kind", pa.string()),
    ("site", pa.string()),
    ("shipment_id", pa.int64()),
    ("from_site", pa.string()),
    ("to_site", pa.string()),
])


def site_names(n_sites: int) -> list[str]:
    """Supply-chain site names: farms, plants and warehouses, then SITE12, SITE13, ..."""
    if n_sites < 2:
        raise ValueError("n_sites must be at least 2")
    base = ["FARM_A", "FARM_B", "FARM_C", "PLANT_N", "PLANT_S", "MILL", "DEPOT_1", "DEPOT_2",
            "WAREHOUSE_E", "WAREHOUSE_W", "MARKET_1", "MARKET_2"]
    names = base[:n_sites]
    return names + [f"SITE{i:02d}" for i in range(len(names), n_sites)]


def generate_shipments(n_rows: int, n_sites: int = 12, seed: int = 13,
                       alert_rate: float = 0.01,
                       shipments_per_site_hour: float = 1.0) -> pa.Table:
    """A deterministic stream of contamination alerts and shipments (SASE+ Query 2).

    Columns: ``ts`` (timestamp[us], strictly increasing from 2024-01-02 09:30:00),
    ``kind`` ('alert' or 'shipment'), ``site`` (the contaminated site of an alert,
    NULL for shipments), ``shipment_id`` (1, 2, ... for shipments, NULL for alerts),
    ``from_site`` and ``to_site`` (two different sites of a shipment, NULL for alerts).
    Every site sends ``shipments_per_site_hour`` shipments an hour on average to
    random other sites, so from any alert's site a chain of shipments -- each leaving
    the site where the previous one arrived -- soon follows: the transitive spread of
    contamination Query 2 reports. About ``alert_rate`` of the events are alerts.
    """
    n_rows = int(n_rows)
    if n_rows < 0:
        raise ValueError("n_rows must be >= 0")
    if not 0.0 <= alert_rate < 1.0:
        raise ValueError("alert_rate must be in [0, 1)")
    names = site_names(n_sites)
    rng = np.random.default_rng(seed)

    events_per_hour = n_sites * shipments_per_site_hour / (1.0 - alert_rate)
    mean_gap_s = 3600.0 / events_per_hour
    gaps = (1 + rng.exponential(mean_gap_s - 1 if mean_gap_s > 1 else 1.0, n_rows)).astype(np.int64)
    ts = START.astype(np.int64) + (np.cumsum(gaps) - (gaps[0] if n_rows else 0)) * _US_PER_S
    is_alert = rng.random(n_rows) < alert_rate
    src = rng.integers(0, n_sites, n_rows).astype(np.int32)
    dst = ((src + rng.integers(1, n_sites, n_rows)) % n_sites).astype(np.int32)
    shipment_id = np.cumsum(~is_alert).astype(np.int64)

    site_col = _string_column(names, src)
    from_col = site_col
    to_col = _string_column(names, dst)
    alert_mask = pa.array(is_alert)
    null_str = pa.nulls(n_rows, pa.string())
    kind = _string_column(["shipment", "alert"], is_alert.astype(np.int32))
    return pa.Table.from_arrays(
        [pa.array(ts, pa.timestamp("us")), kind,
         pc.if_else(alert_mask, site_col, null_str),
         pa.array(shipment_id, pa.int64(), mask=is_alert),
         pc.if_else(alert_mask, null_str, from_col),
         pc.if_else(alert_mask, null_str, to_col)],
        schema=SHIPMENTS_SCHEMA,
    )


# --------------------------------------------------------------------------- stock stream

#: Schema of generate_stock_stream's tables (``difference`` only with difference=True).
STOCK_SCHEMA = pa.schema([
    ("ts", pa.timestamp("us")),
    ("symbol", pa.string()),
    ("price", pa.float64()),
    ("volume", pa.int64()),
])


def stock_rates(n_symbols: int = 20, rate_range: tuple[float, float] = (1.0, 45.0),
                seed: int = 2018) -> dict[str, float]:
    """Arrival rate (events per second) of every symbol of generate_stock_stream.

    Log-uniform draws in rate_range, with the lowest pinned to rate_range[0] and the
    highest to rate_range[1] (so the whole range always occurs); symbols are named by
    symbol_names, most frequent first.
    """
    lo, hi = (float(r) for r in rate_range)
    if not 0 < lo <= hi:
        raise ValueError("rate_range must be (low, high) with 0 < low <= high")
    names = symbol_names(n_symbols)
    rng = np.random.default_rng([seed, 45])
    rates = np.sort(np.exp(rng.uniform(np.log(lo), np.log(hi), n_symbols)))[::-1]
    rates[0] = hi
    if n_symbols > 1:
        rates[-1] = lo
    return dict(zip(names, rates.tolist()))


def generate_stock_stream(n_events: int, n_symbols: int = 20,
                          rate_range: tuple[float, float] = (1.0, 45.0), seed: int = 2018,
                          difference: bool = False) -> pa.Table:
    """A deterministic stock-update stream shaped like the VLDB 2018 experiments.

    Every symbol is an independent Poisson process with its own rate (``stock_rates``:
    ~1..45 events per second); the table is their merge, the first n_events events in
    time. Columns: ``ts`` (timestamp[us], strictly increasing, from 2024-01-02 09:30:00),
    ``symbol`` (string), ``price`` (double: a per-symbol geometric random walk from a
    random level in 20..500, one step per update, rounded to cents) and ``volume``
    (int64, round lots 100-2000). With difference=True a fifth column ``difference``
    (double) holds price minus the symbol's previous price (0 for its first update):
    the attribute the paper's predicates compare. Rows are in ts order.
    """
    n_events = int(n_events)
    if n_events < 0:
        raise ValueError("n_events must be >= 0")
    rate_of = stock_rates(n_symbols, rate_range, seed)
    names = list(rate_of)
    rates = np.array(list(rate_of.values()))
    rng = np.random.default_rng(seed)

    # The superposition of independent Poisson processes is a Poisson process of the
    # summed rate whose events belong to process i with probability r_i / sum(r).
    total = rates.sum()
    gaps = rng.exponential(_US_PER_S / total, n_events)
    ts = START.astype(np.int64) + np.floor(np.cumsum(gaps) - (gaps[0] if n_events else 0))
    ts = _strictly_increasing(ts.astype(np.int64))
    cdf = np.cumsum(rates / total)
    cdf[-1] = 1.0
    sym = np.searchsorted(cdf, rng.random(n_events), side="right").astype(np.int32)

    # Prices: grouped cumulative sum of log steps per symbol, scattered back.
    start_price = rng.uniform(20.0, 500.0, n_symbols)
    steps = rng.normal(0.0, 0.001, n_events)
    order = np.argsort(sym, kind="stable")
    counts = np.bincount(sym, minlength=n_symbols)
    walk = np.empty(n_events)
    walk[order] = _grouped_cumsum(steps[order], counts)
    price = np.maximum(np.round(start_price[sym] * np.exp(walk), 2), 0.01)
    volume = rng.integers(1, 21, n_events, dtype=np.int64) * 100

    arrays = [pa.array(ts, pa.timestamp("us")), _string_column(names, sym),
              pa.array(price, pa.float64()), pa.array(volume, pa.int64())]
    schema = STOCK_SCHEMA
    if difference:
        by_symbol = price[order]
        diff = np.empty(n_events)
        diff[order] = np.diff(by_symbol, prepend=by_symbol[:1])
        first = np.cumsum(counts) - counts  # first update of each symbol, in sorted order
        diff[order[first[counts > 0]]] = 0.0
        arrays.append(pa.array(np.round(diff, 2), pa.float64()))
        schema = schema.append(pa.field("difference", pa.float64()))
    return pa.Table.from_arrays(arrays, schema=schema)
