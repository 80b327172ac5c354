"""EXPLAIN ANALYZE WORKLOAD on Spark: a workload's shared pass run once more, measured.

The pass is planned as the workload's (the same ``SharedPass``) and run without
persisting, its rows dropped, with the side channels EXPLAIN ANALYZE of one clause uses
(backends/spark/analyze.py; ``DataFrame.observe`` metrics, so Spark Connect works too):
the source observed (rows read, and the rows each clause's own relevance filter keeps:
the rows the pass feeds it), each partitioning group's input after its relevance filter
(rows kept), every task's worker wrapped in ``AnalyzedWorker`` (rows, PARTITION BY
groups and time per stage, in one extra row) and the tagged output (rows per clause)."""
from __future__ import annotations

import json
import time

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from cepsql.runtime.one_pass import TAG, SharedPass
from cepsql.runtime.run_stats import PassStatistics
from cepsql.backends.spark.analyze import STATS_COLUMN, AnalyzedWorker, analyzed_schema
from cepsql.backends.spark.columns import column, expression

__all__ = ["PassAnalysis"]


class PassAnalysis:
    """The observations of one measured pass: hand it to the pass builder (``observe_*``,
    ``schema``, ``worker`` are its hooks), ``run`` the frame it returns, then ``finish``."""

    def __init__(self, source: str, shared: SharedPass, views: dict[int, str], relevance):
        self.figures = PassStatistics(source)
        self.shared = shared        # the workload's planned pass (run again here)
        self.views = views          # pattern index -> view name
        self.relevance = relevance  # plan -> its relevance filter in the pass (or None)
        self.seen_source = Observation()
        self.seen_groups: list[Observation] = []
        self.seen_output = Observation()

    def observe_source(self, df: DataFrame) -> DataFrame:
        """Rows read, and per clause fed only its own relevant rows, how many they are."""
        fed = [F.count_if(F.coalesce(expression(cond), F.lit(False))).alias(f"r{p.index}")
               for g in self.shared.groups for p in g.patterns
               if p.relevant is not None and (cond := self.relevance(p.plan)) is not None]
        return df.observe(self.seen_source, F.count(F.lit(1)).alias("rows"), *fed)

    def observe_group(self, k: int, df: DataFrame) -> DataFrame:
        self.seen_groups.append(Observation())
        return df.observe(self.seen_groups[k], F.count(F.lit(1)).alias("rows"))

    def schema(self, shared: SharedPass):
        """The pass's tagged schema (once bound) plus the tasks' stats column."""
        return analyzed_schema(shared.output_schema)

    def worker(self, worker, group) -> AnalyzedWorker:
        return AnalyzedWorker(worker, analyzed_schema(self.shared.output_schema),
                              group.partition_columns, None, None)

    def observe_output(self, tagged: DataFrame) -> DataFrame:
        """Rows per clause (its tag), and the tasks' stats rows (then dropped)."""
        counts = [F.count_if(column(TAG) == i).alias(f"t{i}") for i in self.views]
        tagged = tagged.observe(self.seen_output, F.collect_list(column(STATS_COLUMN))
                                .alias("tasks"), *counts)
        return tagged.where(column(STATS_COLUMN).isNull())

    def run(self, tagged: DataFrame) -> None:
        """Run the pass to its end, its rows dropped (the noop sink)."""
        started = time.perf_counter()
        tagged.write.format("noop").mode("overwrite").save()
        self.figures.seconds = time.perf_counter() - started

    def finish(self) -> PassStatistics:
        out, figures = self.seen_output.get, self.figures
        read = self.seen_source.get
        figures.rows_read = int(read["rows"])
        for group, seen in zip(self.shared.groups, self.seen_groups):
            figures.group_rows.append(int(seen.get["rows"]) if group.relevance else None)
        reports = [json.loads(t) for t in out["tasks"] or []]
        figures.partition_rows = [g for r in reports for g in r["groups"]]
        for r in reports:
            for stage, value in r["seconds"].items():
                stage = "shuffle+sort" if stage == "input" else stage
                figures.task_seconds[stage] = figures.task_seconds.get(stage, 0.0) + value
        for group, kept in zip(self.shared.groups, figures.group_rows):
            for p in group.patterns:  # fed its own relevant rows, or the group's
                fed = read.get(f"r{p.index}")
                rows_in = int(fed) if fed is not None else \
                    (kept if kept is not None else figures.rows_read)
                figures.clauses.append((self.views[p.index], rows_in, int(out[f"t{p.index}"])))
        return figures
