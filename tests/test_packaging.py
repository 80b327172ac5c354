"""The sdist a user installs from holds everything the extension build and the package need."""
from __future__ import annotations

import re
import subprocess
import sys
import tarfile
from pathlib import Path

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


def test_sdist_holds_extension_sources_package_data_and_every_module(tmp_path):
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--skip-dependency-check",
                    "--outdir", str(tmp_path), str(ROOT)], check=True,
                   capture_output=True, text=True)
    (sdist,) = tmp_path.glob("cepsql-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    tracked = subprocess.run(["git", "ls-files", "cepsql"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.split()
    needed = _sources_needed() | {"setup.py", "pyproject.toml", "README.md"}
    needed |= {p for p in tracked if p.endswith((".py", ".sql", ".properties"))}
    missing = sorted(needed - names)
    assert not missing, f"sdist lacks {missing}"
    assert any(n.endswith(".pyx") for n in names) and "cepsql/conf/log4j2.properties" in names
