"""The sdist a user installs from holds everything the extension build and the package
need; the manylinux wheel built from it runs without Cython or a C compiler."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import cepsql
from _wheel_probe import QUERIES, TICKS
from support.background import Job

ROOT = Path(__file__).resolve().parents[1]


SYSTEM_HEADERS = {"Python.h"}  # headers the compiler finds outside the repository


def _sources_needed() -> set[str]:
    """Every .pyx plus what they include / cimport (cepsql/_ext/*.pxd) / extern from,
    transitively."""
    need, todo = set(), [f"cython_ext/{p.name}" for p in (ROOT / "cython_ext").glob("*.pyx")]
    while todo:
        path = todo.pop()
        if path in need:
            continue
        need.add(path)
        text = (ROOT / path).read_text()
        todo += [f"cython_ext/{n}" for n in re.findall(r'^\s*include "([^"]+)"', text, re.M)]
        todo += [f"cython_ext/{n}" for n in re.findall(r'extern from "([^"<>]+\.h)"', text)
                 if n not in SYSTEM_HEADERS]
        todo += [f"cepsql/_ext/{n}.pxd" for n in
                 re.findall(r'^\s*from cepsql\._ext\.(\w+) cimport', text, re.M)]
    return need


#: the build runs from the start of the test session, beside the other tests
BACKGROUND = {"wheel-from-sdist": Job((sys.executable, str(Path(__file__).with_name("_wheel_probe.py"))))}


@pytest.fixture(scope="module")
def built(background) -> dict:
    """What tests/_wheel_probe.py saw: the sdist's and the wheel's member names, and what
    the wheel did installed in a fresh venv without Cython or a compiler."""
    done = background.result("wheel-from-sdist")
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_sdist_holds_extension_sources_package_data_and_every_module(built):
    names = set(built["sdist"])
    tracked = subprocess.run(["git", "ls-files", "cepsql"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.split()
    needed = _sources_needed() | {"setup.py", "pyproject.toml", "README.md"}
    needed |= {p for p in tracked if p.endswith((".py", ".sql", ".properties"))}
    missing = sorted(needed - names)
    assert not missing, f"sdist lacks {missing}"
    assert any(n.endswith(".pyx") for n in names) and "cepsql/conf/log4j2.properties" in names


def test_manylinux_wheel_built_from_the_sdist_holds_every_evaluator(built):
    """scripts/build_wheels.sh compiles the wheel from the sdist and repairs it: one
    compiled module per evaluator, a manylinux platform tag."""
    names = built["wheel"]
    pyx = {p.stem for p in (ROOT / "cython_ext").glob("*.pyx")}
    compiled = {n.split("/")[-1].split(".")[0] for n in names if n.startswith("cepsql/_ext/")
                and n.endswith((".so", ".pyd"))}
    assert compiled == pyx, names
    assert re.fullmatch(r"cepsql-[\w.]+-cp\d+-cp\d+-manylinux[\w.]+\.whl", built["wheel_file"]), \
        built["wheel_file"]


def test_wheel_runs_queries_in_a_fresh_venv_without_cython_or_a_compiler(built):
    """The installed wheel's own compiled evaluators answer, as this checkout does."""
    ran = built["ran"]
    assert ran["cepsql"].startswith(built["site"]) and ran["ext"].startswith(built["site"])
    assert ran["cython"] is False and ran["cc"] is None
    assert ran["rows"]["sql2016"] == [["a", 0, 2], ["a", 3, 5], ["b", 1, 3]]
    here = cepsql.match_recognize(QUERIES["cep"], ticks=pd.DataFrame(TICKS))
    assert ran["rows"]["cep"] == here[["sym", "s", "e"]].values.tolist() != []
