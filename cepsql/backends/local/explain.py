"""EXPLAIN in-process: ``cepsql.explain_query(query, analyze=False, **tables)``, the same report
as ``spark.cep.explain`` without Spark. With analyze the query runs (its result is
dropped) and each clause's block adds what the run measured (explain/analyze.py)."""
from __future__ import annotations

from cepsql import parse
from cepsql.errors import CepUnsupportedError
from cepsql.compile.clause import plan_query
from cepsql.explain.analyze import clause_blocks
from cepsql.explain.svg import clauses_svg
from cepsql.runtime.run_stats import RunStatistics
from cepsql.backends.local.engine import TableLike, plan_local, run_local, to_arrow

__all__ = ["explain_query"]


def explain_query(query: str, analyze: bool = False, *, file: str | None = None,
            **tables: TableLike) -> str:
    """Each MATCH_RECOGNIZE clause's plan over the tables (pandas or Arrow, named as in
    the query). ``query`` may be written ``EXPLAIN [ANALYZE] [FORMAT SVG] <query>``;
    ``analyze`` (or ANALYZE) runs it and reports rows, partitions, the evaluator's
    counters and time per stage next to the estimates. FORMAT SVG returns the plans
    drawn (with the measured figures under ANALYZE); ``file`` (.svg) also writes them."""
    workload = parse.parse_explain_workload(query)
    if workload is not None:
        raise CepUnsupportedError(
            "EXPLAIN [ANALYZE] WORKLOAD describes the pattern views of a Spark session: run "
            "it through spark.cep.sql or the cepsql command line; in-process, explain each "
            "view's query with cepsql.explain_query(query, analyze=True)",
            sql=query, pos=workload[1])
    explained = parse.parse_explain(query)
    if explained is not None:
        analyze = analyze or parse.explain_analyze(query)
        svg = parse.explain_format(query) == "SVG"
        query = explained[0]
    else:
        svg = False
    arrow = {name: to_arrow(table) for name, table in tables.items()}
    recorded: list[tuple[object, object]] = []

    def recording_planner(spec, schema, sql, **planning):
        plan = plan_query(spec, schema, sql, **planning)
        recorded.append((spec, plan))
        return plan

    analyzed = None
    if analyze:
        stats = RunStatistics()
        out = run_local(query, arrow, planner=recording_planner, stats=stats)
        analyzed = stats.clauses
    else:
        recorded = plan_local(query, arrow)
    if svg or file is not None:
        drawing = clauses_svg(recorded, analyzed, file=file)
        if svg:
            return drawing
    blocks = clause_blocks(recorded, analyzed)
    if analyze:
        blocks.append(f"== Statement ==\nrows returned: {out.num_rows:,}")
    return "\n\n".join(blocks)
