"""EXPLAIN: which parts of DEFINE run vectorised before matching and which in the VM."""
from __future__ import annotations

import re
import pyarrow as pa

import cepsql
from cepsql.parse import find_match_recognize
from cepsql.explain.svg import plan_svg
from cepsql.compile.clause import plan_query
from cepsql.explain.clause import explain_clause

Q = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
     "MEASURES FIRST(A.p) AS p PATTERN (A B+) "
     "DEFINE A AS A.v > 1000, B AS B.p > PREV(B.p) AND B.p > A.p * 2)")
SCHEMA = pa.schema([("sym", pa.string()), ("ts", pa.int64()), ("p", pa.float64()),
                    ("v", pa.int64())])


def test_explain_text_shows_pushdown_and_vm_parts():
    text = explain_clause(plan_query(find_match_recognize(Q)[0].spec, SCHEMA, Q))
    assert "pattern:       A B+" in text
    assert "partition by:  sym" in text
    assert "order by:      ts ASC NULLS FIRST; ties broken by p, v" in text
    # the row-local parts become derived columns ...
    assert "__cep_d0 := (`v` > 1000)" in text and "__cep_d1 := (`p` * 2)" in text
    # ... and the VM compares rows
    assert "B: ((p@current row > p@PREV(current row, 1)) AND (p@current row > __cep_d1@LAST(A)))" in text


def test_explain_statement_through_spark(spark):
    spark.createDataFrame([("a", 1, 1.0, 5)], "sym string, ts long, p double, v long") \
        .createOrReplaceTempView("t")
    plan = spark.cep.sql("EXPLAIN " + Q).collect()[0].plan
    assert plan.startswith("== MATCH_RECOGNIZE clause 1 ==")
    assert "== Spark SQL after rewriting ==" in plan
    again = spark.cep.explain(Q)  # the same text, but for the generated view's number
    assert again.split("== Spark SQL")[0] == plan.split("== Spark SQL")[0]


def test_plain_summary_comes_first(spark):
    """A newcomer reads what is matched, how it is split and which plan first; the
    generated relation is defined under the rewritten SQL."""
    spark.createDataFrame([("a", 1, 1.0), ("a", 2, 2.0), ("b", 1, 3.0)],
                          "sym string, t int, p double").createOrReplaceTempView("sumx")
    text = spark.cep.explain("""SELECT * FROM sumx MATCH_RECOGNIZE (PARTITION BY sym ORDER BY t
        MEASURES A.p AS ap PATTERN (A B) DEFINE B AS B.p > A.p) m""")
    head = text.split("Detail:")[0]
    assert "In short:" in head
    assert "PATTERN (A B) over rows in t order" in head
    assert "one independent group per value of sym" in head
    assert "pattern:" not in head                        # the expert detail comes after
    assert re.search(r"`__cep_mr_\w+` := MATCH_RECOGNIZE clause 1 over sumx, PATTERN \(A B\)",
                     text)


def test_explain_format_svg_draws_the_chosen_tree_plan_and_the_pattern_tree(spark, tmp_path):
    import xml.etree.ElementTree as ET
    spark.createDataFrame([("a", i, float(i % 5), i % 3) for i in range(60)],
                          "sym string, ts long, p double, v long").createOrReplaceTempView("t")
    cep = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES a.ts AS x "
           "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b, c)) WITHIN 5 ROWS "
           "DEFINE a AS a.v = 0, b AS b.v = 1 AND b.p > a.p, c AS c.v = 2)")
    svg = spark.cep.sql("EXPLAIN FORMAT SVG " + cep).collect()[0].plan
    root = ET.fromstring(svg)   # well-formed
    labels = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert {"A", "B", "C"} <= set(labels)
    assert labels.count("JOIN") == 2 or {"step 2", "step 3"} <= set(labels)   # tree or order
    with cepsql.planner_options(algorithm="ZSTREAM"):
        plan = plan_query(find_match_recognize(cep)[0].spec, SCHEMA, cep)
    tree = ET.fromstring(plan_svg(plan.spec, plan))
    assert [t.text for t in tree.iter("{http://www.w3.org/2000/svg}text")].count("JOIN") == 2
    out = tmp_path / "plan.svg"
    text = spark.cep.explain(Q, file=str(out))
    assert text.startswith("== MATCH_RECOGNIZE clause 1 ==")   # text still returned
    drawn = [t.text for t in ET.parse(out).getroot().iter("{http://www.w3.org/2000/svg}text")]
    assert {"SEQ", "A", "KL{1,}"} <= set(drawn)                  # SQL mode: the pattern tree


def test_explain_format_rejects_unknown_formats_at_the_word(spark):
    import pytest
    from cepsql.errors import CepSyntaxError
    with pytest.raises(CepSyntaxError) as err:
        spark.cep.explain("EXPLAIN FORMAT PNG " + Q)
    assert "EXPLAIN FORMAT takes SVG or TEXT, not PNG" in str(err.value)
    assert "column 16" in str(err.value)
