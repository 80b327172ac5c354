"""The sdist a user installs from holds everything the extension build and the package need."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.background import Job

ROOT = Path(__file__).resolve().parents[1]


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
        todo += [f"cython_ext/{n}" for n in re.findall(r'extern from "([^"<>]+\.h)"', text)]
        todo += [f"cepsql/_ext/{n}.pxd" for n in
                 re.findall(r'^\s*from cepsql\._ext\.(\w+) cimport', text, re.M)]
    return need


#: the build runs from the start of the test session, beside the other tests
BACKGROUND = {"wheel-from-sdist": Job((sys.executable, str(Path(__file__).with_name("_wheel_probe.py"))))}


@pytest.fixture(scope="module")
def built(background) -> dict:
    """The sdist's and the wheel's member names and where the installed wheel imports from."""
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


def test_wheel_built_from_the_sdist_compiles_every_evaluator_and_imports(built):
    """What `pip install cepsql` does from an sdist (tests/_wheel_probe.py): the wheel
    holds one compiled module per evaluator and imports from where it was installed."""
    names = built["wheel"]
    pyx = {p.stem for p in (ROOT / "cython_ext").glob("*.pyx")}
    compiled = {n.split("/")[-1].split(".")[0] for n in names if n.startswith("cepsql/_ext/")
                and n.endswith((".so", ".pyd"))}
    assert compiled == pyx, names
    assert built["imported"].startswith(built["target"])
