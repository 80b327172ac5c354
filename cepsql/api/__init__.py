"""What users call: ``spark.cep`` (session.py: the session extension, CepSession) and the
``cepsql`` command line (cli.py); ``cepsql.match_recognize`` and ``cepsql.workload`` are
the local backend's, named in cepsql/__init__.py.

The top of the pipeline: may import the backends and every stage. It is the one place
where the batch and the streaming paths meet: session.py hands the Spark backend the
streaming backend's entry points (``STREAMING``), as the backends never import each other."""
