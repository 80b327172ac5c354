"""MATCH_RECOGNIZE clause parsing, expression conversion, clause sites, statements."""
import pytest

from cepsql.algebra.expressions import (Aggregate, Between, BinaryOp, Case, Cast, Classifier,
                                        ColumnRef, FunctionCall, InList, IsNull, Like, Literal,
                                        MatchNumber, Navigation, UnaryOp)
from cepsql.algebra.pattern import Concat, Quantified, Var
from cepsql.algebra.spec import SkipTo
from cepsql.parse import (find_match_recognize, parse_clause_body, parse_create_view,
                            parse_drop_view, parse_explain, split_statements)
from cepsql.errors import CepAnalysisError, CepSyntaxError, CepUnsupportedError


def spec_of(sql):
    sites = find_match_recognize(sql)
    assert len(sites) == 1
    return sites[0].spec


def clause(body, source="ticks"):
    return spec_of(f"SELECT * FROM {source} MATCH_RECOGNIZE ({body})")


def define(cond, pattern="A B C"):
    return clause(f"PATTERN ({pattern}) DEFINE A AS {cond}").defines["A"]


def measure(expr, rows="ONE ROW PER MATCH", pattern="A B C"):
    return clause(f"MEASURES {expr} AS m {rows} PATTERN ({pattern})").measures[0].expr


# --- full clauses ----------------------------------------------------------------------------
TRINO_EXAMPLE = """
SELECT * FROM orders MATCH_RECOGNIZE(
    PARTITION BY custkey
    ORDER BY orderdate
    MEASURES
        A.totalprice AS starting_price,
        LAST(B.totalprice) AS bottom_price,
        LAST(U.totalprice) AS top_price
    ONE ROW PER MATCH
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (A B+ C+ D+)
    SUBSET U = (C, D)
    DEFINE
        B AS totalprice < PREV(totalprice),
        C AS totalprice > PREV(totalprice) AND totalprice <= A.totalprice,
        D AS totalprice > PREV(totalprice)
) AS m
"""


def test_trino_documentation_example():
    spec = spec_of(TRINO_EXAMPLE)
    assert [k.name for k in spec.partition_by] == ["custkey"]
    assert spec.partition_by[0].expr == ColumnRef(None, "custkey")
    assert spec.order_by[0].expr == ColumnRef(None, "orderdate")
    assert spec.order_by[0].ascending and spec.order_by[0].nulls_first is None
    assert [m.name for m in spec.measures] == ["starting_price", "bottom_price", "top_price"]
    assert spec.measures[0].expr == ColumnRef("A", "totalprice")
    assert spec.measures[1].expr == Navigation("LAST", ColumnRef("B", "totalprice"), 0)
    assert spec.rows_per_match == "ONE"
    assert spec.after_match_skip == SkipTo("PAST_LAST_ROW")
    assert spec.pattern == Concat((Var("A"), Quantified(Var("B"), 1, None),
                                   Quantified(Var("C"), 1, None), Quantified(Var("D"), 1, None)))
    assert spec.pattern_text == "A B+ C+ D+"
    assert spec.subsets == {"U": ("C", "D")}
    assert list(spec.defines) == ["B", "C", "D"]
    assert spec.defines["B"] == BinaryOp("<", ColumnRef(None, "totalprice"),
                                         Navigation("PREV", ColumnRef(None, "totalprice"), 1))
    assert spec.variables == ["A", "B", "C", "D"]


def test_defaults_and_missing_define():
    spec = clause("PATTERN (A+)")
    assert spec.partition_by == () and spec.order_by == () and spec.measures == ()
    assert spec.rows_per_match == "ONE" and spec.all_rows_option == "SHOW_EMPTY"
    assert spec.after_match_skip == SkipTo() and spec.defines == {} and spec.subsets == {}


def test_partition_and_order_items():
    spec = clause("PARTITION BY sym, upper(exch) ORDER BY ts DESC NULLS FIRST, id ASC, "
                  "seq NULLS LAST PATTERN (A)")
    assert [k.name for k in spec.partition_by] == ["sym", "upper(exch)"]
    assert spec.partition_by[1].expr == FunctionCall("upper", (ColumnRef(None, "exch"),))
    assert [(k.ascending, k.nulls_first) for k in spec.order_by] == [
        (False, True), (True, None), (True, False)]


@pytest.mark.parametrize("text, rows, option", [
    ("ONE ROW PER MATCH", "ONE", "SHOW_EMPTY"),
    ("ALL ROWS PER MATCH", "ALL", "SHOW_EMPTY"),
    ("ALL ROWS PER MATCH SHOW EMPTY MATCHES", "ALL", "SHOW_EMPTY"),
    ("ALL ROWS PER MATCH OMIT EMPTY MATCHES", "ALL", "OMIT_EMPTY"),
    ("ALL ROWS PER MATCH WITH UNMATCHED ROWS", "ALL", "WITH_UNMATCHED"),
])
def test_rows_per_match(text, rows, option):
    spec = clause(f"{text} PATTERN (A)")
    assert (spec.rows_per_match, spec.all_rows_option) == (rows, option)


@pytest.mark.parametrize("text, kind, var", [
    ("PAST LAST ROW", "PAST_LAST_ROW", None), ("TO NEXT ROW", "TO_NEXT_ROW", None),
    ("TO FIRST b", "TO_FIRST", "B"), ("TO LAST B", "TO_LAST", "B"), ("TO B", "TO_LAST", "B"),
    ("TO U", "TO_LAST", "U"),
])
def test_after_match_skip(text, kind, var):
    spec = clause(f"AFTER MATCH SKIP {text} PATTERN (A B) SUBSET U = (A, B)")
    assert (spec.after_match_skip.kind, spec.after_match_skip.var) == (kind, var)


def test_quoted_and_case_of_variables():
    spec = clause('MEASURES `b`.x AS bx, a.x AS ax PATTERN (a "b") '
                  'DEFINE A AS a.x > 0, "b" AS `b`.x > 0')
    assert spec.variables == ["A", "b"]
    assert set(spec.defines) == {"A", "b"}
    assert spec.measures[0].expr == ColumnRef("b", "x")
    assert spec.measures[1].expr == ColumnRef("A", "x")


def test_measure_alias_without_as_and_positions():
    sql = "SELECT * FROM t MATCH_RECOGNIZE (MEASURES A.x ax, B.y by_ PATTERN (A B))"
    spec = spec_of(sql)
    assert [m.name for m in spec.measures] == ["ax", "by_"]
    assert spec.measures[0].pos == sql.index("A.x")
    assert spec.measures[0].expr.pos == sql.index("A.x")


# --- expressions -------------------------------------------------------------------------------
def test_navigation_defaults_and_nesting():
    assert define("PREV(A.x) > 0").left == Navigation("PREV", ColumnRef("A", "x"), 1)
    assert define("NEXT(x, 2) > 0").left == Navigation("NEXT", ColumnRef(None, "x"), 2)
    assert define("FIRST(B.x) > 0").left == Navigation("FIRST", ColumnRef("B", "x"), 0)
    assert define("LAST(B.x, 3) > 0").left == Navigation("LAST", ColumnRef("B", "x"), 3)
    nested = define("PREV(LAST(B.x + 1, 1), 2) > 0").left
    assert nested == Navigation("PREV", Navigation(
        "LAST", BinaryOp("+", ColumnRef("B", "x"), Literal(1, "int")), 1), 2)


def test_running_final():
    assert measure("FINAL LAST(A.x)") == Navigation("LAST", ColumnRef("A", "x"), 0, "FINAL")
    assert measure("RUNNING FIRST(A.x, 1)") == Navigation("FIRST", ColumnRef("A", "x"), 1,
                                                          "RUNNING")
    nav = measure("PREV(FINAL LAST(A.x), 2)")
    assert nav == Navigation("PREV", Navigation("LAST", ColumnRef("A", "x"), 0, "FINAL"), 2)
    agg = measure("FINAL avg(B.x)")
    assert agg == Aggregate("avg", (ColumnRef("B", "x"),), "FINAL")
    sql = "SELECT * FROM t MATCH_RECOGNIZE (MEASURES FINAL LAST(A.x) AS m PATTERN (A))"
    assert spec_of(sql).measures[0].expr.pos == sql.index("FINAL")
    # a column named running stays a column
    assert measure("running + 1") == BinaryOp("+", ColumnRef(None, "running"), Literal(1, "int"))


def test_classifier_match_number():
    assert measure("CLASSIFIER()") == Classifier(None)
    assert measure("classifier(b)") == Classifier("B")
    assert measure("MATCH_NUMBER()") == MatchNumber()


def test_aggregates():
    assert measure("count(*)") == Aggregate("count", (), star_var="")
    assert measure("count(B.*)") == Aggregate("count", (), star_var="B")
    assert measure("COUNT(DISTINCT A.x)") == Aggregate("count", (ColumnRef("A", "x"),),
                                                       distinct=True)
    assert measure("sum(A.x * 2)") == Aggregate(
        "sum", (BinaryOp("*", ColumnRef("A", "x"), Literal(2, "int")),))
    for name in ("min", "max", "avg", "array_agg", "collect_list"):
        assert measure(f"{name}(C.x)") == Aggregate(name, (ColumnRef("C", "x"),))
    assert define("count(A.*) < 3 AND RUNNING sum(x) > 1") == BinaryOp(
        "AND", BinaryOp("<", Aggregate("count", (), star_var="A"), Literal(3, "int")),
        BinaryOp(">", Aggregate("sum", (ColumnRef(None, "x"),), "RUNNING"), Literal(1, "int")))


@pytest.mark.parametrize("text, expected", [
    ("1", Literal(1, "int")), ("1.5", Literal("1.5", "decimal")), ("2e3", Literal(2000.0, "double")),
    ("1.5D", Literal(1.5, "double")), ("10L", Cast(Literal(10, "int"), "bigint")), ("-3", Literal(-3, "int")),
    ("'abc'", Literal("abc", "string")), ("true", Literal(True, "bool")),
    ("NULL", Literal(None, "null")), ("DATE '2020-01-02'", Literal("2020-01-02", "date")),
    ("TIMESTAMP '2020-01-02 03:04:05'", Literal("2020-01-02 03:04:05", "timestamp")),
])
def test_literals(text, expected):
    assert measure(text) == expected


def test_operators():
    x, y = ColumnRef(None, "x"), ColumnRef(None, "y")
    assert define("x IS NULL") == IsNull(x)
    assert define("x IS NOT NULL") == IsNull(x, True)
    assert define("x IN (1, 2)") == InList(x, (Literal(1, "int"), Literal(2, "int")))
    assert define("x NOT IN (1)") == InList(x, (Literal(1, "int"),), True)
    assert define("x BETWEEN 1 AND y") == Between(x, Literal(1, "int"), y)
    assert define("x NOT BETWEEN 1 AND y") == Between(x, Literal(1, "int"), y, True)
    assert define("x LIKE 'a%'") == Like(x, Literal("a%", "string"))
    assert define("x NOT LIKE 'a%'") == Like(x, Literal("a%", "string"), True)
    assert define("NOT (x > 1 OR y <> 2)") == UnaryOp("NOT", BinaryOp(
        "OR", BinaryOp(">", x, Literal(1, "int")), BinaryOp("<>", y, Literal(2, "int"))))
    assert define("x / y % 2 = -y") == BinaryOp("=", BinaryOp("%", BinaryOp("/", x, y),
                                                              Literal(2, "int")), UnaryOp("-", y))
    assert measure("x || 'a'") == BinaryOp("||", x, Literal("a", "string"))
    assert measure("CAST(x AS double)") == Cast(x, "double")
    assert measure("CASE WHEN x > 1 THEN 'a' ELSE 'b' END") == Case(
        None, ((BinaryOp(">", x, Literal(1, "int")), Literal("a", "string")),),
        Literal("b", "string"))
    assert measure("CASE x WHEN 1 THEN 2 END") == Case(x, ((Literal(1, "int"), Literal(2, "int")),))
    assert measure("coalesce(A.x, 0)") == FunctionCall("coalesce", (ColumnRef("A", "x"),
                                                                    Literal(0, "int")))
    assert measure("Round(x, 2)") == FunctionCall("round", (x, Literal(2, "int")))


# --- clause sites -------------------------------------------------------------------------------
def site_texts(sql):
    return [(sql[s.start:s.end], s.source_text, s.source_is_query, s.alias)
            for s in find_match_recognize(sql)]


def test_site_plain_table_alias_as():
    sql = "SELECT * FROM ticks MATCH_RECOGNIZE (PATTERN (A)) AS m"
    assert site_texts(sql) == [("ticks MATCH_RECOGNIZE (PATTERN (A)) AS m", "ticks", False, "m")]


def test_site_qualified_and_backquoted_table_alias_without_as():
    sql = "SELECT * FROM db.ticks MATCH_RECOGNIZE (PATTERN (A)) m ORDER BY 1"
    assert site_texts(sql) == [("db.ticks MATCH_RECOGNIZE (PATTERN (A)) m", "db.ticks", False, "m")]
    sql = "SELECT * FROM `my db`.`my table` MATCH_RECOGNIZE (PATTERN (A))"
    site, = find_match_recognize(sql)
    assert site.source_text == "`my db`.`my table`" and site.alias is None
    assert sql[site.start:site.end] == sql[len("SELECT * FROM "):]
    assert sql[site.source_offset:].startswith("`my db`")


def test_site_no_alias_followed_by_where():
    sql = "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A)) WHERE x > 1"
    assert site_texts(sql) == [("t MATCH_RECOGNIZE (PATTERN (A))", "t", False, None)]


def test_site_subquery_source():
    sql = "SELECT * FROM (SELECT * FROM t WHERE a > 1) MATCH_RECOGNIZE (PATTERN (A)) r"
    site, = find_match_recognize(sql)
    assert site.start == sql.index("(SELECT")
    assert site.source_is_query and site.source_text == "SELECT * FROM t WHERE a > 1"
    assert sql[site.source_offset:].startswith("SELECT * FROM t WHERE")
    assert site.alias == "r" and site.end == len(sql)


def test_site_two_clauses_joined():
    sql = ("SELECT * FROM a MATCH_RECOGNIZE (PATTERN (X)) AS p "
           "JOIN b MATCH_RECOGNIZE (PATTERN (Y)) q ON p.k = q.k")
    assert site_texts(sql) == [("a MATCH_RECOGNIZE (PATTERN (X)) AS p", "a", False, "p"),
                               ("b MATCH_RECOGNIZE (PATTERN (Y)) q", "b", False, "q")]


def test_site_in_cte():
    sql = ("WITH m AS (SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A)) x) "
           "SELECT * FROM m WHERE 1 = 1")
    assert site_texts(sql) == [("t MATCH_RECOGNIZE (PATTERN (A)) x", "t", False, "x")]


def test_site_nested_in_source_subquery():
    sql = ("SELECT * FROM (SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A)) i) "
           "MATCH_RECOGNIZE (PATTERN (B)) o")
    outer, = find_match_recognize(sql)
    assert outer.alias == "o" and outer.spec.variables == ["B"]
    inner, = find_match_recognize(outer.source_text, offset=outer.source_offset, full_sql=sql)
    assert sql[inner.start:inner.end] == "t MATCH_RECOGNIZE (PATTERN (A)) i"
    assert inner.spec.pattern.pos == sql.index("(A)") + 1


def test_site_source_alias_skipped():
    sql = "SELECT * FROM ticks AS t MATCH_RECOGNIZE (PATTERN (A)) m"
    assert site_texts(sql) == [(sql[14:], "ticks", False, "m")]


def test_site_offsets_with_offset_argument():
    full = "xx; SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B) DEFINE C AS true)"
    with pytest.raises(CepAnalysisError) as info:
        find_match_recognize(full[4:], offset=4, full_sql=full)
    assert info.value.pos == full.index("C AS")
    assert info.value.sql == full


# --- errors with line:column ---------------------------------------------------------------------
def error_of(sql, kind=CepSyntaxError):
    with pytest.raises(kind) as info:
        find_match_recognize(sql)
    return info.value


def test_error_pattern_syntax():
    err = error_of("SELECT *\nFROM t MATCH_RECOGNIZE (\n  PATTERN (A | | B)\n)")
    assert (err.line, err.col) == (3, 16)
    assert "'|'" in err.message


def test_error_unknown_variable_in_define():
    err = error_of("SELECT * FROM t MATCH_RECOGNIZE (\n PATTERN (A B)\n DEFINE B AS B.x > Z.x)",
                   CepAnalysisError)
    assert (err.line, err.col) == (3, 20) and "unknown pattern variable Z" in err.message


def test_error_unknown_variable_in_measures():
    err = error_of("SELECT * FROM t MATCH_RECOGNIZE (\n MEASURES LAST(Q.x) AS q\n PATTERN (A))",
                   CepAnalysisError)
    assert (err.line, err.col) == (2, 16) and "Q" in err.message


def test_error_define_not_in_pattern_and_duplicate():
    err = error_of("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE B AS true)",
                   CepAnalysisError)
    assert (err.line, err.col) == (1, 53)
    err = error_of("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS true, A AS false)")
    assert (err.line, err.col) == (1, 64) and "duplicate" in err.message


def test_error_final_in_define():
    err = error_of("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B)\nDEFINE B AS FINAL LAST(A.x) > 0)",
                   CepAnalysisError)
    assert (err.line, err.col) == (2, 13) and "FINAL" in err.message
    err = error_of("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A)\nDEFINE A AS FINAL sum(A.x) > 0)",
                   CepAnalysisError)
    assert (err.line, err.col) == (2, 13)


def test_error_bad_quantifier_bounds():
    err = error_of("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A{4,2}))")
    assert (err.line, err.col) == (1, 44) and "exceeds" in err.message


def test_error_unterminated_clause():
    err = error_of("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS x > 1")
    assert (err.line, err.col) == (1, 33) and "not terminated" in err.message


def test_error_unterminated_string():
    err = error_of("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A)\nDEFINE A AS x = 'abc)")
    assert (err.line, err.col) == (2, 17) and "unterminated string" in err.message


def test_error_expression_syntax_shows_token():
    sql = "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B) DEFINE A AS x > 1 B AS y)"
    err = error_of(sql)
    assert err.pos == sql.index("B AS") and err.col == 66 and "'B'" in err.message
    sql = "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS x > )"
    err = error_of(sql)
    assert err.pos == len(sql) - 1 and err.col == 62 and "incomplete expression" in err.message


def test_error_clause_order_and_missing_pattern():
    err = error_of("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts DEFINE A AS true)")
    assert (err.line, err.col) == (1, 46) and "expected PATTERN" in err.message


def test_error_measure_without_name():
    err = error_of("SELECT * FROM t MATCH_RECOGNIZE (MEASURES A.x + 1 PATTERN (A))")
    assert (err.line, err.col) == (1, 43) and "AS <name>" in err.message


@pytest.mark.parametrize("body, kind, fragment", [
    ("PATTERN (A B) SUBSET A = (B)", CepAnalysisError, "already a pattern variable"),
    ("PATTERN (A B) SUBSET U = (A, Z)", CepAnalysisError, "Z"),
    ("AFTER MATCH SKIP TO FIRST Z PATTERN (A)", CepAnalysisError, "unknown pattern variable Z"),
    ("PATTERN (A B) DEFINE A AS PREV(NEXT(A.x)) > 0", CepAnalysisError, "nested"),
    ("PATTERN (A B) DEFINE A AS PREV(A.x + B.x) > 0", CepAnalysisError, "same pattern variable"),
    ("PATTERN (A B) DEFINE A AS sum(A.x + B.x) > 0", CepAnalysisError, "same pattern variable"),
    ("PATTERN (A B) DEFINE A AS sum(PREV(A.x)) > 0", CepAnalysisError, "nested"),
    ("PATTERN (A) DEFINE A AS count(Z.*) > 0", CepAnalysisError, "Z"),
    ("PATTERN (A) DEFINE A AS RUNNING upper(x) = 'a'", CepAnalysisError, "RUNNING"),
    ("PATTERN (A) DEFINE A AS PREV(x, y) > 0", CepAnalysisError, "integer constant"),
    ("PARTITION BY A.x PATTERN (A)", CepAnalysisError, "PARTITION BY"),
    ("ORDER BY PREV(ts) PATTERN (A)", CepAnalysisError, "ORDER BY"),
    ("PATTERN (A) DEFINE A AS EXISTS (SELECT 1)", CepUnsupportedError, "subqueries"),
    ("MEASURES A.x AS m, A.y AS M PATTERN (A)", CepSyntaxError, "duplicate measure"),
])
def test_semantic_errors(body, kind, fragment):
    err = error_of(f"SELECT * FROM t MATCH_RECOGNIZE ({body})", kind)
    assert fragment in err.message and err.line == 1


# --- statements -----------------------------------------------------------------------------
def test_split_statements_strings_and_comments():
    script = ("SELECT 'a;b' AS x;  -- c;d\n"
              "SELECT \"q;\" /* ; /* nested ; */ ; */ FROM `t;`;\n"
              ";  ;\n-- only a comment;\n"
              "SELECT 'it\\'s;' ")
    parts = split_statements(script)
    assert [p[0] for p in parts] == [
        "SELECT 'a;b' AS x",
        "-- c;d\nSELECT \"q;\" /* ; /* nested ; */ ; */ FROM `t;`",
        "-- only a comment;\nSELECT 'it\\'s;'"]
    for text, offset in parts:
        assert script[offset:offset + len(text)] == text


def test_parse_create_view():
    stmt = "CREATE OR REPLACE TEMPORARY VIEW rising AS SELECT * FROM t"
    view = parse_create_view(stmt)
    assert (view.name, view.or_replace, view.if_not_exists) == ("rising", True, False)
    assert view.query_text == "SELECT * FROM t" and stmt[view.query_offset:] == view.query_text
    view = parse_create_view("create temp view if not exists `v 1` as\n  select 1")
    assert (view.name, view.or_replace, view.if_not_exists, view.query_text) == (
        "v 1", False, True, "select 1")
    assert parse_create_view("CREATE TABLE x AS SELECT 1") is None
    assert parse_create_view("SELECT 1") is None
    with pytest.raises(CepSyntaxError):
        parse_create_view("CREATE TEMPORARY VIEW v SELECT 1")


def test_parse_drop_view_and_explain():
    assert parse_drop_view("DROP VIEW IF EXISTS rising") == ("rising", True)
    assert parse_drop_view("drop view v") == ("v", False)
    assert parse_drop_view("DROP TABLE v") is None
    stmt = "EXPLAIN  SELECT * FROM t"
    assert parse_explain(stmt) == ("SELECT * FROM t", 9)
    assert parse_explain("EXPLAIN EXTENDED SELECT 1") == ("SELECT 1", 17)
    assert parse_explain("SELECT 1") is None
    assert parse_explain("/* c */ explain\n-- x\nSELECT 2") == ("SELECT 2", 21)


def test_parse_clause_body():
    spec = parse_clause_body("MEASURES LAST(B.p) AS lp ALL ROWS PER MATCH PATTERN (A B+) "
                             "DEFINE B AS B.p > PREV(B.p)",
                             partition_by=["sym"], order_by=["ts DESC", "id"])
    assert [k.name for k in spec.partition_by] == ["sym"]
    assert [(k.expr, k.ascending) for k in spec.order_by] == [
        (ColumnRef(None, "ts"), False), (ColumnRef(None, "id"), True)]
    assert spec.rows_per_match == "ALL" and spec.variables == ["A", "B"]
    with pytest.raises(CepAnalysisError) as info:
        parse_clause_body("PATTERN (A) DEFINE A AS Q.x > 0")
    assert info.value.col == 25
    with pytest.raises(CepSyntaxError):
        parse_clause_body("PATTERN (A) DEFINE A AS x > 0)")
