"""What a user without a C compiler gets (tests/test_packaging.py runs it in the background):
scripts/build_wheels.sh builds the sdist and, from it, the manylinux wheel; the wheel is
installed with pip, offline, into a fresh venv that holds no Cython (its dependencies are
links to the test venv's copies of exactly cepsql's requirements), and two queries run
through it in-process with no compiler reachable. Prints one JSON line."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import time
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]

#: one row per event, and the queries the installed wheel runs over them
TICKS = {"sym": ["a"] * 6 + ["b"] * 4, "ts": list(range(6)) + list(range(4)),
         "p": [1.0, 2.0, 3.0, 2.0, 3.0, 4.0, 5.0, 4.0, 6.0, 7.0]}
QUERIES = {
    "sql2016": "SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
               "MEASURES FIRST(A.ts) AS s, LAST(B.ts) AS e PATTERN (A B+) "
               "DEFINE B AS B.p > PREV(B.p)) ORDER BY sym, s",
    "cep": "SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
           "MEASURES a.ts AS s, c.ts AS e STRATEGY SKIP_TILL_ANY_MATCH "
           "PATTERN (SEQ(a, KL(b), c)) WITHIN 3 ROWS "
           "DEFINE b AS b.p > a.p, c AS c.p > LAST(b.p)) ORDER BY sym, s, e",
}
_RUN_QUERIES = """
import importlib.util, json, shutil, sys
import pandas as pd
import cepsql, cepsql._ext.matcher, cepsql._ext.cep
ticks = pd.DataFrame(json.loads(sys.argv[1]))
rows = {name: cepsql.match_recognize(sql, ticks=ticks)[["sym", "s", "e"]].values.tolist()
        for name, sql in json.loads(sys.argv[2]).items()}
print(json.dumps({"cepsql": cepsql.__file__, "ext": cepsql._ext.matcher.__file__,
                  "cython": importlib.util.find_spec("Cython") is not None,
                  "cc": shutil.which("gcc") or shutil.which("cc"), "rows": rows}))
"""


def _run(*argv: str, **kw) -> str:
    done = subprocess.run(list(argv), capture_output=True, text=True, **kw)
    if done.returncode:
        sys.exit(f"{argv[:4]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


def requirement_closure(names: list[str]) -> list[metadata.Distribution]:
    """The installed distributions ``names`` need at run time (no extras), transitively."""
    seen: dict[str, metadata.Distribution] = {}
    todo = list(names)
    while todo:
        key = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if key in seen:
            continue
        seen[key] = dist = metadata.distribution(key)
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


def link_packages(dists: list[metadata.Distribution], folder: Path) -> None:
    """A folder of symlinks to exactly these distributions' top-level files (code and
    .dist-info), for a venv's .pth: the fresh venv imports them and nothing else."""
    folder.mkdir()
    for dist in dists:
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            source = Path(dist.locate_file(top))
            if source.exists() and not (folder / top).exists():
                (folder / top).symlink_to(source)


def main() -> None:
    work = Path.cwd()
    dist = work / "dist"
    started = time.perf_counter()
    # compiled without optimisation (setup.py CEPSQL_OPT_FLAGS): checked here are the
    # sdist's completeness and a wheel that runs without a compiler, not the evaluators'
    # speed (the rest of the suite runs the -O3 build); this probe took 127 s CPU with
    # -O3 and the inlining parameters, 33 s with -O0
    _run("bash", str(ROOT / "scripts" / "build_wheels.sh"), "--no-isolation", sys.executable,
         env={**os.environ, "OUT": str(dist), "CEPSQL_OPT_FLAGS": "-O0 -g0"})
    built_s = time.perf_counter() - started
    (sdist,) = dist.glob("cepsql-*.tar.gz")
    with tarfile.open(sdist) as tar:
        sdist_names = sorted(n.split("/", 1)[1] for n in tar.getnames() if "/" in n)
    (wheel,) = dist.glob("cepsql-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        wheel_names = zf.namelist()
        (meta,) = [n for n in wheel_names if n.endswith(".dist-info/METADATA")]
        requires = [Requirement(line.split(":", 1)[1]) for line in
                    zf.read(meta).decode().splitlines() if line.startswith("Requires-Dist:")]

    venv = work / "fresh"
    started = time.perf_counter()
    _run(sys.executable, "-m", "venv", "--without-pip", str(venv))
    python = venv / "bin" / "python"
    site = Path(_run(str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))",
                     env={}).strip())
    link_packages(requirement_closure([r.name for r in requires if r.marker is None]),
                  work / "deps")
    (site / "cepsql-deps.pth").write_text(str(work / "deps") + "\n")
    # without PYTHONPATH: the checkout (and the cepsql.egg-info the sdist build leaves
    # there) must not count as an installed cepsql
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    _run(sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index",
         "--no-cache-dir", str(wheel), env=clean)
    install_s = time.perf_counter() - started
    no_compiler = {"PATH": str(venv / "bin"), "CC": "/bin/false", "CXX": "/bin/false",
                   "HOME": str(work)}
    ran = json.loads(_run(str(python), "-c", _RUN_QUERIES, json.dumps(TICKS),
                          json.dumps(QUERIES), cwd=work, env=no_compiler).strip())
    print(json.dumps({"sdist": sdist_names, "wheel": wheel_names, "wheel_file": wheel.name,
                      "site": str(site), "ran": ran, "build_s": round(built_s, 1),
                      "install_s": round(install_s, 1)}))


if __name__ == "__main__":
    main()
