"""The documentation site: it builds in strict mode (no broken links or references) and
every Python and `cepsql` command block on it runs as written.

Blocks of one page run in order in one namespace, in a scratch directory, with the test
session active (so ``cepsql.get_session()`` returns it). A block whose first line is
``# run: subprocess`` needs its own process (e.g. a Spark Connect client) and runs in a
fresh interpreter. Shell blocks run their ``cepsql ...`` lines; ``pip install`` lines are
the only lines not executed (they would install from the network).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.background import Job

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.M | re.S)


def _blocks(page: Path, language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(page.read_text()) if lang == language]


def _pages_with(language: str) -> list[str]:
    return sorted(p.name for p in DOCS.glob("*.md") if _blocks(p, language))


def test_site_builds_strict(tmp_path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                           "-d", str(tmp_path / "site")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "api" / "index.html").read_text().count("match_recognize") > 2


@pytest.mark.parametrize("page", _pages_with("python"))
def test_python_blocks_run(page, spark, tmp_path, monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"docs_{page}"}
    before = {t.name for t in spark.catalog.listTables() if t.isTemporary}
    try:
        _run_python_blocks(page, namespace)
    finally:  # the page's views leave the session the other tests share
        for view in {t.name for t in spark.catalog.listTables() if t.isTemporary} - before:
            spark.catalog.dropTempView(view)


def _run_python_blocks(page: str, namespace: dict) -> None:
    for n, block in enumerate(_blocks(DOCS / page, "python")):
        if block.startswith("# run: subprocess"):
            done = subprocess.run([sys.executable, "-c", block], capture_output=True,
                                  text=True, timeout=600, env=_child_env())
            assert done.returncode == 0, f"{page} block {n}:\n{done.stderr[-3000:]}"
            continue
        exec(compile(block, f"{page} (block {n})", "exec"), namespace)  # our own docs


#: each page's commands run from the start of the test session, beside the other tests
BACKGROUND = {f"docs-commands-{page}": Job((sys.executable, str(Path(__file__).with_name(
    "_run_commands.py")), str(DOCS / page))) for page in _pages_with("bash")}


@pytest.mark.parametrize("page", _pages_with("bash"))
def test_command_blocks_run(page, background):
    done = background.result(f"docs-commands-{page}")
    assert done.returncode == 0, f"{page}: {done.stderr[-3000:]}"
    ran = done.stdout.splitlines()
    assert ran and all(line.startswith("cepsql ") for line in ran), ran


def _child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env
