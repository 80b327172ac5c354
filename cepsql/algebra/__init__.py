"""Normalized pattern algebra: pattern AST, expression trees, the query spec."""
from .expressions import *  # noqa: F401,F403
from .pattern import *  # noqa: F401,F403
from .spec import *  # noqa: F401,F403
