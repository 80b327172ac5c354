"""Vectorised row-local DEFINE masks (cepsql/backends/local/masks.py) equal the condition
VM's (SqlMatcher.row_local_masks) on random DEFINEs over partitions with NULL, NaN and
-0.0: comparisons, three-valued AND/OR/NOT, IS [NOT] NULL, arithmetic across rows, PREV
and NEXT at offsets 1-3, FLOAT casts; DEFINEs outside the subset fall back to the VM."""
from __future__ import annotations

from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from cepsql.backends.local.masks import KERNELS, vector_masks
from cepsql.compile import opcodes
from cepsql.errors import CepRuntimeError
from cepsql.backends.local.sequence import define_masks, vm_masks
from cepsql.parse import find_match_recognize
from cepsql.exprs.arrow_eval import evaluate_arrow
from cepsql.compile.clause import plan_query
from cepsql.runtime.workers import bind_worker

SETTINGS = dict(deadline=None, max_examples=30,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

VALUES = [0.0, -0.0, 1.0, 2.5, -3.0, float("nan"), float("inf"), None]


@st.composite
def operands(draw) -> str:
    """A double operand: the row's v or w, PREV/NEXT of one, a literal, or arithmetic."""
    kind = draw(st.integers(0, 4))
    column = draw(st.sampled_from(["v", "w"]))
    if kind == 0:
        return f"A.{column}"
    if kind == 1:
        nav = draw(st.sampled_from(["PREV", "NEXT"]))
        return f"{nav}(A.{column}, {draw(st.integers(1, 3))})"
    if kind == 2:
        return draw(st.sampled_from(["1.5", "0.0", "-2.0", "CAST('NaN' AS DOUBLE)"]))
    if kind == 3:
        return f"CAST(A.{column} AS FLOAT)"
    op = draw(st.sampled_from(["+", "-", "*"]))
    return f"(A.{column} {op} PREV(A.{draw(st.sampled_from(['v', 'w']))}))"


@st.composite
def conditions(draw, depth: int = 0) -> str:
    kind = draw(st.integers(0, 5 if depth < 2 else 1))
    if kind <= 1:
        op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
        return f"{draw(operands())} {op} {draw(operands())}"
    if kind == 2:
        return f"{draw(operands())} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if kind == 3:
        return f"NOT ({draw(conditions(depth + 1))})"
    op = "AND" if kind == 4 else "OR"
    return f"({draw(conditions(depth + 1))}) {op} ({draw(conditions(depth + 1))})"


@st.composite
def tables(draw) -> pa.Table:
    n = draw(st.integers(1, 40))
    keys = sorted(draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=n, max_size=n)))
    values = st.lists(st.sampled_from(VALUES), min_size=n, max_size=n)
    return pa.table({"p": pa.array(keys), "ts": pa.array(range(n), pa.int64()),
                     "v": pa.array(draw(values), pa.float64()),
                     "w": pa.array(draw(values), pa.float64()),
                     "x": pa.array(draw(st.lists(st.integers(-2, 2), min_size=n, max_size=n)),
                                   pa.int64())})


def _bound(define_b: str, define_c: str, table: pa.Table):
    """The worker of ``PATTERN (A B+ C)`` with these DEFINEs (A without one), its
    prepared input (sorted by p, ts already) and the partition bounds."""
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
           "MATCH_NUMBER() AS mn ONE ROW PER MATCH PATTERN (A B+ C) DEFINE "
           f"B AS {define_b.replace('A.', 'B.')}, C AS {define_c.replace('A.', 'C.')})")
    site = find_match_recognize(sql, offset=0, full_sql=sql)[0]
    plan = plan_query(site.spec, table.schema, sql)
    prepared = table
    for name, expr in plan.prepare_columns:
        prepared = prepared.append_column(name, evaluate_arrow(expr, table))
    keys = np.asarray(table.column("p").to_pylist(), dtype=object)
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return bind_worker(plan, prepared.schema).worker, prepared, np.append(starts, len(keys))


def _vm_masks(worker, prepared: pa.Table, bounds: np.ndarray) -> np.ndarray:
    return vm_masks(worker, worker._vm_columns(prepared), bounds)


@given(tables(), conditions(), conditions())
@settings(**SETTINGS)
def test_vector_masks_equal_vm(table, define_b, define_c):
    worker, prepared, bounds = _bound(define_b, define_c, table)
    c = worker.config
    values, nulls, consts, exact = worker._vm_columns(prepared)
    vector = vector_masks(c.code, c.refs, values, nulls, consts, bounds, c.n_labels)
    assert vector is not None, (define_b, define_c)  # the subset covers these DEFINEs
    np.testing.assert_array_equal(vector, _vm_masks(worker, prepared, bounds))


@given(tables(), st.data())
@settings(**SETTINGS)
def test_define_masks_equal_vm_in_any_row_order(table, data):
    """define_masks over rows given by position (the threads' gather-free path), with
    DEFINEs the vector path leaves to the VM (integers, abs) among them, over columns with
    and without NULLs."""
    define_b = data.draw(st.sampled_from(["B.x > PREV(B.x)", "abs(B.v - PREV(B.v)) > 1",
                                          "B.v > PREV(B.v)", "B.x = 1 OR B.v IS NULL",
                                          "B.w - PREV(B.v) >= NEXT(B.w)"]))
    if data.draw(st.booleans()):  # no NULLs: the DOUBLE columns are read from numpy
        table = table.set_column(2, "v", pc.fill_null(table.column("v"), 0.5))
        table = table.set_column(3, "w", pc.fill_null(table.column("w"), -0.0))
    worker, prepared, bounds = _bound(define_b, "C.v < PREV(C.v)", table)
    n = prepared.num_rows
    perm = np.asarray(data.draw(st.permutations(range(n))), dtype=np.int64)
    shuffled = prepared.take(pa.array(perm))
    rows = np.argsort(perm)  # shuffled's rows in the sorted order
    expected = _vm_masks(worker, prepared, bounds)
    np.testing.assert_array_equal(define_masks(worker, shuffled, rows, bounds), expected)


def test_unsupported_instruction_falls_back():
    table = pa.table({"p": ["a"] * 4, "ts": [0, 1, 2, 3], "v": [1.0, 2.0, 0.0, 4.0],
                      "w": [1.0] * 4, "x": [1, 2, 3, 4]})
    worker, prepared, bounds = _bound("abs(B.v - PREV(B.v)) > 1", "C.v < PREV(C.v)", table)
    c = worker.config
    values, nulls, consts, _ = worker._vm_columns(prepared)
    assert vector_masks(c.code, c.refs, values, nulls, consts, bounds, c.n_labels) is None
    np.testing.assert_array_equal(define_masks(worker, prepared, None, bounds),
                                  _vm_masks(worker, prepared, bounds))


# --- any row-local DEFINE: the mask path (vector where it can, else VM) is the VM ------
VM_ONLY = ["abs(A.v) > 1", "A.v / A.w > 0", "A.x / (A.x - 1) >= 1", "A.x + PREV(A.x) = 1",
           "A.x * 4611686018427387903 + PREV(A.x) > 0",  # overflow in the VM (ANSI: error)
           "A.x * 4611686018427387903 - NEXT(A.x) * 3 < 0", "A.x * 4611686018427387904 > 0",
           "A.v / (PREV(A.x) - 1) > 0", "A.x / (PREV(A.x) - 1) >= 1",
           "CAST(A.x AS FLOAT) < 1.5", "coalesce(A.v, A.w, 0.0) > 0", "A.v = 1.5",
           "greatest(A.v, A.w) >= 1", "A.x % 2 = 0", "round(A.v) = 2", "A.v > 1e308 * 10"]


@st.composite
def any_conditions(draw, depth: int = 0) -> str:
    """Row-local DEFINEs beyond the vector subset: integer arithmetic (checked under ANSI:
    overflow, division by zero), functions, DECIMAL literals, mixed with the subset."""
    kind = draw(st.integers(0, 4 if depth < 2 else 1))
    if kind == 0:
        return draw(st.sampled_from(VM_ONLY))
    if kind == 1:
        return draw(conditions(depth))
    if kind == 2:
        return f"NOT ({draw(any_conditions(depth + 1))})"
    op = "AND" if kind == 3 else "OR"
    return f"({draw(any_conditions(depth + 1))}) {op} ({draw(any_conditions(depth + 1))})"


def _outcome(masks_of):
    try:
        return masks_of().tolist()
    except Exception as e:  # an ANSI error: both paths must raise it
        return type(e).__name__, str(e)


@given(tables(), any_conditions(), any_conditions())
@settings(**SETTINGS)
def test_mask_path_equals_vm_on_any_row_local_define(table, define_b, define_c):
    try:
        worker, prepared, bounds = _bound(define_b, define_c, table)
    except CepRuntimeError:  # a derived column overflowed before either path runs
        reject()
    assert _outcome(lambda: define_masks(worker, prepared, None, bounds)) == \
        _outcome(lambda: _vm_masks(worker, prepared, bounds)), (define_b, define_c)


@given(tables(), conditions(), conditions(), st.sampled_from(sorted(KERNELS)))
@settings(**SETTINGS)
def test_an_opcode_without_a_kernel_falls_back_to_the_vm(table, define_b, define_c, opcode):
    """masks.py dispatches on one table (opcode -> numpy kernel): take any opcode out of
    it and the DEFINEs using it go to the VM, with the same masks."""
    worker, prepared, bounds = _bound(define_b, define_c, table)
    c = worker.config
    values, nulls, consts, _ = worker._vm_columns(prepared)
    with mock.patch.dict(KERNELS):
        del KERNELS[opcode]
        vector = vector_masks(c.code, c.refs, values, nulls, consts, bounds, c.n_labels)
        got = define_masks(worker, prepared, None, bounds)
    expected = _vm_masks(worker, prepared, bounds)
    if opcode in set(c.code.code.tolist()) and vector is not None:
        np.testing.assert_array_equal(vector, expected)  # the opcode was only an operand
    np.testing.assert_array_equal(got, expected)


def test_kernels_cover_only_condition_vm_opcodes():
    vm = {v for k, v in vars(opcodes).items() if k.startswith(("C_", "X_")) and isinstance(v, int)}
    assert set(KERNELS) <= vm
