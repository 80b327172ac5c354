"""Options of the cost-based CEP planner, from Spark conf keys or (in-process) a context.

Spark users set ``spark.conf.set("cepsql.planner.algorithm", "GREEDY")``; in-process users
write ``with cepsql.planner_options(algorithm="GREEDY"): cepsql.match_recognize(...)``.
Both end up as one frozen ``PlannerOptions`` handed to ``plan_query``.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields, replace
from typing import Callable, Iterator

from cepsql.errors import CepAnalysisError
from cepsql.exprs.ansi import ansi_enabled, ansi_mode
from cepsql.planning.algorithms import ALGORITHMS
from cepsql.planning.cost import CostModel

__all__ = ["CONF_KEYS", "PlannerOptions", "conf_values", "current_options", "options_from_conf",
           "planner_options"]


#: CPU of a pair tried / of a partial match created in the planned evaluator, fitted on
#: forced plans of SEQ(a, b, c, d, e) (benchmarks/bench_adaptive.py --plans: 0.12 us vs
#: 0.41 us per pair / partial match)
ACCESS_WEIGHT = 0.3


@dataclass(frozen=True)
class PlannerOptions:
    """algorithm: one of planning.ALGORITHMS, or None = cepsql chooses (DP within the
    plan-time budget, GREEDY / II beyond). alpha: weight of the latency cost (0 = pure
    throughput cost, VLDB 2018 section 5.1). sample_rows / sample_seconds bound the
    statistics sample; plan_seconds bounds plan generation. slicing: split unpartitioned
    windowed inputs into overlapping time slices; infer_partitions: derive PARTITION BY
    keys from an equality that links every variable. run_merging: the CEP run NFA merges
    equal runs (SASE+ 5.2.2; off only to measure it). In-process only: threads for the
    evaluators (None = every core), sequence_fast_path (``A B+ C`` shapes:
    backends/local/sequence.py) and vector_masks (DEFINE masks in numpy: masks.py), both
    switched off only to compare against the general evaluator. max_partial_matches
    bounds one partition's CEP state (live runs, buffered nodes, partial matches, rows of
    matches not yet output; cepsql.cep.maxPartialMatches): None scales it to the worker's
    memory (runtime.cep_worker.default_state_limit), 0 means no bound. access: cost of
    a pair of partial matches tried against one created (cost.py; 0 = the VLDB 2018
    costs exactly; ACCESS_WEIGHT was measured on the planned evaluator)."""
    algorithm: str | None = None
    alpha: float = 0.0
    access: float = ACCESS_WEIGHT
    sample_rows: int = 50_000
    sample_seconds: float = 5.0
    plan_seconds: float = 1.0
    slicing: bool = True
    infer_partitions: bool = True
    ansi: bool = True  # spark.sql.ansi.enabled: DEFINE arithmetic overflow raises (else NULL)
    run_merging: bool = True
    threads: int | None = None
    sequence_fast_path: bool = True
    vector_masks: bool = True
    max_partial_matches: int | None = None

    def cost_model(self) -> CostModel:
        """The cost model plans are chosen (and adaptive switches priced) with."""
        return CostModel(alpha=self.alpha, access=self.access)


#: Spark conf key -> PlannerOptions field
CONF_KEYS = {
    "cepsql.planner.algorithm": "algorithm",
    "cepsql.planner.alpha": "alpha",
    "cepsql.planner.accessCost": "access",
    "cepsql.planner.sampleRows": "sample_rows",
    "cepsql.planner.sampleSeconds": "sample_seconds",
    "cepsql.planner.planSeconds": "plan_seconds",
    "cepsql.planner.slicing": "slicing",
    "cepsql.planner.inferPartitions": "infer_partitions",
    "cepsql.planner.runMerging": "run_merging",
    "cepsql.cep.maxPartialMatches": "max_partial_matches",
    "spark.sql.ansi.enabled": "ansi",
}

_TYPES = {f.name: f.type for f in fields(PlannerOptions)}
_current: ContextVar[PlannerOptions] = ContextVar("cepsql_planner_options",
                                                  default=PlannerOptions())


def _convert(key: str, name: str, text: str):
    text = text.strip()
    try:
        if name == "algorithm":
            if text.upper() in ("", "AUTO", "DEFAULT"):
                return None
            if text.upper() not in ALGORITHMS:
                raise ValueError(f"known: AUTO, {', '.join(ALGORITHMS)}")
            return text.upper()
        if name in ("slicing", "infer_partitions", "ansi", "run_merging"):
            if text.lower() not in ("true", "false"):
                raise ValueError("expected true or false")
            return text.lower() == "true"
        if name == "max_partial_matches" and text.upper() in ("", "AUTO", "DEFAULT"):
            return None
        if name in ("sample_rows", "max_partial_matches"):
            value = int(text)
        else:
            value = float(text)
        if value < 0 or (name == "alpha" and value > 1):
            raise ValueError("out of range" + (" [0, 1]" if name == "alpha" else ""))
        return value
    except ValueError as exc:
        raise CepAnalysisError(f"invalid value {text!r} for {key}: {exc}") from None


def conf_values(get: Callable[[str], str | None], keys: dict[str, str],
                convert: Callable[[str, str, str], object]) -> dict[str, object]:
    """{name: convert(key, name, text)} for every conf key of ``keys`` (key -> name) that
    ``get`` finds set: how the planner's and the sharing planner's keys are read."""
    return {name: convert(key, name, str(text)) for key, name in keys.items()
            if (text := get(key)) is not None}


def options_from_conf(get: Callable[[str], str | None],
                      base: PlannerOptions | None = None) -> PlannerOptions:
    """PlannerOptions from a conf getter (e.g. ``lambda k: spark.conf.get(k, None)``)."""
    return replace(base or PlannerOptions(), **conf_values(get, CONF_KEYS, _convert))


def current_options() -> PlannerOptions:
    """The options of the in-process path (set with ``planner_options``); ``ansi`` is
    kept in exprs.ansi, where the expression evaluators read it. The set options
    themselves when their ansi is current (a replace costs 14 us, and every in-process
    call asks)."""
    opts, ansi = _current.get(), ansi_enabled()
    return opts if opts.ansi == ansi else replace(opts, ansi=ansi)


@contextmanager
def planner_options(**settings) -> Iterator[PlannerOptions]:
    """Set planner options for in-process queries inside the ``with`` block; keys are
    PlannerOptions fields (``algorithm="DP_B"``, ``alpha=0.5``, ...)."""
    unknown = set(settings) - set(_TYPES)
    if unknown:
        raise TypeError(f"unknown planner option(s): {', '.join(sorted(unknown))}")
    opts = current_options()
    for name, value in settings.items():
        if name == "algorithm" and value is not None:
            value = _convert("algorithm", "algorithm", str(value))
        opts = replace(opts, **{name: value})
    token = _current.set(opts)
    try:
        with ansi_mode(opts.ansi):
            yield opts
    finally:
        _current.reset(token)
