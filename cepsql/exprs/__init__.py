"""Backend renderings of the expression IR: Spark SQL text and vectorised Arrow evaluation.

Both must give the same values for the same IR, so the Spark and local backends agree."""
from cepsql.exprs.spark_sql import quote_identifier, to_spark_sql  # noqa: F401
