"""Arrow evaluation of the expression IR, alone and against Spark on the same IR."""
import datetime
import math
from decimal import Decimal

import pyarrow as pa
import pytest

from cepsql.algebra import types as T
from cepsql.algebra.expressions import (Between, BinaryOp, Case, Cast, ColumnRef, FunctionCall,
                                        InList, IsNull, Like, Literal, Navigation, UnaryOp)
from cepsql.errors import CepAnalysisError, CepRuntimeError, CepUnsupportedError
from cepsql.exprs.arrow_eval import evaluate_arrow
from cepsql.exprs.spark_sql import to_spark_sql


def c(name):
    return ColumnRef(None, name)


def i(v):
    return Literal(v, "int")


def f(v):
    return Literal(v, "double")


def s(v):
    return Literal(v, "string")


def fn(name, *args):
    return FunctionCall(name, tuple(args))


def op(o, a, b):
    return BinaryOp(o, a, b)


NULL = Literal(None, "null")

TABLE = pa.table({
    "i": pa.array([1, 2, None, 4, -3], pa.int32()),
    "l": pa.array([10, 2, 5, None, -3], pa.int64()),
    "d": pa.array([1.45, 2.5, None, -2.7, 0.25]),
    "s": pa.array(["abc", "b", None, "xbc", "Ab"]),
    "t": pa.array([" pad ", "x", None, "  ", "y "]),
    "n": pa.array(["12", " 7 ", None, "-3", "0"]),
    "b": pa.array([True, False, None, True, None]),
    "dt": pa.array([datetime.date(2020, 1, 31), datetime.date(2021, 12, 1), None,
                    datetime.date(1999, 6, 15), datetime.date(2000, 2, 29)]),
    "ts": pa.array([datetime.datetime(2020, 1, 31, 13, 45, 7), None,
                    datetime.datetime(2021, 1, 1, 0, 0, 59), datetime.datetime(1999, 6, 15, 23, 5),
                    datetime.datetime(2000, 2, 29, 7, 30)], pa.timestamp("us", tz="UTC")),
    "dec": pa.array([Decimal("1.25"), Decimal("-2.35"), None, Decimal("0.05"), Decimal("10.00")],
                    pa.decimal128(5, 2)),
})

EXPRESSIONS = [
    op("+", c("i"), i(1)), op("-", c("l"), c("i")), op("*", c("i"), i(2)), op("+", c("d"), c("i")),
    op("/", c("i"), i(2)), op("/", c("i"), i(0)), op("/", c("d"), f(0.0)), op("%", c("i"), i(3)),
    op("%", i(-7), i(3)), op("%", c("l"), c("i")), op("%", c("d"), f(2.0)), op("%", c("i"), i(0)),
    UnaryOp("-", c("i")), op("+", c("dec"), c("i")),
    op(">", c("i"), i(2)), op("=", c("i"), c("l")), op(">=", c("d"), f(1.5)),
    op("=", c("s"), s("b")), op("<>", c("s"), s("b")), op("<", c("i"), c("d")),
    op("AND", op(">", c("i"), i(1)), c("b")), op("OR", op(">", c("i"), i(1)), c("b")),
    UnaryOp("NOT", c("b")), op("AND", c("b"), NULL),
    IsNull(c("i")), IsNull(c("s"), negated=True),
    InList(c("i"), (i(1), i(3), NULL)), InList(c("i"), (i(1), i(2)), negated=True),
    InList(c("s"), (s("abc"), s("Ab"))),
    Between(c("i"), i(1), i(3)), Between(c("d"), i(0), i(2), negated=True),
    Like(c("s"), s("a%")), Like(c("s"), s("_b%")), Like(c("s"), s("%c"), negated=True),
    Case(None, ((op(">", c("i"), i(2)), s("big")), (op(">", c("i"), i(0)), s("small")))),
    Case(c("i"), ((i(1), c("d")),), i(0)),
    Cast(c("i"), "double"), Cast(c("d"), "int"), Cast(c("n"), "int"), Cast(c("i"), "string"),
    Cast(c("dec"), "double"), Cast(c("i"), "decimal(10,2)"), Cast(c("ts"), "date"),
    op("||", c("s"), s("x")), fn("concat", c("s"), s("-"), c("i")),
    fn("abs", c("i")), fn("round", c("d"), i(1)), fn("round", f(2.675), i(2)),
    fn("round", c("l"), i(-1)), fn("round", c("dec"), i(1)), fn("round", c("d")),
    fn("floor", c("d")), fn("ceil", c("d")), fn("ceil", c("i")), fn("sqrt", fn("abs", c("d"))),
    fn("exp", i(0)), fn("ln", c("i")), fn("log10", i(100)), fn("power", i(2), c("i")),
    fn("greatest", c("i"), c("l"), i(2)), fn("least", c("d"), c("i")), fn("coalesce", c("i"), c("l")),
    fn("nvl", c("s"), s("z")), fn("ifnull", c("d"), i(0)),
    fn("upper", c("s")), fn("lower", c("s")), fn("length", c("s")), fn("substr", c("s"), i(2)),
    fn("substr", c("s"), i(-2), i(1)), fn("substring", c("s"), i(0), i(2)),
    fn("substr", c("s"), i(-5), i(3)), fn("trim", c("t")), fn("if", op(">", c("i"), i(1)), s("y"), s("n")),
    fn("year", c("dt")), fn("month", c("dt")), fn("day", c("dt")), fn("hour", c("ts")),
    fn("minute", c("ts")),
    op("=", c("dt"), s("2020-01-31")), op("=", c("s"), s("it's \\ \"q\"")),
]


def test_arrow_matches_spark(spark):
    df = spark.createDataFrame(TABLE)
    rows = df.selectExpr(*[f"{to_spark_sql(e)} AS c{k}" for k, e in enumerate(EXPRESSIONS)]) \
        .collect()
    mismatches = []
    for k, e in enumerate(EXPRESSIONS):
        expected = [r[k] for r in rows]
        try:
            got = evaluate_arrow(e, TABLE).to_pylist()
        except Exception as exc:  # report every mismatch at once
            got = [repr(exc)]
        if len(got) != len(expected) or not all(
                (x is None and y is None) or (x is not None and y is not None and
                                              (x == y or (isinstance(x, float) and isinstance(y, float)
                                                          and math.isnan(x) and math.isnan(y))))
                for x, y in zip(got, expected)):
            mismatches.append((to_spark_sql(e), got, expected))
    assert not mismatches, "\n".join(map(str, mismatches))


def test_three_valued_logic_and_null_division():
    t = pa.table({"x": pa.array([True, False, None])})
    assert evaluate_arrow(op("AND", c("x"), NULL), t).to_pylist() == [None, False, None]
    assert evaluate_arrow(op("OR", c("x"), NULL), t).to_pylist() == [True, None, None]
    t = pa.table({"a": [7, -7, 1], "b": [2, 2, 0]})
    assert evaluate_arrow(op("/", c("a"), c("b")), t).to_pylist() == [3.5, -3.5, None]
    assert evaluate_arrow(op("%", c("a"), c("b")), t).to_pylist() == [1, -1, None]


def test_scalar_expression_is_broadcast():
    t = pa.table({"x": [1, 2, 3]})
    assert evaluate_arrow(op("+", i(1), i(2)), t).to_pylist() == [3, 3, 3]


def test_like_with_column_pattern():
    t = pa.table({"s": ["abc", "xyz", None], "p": ["a%", "a%", "%"]})
    assert evaluate_arrow(Like(c("s"), c("p")), t).to_pylist() == [True, False, None]


def test_overflow_is_a_runtime_error():
    t = pa.table({"x": pa.array([2**31 - 1], pa.int32())})
    with pytest.raises(CepRuntimeError):
        evaluate_arrow(op("+", c("x"), i(1)), t)


def test_errors_name_the_problem():
    t = pa.table({"x": [1]})
    with pytest.raises(CepUnsupportedError, match="frobnicate"):
        evaluate_arrow(fn("frobnicate", c("x")), t)
    with pytest.raises(CepAnalysisError, match="nope"):
        evaluate_arrow(c("nope"), t)
    with pytest.raises(CepUnsupportedError):
        evaluate_arrow(Navigation("PREV", c("x")), t)
    assert evaluate_arrow(c("X"), t).to_pylist() == [1]  # case-insensitive like Spark


@pytest.mark.parametrize("ansi", [True, False])
def test_widening_follows_the_vm_type_rules(ansi):
    """CASE/COALESCE widen by algebra.types (Spark's TypeCoercion / AnsiTypeCoercion and
    widerDecimalType), the rules the condition VM compiles with: FLOAT meets an integer
    at FLOAT only without ANSI, two decimals at max(range) + max(scale) digits (no extra
    digit as for +), 38-digit decimals give up scale."""
    cols = {"f": pa.array([1.5], pa.float32()), "i": pa.array([2], pa.int32()),
            "d52": pa.array([Decimal("1.25")], pa.decimal128(5, 2)),
            "d63": pa.array([Decimal("1.125")], pa.decimal128(6, 3)),
            "w20": pa.array([Decimal("1." + "0" * 20)], pa.decimal128(38, 20)),
            "w19": pa.array([Decimal("1." + "0" * 19)], pa.decimal128(38, 19)),
            "b": pa.array([3], pa.int64())}
    t = pa.table(cols)
    for x, y in [("f", "i"), ("f", "d52"), ("i", "d52"), ("d52", "d63"), ("w20", "w19"),
                 ("b", "d52"), ("i", "b")]:
        want = T.to_arrow(T.common_type([T.of_arrow(cols[x].type), T.of_arrow(cols[y].type)], ansi))
        got = evaluate_arrow(fn("coalesce", c(x), c(y)), t, ansi=ansi).type
        assert got == want, (x, y, got, want)
    assert evaluate_arrow(fn("coalesce", c("f"), c("i")), t, ansi=ansi).type == (
        pa.float64() if ansi else pa.float32())
    assert evaluate_arrow(fn("coalesce", c("d52"), c("d63")), t, ansi=ansi).type == pa.decimal128(6, 3)
    assert evaluate_arrow(fn("coalesce", c("w20"), c("w19")), t, ansi=ansi).type == pa.decimal128(38, 19)
