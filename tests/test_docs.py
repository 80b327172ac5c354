"""The documentation site: it builds in strict mode (no broken links or references) and
every Python and `cepsql` command block on it and in the README runs as written.

Blocks of one page run in order in one namespace, in a scratch directory, with the test
session active (so ``cepsql.get_session()`` returns it). A block whose first line is
``# run: subprocess`` needs its own process (e.g. a Spark Connect client) and runs in a
fresh interpreter; the rendered site hides such markers (docs/_hooks/harness_markers.py).
``bash`` blocks run their ``cepsql ...`` lines; ``pip install`` lines are the only lines not
executed (they would install from the network). ``shell`` blocks (installing from a clone)
are shown, never run.
"""
from __future__ import annotations

import html
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import cepsql
from cepsql.datagen import generate_ticks
from support.background import Job, child_env

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.M | re.S)
#: the pages whose blocks run, by file name: the site's and the README
PAGES = {page.name: page for page in (*sorted(DOCS.glob("*.md")), ROOT / "README.md")}


def _blocks(page: Path, language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(page.read_text()) if lang == language]


def _pages_with(language: str) -> list[str]:
    return sorted(name for name, page in PAGES.items() if _blocks(page, language))


def _mkdocs(*args: str, cwd: Path = ROOT, **popen) -> subprocess.Popen:
    """``python -m mkdocs <args>``; never ``-q``: it hides warnings, and strict mode then
    passes a broken link (it counts only the warnings that are logged)."""
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    return subprocess.Popen([sys.executable, "-m", "mkdocs", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def _build_strict(config: Path, site: Path) -> tuple[int, str]:
    """Build ``config`` in strict mode: its return code and the warnings it logged."""
    build = _mkdocs("build", "--strict", "-f", str(config), "-d", str(site))
    _, err = build.communicate(timeout=300)
    return build.returncode, "\n".join(line for line in err.splitlines()
                                       if not line.startswith("INFO"))


def test_strict_build_fails_on_a_broken_link(tmp_path):
    """The site's own settings (strict, validation) with one page linking out of docs/."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text(
        "# Home\n\nSee [the benchmarks](../benchmarks/README.md#streaming).\n")
    (tmp_path / "mkdocs.yml").write_text(
        f"INHERIT: {ROOT / 'mkdocs.yml'}\ndocs_dir: docs\nnav: [index.md]\n"
        "plugins: [search]\nhooks: []\n")
    returncode, warnings = _build_strict(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert returncode != 0 and "../benchmarks/README.md" in warnings, warnings


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get(url: str, deadline: float, server: subprocess.Popen) -> str:
    """The page at ``url`` once the server answers (it builds the whole site first)."""
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.read().decode()
        except OSError:
            assert server.poll() is None, server.communicate()[1][-3000:]
            assert time.monotonic() < deadline, f"mkdocs serve did not answer {url}"
            time.sleep(0.5)


def test_site_builds_strict_and_serves_pages_without_harness_markers():
    """One build of the whole site (it takes seconds): ``mkdocs serve --strict`` builds
    it as ``mkdocs build --strict`` does (a warning aborts the server before it answers)
    and serves it; no warning may be logged at all."""
    port = _free_port()
    server = _mkdocs("serve", "--strict", "--no-livereload", "-a", f"127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 300
        page = _get(f"http://127.0.0.1:{port}/getting-started/", deadline, server)
        api = _get(f"http://127.0.0.1:{port}/api/", deadline, server)
    finally:
        server.terminate()
        _, err = server.communicate(timeout=60)
    warnings = "\n".join(line for line in err.splitlines() if not line.startswith("INFO"))
    assert "WARNING" not in warnings, warnings[-3000:]
    assert api.count("match_recognize") > 2
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert "Getting started" in text and 'SparkSession.builder.remote("local[2]")' in text
    assert "# run:" not in text  # harness markers: docs/_hooks/harness_markers.py
    assert "# run: subprocess" in (DOCS / "getting-started.md").read_text()  # the tests' copy


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
    for n, block in enumerate(_blocks(PAGES[page], "python")):
        if block.startswith("# run: subprocess"):
            done = subprocess.run([sys.executable, "-c", block], capture_output=True,
                                  text=True, timeout=600, env=child_env())
            assert done.returncode == 0, f"{page} block {n}:\n{done.stderr[-3000:]}"
            continue
        if block.startswith("# run: notebook"):  # a notebook's predefined names
            _notebook_names(namespace)
        exec(compile(block, f"{page} (block {n})", "exec"), namespace)  # our own docs


def _notebook_names(namespace: dict) -> None:
    """What a Databricks notebook block finds already defined: ``spark`` (with a
    ``ticks`` view, as the pages' examples use)."""
    from pyspark.sql import SparkSession
    spark = SparkSession.getActiveSession()
    spark.createDataFrame(generate_ticks(2_000)).createOrReplaceTempView("ticks")
    namespace.setdefault("spark", spark)
    namespace.setdefault("cepsql", cepsql)


def test_readme_and_getting_started_build_the_demo_view_alike():
    def setup(page: str) -> list[str]:  # the session and the view, in the first Spark block
        first = next(block for block in _blocks(PAGES[page], "python") if "spark = " in block)
        return [line for line in first.splitlines()
                if line.startswith("spark = ") or 'TempView("ticks")' in line]
    assert setup("README.md") == setup("getting-started.md") != []


#: each page's commands run from the start of the test session, beside the other tests
BACKGROUND = {f"docs-commands-{page}": Job((sys.executable, str(Path(__file__).with_name(
    "_run_commands.py")), str(PAGES[page]))) for page in _pages_with("bash")}


@pytest.mark.parametrize("page", _pages_with("bash"))
def test_command_blocks_run(page, background):
    done = background.result(f"docs-commands-{page}")
    assert done.returncode == 0, f"{page}: {done.stderr[-3000:]}"
    ran = done.stdout.splitlines()
    assert ran and all(line.startswith("cepsql ") for line in ran), ran

