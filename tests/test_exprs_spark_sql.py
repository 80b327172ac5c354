"""Rendering of the expression IR as Spark SQL text (no Spark needed)."""
import pytest

from cepsql.algebra.expressions import (Aggregate, Between, BinaryOp, Case, Cast, ColumnRef,
                                        FunctionCall, InList, IsNull, Like, Literal, MatchNumber,
                                        Navigation, UnaryOp)
from cepsql.errors import CepUnsupportedError
from cepsql.exprs.spark_sql import to_spark_sql


def col(name):
    return ColumnRef(None, name)


def test_identifiers_are_backquoted_and_escaped():
    assert to_spark_sql(col("price")) == "`price`"
    assert to_spark_sql(col("we`ird name")) == "`we``ird name`"


def test_string_literals_are_escaped():
    assert to_spark_sql(Literal("it's", "string")) == r"'it\'s'"
    assert to_spark_sql(Literal("a\\b", "string")) == r"'a\\b'"


@pytest.mark.parametrize("lit, text", [
    (Literal(5, "int"), "5"), (Literal(-5, "int"), "(-5)"), (Literal(2**40, "int"), f"{2**40}L"),
    (Literal(1.5, "double"), "1.5D"), (Literal(-0.25, "double"), "(-0.25D)"),
    (Literal("1.50", "decimal"), "(1.50BD)"), (Literal(True, "bool"), "TRUE"),
    (Literal(None, "null"), "NULL"), (Literal("2020-01-02", "date"), "DATE '2020-01-02'"),
    (Literal("2020-01-02 03:04:05", "timestamp"), "TIMESTAMP '2020-01-02 03:04:05'"),
    (Literal(float("nan"), "double"), "CAST('NaN' AS DOUBLE)"),
])
def test_literals(lit, text):
    assert to_spark_sql(lit) == text


def test_compound_nodes():
    x = col("x")
    assert to_spark_sql(BinaryOp("+", x, Literal(1, "int"))) == "(`x` + 1)"
    assert to_spark_sql(BinaryOp("/", x, Literal(2, "int"))) == \
        "try_divide(`x`, 2)"
    assert to_spark_sql(UnaryOp("NOT", IsNull(x, negated=True))) == "(NOT (`x` IS NOT NULL))"
    assert to_spark_sql(InList(x, (Literal(1, "int"), Literal(2, "int")), negated=True)) == \
        "(`x` NOT IN (1, 2))"
    assert to_spark_sql(Between(x, Literal(1, "int"), Literal(2, "int"))) == \
        "(`x` BETWEEN 1 AND 2)"
    assert to_spark_sql(Like(col("s"), Literal("a%", "string"))) == "(`s` LIKE 'a%')"
    assert to_spark_sql(Case(None, ((IsNull(x), Literal(0, "int")),), x)) == \
        "(CASE WHEN (`x` IS NULL) THEN 0 ELSE `x` END)"
    assert to_spark_sql(Cast(x, "decimal(10, 2)")) == "CAST(`x` AS decimal(10, 2))"
    assert to_spark_sql(FunctionCall("coalesce", (x, Literal(0, "int")))) == "coalesce(`x`, 0)"


@pytest.mark.parametrize("expr", [
    ColumnRef("A", "price"),
    Navigation("PREV", col("x")),
    MatchNumber(),
    Aggregate("sum", (col("x"),)),
    FunctionCall("evil(1); drop", ()),
    Cast(col("x"), "int) FROM t --"),
    Literal("1; DROP", "decimal"),
    BinaryOp("^", col("x"), col("y")),
])
def test_rejected(expr):
    with pytest.raises(CepUnsupportedError):
        to_spark_sql(expr)
