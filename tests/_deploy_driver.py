"""Run the core queries (tests/support/deploy_queries.py) on one deployment and print the
results as JSON on the last line of stdout. Usage: python _deploy_driver.py connect|cluster

connect: a real local Spark Connect server started by pyspark (``remote("local[2]")``);
cluster: ``local-cluster[2,1,1024]`` — a standalone master and two workers, each executor
its own JVM with its own Python workers, so plans are serialized and cepsql (with its
Cython extension) is imported on separate processes, as on a cluster."""
from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, HERE]
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def session(mode: str):
    from pyspark.sql import SparkSession
    conf = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
            "spark.sql.session.timeZone": "UTC", "spark.driver.memory": "512m"}
    builder = SparkSession.builder.appName(f"cepsql-{mode}")
    if mode == "connect":  # Spark's default 200 shuffle partitions, as users run it
        builder = builder.remote("local[2]")
    else:
        conf["spark.sql.shuffle.partitions"] = "2"
    if mode == "cluster":
        builder = (builder.master("local-cluster[2,1,1024]")
                   .config("spark.executor.memory", "512m")
                   .config("spark.task.maxFailures", "1"))  # the failing query: no retries
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def worker_processes(spark) -> list[list]:
    """(python worker pid, its parent pid, where it imported cepsql from) per partition."""
    def probe(batches):
        import pyarrow as pa

        import cepsql
        for _ in batches:
            pass
        yield pa.RecordBatch.from_pydict({"pid": [os.getpid()], "parent": [os.getppid()],
                                          "module": [cepsql.__file__]})
    df = spark.range(0, 8, 1, 4).mapInArrow(probe, "pid long, parent long, module string")
    return [list(r) for r in df.collect()]


def exit_with_parent() -> None:
    """A killed pytest must not leave this driver and its Spark JVMs running for hours:
    once the parent is gone (this process re-parented), exit at once; the JVMs started
    by pyspark exit when their Python parent does."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1)
        os._exit(3)
    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def main(mode: str) -> None:
    exit_with_parent()
    spark = session(mode)
    import cepsql  # noqa: F401  (after the session: Connect sessions get .cep too)
    from support.deploy_queries import QUERIES, run_all, run_stream, statement_requests
    result = run_all(spark)
    if mode == "connect":  # transformWithState, its late rows without a SparkContext
        with tempfile.TemporaryDirectory() as folder:
            result["stream"] = run_stream(spark, folder)
    result["session_type"] = type(spark).__module__
    if mode == "connect":
        result["requests"] = statement_requests(spark, QUERIES["sql2016"])
    if mode == "cluster":
        result["workers"] = worker_processes(spark)
        result["driver_pid"] = os.getpid()
    spark.stop()
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main(sys.argv[1])
