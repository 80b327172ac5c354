"""The CEP evaluator is re-entrant: two evaluations running at once in two threads (the
Cython run releases the GIL, and orders its stored matches without it) give exactly
the results they give one after the other. The match ordering once read its context
from module-level variables, which a concurrent evaluation overwrote."""
from __future__ import annotations

import datetime
import threading

import pyarrow as pa
import pandas as pd

import cepsql

# many overlapping matches per row: the stored matches are sorted for MATCH_NUMBER
# (first row first) and, under SKIP PAST LAST ROW, for the selection (last row first)
QUERY = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES a.ts AS t0, b.ts AS tb, "
         "c.ts AS t1, MATCH_NUMBER() AS mn ONE ROW PER MATCH {skip} "
         "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b, c)) WITHIN INTERVAL '{w}' SECOND "
         "DEFINE a AS a.kind = 'a', b AS b.kind = 'b', c AS c.kind = 'c')")
PAST = "AFTER MATCH SKIP PAST LAST ROW"
ROUNDS = 12


def _events(n: int, shift: int) -> pa.Table:
    start = datetime.datetime(2024, 1, 1)
    return pa.table({
        "ts": [start + datetime.timedelta(seconds=i) for i in range(n)],
        "kind": ["abc"[(i // (3 + shift) + i % 2 + shift) % 3] for i in range(n)]})


def _run(sql: str, table: pa.Table) -> pd.DataFrame:
    return cepsql.match_recognize(sql, t=table)


def _concurrently(jobs: list[tuple[str, pa.Table]]) -> list[list[pd.DataFrame]]:
    """Each job run ROUNDS times in its own thread, all threads started together."""
    results: list[list[pd.DataFrame]] = [[] for _ in jobs]
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(jobs))

    def work(k: int) -> None:
        try:
            barrier.wait()
            for _ in range(ROUNDS):
                results[k].append(_run(*jobs[k]))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return results


def _check(jobs: list[tuple[str, pa.Table]]) -> None:
    sequential = [_run(sql, table) for sql, table in jobs]
    for k, runs in enumerate(_concurrently(jobs)):
        assert len(runs) == ROUNDS
        for got in runs:
            pd.testing.assert_frame_equal(got, sequential[k])


def test_selection_and_numbering_sort_concurrently():
    # one thread orders for the SKIP PAST LAST ROW selection, the other for numbering,
    # over different data: a shared sort context would mix keys and arrays
    numbering = (QUERY.format(skip="", w=20), _events(600, 0))
    selection = (QUERY.format(skip=PAST, w=25), _events(500, 1))
    assert len(_run(*numbering)) > 3000 and len(_run(*selection)) > 20
    _check([numbering, selection])


def test_same_query_different_data_concurrently():
    jobs = [(QUERY.format(skip="", w=w), _events(n, shift))
            for w, n, shift in ((15, 500, 0), (20, 400, 2))]
    assert all(len(_run(*job)) > 1000 for job in jobs)
    _check(jobs)


# SQL:2016 mode, planned once (backends/local/plan_cache.py): every call reuses the same
# cached plan and bound worker, so concurrent calls share them
SQL2016 = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES MATCH_NUMBER() AS mn, "
           "FIRST(b.ts) AS tb, AVG(b.n) AS avg_b, LAST(c.ts) AS tc ONE ROW PER MATCH "
           "AFTER MATCH SKIP TO NEXT ROW PATTERN (a b+? c+?) DEFINE a AS a.kind = 'a', "
           "b AS b.n >= AVG(b.n), c AS c.kind = 'c')")


def test_cached_plan_shared_by_concurrent_calls():
    jobs = [(SQL2016, _events(n, shift).append_column("n", pa.array(
        [(i * 7 + shift) % 5 for i in range(n)]))) for n, shift in ((900, 0), (700, 1))]
    cepsql.backends.local.plan_cache.PLANS.clear()
    assert all(len(_run(*job)) > 20 for job in jobs)
    assert len(cepsql.backends.local.plan_cache.PLANS) == 1  # one plan for both inputs
    _check(jobs)
