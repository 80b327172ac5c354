"""The sizes of user input cepsql accepts, stated once, and the recursion budget that
lets the recursive passes over a clause's trees reach them.

Nesting: Spark has no fixed nesting limit, its parser and analyzer simply overflow the
JVM stack. Measured with plain ``spark.sql`` on Spark 4.3 (default driver stack): nested
parentheses parse up to 311 in a SELECT list and 499 in a WHERE, a chain of ``+`` up to
593 terms, a chain of AND-ed conjuncts up to 1,322 (1,323 overflows in the optimizer).
cepsql accepts the same depths (MAX_PAREN_NESTING, MAX_EXPRESSION_DEPTH) and refuses
deeper text with a positioned CepSyntaxError instead of an overflow.

Recursion: the parser (sqlglot's recursive descent takes about 16 Python frames per
parenthesis) and every later pass over the expression and pattern trees are recursive.
Rewriting them all as explicit-stack walks would touch every stage; instead the front
end's entry point calls ``ensure_recursion_budget()``, which raises the interpreter's
limit once to a budget that covers the accepted depths. The limit is only ever raised,
never lowered again, so concurrent statements in threads cannot shrink it under each
other, and the later stages (analysis, compilation, rendering, the Arrow evaluator)
run under the same budget in the same process. Python 3.11+ runs Python-to-Python
calls without growing the C stack, so the larger limit costs nothing until used.
"""
from __future__ import annotations

import sys

__all__ = ["MAX_PAREN_NESTING", "MAX_EXPRESSION_DEPTH", "MAX_QUANTIFIER_BOUND",
           "MAX_NAVIGATION_OFFSET", "MAX_INT64", "RECURSION_BUDGET", "ensure_recursion_budget"]

MAX_PAREN_NESTING = 500       # Spark: 312 nested parentheses overflow in SELECT, 500 in WHERE
MAX_EXPRESSION_DEPTH = 1_500  # Spark: 1,323 AND-ed conjuncts overflow its optimizer
# Quantifier bounds ({n,m}, KL(p, n, m)) in both modes: the SQL:2016 matcher unrolls a
# bounded repetition into instructions (at most 200,000), the CEP evaluator counts in int32;
# one rule for both modes, refused at the number as written.
MAX_QUANTIFIER_BOUND = 100_000
# PREV/NEXT/FIRST/LAST offsets: row positions are int32 in the evaluators, and a row index
# plus an offset must not overflow.
MAX_NAVIGATION_OFFSET = 2**30
MAX_INT64 = 2**63 - 1         # Spark's day-time intervals are int64 microseconds
RECURSION_BUDGET = 30_000     # frames: MAX_PAREN_NESTING * ~16 (sqlglot) + later passes


def ensure_recursion_budget() -> None:
    """Raise the interpreter's recursion limit to RECURSION_BUDGET (never lowers it)."""
    if sys.getrecursionlimit() < RECURSION_BUDGET:
        sys.setrecursionlimit(RECURSION_BUDGET)

