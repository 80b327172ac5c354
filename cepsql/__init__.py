"""cepsql: SQL:2016 MATCH_RECOGNIZE and complex event processing for Apache Spark.

``import cepsql`` gives every SparkSession a ``cep`` property (``spark.cep.sql(...)``);
``cepsql.match_recognize(sql, **tables)`` runs the same SQL in-process without Spark.
Importing never starts a JVM.
"""
from __future__ import annotations

import os as _os

from cepsql import errors
from cepsql.errors import (CepAnalysisError, CepEnvironmentError, CepError, CepRuntimeError,
                     CepSyntaxError, CepUnsupportedError)
from cepsql.backends.spark.environment import ensure_environment, require_java

__version__ = "0.1.0"

# A Spark Python worker (the JVM's worker factory sets this variable) only unpickles and
# runs evaluators: it skips the driver-side setup below and imports the public functions
# on first use, which saves every worker process seconds of imports (pandas, Spark
# Connect, sqlglot, DuckDB) before its first task.
_IN_SPARK_WORKER = "PYTHON_WORKER_FACTORY_SECRET" in _os.environ
_LAZY = {"match_recognize": ".backends.local.engine", "workload": ".backends.local.workload",
         "plot_matches": ".plot", "plot_trace": ".plot", "trace": ".debugging.local",
         "near_misses": ".debugging.local", "PlannerOptions": ".planning.options",
         "planner_options": ".planning.options", "CepSession": ".api.session"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if not _IN_SPARK_WORKER:
    ensure_environment()
    from cepsql.backends.local.engine import match_recognize  # noqa: E402
    from cepsql.backends.local.workload import workload  # noqa: E402, F401  (public API)
    from cepsql.plot import plot_matches, plot_trace  # noqa: E402  (matplotlib on first use)
    from cepsql.debugging.local import near_misses, trace  # noqa: E402, F401  (public API)
    from cepsql.planning.options import PlannerOptions, planner_options  # noqa: E402
    from cepsql.api.session import CepSession  # noqa: E402
    # cepsql.explain_query(query, analyze=..., **tables): EXPLAIN [ANALYZE] in-process
    # (not "explain": that name is the cepsql/explain/ package's)
    from cepsql.backends.local.explain import explain_query  # noqa: E402


def _attach_all() -> None:
    from pyspark.sql import SparkSession

    from cepsql.api.session import attach as _attach
    _attach(SparkSession)
    import importlib.util
    if importlib.util.find_spec("grpc") is None:  # Spark Connect not installed
        return
    try:  # its import checks optional dependencies (and may even sys.exit under -c)
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except (Exception, SystemExit):
        return
    _attach(ConnectSession)


if not _IN_SPARK_WORKER:
    _attach_all()
    from cepsql.backends.spark.quiet_errors import install as _install_quiet_errors  # noqa: E402
    _install_quiet_errors()


def _install_error_hook() -> None:
    """CepErrors raised inside Spark tasks surface as themselves on any action."""
    from cepsql.backends.spark.task_errors import install_error_hook
    install_error_hook()


if not _IN_SPARK_WORKER:
    _install_error_hook()


def register(spark) -> None:
    """Register the SQL table functions ``cep_match`` and ``cep_view`` on ``spark`` so that
    plain ``spark.sql`` can call them (done automatically for the session active at
    ``import cepsql`` and on first use of ``spark.cep``). Through ``spark.cep.sql`` the
    same calls run batch-based; see cepsql/backends/spark/table_function.py."""
    from cepsql.backends.spark.tf_plain import register as _register
    _register(spark)


def _register_active() -> None:
    """At import: register on the already running session, if any (never starts one)."""
    from pyspark.sql import SparkSession
    from cepsql.api.session import register_quietly
    try:
        spark = SparkSession.getActiveSession()
    except Exception:  # pragma: no cover - broken or remote-only environments
        return
    if spark is not None:
        register_quietly(spark)


if not _IN_SPARK_WORKER:
    _register_active()


def get_session(master: str | None = None, conf: dict | None = None):
    """A SparkSession for local use: app name cepsql, ``local[*]``, shuffle partitions
    = 2 x cores, Arrow enabled; ``conf`` entries override these defaults."""
    import os

    from pyspark.sql import SparkSession
    require_java()
    settings = {
        "spark.sql.shuffle.partitions": str(2 * (os.cpu_count() or 1)),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # progress bars would interleave with printed results (show(), EXPLAIN)
        "spark.ui.showConsoleProgress": "false",
    }
    settings.update({k: str(v) for k, v in (conf or {}).items()})
    _quiet_logging(settings)
    builder = SparkSession.builder.appName("cepsql").master(master or "local[*]")
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    from cepsql.api.session import register_quietly
    register_quietly(session)
    return session


def _quiet_logging(settings: dict[str, str]) -> None:
    """Point a JVM that this call starts at cepsql's console logging (Spark's defaults
    minus lines the user did not cause), unless the caller configures log4j already.
    A running JVM keeps its configuration: then this has no effect."""
    from importlib.resources import files
    key = "spark.driver.extraJavaOptions"
    options = settings.get(key, "")
    if "log4j2.configurationFile" in options or "log4j.configuration" in options:
        return
    path = files("cepsql.conf").joinpath("log4j2.properties")
    settings[key] = f"{options} -Dlog4j2.configurationFile=file:{path}".strip()


__all__ = ["__version__", "errors", "match_recognize", "explain_query", "plot_matches",
           "plot_trace", "trace", "near_misses", "planner_options", "PlannerOptions",
           "get_session", "register", "CepSession",
           "CepError",
           "CepSyntaxError", "CepAnalysisError", "CepUnsupportedError", "CepRuntimeError",
           "CepEnvironmentError", "ensure_environment", "require_java"]
