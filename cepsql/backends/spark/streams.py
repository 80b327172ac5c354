"""What the Spark backend hands over when an input is a stream. It never imports the
streaming backend (the backends are independent); api/ supplies a StreamRunner made of
the streaming backend's functions when it builds ``spark.cep``, and the rewrite and the
workload call it where a DataFrame ``isStreaming``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from pyspark.sql import DataFrame

from cepsql.errors import CepUnsupportedError
from cepsql.compile.query_plan import QueryPlan
from cepsql.runtime.one_pass import SharedPass

__all__ = ["StreamRunner", "require_streams"]


@dataclass(frozen=True)
class StreamRunner:
    """The streaming backend's entry points, as the batch code calls them."""
    # (streaming input, plan, name its late rows are listed under) -> the unbounded result
    run_plan: Callable[[DataFrame, QueryPlan, str], DataFrame]
    # (streaming source, plans, sharing settings) -> the tagged rows of one stateful pass
    shared_pass: Callable[[DataFrame, list[QueryPlan], dict], tuple[SharedPass, DataFrame]]
    # (workload clauses, passes by source) -> Workload.matches() over the streams
    matches: Callable[[list, dict], DataFrame]


def require_streams(streams: StreamRunner | None) -> StreamRunner:
    """streams, or an error saying that a streaming input needs ``spark.cep``."""
    if streams is None:
        raise CepUnsupportedError("MATCH_RECOGNIZE over a streaming input runs through "
                                  "spark.cep (no streaming backend was given here)")
    return streams
