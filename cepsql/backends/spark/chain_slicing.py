"""SQL:2016 AFTER MATCH SKIP PAST LAST ROW over ordered-scan slices: where the chain of
matches enters each slice.

Under SKIP PAST LAST ROW the search resumes at the row after the previous match's last
row, so a slice cannot simply search from its first row: where a match ends decides where
the next search starts. But whether a match starts at row s, and which one, depends on s
alone (no MATCH_NUMBER(), no anchors, a bounded pattern: ``chain_blocker``). So the
chain's whole state at a row b is one number, its *entry* (``entry_at``): the row after
the last row of the match covering b, else b itself; for a pattern of at most L rows it
lies in b .. b + L - 1, and two chains with the same entry at b have the same matches
from b on.

The driver finds each slice's entry (``slice_entry``) from the rows around its first row
b, which the ordered scan's overlap job collects anyway: some rows before b and the
L - 1 (+ NEXT's reach) rows after it. Where the true chain stands at the region's first
searchable row x is unknown, but its entry there is one of x .. x + L - 1; the chain is
run speculatively from each of them over the region, and when all reach b with the same
entry (they converge: at a common match, or no match at all), that is the slice's entry.
Otherwise the scan widens the regions (more rows before b) and tries again, and when
they still do not converge the clause runs as one task. Each slice's task then searches
from its entry (``MatchWorker.resumed``) and keeps the matches that start in its own rows
(the slice's FIRST(copy flag) measure, as for CEP slices). Each match is output once, by
the task whose chain is the true one.

With gap pushdown (the ordered scan's, gap_scan.py; analyze/relevance.py
chain_gap_filter: no PREV/NEXT, every variable with a single-row condition) only the
rows some variable may take reach Python. A match is contiguous and never holds a
dropped row, so each run of kept rows between two dropped ones is searched as a
PARTITION BY group of its own (the slice column numbered by run, ``run_breaks``), and
the chain is known again at every run's first row: a border's entry comes from the
last run beginning before it (``gap_slice_entry``), speculation only for a run longer
than the rows read around the border; a task leaves out the runs before its entry's
(``entered``).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
import itertools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from cepsql.algebra.expressions import ColumnRef, MatchNumber, Navigation, walk
from cepsql.algebra.pattern import (Alternation, Anchor, Concat, Empty, Exclusion,
                                    Negation, PatternNode, Permute, Quantified, Var)
from cepsql.algebra.pattern import walk as walk_pattern
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.compile.program import can_be_empty

__all__ = ["END_MEASURE", "MAX_CHAIN_ROWS", "START_MEASURE", "ChainRows", "chain_blocker",
           "chain_rows", "entered", "entry_at", "gap_slice_entry", "pattern_rows", "reach",
           "region_matches", "run_breaks", "slice_entry"]

START_MEASURE = "__cep_chain_s"  # hidden measures: the match's first and last row's
END_MEASURE = "__cep_chain_e"    # position in the region the driver runs
MAX_CHAIN_ROWS = 64  # longest pattern (rows) sliced: the candidates cost a run each


@dataclass(frozen=True)
class ChainRows:
    """What chain slicing needs around each slice's first row."""
    span: int         # the most rows of one match (the entry candidates)
    lookback: int     # rows PREV reads before a match's first row
    before_rows: int  # rows wanted before a slice's first row (speculative chains)
    after_rows: int   # rows needed after it: the rest of a match started before it


def chain_rows(spec: MatchRecognizeSpec, before_rows: int | None = None) -> ChainRows:
    """The ChainRows of a clause chain_blocker accepts; before_rows default: enough
    for the speculative chains to meet a few matches' spans before the slice."""
    span = pattern_rows(spec.pattern)
    back, ahead = reach(spec)
    if before_rows is None:
        before_rows = max(64, 16 * (span + back))
    return ChainRows(span, back, back + before_rows, span - 1 + ahead)


def pattern_rows(node: PatternNode) -> int | None:
    """The most rows one match of ``node`` can take, or None: unbounded."""
    if isinstance(node, Var):
        return 1
    if isinstance(node, (Empty, Anchor, Negation)):
        return 0
    if isinstance(node, (Concat, Permute)):
        parts = [pattern_rows(i) for i in node.items]
        return None if None in parts else sum(parts)
    if isinstance(node, Alternation):
        parts = [pattern_rows(i) for i in node.items]
        return None if None in parts else max(parts)
    if isinstance(node, Quantified):
        one = pattern_rows(node.child)
        if one == 0:
            return 0
        return None if one is None or node.max is None else one * node.max
    if isinstance(node, Exclusion):
        return pattern_rows(node.child)
    raise TypeError(node)


def chain_blocker(spec: MatchRecognizeSpec) -> str | None:
    """Why a SQL:2016-mode clause cannot be sliced by chain entries (None: it can)."""
    if spec.strategy is not None:
        return "CEP mode"
    if spec.partition_by:
        return "PARTITION BY is written: partitions already run in parallel"
    if not spec.order_by:
        return "no ORDER BY"
    if spec.after_match_skip.kind != "PAST_LAST_ROW":
        return "only AFTER MATCH SKIP PAST LAST ROW is sliced in SQL:2016 mode"
    if spec.rows_per_match != "ONE":
        return "ALL ROWS PER MATCH"
    if spec.window is not None:
        return "a WITHIN window"
    if any(isinstance(n, Anchor) for n in walk_pattern(spec.pattern)):
        return "an anchor ^ or $ refers to the whole input's ends"
    if can_be_empty(spec.pattern):
        return "the pattern can match no rows"
    rows = pattern_rows(spec.pattern)
    if rows is None:
        return "the pattern is unbounded (a match may span the whole input)"
    if rows > MAX_CHAIN_ROWS:
        return f"a match may span more than {MAX_CHAIN_ROWS} rows"
    for expr in _expressions(spec):
        if any(isinstance(e, MatchNumber) for e in walk(expr)):
            return "MATCH_NUMBER() numbers the matches of the whole input"
    return None


def _expressions(spec: MatchRecognizeSpec) -> list:
    return list(spec.defines.values()) + [m.expr for m in spec.measures]


def reach(spec: MatchRecognizeSpec) -> tuple[int, int]:
    """(rows before a match's first row, rows after its last row) its PREV / NEXT can
    read: the sum of every PREV / NEXT offset (a bound for nested navigation)."""
    back = ahead = 0
    for expr in _expressions(spec):
        for e in walk(expr):
            if isinstance(e, Navigation) and e.kind == "PREV":
                back += e.offset
            elif isinstance(e, Navigation) and e.kind == "NEXT":
                ahead += e.offset
    return back, ahead


def entry_at(matches: Iterable[tuple[int, int]], at: int) -> int:
    """Where a chain with ``matches`` ((first, last) rows) searches from at row ``at``:
    after the match covering ``at``, else ``at`` itself."""
    for first, last in matches:
        if first < at <= last:
            return last + 1
    return at


def slice_entry(run: Callable[[int | None], list[tuple[int, int]] | None], at: int, before: int,
                span: int, from_start: bool) -> int | None:
    """The chain's entry at region row ``at`` (a slice's first row), or None when the
    speculative chains do not converge. run(c) gives the matches of the chain searched
    from region row c (None: from the region's first row, which is the input's first
    row; run gives None when it cannot tell). before: rows PREV reads before a match;
    span: the pattern's most rows; from_start: the region begins at the input's first
    row (the chain is known)."""
    if from_start:
        matches = run(None)
        return None if matches is None else entry_at(matches, at)
    first = before  # the first row whose PREV reads lie in the region
    if first >= at:
        return None
    entries = set()
    for c in range(first, first + max(span, 1)):
        matches = run(c) if c < at else []
        if matches is None:
            return None
        entries.add(entry_at(matches, at) if c < at else c)
    return entries.pop() if len(entries) == 1 else None


def run_breaks(positions: np.ndarray, first_breaks: bool) -> np.ndarray:
    """(gap pushdown) Which kept rows (by global position) begin a run: those not
    directly after the previous kept row. Each run is searched as a group of its own
    (no match spans a dropped row: analyze/relevance.py chain_gap_filter).
    first_breaks: whether the first row does."""
    flags = np.empty(len(positions), bool)
    if len(positions):
        flags[0] = first_breaks
        flags[1:] = positions[1:] != positions[:-1] + 1
    return flags


def gap_slice_entry(run: Callable[[int, bool], list[tuple[int, int]] | None],
                    breaks: np.ndarray, at: int, span: int) -> int | None:
    """(gap pushdown) slice_entry over a region cut into runs (``breaks``: run_breaks;
    no PREV/NEXT). When a run begins at or before ``at``, the chain is known there:
    run(r, True) gives the matches searched from region row r as a stream's first row.
    Otherwise the speculative chains of slice_entry, run(c, False): the region's first
    run entered at its row c."""
    known = np.flatnonzero(breaks[:at + 1])
    if len(known):
        matches = run(int(known[-1]), True)
        return None if matches is None else entry_at(matches, at)
    return slice_entry(lambda c: run(c, False), at, 0, span, False)


def entered(worker, batches: Iterator[pa.RecordBatch], entry: int, group_at: int
            ) -> Iterator[pa.RecordBatch]:
    """(gap pushdown) worker's output over ``batches`` (rows cut into groups in column
    ``group_at``) searched from stream row ``entry`` on: the rows of the groups before
    the entry's are left out (no match they hold is kept), and the search enters its
    group there. Every batch is read (the stream checks its rows as it goes)."""
    head, rows = [], 0
    for batch in batches:
        head.append(batch)
        rows += batch.num_rows
        if rows > entry:
            break
    if rows <= entry:  # no row at or after the entry: no match to search
        for _ in batches:
            pass
        return
    table = pa.Table.from_batches(head)
    groups = np.asarray(table.column(group_at).combine_chunks())
    first = int(np.searchsorted(groups, groups[entry], "left"))
    rest = itertools.chain(table.slice(first).to_batches(), batches)
    yield from worker.resumed(rest, entry - first)


def region_matches(worker, table: pa.Table, position: str, final_projection,
                   start: int | None) -> list[tuple[int, int]] | None:
    """(first, last) region rows of the matches ``worker`` (a SQL:2016 MatchWorker of the
    sliced plan) finds in ``table`` searching from row ``start`` (None: row 0 as the
    input's first row); ``position`` is the column numbered here with the row index.
    None: the hidden measures are not plain worker columns (no entry can be told)."""
    columns = dict(final_projection)
    s, e = columns.get(START_MEASURE), columns.get(END_MEASURE)
    if not (isinstance(s, ColumnRef) and isinstance(e, ColumnRef)):
        return None
    at = table.schema.get_field_index(position)
    table = table.set_column(at, table.schema.field(at),
                             pa.array(np.arange(table.num_rows, dtype=np.int64),
                                      table.schema.field(at).type))
    batches = table.to_batches()
    out = worker(iter(batches)) if start is None else worker.resumed(iter(batches), start)
    found = pa.Table.from_batches(list(out), worker.config.output_schema)
    return list(zip(found.column(s.column).to_pylist(), found.column(e.column).to_pylist()))
