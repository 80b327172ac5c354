"""Subprocess checks that start when the test session starts and run beside the other tests.

A few tests run whole programs in fresh processes (a wheel build, Spark Connect and
local-cluster drivers, the CLI in a new JVM, the docs' commands). Run one after the other
they were a third of the suite's wall time, mostly spent waiting on JVM start-ups and a
C compiler while the test process's own Spark session sat idle. A test module declares
its programs in a ``BACKGROUND`` dict ({job name: Job}); conftest.py starts the jobs of
every module that has selected tests as soon as collection ends, and moves those tests to
the end of the run, where ``background.result(name)`` usually finds them finished.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TIMEOUT_S = 900  # the machine is shared: JVM start-ups and compiles can be slow there


def child_env(**extra: str) -> dict:
    """The test process's environment with the repo importable (as Spark workers need)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYSPARK_PYTHON"] = sys.executable
    env.update(extra)
    return env


@dataclass(frozen=True)
class Job:
    """One program: its argv, working folder (None: a fresh temporary one) and stdin."""
    argv: tuple[str, ...]
    cwd: str | None = None
    stdin: str | None = None
    env: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Done:
    returncode: int
    stdout: str
    stderr: str
    cwd: str


class BackgroundJobs:
    """The started jobs of one test session (stdout/stderr go to files: no pipe can fill)."""

    def __init__(self) -> None:
        self._running: dict[str, tuple] = {}
        self._done: dict[str, Done] = {}
        self._folder = tempfile.TemporaryDirectory(prefix="cepsql-bg-")

    def start(self, name: str, job: Job) -> None:
        if name in self._running or name in self._done:
            return
        base = os.path.join(self._folder.name, name)
        os.makedirs(base)
        cwd = job.cwd or os.path.join(base, "cwd")
        os.makedirs(cwd, exist_ok=True)
        out, err = open(base + ".out", "w+"), open(base + ".err", "w+")
        stdin = subprocess.DEVNULL
        if job.stdin is not None:
            with open(base + ".in", "w") as f:
                f.write(job.stdin)
            stdin = open(base + ".in")
        proc = subprocess.Popen(list(job.argv), cwd=cwd, env=child_env(**job.env), stdin=stdin,
                                stdout=out, stderr=err, text=True)
        self._running[name] = (proc, out, err, cwd, stdin)

    def result(self, name: str) -> Done:
        """The job's outcome, waiting for it if it still runs."""
        if name not in self._done:
            proc, out, err, cwd, stdin = self._running.pop(name)
            try:
                proc.wait(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            out.seek(0)
            err.seek(0)
            self._done[name] = Done(proc.returncode, out.read(), err.read(), cwd)
            for f in (out, err):
                f.close()
            if stdin is not subprocess.DEVNULL:
                stdin.close()
        return self._done[name]

    def close(self) -> None:
        """Stop what still runs (a session cut short) and remove the files."""
        for name in list(self._running):
            proc = self._running[name][0]
            if proc.poll() is None:
                proc.kill()
            self.result(name)
        self._folder.cleanup()
