"""The SASE+ Figure 1 examples (cepsql/examples/05-07) and the generators they run on.

Each example's text runs through cepsql.match_recognize on small generated streams and
must return exactly (as a multiset) the rows of the CEP reference evaluator. Sizes are
small so the oracle stays fast: the any-match enumeration of Query 2 grows with 2^(rows
in the window), so its stream is sparse. One example also runs on Spark.
"""
from __future__ import annotations

import pathlib

import numpy as np
import pyarrow as pa
import pytest

import cepsql
from cepsql.datagen import (RFID_SCHEMA, SHIPMENTS_SCHEMA, generate_rfid, generate_shipments,
                            generate_ticks, site_names, tag_names)
from cepsql.reference.cep import evaluate_reference_cep

try:
    from .test_property_sql import row_multiset, spec_of
except ImportError:
    from test_property_sql import row_multiset, spec_of

EXAMPLES = pathlib.Path(cepsql.__file__).resolve().parent / "examples"


def example_sql(name: str) -> str:
    """The example's single statement, without its trailing semicolon."""
    return (EXAMPLES / name).read_text(encoding="utf-8").strip().rstrip(";")


def assert_matches_reference(name: str, table_name: str, table: pa.Table) -> int:
    sql = example_sql(name)
    names, rows = evaluate_reference_cep(spec_of(sql), table)
    df = cepsql.match_recognize(sql, **{table_name: table})
    assert list(df.columns) == names
    got = row_multiset(df.itertuples(index=False, name=None))
    want = row_multiset(rows)
    assert got == want, f"{name}\nmissing: {want - got}\nextra: {got - want}"
    return len(rows)


# --- examples vs the reference ----------------------------------------------------------

@pytest.mark.parametrize("n_rows, n_tags, seed, rate", [
    (120, 6, 1, 0.05), (200, 4, 2, 0.3), (150, 3, 3, 0.5), (90, 2, 4, 0.3), (0, 3, 5, 0.1)])
def test_shoplifting_matches_reference(n_rows, n_tags, seed, rate):
    table = generate_rfid(n_rows, n_tags=n_tags, seed=seed, shoplift_rate=rate)
    assert_matches_reference("05_shoplifting.sql", "rfid", table)


@pytest.mark.parametrize("n_rows, n_sites, seed, per_hour", [
    (60, 3, 1, 1.0), (50, 4, 2, 0.6), (70, 2, 3, 1.2)])
def test_contamination_matches_reference(n_rows, n_sites, seed, per_hour):
    table = generate_shipments(n_rows, n_sites=n_sites, seed=seed, alert_rate=0.1,
                               shipments_per_site_hour=per_hour)
    assert assert_matches_reference("06_contamination.sql", "shipments", table) > 0


@pytest.mark.parametrize("n_rows, n_symbols, seed", [(120, 3, 1), (150, 2, 2), (100, 1, 3)])
def test_stock_trend_matches_reference(n_rows, n_symbols, seed):
    table = generate_ticks(n_rows, n_symbols=n_symbols, seed=seed)
    assert assert_matches_reference("07_stock_trend.sql", "ticks", table) > 0


def test_examples_are_demo_examples_and_linked():
    from cepsql.api import cli
    demo = {e.name for e in cli.load_examples(demo_only=True)}
    root = pathlib.Path(__file__).resolve().parents[1]
    for name in ("05_shoplifting.sql", "06_contamination.sql", "07_stock_trend.sql"):
        assert name in demo
        link = root / "sql_examples" / name
        assert link.is_symlink() and link.resolve() == (EXAMPLES / name).resolve()


# --- what the examples find, checked independently on larger streams ---------------------

def test_shoplifting_reports_exits_without_checkout():
    table = generate_rfid(20_000, n_tags=200, seed=7)
    df = cepsql.match_recognize(example_sql("05_shoplifting.sql"), rfid=table)
    assert len(df) > 50
    readings = table.to_pandas()
    by_tag = {tag: g for tag, g in readings.groupby("tag_id")}
    for tag, shelf_ts, exit_ts in df[["tag_id", "shelf_ts", "exit_ts"]].itertuples(index=False):
        g = by_tag[tag]
        assert (g.loc[g.ts == shelf_ts, "reader"] == "shelf").all()
        assert (g.loc[g.ts == exit_ts, "reader"] == "exit").all()
        assert exit_ts - shelf_ts <= np.timedelta64(12, "h")
        between = g[(g.ts > shelf_ts) & (g.ts < exit_ts)]
        assert "register" not in set(between.reader)
    # non-overlapping: every exit reading is reported at most once
    assert not df.duplicated(["tag_id", "exit_ts"]).any()


def test_contamination_series_are_chains_from_the_alert_site():
    table = generate_shipments(3_000, seed=5)
    sql = example_sql("06_contamination.sql").replace(
        "LAST(b.ts)              AS reached_ts",
        "LAST(b.ts) AS reached_ts, FIRST(b.from_site) AS first_from")
    df = cepsql.match_recognize(sql, shipments=table)
    assert len(df) > 20 and df["hops"].max() >= 3
    assert (df["first_from"] == df["contaminated_site"]).all()
    assert ((df["reached_ts"] - df["alert_ts"]) <= np.timedelta64(3, "h")).all()
    ships = table.to_pandas().set_index("shipment_id", drop=False)
    one_hop = df[df.hops == 1]
    assert (one_hop.first_shipment == one_hop.last_shipment).all()
    assert (ships.loc[df.last_shipment.astype(int), "to_site"].to_numpy()
            == df.reached_site.to_numpy()).all()


def test_stock_trend_shapes():
    df = cepsql.match_recognize(example_sql("07_stock_trend.sql"),
                                ticks=generate_ticks(5_000, n_symbols=4))
    assert len(df) > 10
    assert (df.trend_ticks >= 3).all() and (df.start_volume > 1000).all()
    assert (df.drop_volume < 0.8 * df.last_volume).all()
    assert ((df.drop_ts - df.start_ts) <= np.timedelta64(2, "s")).all()


# --- generators ----------------------------------------------------------------------------

def test_rfid_is_deterministic_and_shaped():
    a = generate_rfid(5_000, n_tags=50, seed=3)
    assert a.equals(generate_rfid(5_000, n_tags=50, seed=3))
    assert not a.equals(generate_rfid(5_000, n_tags=50, seed=4))
    assert a.schema.equals(RFID_SCHEMA) and a.num_rows == 5_000
    assert generate_rfid(0).schema.equals(RFID_SCHEMA)
    df = a.to_pandas()
    assert (np.diff(df.ts.to_numpy().astype(np.int64)) > 0).all()
    assert set(df.reader) == {"shelf", "register", "exit"}
    assert set(df.tag_id) <= set(tag_names(50))
    # readings happen in shop hours, and some tags leave without a register reading
    assert df.ts.dt.hour.min() >= 8
    stolen = 0
    for _, g in df.groupby("tag_id"):
        readers = list(g.reader)
        stolen += sum(1 for i, r in enumerate(readers)
                      if r == "exit" and i > 0 and readers[i - 1] == "shelf")
    assert stolen > 10


def test_rfid_shoplift_rate_zero_gives_no_matches():
    table = generate_rfid(3_000, n_tags=100, seed=2, shoplift_rate=0.0)
    df = cepsql.match_recognize(example_sql("05_shoplifting.sql"), rfid=table)
    # bought items pass the register first; only a browsed item late one day followed by
    # a stolen one next day could match, and with no stolen items nothing does
    assert len(df) == 0


def test_shipments_are_deterministic_and_shaped():
    a = generate_shipments(4_000, n_sites=6, seed=3)
    assert a.equals(generate_shipments(4_000, n_sites=6, seed=3))
    assert not a.equals(generate_shipments(4_000, n_sites=6, seed=4))
    assert a.schema.equals(SHIPMENTS_SCHEMA) and a.num_rows == 4_000
    assert generate_shipments(0).schema.equals(SHIPMENTS_SCHEMA)
    df = a.to_pandas()
    assert (np.diff(df.ts.to_numpy().astype(np.int64)) > 0).all()
    alerts, ships = df[df.kind == "alert"], df[df.kind == "shipment"]
    assert 10 < len(alerts) < 100
    assert alerts.site.notna().all() and alerts.from_site.isna().all()
    assert alerts.shipment_id.isna().all()
    assert ships.site.isna().all() and (ships.from_site != ships.to_site).all()
    assert list(ships.shipment_id.astype(int)) == list(range(1, len(ships) + 1))
    assert set(ships.from_site) | set(ships.to_site) == set(site_names(6))


# --- Spark ---------------------------------------------------------------------------------

def test_shoplifting_on_spark_equals_local(spark):
    table = generate_rfid(400, n_tags=5, seed=9, shoplift_rate=0.3)
    sql = example_sql("05_shoplifting.sql")
    local = cepsql.match_recognize(sql, rfid=table)
    assert len(local) > 0
    spark.createDataFrame(table.to_pandas()).createOrReplaceTempView("rfid")
    try:
        result = spark.cep.sql(sql)
        assert result.columns == list(local.columns)
        got = row_multiset(tuple(r) for r in result.collect())
    finally:
        spark.catalog.dropTempView("rfid")
    assert got == row_multiset(local.itertuples(index=False, name=None))
