"""Backend renderings of the expression IR: Spark SQL text and vectorised Arrow evaluation
(with the in-process ANSI setting it follows, ``exprs.ansi``).

Both must give the same values for the same IR, so the Spark and local backends agree.
May import ``algebra`` and ``errors`` only."""
from cepsql.exprs.spark_sql import quote_identifier, to_spark_sql  # noqa: F401
