"""Ctrl-C tests: run a script in a child Python, send SIGINT once it is running, and
report how it ended (issue 24 A4)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Interrupted:
    out: str
    err: str
    returncode: int
    waited: float   # seconds from SIGINT to the child's exit


def interrupt_after_ready(script: str, delay: float = 1.0, timeout: float = 30) -> Interrupted:
    """Run script (which prints "ready" once its slow part begins) with this checkout
    first on sys.path, send SIGINT ``delay`` seconds after "ready", wait for it."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=timeout)
        return Interrupted(out, err, proc.returncode, time.monotonic() - sent)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
