"""What `pip install cepsql` does from an sdist, in a fresh folder (tests/test_packaging.py
runs it in the background): build the sdist, build a wheel from it (the extension
compiles), install the wheel into an empty folder and import the evaluators from there.
Prints one JSON line: the sdist's and the wheel's member names and the imported file."""
from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*argv: str, **kw) -> str:
    return subprocess.run(list(argv), check=True, capture_output=True, text=True, **kw).stdout


def main() -> None:
    work = Path.cwd()
    dist = work / "dist"
    _run(sys.executable, "-m", "build", "--sdist", "--no-isolation", "--skip-dependency-check",
         "--outdir", str(dist), str(ROOT))
    (sdist,) = dist.glob("cepsql-*.tar.gz")
    with tarfile.open(sdist) as tar:
        sdist_names = sorted(n.split("/", 1)[1] for n in tar.getnames() if "/" in n)
    wheels = work / "wheels"
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(wheels), str(sdist))
    (wheel,) = wheels.glob("cepsql-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        wheel_names = zf.namelist()
    target = work / "site"
    _run(sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(target), str(wheel))
    probe = ("import cepsql, cepsql._ext.cep, cepsql._ext.matcher, cepsql._ext.shared_dag; "
             "print(cepsql.__file__)")
    imported = _run(sys.executable, "-c", probe, cwd=work,
                    env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}).strip()
    print(json.dumps({"sdist": sdist_names, "wheel": wheel_names, "imported": imported,
                      "target": str(target)}))


if __name__ == "__main__":
    main()
