"""The package's shape, checked: the pipeline's import direction (the import-linter
contracts in pyproject.toml), no cycle-dodging function-local imports and no private
names borrowed across modules. Run `lint-imports` at the repository root for the same
report by hand."""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "cepsql"

# Function-local imports of cepsql's own modules, each with why it may not be at the top.
# Allowed only where the module imported pulls a heavy optional dependency (or one a
# Spark Python worker should not pay for), never to dodge a cycle.
_EXT_IN_TASKS = ("the compiled evaluator is loaded where a task builds its matcher: importing "
                 "cepsql (parsing, planning, EXPLAIN) needs no built extension")
LOCAL_IMPORTS_ALLOWED: dict[tuple[str, str], str] = {
    ("cepsql.runtime.worker", "cepsql._ext.matcher"): _EXT_IN_TASKS,
    ("cepsql.runtime.cep_worker", "cepsql._ext.cep"): _EXT_IN_TASKS,
    ("cepsql.runtime.shared_evaluator", "cepsql._ext.shared_dag"): _EXT_IN_TASKS,
    ("cepsql.backends.local.sequence", "cepsql._ext.sequence"): _EXT_IN_TASKS,
    # cepsql/__init__.py: driver-side setup a Spark Python worker skips (it imports the
    # package without pyspark's session, Spark Connect, pandas or sqlglot)
    ("cepsql", "cepsql.api.session"): "kept lazy for Spark Python workers (__init__)",
    ("cepsql", "cepsql.backends.spark.task_errors"): "kept lazy for Spark Python workers (__init__)",
    ("cepsql", "cepsql.backends.spark.tf_plain"): "kept lazy for Spark Python workers (__init__)",
    # modules whose objects Spark Python workers unpickle: cepsql.parse loads sqlglot,
    # which __init__ keeps out of workers; only a driver-side error path needs it
    ("cepsql.backends.streaming.workload", "cepsql.parse.splice"):
        "sqlglot kept out of workers that unpickle the workload's stateful processor",
}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(), str(path))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package.pop()
    package = package[:len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def test_import_contracts_hold():
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run([str(lint) if lint.exists() else "lint-imports", "--no-cache"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_no_function_local_imports_of_cepsql_modules():
    found = []
    for path, tree in _modules():
        top = set(map(id, tree.body))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and id(inner) not in top:
                    target = _absolute(path, inner)
                    if target.split(".")[0] == "cepsql":
                        key = (_module_name(path), target)
                        if key not in LOCAL_IMPORTS_ALLOWED:
                            found.append(f"{path.relative_to(ROOT)}:{inner.lineno} {target}")
    assert not found, "function-local imports of cepsql modules:\n" + "\n".join(sorted(set(found)))


def test_no_private_names_imported_across_modules():
    found = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and _absolute(path, node).startswith("cepsql"):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {alias.name}")
    assert not found, "private names imported from other modules:\n" + "\n".join(found)


@pytest.mark.parametrize("stage", ["api", "parse", "algebra", "analyze", "stats", "planning",
                                   "sharing", "compile", "runtime", "explain", "backends",
                                   "reference", "exprs"])
def test_every_stage_says_its_job(stage):
    doc = ast.get_docstring(ast.parse((PACKAGE / stage / "__init__.py").read_text()))
    assert doc and len(doc) > 60, f"cepsql/{stage}/__init__.py needs a docstring: its job, what it imports"


def test_lazy_public_names_resolve_in_a_spark_worker():
    """Every name cepsql/__init__.py imports on first use (as in a Spark Python worker)
    points to a module and attribute that exist."""
    code = ("import cepsql\n"
            "for name in cepsql._LAZY: getattr(cepsql, name)\n")
    env = {**os.environ, "PYTHON_WORKER_FACTORY_SECRET": "test"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
def test_one_buffer_to_numpy_helper_in_the_cython_sources():
    """Growable int64 buffers become numpy arrays through buffers' buf_to_numpy only (its
    release argument says who frees the buffer); the evaluators had three copies, one of
    which freed the buffer and two which did not."""
    sources = [*(ROOT / "cython_ext").glob("*.p*"), *(ROOT / "cepsql" / "_ext").glob("*.pxd")]
    defs = [(p.name, m.group(1)) for p in sorted(sources)
            for m in re.finditer(r"^cdef\s+(?:inline\s+)?object\s+(\w*to_numpy\w*)\s*\(",
                                 p.read_text(), re.M)]
    assert defs == [("buffers.pxd", "buf_to_numpy")], defs
