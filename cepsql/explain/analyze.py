"""EXPLAIN ANALYZE: what one clause's run measured (runtime/run_stats.py ClauseStatistics:
rows read and kept, rows per variable, partitions and skew, the evaluator's counters,
the plan a task used, time per stage), next to what planning estimated where it did
(CEP mode's sampled statistics: rows and per-variable selectivities).

Rendered after the clause's EXPLAIN block, so the estimates and the measured figures
read side by side; ``analyze_labels`` gives the short figures drawn on the plan SVG."""
from __future__ import annotations

from cepsql.analyze.relevance import positional_conjuncts, row_local_conjuncts
from cepsql.compile.query_plan import CepExplainFacts, QueryPlan
from cepsql.explain.clause import explain_clause
from cepsql.explain.summary import summarize
from cepsql.runtime.run_stats import STAGES, ClauseStatistics, PassStatistics, skew as skew_of

__all__ = ["analyze_block", "analyze_labels", "clause_blocks", "pass_block"]


def clause_blocks(recorded: list[tuple[object, QueryPlan]],
                  analyzed: list[ClauseStatistics | None] | None = None) -> list[str]:
    """The EXPLAIN block of each planned clause ((spec, plan) pairs, in run order): its
    summary and detail, then (EXPLAIN ANALYZE) what its run measured (``analyzed``, one
    entry per clause; None: not measured)."""
    analyzed = list(analyzed or [])
    blocks = []
    for i, (spec, plan) in enumerate(recorded, 1):
        body = explain_clause(plan) or "(no plan details)"
        block = f"== MATCH_RECOGNIZE clause {i} ==\n{summarize(spec, plan)}\n\nDetail:\n{body}"
        if i <= len(analyzed) and analyzed[i - 1] is not None:
            block += "\n\n" + analyze_block(plan, analyzed[i - 1])
        blocks.append(block)
    return blocks

# evaluator counters shown, in this order: (key, label); others are listed after them
_COUNTERS = (
    ("attempts", "match attempts started"),
    ("thread_states", "regex VM thread states entered"),
    ("peak_thread_states", "peak thread states at one row"),
    ("runs_created", "runs created"),
    ("runs_merged", "runs merged"),
    ("peak_runs", "peak live runs"),
    ("partial_matches", "partial matches created"),
    ("peak_partial_matches", "peak partial matches held"),
    ("peak_rows", "peak rows held"),
    ("matches_found", "matches found"),
    ("matches_output", "matches output (after AFTER MATCH / strategy rules)"),
)
_PLAN_KEYS = ("worker_planned", "worker_plan", "worker_sample_rows", "adaptive_checks",
              "adaptive_switches", "planned")


def analyze_block(plan: QueryPlan, stats: ClauseStatistics) -> str:
    """The "Analyze" lines of one clause: measured figures, estimates in brackets."""
    estimates = _statistics(plan)
    lines = ["Analyze (measured in this run; [planner's estimate]):"]
    read = stats.rows_read
    est_rows = getattr(estimates, "input_rows", None)
    lines.append(f"  rows read:        {_n(read)}"
                 + (f"  [{_n(est_rows)}]" if est_rows is not None else ""))
    if stats.rows_relevant is not None:
        lines.append(f"  rows kept:        {_n(stats.rows_relevant)}{_share(stats.rows_relevant, read)}"
                     " by the relevance filter")
    elif plan.relevance_filter is None and plan.spec is not None \
            and getattr(plan.spec, "strategy", None) is not None:
        lines.append("  rows kept:        every row (no relevance filter)")
    lines += _variable_lines(plan, stats, estimates)
    lines += _partition_lines(stats.partition_rows)
    lines += _counter_lines(stats.counters)
    lines += _plan_lines(plan, stats.counters)
    lines.append(f"  output rows:      {_n(stats.output_rows)}")
    if stats.seconds:
        times = ", ".join(f"{stage} {stats.seconds[stage]:.3f} s" for stage in STAGES
                          if stage in stats.seconds)
        lines.append(f"  time per stage:   {times}")
    lines += [f"  note: {note}" for note in stats.notes]
    return "\n".join(lines)


def analyze_labels(stats: ClauseStatistics) -> list[str]:
    """Short measured figures for the plan drawing (rows in and out, matches, time)."""
    c = stats.counters
    labels = [f"rows {_n(stats.rows_read)} -> {_n(stats.output_rows)}"]
    matches = c.get("matches_output")
    if matches is not None:
        labels.append(f"matches {_n(matches)}")
    peak = c.get("peak_partial_matches", c.get("peak_runs", c.get("peak_thread_states")))
    if peak is not None:
        labels.append(f"peak state {_n(peak)}")
    if stats.seconds:
        labels.append(f"time {sum(stats.seconds.values()):.3f} s")
    return labels


def _statistics(plan: QueryPlan):
    """The PatternStatistics the planner used (None: SQL:2016 mode or no planning)."""
    facts = plan.explain_facts
    if isinstance(facts, CepExplainFacts) and facts.choice is not None:
        statistics = getattr(facts.choice, "statistics", None)
        if getattr(statistics, "sample_rows", 0):  # defaults estimate nothing
            return statistics
    return None


def _variable_lines(plan: QueryPlan, stats: ClauseStatistics, estimates) -> list[str]:
    """Per variable, the rows where its DEFINE's conjuncts that read only the current row
    and PREV/NEXT of it all hold, naming them; the planner's estimate beside it when they
    are all single-row (what the estimate is of)."""
    if not stats.variable_rows:
        return []
    base = stats.rows_relevant if stats.rows_relevant is not None else stats.rows_read
    lines = ["  rows per variable where its DEFINE conjuncts on the row and PREV/NEXT of "
             "it hold:"]
    unary = getattr(estimates, "unary_selectivity", {}) or {}
    counted = positional_conjuncts(plan.spec) if plan.spec is not None else {}
    single = row_local_conjuncts(plan.spec) if plan.spec is not None else {}
    for var, held in stats.variable_rows.items():
        conjuncts = counted.get(var, [])
        if not conjuncts:
            lines.append(f"    {var}: not counted (every DEFINE conjunct reads the match "
                         "being built)")
            continue
        texts = " AND ".join(c.text for c in conjuncts)
        if held is None:
            lines.append(f"    {var}: not counted ({texts} cannot be evaluated vectorised)")
            continue
        est = ""
        if var in unary and stats.rows_read is not None \
                and len(single.get(var, [])) == len(conjuncts):
            est = f"  [{_n(round(unary[var] * stats.rows_read))}]"
        lines.append(f"    {var}: {_n(held)} of {_n(base)} rows{_share(held, base)} "
                     f"satisfy {texts}{est}")
    return lines


def pass_block(stats: PassStatistics, unmeasured: list[str] = ()) -> str:
    """The "Analyze" lines of one shared workload pass (EXPLAIN ANALYZE WORKLOAD);
    ``unmeasured``: views whose clauses run on their own, outside the pass."""
    read = stats.rows_read
    lines = [f"Analyze (the pass over {stats.source}, measured in this run):",
             f"  rows read:        {_n(read)}"]
    for k, kept in enumerate(stats.group_rows, 1):
        lines.append(f"  group {k} kept:     " + ("every row (no relevance filter)"
                     if kept is None else f"{_n(kept)}{_share(kept, read)} by its "
                     "relevance filter"))
    lines += _partition_lines(stats.partition_rows)
    lines.append("  per clause (view: rows fed to it -> rows it returned):")
    lines += [f"    {view}: {_n(rows_in)} -> {_n(rows_out)}"
              for view, rows_in, rows_out in stats.clauses]
    lines += [f"    {view}: runs on its own after the pass (not measured here: EXPLAIN "
              "ANALYZE its query)" for view in unmeasured]
    if stats.task_seconds:
        times = ", ".join(f"{stage} {stats.task_seconds[stage]:.3f} s" for stage in STAGES
                          if stage in stats.task_seconds)
        lines.append(f"  time in tasks:    {times} (summed over the tasks)")
    if stats.seconds is not None:
        lines.append(f"  the pass's job:   {stats.seconds:.3f} s wall (scan, shuffle, sort, "
                     "evaluation)")
    return "\n".join(lines)


def _partition_lines(partition_rows: list[int]) -> list[str]:
    skew = skew_of(partition_rows)
    if skew is None:
        return ["  partitions:       0"]
    largest, median = skew
    ratio = f" ({largest / median:.1f}x the median)" if median else ""
    line = (f"  partitions:       {_n(len(partition_rows))}; largest {_n(largest)} rows, "
            f"median {median:,.1f}{ratio}")
    return [line]


def _counter_lines(counters: dict) -> list[str]:
    shown = [(label, counters[key]) for key, label in _COUNTERS if key in counters]
    known = {k for k, _ in _COUNTERS} | set(_PLAN_KEYS)
    shown += [(key.replace("_", " "), value) for key, value in counters.items()
              if key not in known and not isinstance(value, str)]
    if not shown:
        return ["  evaluator:        (keeps no counters on this path)"]
    return ["  evaluator:"] + [f"    {label}: {_n(value)}" for label, value in shown]


def _plan_lines(plan: QueryPlan, counters: dict) -> list[str]:
    facts = plan.explain_facts
    choice = getattr(facts, "choice", None)
    if isinstance(facts, CepExplainFacts):
        used = "in-order run NFA" if choice is None else \
            f"{choice.evaluator}" + (f" ({choice.algorithm})" if choice.algorithm else "")
    elif facts is not None:
        used = "SQL:2016 regex VM"
    else:
        used = "(not recorded)"
    if counters.get("worker_planned"):
        used = (f"planned in the tasks from their own first rows "
                f"({_n(counters.get('worker_sample_rows'))} sampled in all): "
                f"{counters.get('worker_plan', '')}")
    lines = [f"  plan used:        {used}"]
    switches = counters.get("adaptive_switches")
    if switches is not None:
        lines.append(f"  re-planned in a task: {'yes' if switches else 'no'} ({_n(switches)} "
                     f"switches after {_n(counters.get('adaptive_checks', 0))} drift checks)")
    else:
        lines.append("  re-planned in a task: no")
    return lines


def _n(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"


def _share(part: int | None, whole: int | None) -> str:
    if part is None or not whole:
        return ""
    return f" ({100.0 * part / whole:.1f}%)"
