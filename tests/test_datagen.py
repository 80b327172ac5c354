"""The demo/benchmark stream must be deterministic and shaped as documented."""
import numpy as np
import pyarrow as pa

from cepsql.datagen import TICKS_SCHEMA, generate_ticks, symbol_names, ticks_to_pandas


def test_same_seed_same_table_other_seed_other_table():
    a = generate_ticks(5_000, seed=3)
    assert a.equals(generate_ticks(5_000, seed=3))
    assert not a.equals(generate_ticks(5_000, seed=4))


def test_columns_and_types():
    t = generate_ticks(1_000)
    assert t.schema.equals(TICKS_SCHEMA)
    assert t.num_rows == 1_000
    assert t.column_names == ["symbol", "ts", "price", "volume"]
    assert generate_ticks(0).schema.equals(TICKS_SCHEMA)


def test_values_are_plausible():
    df = ticks_to_pandas(generate_ticks(50_000, n_symbols=5))
    assert str(df["ts"].iloc[0]) == "2024-01-02 09:30:00"
    assert (np.diff(df["ts"].to_numpy().astype(np.int64)) > 0).all()
    assert (df["price"] > 0).all()
    assert np.allclose(df["price"] * 100, np.round(df["price"] * 100))
    assert (df["volume"] > 0).all() and df["volume"].dtype == np.int64
    assert set(df["symbol"]) == set(symbol_names(5))
    # a random walk per symbol: consecutive prices of one symbol stay close
    rel = df.groupby("symbol")["price"].pct_change().abs().dropna()
    assert rel.max() < 0.02


def test_arrival_rates_are_skewed():
    counts = generate_ticks(200_000).column("symbol").value_counts()
    by_symbol = {c["values"]: c["counts"] for c in counts.to_pylist()}
    assert len(by_symbol) == 20
    ratio = max(by_symbol.values()) / min(by_symbol.values())
    assert 30 < ratio < 65
    assert max(by_symbol, key=by_symbol.get) == "AAPL"


def test_ticks_to_pandas_accepts_row_count():
    df = ticks_to_pandas(100, n_symbols=3, seed=1)
    assert len(df) == 100
    assert pa.Table.from_pandas(df, preserve_index=False).equals(generate_ticks(100, 3, 1))


# --------------------------------------------------------------------------- stock stream

def test_stock_stream_is_deterministic_and_shaped():
    from cepsql.datagen import STOCK_SCHEMA, generate_stock_stream
    a = generate_stock_stream(3_000, n_symbols=6, seed=5)
    assert a.equals(generate_stock_stream(3_000, n_symbols=6, seed=5))
    assert not a.equals(generate_stock_stream(3_000, n_symbols=6, seed=6))
    assert a.schema.equals(STOCK_SCHEMA) and a.num_rows == 3_000
    assert generate_stock_stream(0).num_rows == 0
    ts = a.column("ts").to_numpy().astype(np.int64)
    assert (np.diff(ts) > 0).all()
    assert str(a.column("ts")[0]) == "2024-01-02 09:30:00"
    df = a.to_pandas()
    assert (df["price"] > 0).all() and (df["volume"] > 0).all()


def test_stock_stream_rates_span_the_range_and_arrivals_are_poisson():
    from cepsql.datagen import generate_stock_stream, stock_rates
    rates = stock_rates(20, (1, 45), seed=3)
    assert min(rates.values()) == 1 and max(rates.values()) == 45
    assert list(rates.values()) == sorted(rates.values(), reverse=True)
    t = generate_stock_stream(200_000, n_symbols=20, seed=3)
    df = t.to_pandas()
    seconds = (df["ts"].iloc[-1] - df["ts"].iloc[0]).total_seconds()
    measured = df["symbol"].value_counts() / seconds
    for name, rate in rates.items():
        assert abs(measured[name] - rate) < 0.1 * rate + 0.2, (name, measured[name], rate)
    # Poisson: per-symbol gaps are exponential (coefficient of variation ~1)
    gaps = df[df["symbol"] == next(iter(rates))]["ts"].diff().dt.total_seconds().dropna()
    assert 0.9 < gaps.std() / gaps.mean() < 1.1


def test_stock_stream_difference_is_the_previous_price_change():
    from cepsql.datagen import generate_stock_stream
    df = generate_stock_stream(5_000, n_symbols=4, seed=1, difference=True).to_pandas()
    expected = df.groupby("symbol")["price"].diff().fillna(0.0).round(2)
    assert np.allclose(df["difference"], expected)
    assert (df.groupby("symbol")["difference"].first() == 0).all()
