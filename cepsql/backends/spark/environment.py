"""Process defaults that make local Spark start reliably (loopback address, same Python
for driver and workers) and a clear error when Java is missing."""
from __future__ import annotations

import os
import shutil
import sys

from cepsql.errors import CepEnvironmentError


def ensure_environment() -> None:
    """Set SPARK_LOCAL_IP and the PySpark Python interpreters unless the user already did."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def find_java() -> str | None:
    """Path of the java executable Spark would use, or None."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


def require_java() -> str:
    """The java executable, or CepEnvironmentError explaining how to get one."""
    java = find_java()
    if java is None:
        raise CepEnvironmentError(
            "Java 17 is required to run Spark: no `java` found on PATH or JAVA_HOME. "
            "Install a JDK 17 (e.g. `apt-get install openjdk-17-jre-headless`) or set JAVA_HOME.")
    return java
