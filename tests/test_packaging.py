"""The sdist a user installs from holds everything the extension build and the package need."""
from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _sources_needed() -> set[str]:
    """Every .pyx plus what they include / extern from, transitively."""
    need, todo = set(), [p.name for p in (ROOT / "cython_ext").glob("*.pyx")]
    while todo:
        name = todo.pop()
        if name in need:
            continue
        need.add(name)
        text = (ROOT / "cython_ext" / name).read_text()
        todo += re.findall(r'^\s*include "([^"]+)"', text, re.M)
        todo += re.findall(r'extern from "([^"<>]+\.h)"', text)
    return {f"cython_ext/{n}" for n in need}


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> Path:
    """One sdist for both tests (building it is a few seconds each time)."""
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--skip-dependency-check",
                    "--outdir", str(dist), str(ROOT)], check=True,
                   capture_output=True, text=True)
    (path,) = dist.glob("cepsql-*.tar.gz")
    return path


def test_sdist_holds_extension_sources_package_data_and_every_module(sdist):
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    tracked = subprocess.run(["git", "ls-files", "cepsql"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.split()
    needed = _sources_needed() | {"setup.py", "pyproject.toml", "README.md"}
    needed |= {p for p in tracked if p.endswith((".py", ".sql", ".properties"))}
    missing = sorted(needed - names)
    assert not missing, f"sdist lacks {missing}"
    assert any(n.endswith(".pyx") for n in names) and "cepsql/conf/log4j2.properties" in names


def test_wheel_built_from_the_sdist_compiles_every_evaluator_and_imports(sdist, tmp_path):
    """What `pip install cepsql` does from an sdist: build a wheel from it (the extension
    compiles), install the wheel into an empty folder, import the evaluators from there."""
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(dist), str(sdist)], check=True, capture_output=True,
                   text=True)
    (wheel,) = dist.glob("cepsql-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    pyx = {p.stem for p in (ROOT / "cython_ext").glob("*.pyx")}
    built = {n.split("/")[-1].split(".")[0] for n in names if n.startswith("cepsql/_ext/")
             and n.endswith((".so", ".pyd"))}
    assert built == pyx, names
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--target",
                    str(target), str(wheel)], check=True, capture_output=True, text=True)
    probe = ("import cepsql, cepsql._ext.cep, cepsql._ext.matcher, cepsql._ext.shared_dag; "
             "print(cepsql.__file__)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, check=True,
                         capture_output=True, text=True,
                         env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}).stdout
    assert out.strip().startswith(str(target))
