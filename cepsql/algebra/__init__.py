"""Normalized pattern algebra: pattern AST, expression trees, the query spec."""
from cepsql.algebra.expressions import *  # noqa: F401,F403
from cepsql.algebra.pattern import *  # noqa: F401,F403
from cepsql.algebra.spec import *  # noqa: F401,F403
