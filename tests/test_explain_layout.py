"""EXPLAIN's pictures and text as a person reads them: plan drawings laid out as trees
(each box one row below its parent, none overlapping) and SQL literals as written."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import pyarrow as pa
import pytest

import cepsql
from cepsql.compile.clause import plan_query
from cepsql.explain.clause import explain_clause
from cepsql.explain.layout import tidy_layout
from cepsql.explain.svg import dag_svg, pattern_boxes, plan_boxes, plan_svg
from cepsql.explain.workload import describe_workload, workload_svg
from cepsql.parse import find_match_recognize
from cepsql.sharing import plan_workload, workload_pattern
from support.sharing_synthetic import TICKS_SCHEMA, stock_workload

NS = "{http://www.w3.org/2000/svg}"
SCHEMA = pa.schema([("sym", pa.string()), ("ts", pa.int64()), ("open", pa.decimal128(10, 2)),
                    ("close", pa.float64()), ("v", pa.int64())])


def _spec(pattern: str, strategy: str = "SKIP_TILL_ANY_MATCH", define: str = "a AS a.v > 0"):
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(ts) AS x "
           f"{'STRATEGY ' + strategy if strategy else ''} PATTERN ({pattern}) WITHIN 5 ROWS "
           f"DEFINE {define})")
    return find_match_recognize(sql)[0].spec, sql


def _drawing(svg: str) -> tuple[list[tuple[float, float, float, float]], list[tuple[int, int]]]:
    """The drawn boxes (x, y, width, height) and the edges between them as (parent, child)
    box indices, read back from the SVG: an edge leaves its parent's bottom centre and
    ends at its child's top centre."""
    root = ET.fromstring(svg)
    boxes = [tuple(float(r.get(k)) for k in ("x", "y", "width", "height"))
             for r in root.iter(f"{NS}rect") if r.get("x") is not None]

    def box_at(x: float, y: float, bottom: bool) -> int:
        (hit,) = [i for i, (bx, by, w, h) in enumerate(boxes)
                  if abs(bx + w / 2 - x) < 0.06 and abs(by + (h if bottom else 0) - y) < 0.06]
        return hit
    edges = [(box_at(float(ln.get("x1")), float(ln.get("y1")), True),
              box_at(float(ln.get("x2")), float(ln.get("y2")), False))
             for ln in root.iter(f"{NS}line")]
    return boxes, edges


def _rows(boxes) -> dict[int, int]:
    """Box index -> its row (0 = top), from the distinct y positions drawn."""
    ys = sorted({y for _, y, _, _ in boxes})
    return {i: ys.index(y) for i, (_, y, _, _) in enumerate(boxes)}


def _assert_tidy(svg: str, tree: bool) -> None:
    boxes, edges = _drawing(svg)
    row = _rows(boxes)
    for i, (x, y, w, h) in enumerate(boxes):            # no two boxes overlap
        for x2, y2, _, _ in boxes[i + 1:]:
            assert abs(x - x2) >= w or abs(y - y2) >= h, svg
    parents: dict[int, list[int]] = {}
    for parent, child in edges:
        parents.setdefault(child, []).append(parent)
        assert row[child] > row[parent]
    for child, ps in parents.items():
        # a tree: exactly one row below its parent; a DAG: below its deepest consumer
        assert (len(ps) == 1) if tree else True
        assert row[child] == max(row[p] for p in ps) + 1, (boxes[child], ps)
    roots = [i for i in range(len(boxes)) if i not in parents]
    assert {row[r] for r in roots} == {0} if tree else roots


PATTERN_SHAPES = [
    ("A B+ (C | D)* E", None, "A AS A.v > 0"),
    ("(A | B C+)+ D{2,3}? ^ $", None, "A AS A.v > 0"),
    ("SEQ(a, KL(b), NOT(n), c)", "SKIP_TILL_ANY_MATCH", "a AS a.v > 0"),
    ("SEQ(a, AND(b, KL(c)), OR(d, SEQ(e, f)), NOT(g), h)", "SKIP_TILL_NEXT_MATCH", "a AS a.v > 0"),
    ("AND(a, OR(b, KL(c)), NOT(d))", "SKIP_TILL_ANY_MATCH", "a AS a.v > 0"),
]


@pytest.mark.parametrize("pattern,strategy,define", PATTERN_SHAPES)
def test_pattern_trees_put_every_box_one_row_below_its_parent(pattern, strategy, define):
    spec, _ = _spec(pattern, strategy, define)
    _assert_tidy(dag_svg(pattern_boxes(spec.pattern), pattern), tree=True)


def test_seq_with_kleene_and_negation_keeps_a_and_c_beside_them():
    """The issue's drawing: A and C hung one row down under the KL and NOT boxes."""
    spec, _ = _spec("SEQ(a, KL(b), NOT(n), c)")
    boxes = pattern_boxes(spec.pattern)
    drawn, _ = _drawing(dag_svg(boxes))
    row = _rows(drawn)
    at = {b.label: row[i] for i, b in enumerate(boxes)}
    assert at == {"SEQ": 0, "A": 1, "KL{1,}": 1, "NOT": 1, "C": 1, "B": 2, "N": 2}
    xs = [drawn[i][0] for i, b in enumerate(boxes) if b.label in ("A", "KL{1,}", "NOT", "C")]
    assert xs == sorted(xs)     # left to right in pattern order


@pytest.mark.parametrize("algorithm", ["ZSTREAM", "DP_LD"])
@pytest.mark.parametrize("pattern", ["SEQ(a, b, c, d)", "OR(SEQ(a, b, c), SEQ(a, d))",
                                     "SEQ(a, KL(b), NOT(d), c)"])
def test_chosen_plans_are_drawn_as_tidy_trees(algorithm, pattern):
    define = "a AS a.v = 0, b AS b.v = 1 AND b.close > a.close, c AS c.v = 2, d AS d.v = 3"
    spec, sql = _spec(pattern, define=define)
    with cepsql.planner_options(algorithm=algorithm):
        plan = plan_query(spec, SCHEMA, sql)
    chosen = list(plan.chosen_plans or [])
    svg = plan_svg(plan.spec, plan)
    _assert_tidy(svg, tree=True)
    if chosen:   # the planned clause's join tree / order chain, not the pattern tree
        assert len(_drawing(svg)[0]) == len(plan_boxes(chosen))


def test_shared_workload_dag_hangs_each_node_below_its_deepest_consumer():
    wl = stock_workload(12, seed=4, symbols=6, sizes=(3, 5), windows=(5, 10))
    patterns = wl.workload_patterns()
    plan = plan_workload(patterns, algorithm="SA", seed=0, max_iterations=200)
    assert plan.shared_nodes()
    _assert_tidy(workload_svg(plan, patterns), tree=False)


def test_layout_of_a_dag_whose_shared_node_has_parents_on_two_rows():
    #   4 -> (3, 0); 3 -> (2,); 2 -> (0, 1): node 0 is read on rows 0 and 2
    placed = tidy_layout([[], [], [0, 1], [2], [3, 0]])
    assert placed.level == [3, 3, 2, 1, 0]
    assert placed.tree_parent == [2, 2, 3, 4, None]
    assert placed.slot[2] == (placed.slot[0] + placed.slot[1]) / 2
    assert abs(placed.slot[0] - placed.slot[1]) == 1


def test_explain_text_prints_literals_as_written():
    spec, sql = _spec("A Z+", None, "A AS A.close > 1.5, "
                      "Z AS Z.close > Z.open + 0.1 AND Z.open > A.open * 2.5 AND Z.v > -3")
    text = explain_clause(plan_query(spec, SCHEMA, sql))
    assert "(`close` > 1.5)" in text and "(`open` + 0.1)" in text, text
    assert "(`open` * 2.5)" in text and "(`v` > -3)" in text, text
    assert "BD" not in text and "'0.1'" not in text


def test_explain_workload_prints_decimal_literals_unquoted():
    sql = ("SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
           "MEASURES a.ts AS x STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, {z})) "
           "WITHIN 5 ROWS DEFINE a AS a.price > 1, {z} AS {z}.diff > a.diff + 0.1)")
    patterns = [workload_pattern(find_match_recognize(sql.format(z=z))[0].spec, TICKS_SCHEMA,
                                 name=z) for z in ("y", "z")]
    plan = plan_workload(patterns, seconds=0.05)
    text = describe_workload(plan, patterns) + workload_svg(plan, patterns)
    assert "A.diff + 0.1" in text, text
    assert "'0.1'" not in text
