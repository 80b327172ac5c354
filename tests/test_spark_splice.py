"""Statement rewriting as text (no Spark): sources, CTEs, aliases, nesting."""
from cepsql.parse.splice import (is_select_star_from, rewrite_text, scan_ctes, strip_parens)


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, site, source):
        self.calls.append((site, source))
        return f"v{len(self.calls)}"


def test_alias_and_no_alias(fake_finder):
    rec = Recorder()
    sql = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY x) AS m WHERE m.x > 1"
    assert rewrite_text(sql, rec, fake_finder) == "SELECT * FROM `v1` AS `m` WHERE m.x > 1"
    assert rec.calls[0][1].table == "t"
    rec = Recorder()
    sql = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY x) WHERE x > 1"
    assert rewrite_text(sql, rec, fake_finder) == "SELECT * FROM `v1` WHERE x > 1"
    rec = Recorder()
    assert rewrite_text("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY x) m", rec, fake_finder) == \
        "SELECT * FROM `v1` AS `m`"


def test_no_clause_is_unchanged(fake_finder):
    sql = "SELECT 'MATCH_RECOGNIZE (' FROM t"
    assert rewrite_text(sql, Recorder(), fake_finder) == sql


def test_join_of_two_clauses(fake_finder):
    rec = Recorder()
    sql = ("SELECT * FROM a MATCH_RECOGNIZE (ORDER BY x) AS p "
           "JOIN `b b` MATCH_RECOGNIZE (ORDER BY y) AS q ON p.k = q.k")
    assert rewrite_text(sql, rec, fake_finder) == "SELECT * FROM `v1` AS `p` JOIN `v2` AS `q` ON p.k = q.k"
    assert [s.table for _, s in rec.calls] == ["a", "`b b`"]


def test_subquery_source_with_nested_clause(fake_finder):
    rec = Recorder()
    sql = ("SELECT * FROM (SELECT * FROM t MATCH_RECOGNIZE (ORDER BY x) AS i WHERE rn = 1) "
           "MATCH_RECOGNIZE (ORDER BY y) AS o")
    assert rewrite_text(sql, rec, fake_finder) == "SELECT * FROM `v2` AS `o`"
    (inner_site, inner_src), (outer_site, outer_src) = rec.calls
    assert inner_src.table == "t"
    assert outer_src.sql == "SELECT * FROM (SELECT * FROM `v1` AS `i` WHERE rn = 1) AS `__cep_src`"
    # positions of nested sites are reported in the full statement
    assert sql[inner_site.source_offset:].startswith("t MATCH_RECOGNIZE")


def test_cte_sources(fake_finder):
    rec = Recorder()
    sql = ("WITH c AS (SELECT * FROM t WHERE x > 0), "
           "d AS (SELECT * FROM c MATCH_RECOGNIZE (ORDER BY x) m) "
           "SELECT * FROM d MATCH_RECOGNIZE (ORDER BY x) AS n")
    out = rewrite_text(sql, rec, fake_finder)
    assert out == ("WITH c AS (SELECT * FROM t WHERE x > 0), d AS (SELECT * FROM `v1` AS `m`) "
                   "SELECT * FROM `v2` AS `n`")
    first, second = rec.calls[0][1], rec.calls[1][1]
    assert first.sql == ("WITH c AS (SELECT * FROM t WHERE x > 0) SELECT * FROM "
                         "(SELECT * FROM c) AS `__cep_src`")
    assert second.sql.startswith("WITH c AS (SELECT * FROM t WHERE x > 0), "
                                 "d AS (SELECT * FROM `v1` AS `m`) SELECT * FROM (SELECT * FROM d)")


def test_subquery_source_sees_ctes(fake_finder):
    rec = Recorder()
    sql = "WITH c AS (SELECT 1 AS x) SELECT * FROM (SELECT * FROM C) MATCH_RECOGNIZE (ORDER BY x)"
    rewrite_text(sql, rec, fake_finder)
    assert rec.calls[0][1].sql.startswith("WITH c AS (SELECT 1 AS x) SELECT * FROM (SELECT * FROM (")


def test_helpers():
    assert [n for n, _, _ in scan_ctes("with `A b`(x) as (select ')') , c as (select 1) select 2")] \
        == ["a b", "c"]
    assert scan_ctes("SELECT 1") == []
    assert strip_parens("  ((SELECT 1))  ") == ("SELECT 1", 4)
    assert strip_parens("(SELECT 1) UNION (SELECT 2)")[0] == "(SELECT 1) UNION (SELECT 2)"
    sql = "SELECT * FROM t MATCH_RECOGNIZE (x) m ;"
    assert is_select_star_from(sql, 14, 37)
    assert not is_select_star_from("SELECT a FROM t MATCH_RECOGNIZE (x) m", 14, 37)
