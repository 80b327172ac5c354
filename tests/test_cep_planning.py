"""Cost-based planning of CEP clauses: options, the planner's choice, EXPLAIN, Spark conf."""
from __future__ import annotations

import re
from functools import partial

import numpy as np
import pyarrow as pa
import pytest

import cepsql
from cepsql.parse import find_match_recognize
from cepsql.errors import CepAnalysisError
from cepsql.backends.local.engine import table_statistics
from cepsql.compile.clause import plan_query
from cepsql.planning.evaluator_choice import choose_cep_plan
from cepsql.planning.options import PlannerOptions, options_from_conf
from cepsql.explain.clause import explain_clause

SQL = ("SELECT * FROM ticks MATCH_RECOGNIZE (ORDER BY ts "
       "MEASURES a.ts AS ta, b.ts AS tb, c.ts AS tc STRATEGY {strategy} "
       "PATTERN (SEQ(a, b, c)) WITHIN INTERVAL '30' SECOND "
       "DEFINE a AS a.sym = 'A', b AS b.sym = 'B' AND b.price > a.price, "
       "c AS c.sym = 'C' AND c.price < b.price)")


def rare_last_ticks(n: int = 600) -> pa.Table:
    """A and B frequent, C rare: the lazy plan starts from C."""
    rng = np.random.default_rng(7)
    sym = rng.choice(["A", "B", "C"], size=n, p=[0.49, 0.49, 0.02])
    ts = (np.arange(n, dtype=np.int64) * 1_000_000).astype("datetime64[us]")
    return pa.table({"ts": ts, "sym": sym, "price": rng.normal(100, 5, n)})


def _plan(sql: str, table: pa.Table, **options):
    site = find_match_recognize(sql)[0]
    with cepsql.planner_options(**options):
        return plan_query(site.spec, table.schema, sql,
                          statistics=partial(table_statistics, table=table))


def test_default_plan_starts_from_the_rare_variable():
    table = rare_last_ticks()
    text = explain_clause(_plan(SQL.format(strategy="SKIP_TILL_ANY_MATCH"), table))
    assert "evaluator: lazy chain NFA" in text or "evaluator: instance-based tree" in text
    assert "statistics: 600 sampled rows of 600" in text
    rates = text.split("rates (rows per second): ")[1].splitlines()[0]
    c_rate = float(rates.split("C=")[1].split(",")[0])
    assert c_rate < 0.1  # about 2% of one row per second
    assert "ORDER PLAN [DP_LD]" in text and "C -> B -> A" in text
    assert "alternatives (total cost" in text
    for name in ("TRIVIAL", "EFREQ", "GREEDY", "II_RANDOM", "II_GREEDY", "DP_LD",
                 "ZSTREAM", "ZSTREAM_ORD", "DP_B"):
        assert f"\n  {name} " in text



def test_alternatives_are_priced_only_when_explain_reads_them():
    """Planning a clause (e.g. each of a workload's views) does not price the other
    algorithms; reading them (EXPLAIN) does, once; alternatives=False never does."""
    table = rare_last_ticks()
    plan = _plan(SQL.format(strategy="SKIP_TILL_ANY_MATCH"), table)
    choice = plan.explain_facts.choice
    assert choice.priced is None
    priced = choice.alternatives
    assert set(priced) == {"TRIVIAL", "EFREQ", "GREEDY", "II_RANDOM", "II_GREEDY", "DP_LD",
                           "ZSTREAM", "ZSTREAM_ORD", "DP_B"}
    assert priced["DP_LD"] == pytest.approx(choice.plans[0].cost)  # the chosen order plan
    assert choice.alternatives is priced and choice.pricing is None
    unpriced = choose_cep_plan(plan.spec, plan.explain_facts.terms, PlannerOptions(),
                               partial(table_statistics, table=table), alternatives=False)
    assert unpriced.alternatives == {}
    assert [p.cost for p in unpriced.plans] == [p.cost for p in choice.plans]

def test_algorithm_option_selects_the_plan_and_results_do_not_change():
    table = rare_last_ticks()
    sql = SQL.format(strategy="SKIP_TILL_ANY_MATCH")
    assert "TREE PLAN [ZSTREAM]" in explain_clause(_plan(sql, table, algorithm="zstream"))
    assert "ORDER PLAN [TRIVIAL]" in explain_clause(_plan(sql, table, algorithm="TRIVIAL"))
    results = []
    for algorithm in ("TRIVIAL", "GREEDY", "DP_B", None):
        with cepsql.planner_options(algorithm=algorithm):
            df = cepsql.match_recognize(sql, ticks=table)
        results.append(sorted(map(tuple, df.astype(str).itertuples(index=False))))
    assert len(results[0]) > 0
    assert all(r == results[0] for r in results)


def test_arrival_order_strategies_fall_back_and_say_so():
    text = explain_clause(_plan(SQL.format(strategy="SKIP_TILL_NEXT_MATCH"), rare_last_ticks()))
    assert "evaluator: in-order SASE+ run NFA" in text
    assert "out-of-order plans would change the result" in text


_COMPOSITE = ("SELECT * FROM ticks MATCH_RECOGNIZE (ORDER BY ts MEASURES count(*) AS n "
              "STRATEGY SKIP_TILL_ANY_MATCH PATTERN ({pattern}) WITHIN INTERVAL '30' SECOND "
              "DEFINE {defines})")


def _composite(pattern: str) -> str:
    """A clause over ticks with DEFINEs for the lower-case variables the pattern names."""
    syms = {"a": "A", "b": "B", "c": "C", "d": "A"}
    used = sorted(set(re.findall(r"\b([abcd])\b", pattern)))
    return _COMPOSITE.format(pattern=pattern,
                             defines=", ".join(f"{v} AS {v}.sym = '{syms[v]}'" for v in used))


def test_composite_not_is_planned_and_explained():
    # the positive part has a JQPG reduction; the NOT is an absence check on it (R6a)
    text = explain_clause(_plan(_composite("SEQ(a, NOT(SEQ(c, d)), b)"),
                                rare_last_ticks()))
    assert "evaluator: lazy chain NFA" in text or "evaluator: instance-based tree" in text
    assert "negation:      NOT(C D)" in text and "any-match search" in text


def test_composite_kleene_runs_in_order_and_says_why():
    text = explain_clause(_plan(_composite("KL(SEQ(a, b))"), rare_last_ticks()))
    assert "evaluator: in-order SASE+ run NFA" in text
    assert "KL over a composite pattern has no JQPG reduction" in text
    assert "kleene:        KL(A B)" in text


def test_and_not_slot_is_planned():
    text = explain_clause(_plan(_composite("SEQ(a, AND(NOT(c), b), d)"),
                                rare_last_ticks()))
    assert "evaluator: lazy chain NFA" in text or "evaluator: instance-based tree" in text


def test_nested_seq_holding_an_and_not_runs_in_order():
    text = explain_clause(_plan(_composite("SEQ(a, OR(SEQ(AND(NOT(c), b), d), b))"),
                                rare_last_ticks()))
    assert "evaluator: in-order SASE+ run NFA" in text
    assert "move the NOT's region" in text


def test_options_from_conf_validates_values():
    conf = {"cepsql.planner.algorithm": "dp_b", "cepsql.planner.alpha": "0.5"}
    opts = options_from_conf(conf.get)
    assert opts == PlannerOptions(algorithm="DP_B", alpha=0.5)
    assert options_from_conf({"cepsql.planner.algorithm": "auto"}.get).algorithm is None
    assert options_from_conf({"cepsql.planner.runMerging": "false"}.get).run_merging is False
    with pytest.raises(CepAnalysisError, match="cepsql.planner.runMerging"):
        options_from_conf({"cepsql.planner.runMerging": "off"}.get)
    with pytest.raises(CepAnalysisError, match="cepsql.planner.algorithm"):
        options_from_conf({"cepsql.planner.algorithm": "FASTEST"}.get)
    with pytest.raises(CepAnalysisError, match=r"range \[0, 1\]"):
        options_from_conf({"cepsql.planner.alpha": "2"}.get)
    with pytest.raises(TypeError, match="unknown planner option"):
        with cepsql.planner_options(algo="GREEDY"):
            pass


def test_spark_conf_selects_the_algorithm(spark):
    table = rare_last_ticks(200)
    spark.createDataFrame(table.to_pandas()).createOrReplaceTempView("ticks")
    sql = SQL.format(strategy="SKIP_TILL_ANY_MATCH")
    try:
        spark.conf.set("cepsql.planner.algorithm", "ZSTREAM_ORD")
        text = spark.cep.explain(sql)
        assert "TREE PLAN [ZSTREAM_ORD]" in text
        assert "statistics:" in text
        got = spark.cep.sql(sql).toPandas()
    finally:
        spark.conf.unset("cepsql.planner.algorithm")
    want = cepsql.match_recognize(sql, ticks=table)
    key = ["ta", "tb", "tc"]
    assert len(got) == len(want) > 0
    assert sorted(map(tuple, got[key].astype(str).values)) == \
        sorted(map(tuple, want[key].astype(str).values))


VEHICLES = ("SELECT * FROM trips MATCH_RECOGNIZE (ORDER BY ts "
            "MEASURES a.vehicle AS v, a.ts AS ta, b.ts AS tb, c.ts AS tc "
            "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b, c)) WITHIN INTERVAL '5' SECOND "
            "DEFINE a AS a.kind = 'start', b AS b.kind = 'stop' AND b.vehicle = a.vehicle "
            "AND c.vehicle = a.vehicle, c AS c.kind = 'end')")


def test_partition_key_inferred_from_linking_equalities():
    from cepsql.reference.cep import evaluate_reference_cep
    rng = np.random.default_rng(3)
    n = 80
    table = pa.table({"ts": np.arange(n, dtype=np.int64),
                      "vehicle": rng.choice(["v1", "v2", "v3"], n),
                      "kind": rng.choice(["start", "stop", "end"], n)})
    text = explain_clause(_plan(VEHICLES, table))
    assert "partition by:  vehicle (inferred:" in text
    assert "vehicle (inferred" not in explain_clause(_plan(VEHICLES, table, infer_partitions=False))
    inferred = cepsql.match_recognize(VEHICLES, trips=table)
    with cepsql.planner_options(infer_partitions=False):
        plain = cepsql.match_recognize(VEHICLES, trips=table)
    assert list(inferred.columns) == list(plain.columns) == ["v", "ta", "tb", "tc"]
    rows = sorted(map(tuple, inferred.astype(str).values))
    assert len(rows) > 0 and rows == sorted(map(tuple, plain.astype(str).values))
    _, want = evaluate_reference_cep(find_match_recognize(VEHICLES)[0].spec, table)
    assert rows == sorted(tuple(str(x) for x in r) for r in want)
