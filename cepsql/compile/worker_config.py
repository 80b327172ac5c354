"""What a bound clause hands the runtime: plain, picklable configurations.

``QueryPlan.bind`` returns a ``BoundPlan`` holding one of these; the runtime builds the
worker that runs in tasks from it (``runtime.workers.worker_for``). ``WorkerConfig`` is
the SQL:2016-mode regex VM program (``compile.sql``), ``CepConfig`` the CEP-mode program
of the run NFA or planned evaluator (``compile.cep``), and ``TaskPlanning`` what a task
needs to choose its own plans from its first rows (``runtime.task_planning``). Only data:
numpy arrays, Arrow schemas and the compiled condition VM code.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.compile.conditions import ConditionCode
from cepsql.planning.options import PlannerOptions


@dataclass
class WorkerConfig:
    """SQL:2016 mode: the regex VM program, conditions and output layout of a clause."""
    program: np.ndarray
    n_labels: int
    n_slots: int
    labels: list[str]
    code: ConditionCode
    refs: np.ndarray
    membership: np.ndarray
    leaves: np.ndarray
    leaf_columns: list[str | None]
    measure_aggregates: np.ndarray  # int32[n, 4]: set id, function, VM column, final
    aggregate_columns: list[tuple[str, str | None]]  # (function, argument column)
    skip_mode: int
    skip_set: int
    skip_var: str | None
    all_rows: bool
    empty_mode: int
    full_history: bool
    partition_columns: list[str]
    passthrough: list[str]
    max_lookback: int  # deepest PREV reach, rows kept before an undecided start row
    output_schema: pa.Schema
    window_kind: int = 0  # WITHIN: 0 none, 1 rows, 2 time
    window_size: float = 0  # rows, or microseconds
    window_column: str | None = None  # the first ORDER BY key, for time windows
    gathered: tuple = ()  # GatherSpec per __cep_g column (gathered.py)
    closure_depth: int = 0  # scratch depth for epsilon paths (program.Program.closure_depth)
    sql: str | None = None  # the statement, so run-time errors can point into it
    skip_pos: int | None = None  # where AFTER MATCH SKIP TO's variable is written in sql
    error_site: str | None = None  # the driver's id of the clause (errors.error_site)


@dataclass
class TaskPlanning:
    """What a task needs to plan a clause from its own first rows (picklable; built by
    compile.cep, used by runtime.task_planning.WorkerPlanner)."""
    spec: MatchRecognizeSpec
    terms: list
    options: PlannerOptions
    labels: list[str]
    seq_start: list[int]
    conj_label: list[int]
    conj_mask: list[int]
    conj_late: list[int]
    sample_rows: int
    adaptive: object | None = None   # runtime.adaptive.AdaptiveSettings: re-plan as rows drift


@dataclass
class CepConfig:
    """CEP mode: the run NFA's sequences (or the planned evaluator's plans), the DEFINE
    conjuncts and the output layout of a clause."""
    labels: list[str]
    code: ConditionCode
    conj_off: np.ndarray
    conj_label: np.ndarray
    conj_mask: np.ndarray
    refs: np.ndarray
    membership: np.ndarray
    comps: np.ndarray
    seq_start: np.ndarray
    negs: np.ndarray
    leaves: np.ndarray
    leaf_columns: list[str | None]
    measure_aggregates: np.ndarray
    aggregate_columns: list[tuple[str, str | None]]
    rank: np.ndarray
    strategy: int
    all_rows: bool
    with_unmatched: bool
    select_past_last: bool
    partition_columns: list[str]
    passthrough: list[str]
    window_kind: int
    window_size: float
    window_column: str | None
    output_schema: pa.Schema
    merging: bool = True
    max_partial_matches: int | None = None  # PlannerOptions' (None: scaled to memory)
    breaks_column: str | None = None  # STRICT_CONTIGUITY across partitions (see query_plan.py)
    # planned evaluation (planning/evaluator_choice.py; arrays built by cep_plan_arrays.py)
    conj_late: np.ndarray | None = None
    conj_rowlocal: np.ndarray | None = None
    plan_nodes: np.ndarray | None = None
    plan_leaf_of: np.ndarray | None = None
    plan_after: np.ndarray | None = None
    plan_conj_start: np.ndarray | None = None
    plan_conj: np.ndarray | None = None
    plan_neg_start: np.ndarray | None = None
    plan_neg: np.ndarray | None = None
    comp_proceed: np.ndarray | None = None  # SKIP_TILL_NEXT_MATCH closure guards
    # what each NOT negates (cep_expand.pack_not_programs; R6a)
    not_sub_start: np.ndarray | None = None
    not_seq_start: np.ndarray | None = None
    not_comps: np.ndarray | None = None
    not_early: np.ndarray | None = None
    # iteration groups of KL over a SEQ (cep_expand.group_arrays; R6b)
    groups: np.ndarray | None = None
    seq_recheck: np.ndarray | None = None
    take_skip: np.ndarray | None = None
    neg_iter: np.ndarray | None = None   # per NOT check inside a KL group (R6b, R6c)
    loop_only: np.ndarray | None = None  # per comp: starts an alternative only loops enter
    # plan inside the task from its first rows (runtime.task_planning), or None
    worker_planner: TaskPlanning | None = None
    # MEASURES aggregates folded over each output row's rows (gathered.GatherSpec)
    gathered: tuple = ()
    error_site: str | None = None  # the driver's id of the clause (errors.error_site)
