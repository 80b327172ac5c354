"""In-process workloads (cepsql.workload): every view's rows from the one shared pass equal
the view queried alone (cepsql.match_recognize), for mixed SQL:2016 / CEP workloads,
several partitionings, windows, output modes and SQL around a clause; the push-style
worker API equals the pull one."""
from __future__ import annotations

import decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cepsql
from cepsql.errors import CepAnalysisError, CepRuntimeError
from cepsql.exprs.arrow_eval import evaluate_arrow
from cepsql.backends.local.engine import to_arrow
from cepsql.backends.local.workload import views_alone
from cepsql.compile.clause import plan_query
from cepsql.parse import find_match_recognize, parse_create_view
from cepsql.runtime.ordering import sort_table
from cepsql.runtime import cep_worker as cep_worker_module
from cepsql.runtime import worker as worker_module
from cepsql.runtime import one_pass as one_pass_module
from cepsql.runtime.adaptive import adaptive_settings
from cepsql.runtime.one_pass import plan_pass
from cepsql.runtime.workers import bind_worker

SQL_RISE = ("CREATE TEMPORARY VIEW {name} AS SELECT * FROM ticks MATCH_RECOGNIZE ("
            "{part} ORDER BY ts MEASURES FIRST(A.price) AS low, LAST(B.price) AS high, "
            "MATCH_NUMBER() AS mn ONE ROW PER MATCH AFTER MATCH SKIP {skip} PATTERN (A B{q}) "
            "DEFINE A AS A.price > {lo}, B AS B.price > PREV(B.price))")
SQL_ALL = ("CREATE TEMPORARY VIEW {name} AS SELECT * FROM ticks MATCH_RECOGNIZE ("
           "{part} ORDER BY ts MEASURES CLASSIFIER() AS cls, RUNNING sum(price) AS s "
           "ALL ROWS PER MATCH PATTERN (A B* C) "
           "DEFINE B AS B.price <= {lo} + 3, C AS C.price > {lo})")
CEP = ("CREATE TEMPORARY VIEW {name} AS SELECT * FROM ticks MATCH_RECOGNIZE ("
       "{part} ORDER BY ts MEASURES a.ts AS ta, LAST(b.ts) AS tb, count(b.price) AS nb "
       "ONE ROW PER MATCH STRATEGY {strategy} PATTERN (SEQ(a, KL(b), c)) WITHIN {w} ROWS "
       "DEFINE a AS a.price > {lo}, b AS b.price > a.price, c AS c.price < {lo})")
CEP_AND = ("CREATE TEMPORARY VIEW {name} AS SELECT * FROM ticks MATCH_RECOGNIZE ("
           "{part} ORDER BY ts MEASURES a.ts AS ta, b.ts AS tb ONE ROW PER MATCH "
           "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (AND(a, b, NOT(f))) "
           "WITHIN INTERVAL '{w}' SECOND "
           "DEFINE a AS a.price > {lo}, b AS b.price < a.price - 1, f AS f.price = {lo})")
AROUND = ("CREATE TEMPORARY VIEW {name} AS SELECT sym, count(*) AS n, max(high) AS top FROM "
          "(SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
          "MEASURES LAST(B.price) AS high PATTERN (A B+) DEFINE B AS B.price > PREV(B.price)))"
          " m WHERE high > {lo} GROUP BY sym")
EXPR_ORDER = ("CREATE TEMPORARY VIEW {name} AS SELECT * FROM ticks MATCH_RECOGNIZE ("
              "PARTITION BY upper(sym) ORDER BY ts * 2 MEASURES A.ts AS t, B.price AS p "
              "PATTERN (A B) DEFINE A AS A.price * 2 > {lo}, B AS B.price < A.price)")
STRICT = ("CREATE TEMPORARY VIEW {name} AS SELECT * FROM ticks MATCH_RECOGNIZE ("
          "PARTITION BY sym ORDER BY ts MEASURES a.ts AS ta, b.ts AS tb "
          "STRATEGY STRICT_CONTIGUITY PATTERN (SEQ(a, b)) "
          "DEFINE a AS a.price > {lo}, b AS b.price > a.price)")


def ticks(n: int = 60, seed: int = 1, symbols: str = "abc") -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"sym": rng.choice(list(symbols), n),
                         "ts": np.arange(n, dtype=np.int64),
                         "price": rng.integers(0, 10, n).astype(np.int64)})


def same_rows(got: pd.DataFrame, want: pd.DataFrame) -> bool:
    if list(got.columns) != list(want.columns) or len(got) != len(want):
        return False
    key = lambda df: sorted(map(repr, df.astype(object).where(df.notna(), None)  # noqa: E731
                                .itertuples(index=False, name=None)))
    return key(got) == key(want)


MIXED = [
    SQL_RISE.format(name="rise_sym", part="PARTITION BY sym", skip="PAST LAST ROW", q="+",
                    lo=2),
    SQL_RISE.format(name="rise_all", part="", skip="TO NEXT ROW", q="+?", lo=4),
    SQL_ALL.format(name="runs", part="PARTITION BY sym", lo=5),
    CEP.format(name="cep_any", part="PARTITION BY sym", strategy="SKIP_TILL_ANY_MATCH", w=4,
               lo=5),
    CEP.format(name="cep_next", part="", strategy="SKIP_TILL_NEXT_MATCH", w=5, lo=6),
    CEP.format(name="cep_contig", part="PARTITION BY sym", strategy="PARTITION_CONTIGUITY",
               w=6, lo=3),
    CEP_AND.format(name="cep_and", part="PARTITION BY sym", w=3, lo=4),
    AROUND.format(name="around", lo=3),
    EXPR_ORDER.format(name="expr_order", lo=8),
    STRICT.format(name="strict", lo=4),
]


def test_mixed_workload_equals_each_view_alone():
    data = ticks(80)
    wl = cepsql.workload(MIXED, ticks=data)
    got, alone = wl.dataframes(), views_alone(MIXED, ticks=data)
    assert list(got) == [v.split()[3] for v in MIXED]
    for name in got:
        assert same_rows(got[name], alone[name]), name
    assert wl.passes == 1  # every clause reads ticks: one pass
    assert sum(len(df) for df in alone.values()) > 20  # the workload does match rows


def test_groups_follow_partitioning_and_share_row_local_columns():
    table = to_arrow(ticks(10))
    plans = []
    for stmt in (MIXED[0], MIXED[2], MIXED[1], EXPR_ORDER.format(name="e1", lo=8),
                 EXPR_ORDER.format(name="e_longer_name", lo=8), MIXED[-1]):
        create = parse_create_view(stmt)
        site = find_match_recognize(create.query_text)[0]
        plans.append(plan_query(site.spec, table.schema, stmt))
    shared = plan_pass(table.schema, plans)
    members = sorted(sorted(p.index for p in g.patterns) for g in shared.groups)
    # PARTITION BY sym / none / upper(sym) ORDER BY ts*2 / STRICT_CONTIGUITY on its own
    assert members == [[0, 1], [2], [3, 4], [5]]
    expr_group = next(g for g in shared.groups if {p.index for p in g.patterns} == {3, 4})
    # the two views' equal row-local expressions (keys, order, A.price * 2 > 8) once,
    # although written at other offsets (positions are not part of an expression's identity)
    assert len(expr_group.prepare) == len(plans[3].prepare_columns)


def test_small_chunks_carry_state_across_batches(monkeypatch):
    monkeypatch.setattr(worker_module, "CHUNK_ROWS", 7)
    monkeypatch.setattr(cep_worker_module, "CHUNK_ROWS", 7)
    data = ticks(120, seed=5)
    got = cepsql.workload(MIXED, ticks=data).dataframes()
    alone = views_alone(MIXED, ticks=data)
    for name in got:
        assert same_rows(got[name], alone[name]), name


def test_push_api_equals_pull_for_any_batch_split():
    table = to_arrow(ticks(50, seed=3))
    for stmt in (MIXED[0], MIXED[2], MIXED[3], MIXED[4]):
        create = parse_create_view(stmt)
        plan = plan_query(find_match_recognize(create.query_text)[0].spec, table.schema, stmt)
        prepared = table
        for name, expr in plan.prepare_columns:
            prepared = prepared.append_column(name, evaluate_arrow(expr, table))
        ordered = sort_table(prepared, plan.sort_keys).combine_chunks()
        worker = bind_worker(plan, ordered.schema).worker
        pulled = pa.Table.from_batches(list(worker(iter(ordered.to_batches(max_chunksize=50)))))
        for size in (1, 3, 17):
            pushed = []
            for batch in ordered.to_batches(max_chunksize=size):
                pushed += worker.feed(batch)
            pushed += worker.finish()
            assert pa.Table.from_batches(pushed, schema=pulled.schema).equals(pulled)
        assert worker.finish() == []  # finished: nothing left


def test_matches_cover_every_clause_with_exact_values():
    data = pd.DataFrame({"sym": ["a"] * 4, "ts": range(4),
                         "price": [decimal.Decimal("1.0000000001"), decimal.Decimal("3"),
                                   decimal.Decimal("2"), decimal.Decimal("5.5")]})
    view = ("CREATE TEMPORARY VIEW up AS SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym "
            "ORDER BY ts MEASURES A.price AS a, B.price AS b PATTERN (A B) "
            "DEFINE B AS B.price > A.price)")
    wl = cepsql.workload([view, MIXED[8]], ticks=data)
    m = wl.matches()
    assert list(m.columns) == ["view", "partition", "match_number", "measures"]
    up = m[m.view == "up"]
    assert up.partition.tolist() == [{"sym": "a"}, {"sym": "a"}]
    assert up.match_number.tolist() == [1, 2]
    assert up.measures.tolist() == [{"a": decimal.Decimal("1.0000000001"), "b": decimal.Decimal("3")},
                                    {"a": decimal.Decimal("2"), "b": decimal.Decimal("5.5")}]


def test_views_as_one_script_and_errors():
    script = ";\n".join(MIXED[:2])
    assert list(cepsql.workload(script, ticks=ticks(10)).dataframes()) == ["rise_sym", "rise_all"]
    with pytest.raises(CepAnalysisError, match="CREATE .*TEMPORARY VIEW"):
        cepsql.workload(["SELECT 1"], ticks=ticks(10))
    with pytest.raises(CepAnalysisError, match="unknown table nope"):
        cepsql.workload([MIXED[0].replace("FROM ticks", "FROM nope")], ticks=ticks(10))


TEMPLATES = [SQL_RISE, SQL_ALL, CEP, CEP_AND, AROUND, EXPR_ORDER, STRICT]


@st.composite
def workloads(draw):
    n_views = draw(st.integers(2, 8))
    views = []
    for i in range(n_views):
        template = draw(st.sampled_from(TEMPLATES))
        views.append(template.format(
            name=f"v{i}", part=draw(st.sampled_from(["", "PARTITION BY sym"])),
            skip=draw(st.sampled_from(["PAST LAST ROW", "TO NEXT ROW", "TO LAST B"])),
            q=draw(st.sampled_from(["+", "*", "+?"])), lo=draw(st.integers(1, 8)),
            strategy=draw(st.sampled_from(["SKIP_TILL_ANY_MATCH", "SKIP_TILL_NEXT_MATCH",
                                           "PARTITION_CONTIGUITY"])),
            w=draw(st.integers(2, 6))))
    return views


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.integers(0, 40), st.integers(0, 1000))
def test_random_workloads_equal_views_alone(views, n, seed):
    data = ticks(n, seed=seed, symbols="ab")
    try:
        alone = views_alone(views, ticks=data)
    except CepRuntimeError as error:  # e.g. SKIP TO LAST B when B* matched no row
        with pytest.raises(CepRuntimeError) as raised:
            cepsql.workload(views, ticks=data)
        assert raised.value.message.split(":")[0] == error.message.split(":")[0]
        return
    got = cepsql.workload(views, ticks=data).dataframes()
    for name in got:
        assert same_rows(got[name], alone[name]), name


def test_sharing_access_weight_reaches_the_planner_and_the_replanner(monkeypatch):
    """``sharing={"access": w}`` (cepsql.planner.accessCost on Spark) prices the start-up
    global plan and the adaptive replanner with that pairs weight, not the default."""
    seen = []
    real = one_pass_module.plan_workload

    def spy(patterns, **kw):
        seen.append(kw.get("access"))
        return real(patterns, **kw)
    monkeypatch.setattr(one_pass_module, "plan_workload", spy)
    views = [CEP.format(name=f"c{i}", part="PARTITION BY sym", strategy="SKIP_TILL_ANY_MATCH",
                        w=4, lo=lo) for i, lo in enumerate((3, 5))]
    data = ticks(40)
    wl = cepsql.workload(views, ticks=data, sharing={"access": 0.7})
    got, alone = wl.dataframes(), views_alone(views, ticks=data)
    assert all(same_rows(got[n], alone[n]) for n in got)
    assert seen and set(seen) == {0.7}
    table = to_arrow(data)
    plans = [plan_query(find_match_recognize(parse_create_view(v).query_text)[0].spec,
                        table.schema, v) for v in views]
    shared = plan_pass(table.schema, plans, {"access": 0.7,
                                             "adaptive": adaptive_settings({}.get)})
    replanners = [g.replanner for g in shared.groups if g.replanner is not None]
    assert replanners and {r.access for r in replanners} == {0.7}
