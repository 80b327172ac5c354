"""SQL:2016 mode's program builder: DEFINE per variable, the regex VM program
(``program``) and the ``WorkerConfig`` the runtime's MatchWorker runs.

Called by the clause skeleton (``compile.clause``) through the ``ModeCompiler`` steps.
"""
from __future__ import annotations

import pyarrow as pa

from cepsql.algebra.expressions import Expr, RowRef
from cepsql.algebra.rowrefs import bind_rows
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.analyze.aggregates import normalize_aggregates, value_navigation
from cepsql.analyze.decompose import localize, normalize_define_ref
from cepsql.analyze.rowsets import RefTable
from cepsql.compile.clause_parts import BoundOutput, Clause
from cepsql.compile.program import Program, compile_pattern
from cepsql.compile.opcodes import EMPTY_CODES, SKIP_CODES
from cepsql.compile.query_plan import SqlExplainFacts
from cepsql.compile.worker_config import WorkerConfig



class SqlMode:
    """SQL:2016 mode (no STRATEGY): the steps of ``clause_parts.ModeCompiler``."""

    def __init__(self) -> None:
        self.defines: dict[str, Expr] = {}
        self.regex: Program | None = None   # the regex VM program
        self.skip_set = -1

    def check(self, spec: MatchRecognizeSpec) -> None:
        pass

    def shape(self, spec: MatchRecognizeSpec, schema: pa.Schema) -> MatchRecognizeSpec:
        return spec

    def conditions(self, clause: Clause) -> tuple[dict[str, Expr], list[str]]:
        """Each variable's DEFINE, localized: row-local parts become derived columns."""
        sets, derived = clause.sets, clause.derived
        for var, cond in clause.spec.defines.items():
            cond = normalize_aggregates(value_navigation(cond), derived, final_default=False,
                                        known_vars=clause.known, in_define=True,
                                        members=sets.members)
            bound = bind_rows(cond, in_define=True, final_default=False,
                              known_vars=clause.known)
            self.defines[var] = localize(
                bound, derived, lambda ref, v=var: normalize_define_ref(ref, v, sets.members))
        return self.defines, clause.labels

    def program(self, clause: Clause) -> None:
        self.regex = compile_pattern(clause.spec.pattern, clause.labels)
        skip = clause.spec.after_match_skip
        if skip.kind in ("TO_FIRST", "TO_LAST"):
            self.skip_set = clause.sets.set_id(skip.var)

    def config(self, clause: Clause, out: BoundOutput) -> WorkerConfig:
        spec, program = clause.spec, self.regex
        skip = spec.after_match_skip
        reads = out.refs.refs + [ref for ref, _ in clause.leaves.items]
        return WorkerConfig(
            program=program.ops, n_labels=len(clause.labels), n_slots=program.n_slots,
            labels=clause.labels, code=out.code, refs=out.refs.encode(),
            membership=clause.sets.membership(), leaves=out.leaves,
            leaf_columns=out.leaf_columns, measure_aggregates=out.measure_aggregates,
            aggregate_columns=out.aggregate_columns,
            skip_mode=SKIP_CODES[skip.kind], skip_set=self.skip_set, skip_var=skip.var,
            all_rows=spec.rows_per_match == "ALL",
            empty_mode=EMPTY_CODES[spec.all_rows_option],
            full_history=needs_full_history(out.refs) or out.code.reads_other_labels,
            partition_columns=clause.partition_columns, passthrough=out.passthrough,
            max_lookback=max_lookback(reads), **clause.window(),
            closure_depth=program.closure_depth, sql=clause.sql or None,
            skip_pos=skip.pos, output_schema=out.output_schema, gathered=out.gathered)

    def plan_fields(self, clause: Clause) -> dict:
        derived = [(name, expr) for expr, name in clause.derived.columns.items()]
        return {"explain_facts": SqlExplainFacts(self.defines, derived, len(self.regex))}


def max_lookback(refs: list[RowRef]) -> int:
    """How far before a match's first row any reference can read."""
    return max([-r.physical_offset for r in refs if r.physical_offset < 0] + [0])


def needs_full_history(refs: RefTable) -> bool:
    """Whether DEFINE can read deeper into a thread's past than first/last rows."""
    return any(r.var is not None and r.logical_offset > 0 for r in refs.refs)


__all__ = ["SqlMode", "max_lookback", "needs_full_history"]
