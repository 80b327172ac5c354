"""Process defaults, the Java check, and the public API surface."""
import os
import subprocess
import sys

import pytest

import cepsql
from cepsql.errors import CepEnvironmentError
from cepsql.backends.spark.environment import ensure_environment, require_java

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_environment_defaults(monkeypatch):
    for name in ("SPARK_LOCAL_IP", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", "/custom/python")
    ensure_environment()
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    assert os.environ["PYSPARK_DRIVER_PYTHON"] == "/custom/python"  # user's choice kept


def test_missing_java(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(CepEnvironmentError, match="Java 17 is required"):
        require_java()


def test_public_api():
    from pyspark.sql import SparkSession
    assert isinstance(SparkSession.cep, property)
    assert cepsql.__version__
    assert cepsql.errors.CepError is cepsql.CepError
    assert callable(cepsql.match_recognize) and callable(cepsql.get_session)


def test_import_starts_no_jvm():
    code = ("import cepsql; from pyspark import SparkContext; "
            "assert SparkContext._gateway is None and SparkContext._jvm is None; print('ok')")
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.stdout.strip() == "ok", out.stderr


def test_cep_property_is_bound_and_cached(spark):
    assert isinstance(spark.cep, cepsql.CepSession)
    assert spark.cep is spark.cep and spark.cep.spark is spark


def test_get_session_reuses_the_running_session(spark):
    assert cepsql.get_session("local[2]", {"spark.sql.shuffle.partitions": "4"}) is spark
    assert spark.conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
