"""What users call: ``spark.cep`` (the session extension) and the ``cepsql`` command line.

The top of the pipeline: may import the backends and every stage."""
