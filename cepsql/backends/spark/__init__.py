"""Spark backend: session extension (``spark.cep``), statement rewriting, plan execution.

Importing this package does not import pyspark; ``splice`` is shared with the local backend."""
