"""cepsql.compile.opcodes is the one Python source of the numbers the Cython evaluators
read; cython_ext repeats them. Parse every constant cython_ext defines (``cdef enum: N =
v``, ``cdef enum X:`` blocks, ``DEF N = v``, ``cdef const T N = v``, module-level ``N =
v`` in any .pxi/.pxd/.pyx) and fail when a number drifts, when two Cython files disagree,
or when cython_ext has a constant of an opcode family that Python does not define."""
from __future__ import annotations

import ast
import operator
import re
from pathlib import Path

import pytest

from cepsql.compile import opcodes

ROOT = Path(__file__).resolve().parents[1]
# the .pyx sources and the .pxd interfaces Cython finds beside the compiled modules
CYTHON = (ROOT / "cython_ext", ROOT / "cepsql" / "_ext")
# the families whose numbers cross the boundary (every such Cython constant must be here)
FAMILIES = ("C_", "X_", "XO_", "XK_", "A_", "OP_", "VM_ERR_", "SKIP_", "S_", "K_", "U_")

_ONE = re.compile(r"^\s*(?:cdef\s+enum\s*\w*\s*:\s*|DEF\s+|cdef\s+const\s+\w+\s+|(?=[A-Z]))"
                  r"([A-Z][A-Z0-9_]*)\s*=\s*([^#\n]+?)\s*(?:#.*)?$")
_BLOCK = re.compile(r"^(\s*)cdef\s+enum\b[^:]*:\s*(?:#.*)?$")
_MEMBER = re.compile(r"^\s*([A-Z][A-Z0-9_]*)\s*(?:=\s*([^,#\n]+?))?\s*,?\s*(?:#.*)?$")
_OPS = {ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitOr: operator.or_,
        ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def _value(text: str, known: dict[str, int]) -> int | None:
    """An integer constant expression (literals, << | + - *, names defined before)."""
    def ev(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in known:
            return known[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        raise ValueError(text)
    try:
        return ev(ast.parse(text.strip(), mode="eval").body)
    except (SyntaxError, ValueError):
        return None


def cython_constants(roots: Path | tuple[Path, ...] = CYTHON) -> dict[str, dict[str, int]]:
    """{name: {file: value}} of every integer constant the Cython sources define."""
    found: dict[str, dict[str, int]] = {}
    roots = (roots,) if isinstance(roots, Path) else roots
    paths = sorted(p for root in roots for ext in ("pxi", "pxd", "pyx") for p in root.glob(f"*.{ext}"))
    for path in paths:
        known: dict[str, int] = {}
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            block = _BLOCK.match(line)
            if block:  # cdef enum Name: then indented members, auto-numbered
                indent, nxt = len(block.group(1)), 0
                i += 1
                while i < len(lines) and (not lines[i].strip() or
                                          len(lines[i]) - len(lines[i].lstrip()) > indent):
                    member = _MEMBER.match(lines[i])
                    if member:
                        value = nxt if member.group(2) is None else _value(member.group(2), known)
                        if value is not None:
                            known[member.group(1)] = value
                            found.setdefault(member.group(1), {})[path.name] = value
                            nxt = value + 1
                    i += 1
                continue
            one = _ONE.match(line)
            if one and not line.startswith((" ", "\t")):
                value = _value(one.group(2), known)
                if value is not None:
                    known[one.group(1)] = value
                    found.setdefault(one.group(1), {})[path.name] = value
            i += 1
    return found


def python_constants() -> dict[str, int]:
    return {k: v for k, v in vars(opcodes).items()
            if k.isupper() and isinstance(v, int) and not isinstance(v, bool)}


def test_the_parser_reads_every_form():
    text = ("cdef enum: C_A = 3  # note\nDEF X_B = 1 << 4\ncdef const i64 K_C = 0x10\n"
            "OP_D = 7\ncdef enum Kind:\n    S_E\n    S_F = 5,\n    S_G\n\ndef f():\n    U_X = 9\n")
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "t.pxi").write_text(text)
        got = {k: v["t.pxi"] for k, v in cython_constants(Path(d)).items()}
    assert got == {"C_A": 3, "X_B": 16, "K_C": 16, "OP_D": 7, "S_E": 0, "S_F": 5, "S_G": 6}


def test_cython_files_agree_with_each_other():
    split = {name: files for name, files in cython_constants().items()
             if len(set(files.values())) > 1}
    assert not split, f"cython_ext defines these constants differently in two files: {split}"


def test_every_shared_number_matches_compile_opcodes():
    py = python_constants()
    cy = cython_constants()
    assert len([n for n in cy if n.startswith(FAMILIES)]) >= 80, "the parser found too little"
    drift = {name: (py[name], files) for name, files in cy.items()
             if name in py and set(files.values()) != {py[name]}}
    assert not drift, f"opcode numbers differ between compile/opcodes.py and cython_ext: {drift}"
    missing = sorted(name for name in cy if name.startswith(FAMILIES) and name not in py)
    assert not missing, f"cython_ext constants missing from compile/opcodes.py: {missing}"


@pytest.mark.parametrize("table, prefix", [("FUNC_CODES", "A_"), ("SKIP_CODES", "SKIP_"),
                                           ("STRATEGY_CODES", "S_"), ("XO", "XO_")])
def test_name_tables_use_the_named_numbers(table, prefix):
    named = {v for k, v in python_constants().items() if k.startswith(prefix)}
    assert set(getattr(opcodes, table).values()) <= named
