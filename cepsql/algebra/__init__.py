"""Algebra: the normalized query every stage consumes -- the pattern tree (and its
traversal), the expression IR with its row references, the MATCH_RECOGNIZE spec and the
Spark type rules. Independent of any parser, planner or backend: imports nothing of
cepsql but ``errors``."""
from cepsql.algebra.expressions import *  # noqa: F401,F403
from cepsql.algebra.pattern import *  # noqa: F401,F403
from cepsql.algebra.spec import *  # noqa: F401,F403
