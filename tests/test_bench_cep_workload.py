"""The SASE+ workload of benchmarks/bench_cep.py: its cepsql formulations of the paper's
iterator predicates (p1, p2, p3-min/max/avg) under s2/s3 must give the same matches as
the reference oracle and as a direct model of the paper's literal predicates, with run
merging on and off (the script's ``--check``, on a small stream). No timings."""
from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks",
                     "bench_cep.py")


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_cep_workload", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_every_formulation_is_exact(bench):
    assert bench.check(rows=200) == []


def test_the_check_catches_a_formulation_that_takes_ties(bench, monkeypatch):
    # a max including the current row alone accepts x == max(previous a prices)
    monkeypatch.setitem(bench.PREDICATES, "p3-max", "a.price >= max(a.price)")
    problems = bench.check(rows=200, preds=["p3-max"], strategies=["s2"])
    assert problems and all("paper predicates" in p for p in problems)


def test_query_carries_the_template(bench):
    sql = bench.query("p3-avg", "s3", 1000)
    assert "STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (a+ b) WITHIN 1000 ROWS" in sql
    assert "PARTITION BY symbol" in sql and "b.volume < 150" in sql
    assert "a.price % 500 = 0" in sql and "a.price > avg(a.price)" in sql
    assert "count(a.*) = 1 OR" not in bench.query("p1", "s2", 500)


def test_stream_follows_the_paper(bench):
    df = bench.stock_stream(20000, symbols=2, p_increase=0.7, seed=1)
    assert df["price"].between(1, 1000).all() and df["volume"].between(1, 1000).all()
    assert df["ts"].is_monotonic_increasing and df["ts"].is_unique
    for _, part in df.groupby("symbol"):
        step = np.diff(part["price"].to_numpy()) % 1000  # the walk wraps around 1..1000
        step = np.where(step == 999, -1, step)
        assert set(np.unique(step)) <= {-1, 0, 1}
        assert 0.65 < (step == 1).mean() < 0.75
