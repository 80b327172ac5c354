"""Many mutants of valid queries run in-process (issue 24): how many gave rows, how many a
cepsql error positioned in the mutant's text, and which other exception types are left
(with an example each). Run by hand: python benchmarks/fuzz_errors.py [n_mutants] [seed]."""
from __future__ import annotations

import collections
import os
import random
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))  # tests/support

from support.fuzz import mutate, positioned, run_in_process, seed_queries, seed_tables  # noqa: E402


def _origin(err: BaseException) -> str:
    """The innermost cepsql frame of err's traceback (which stage let it through)."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if "cepsql" in f.filename]
    if not frames:
        return "?"
    f = frames[-1]
    return f"{f.filename.split('cepsql/', 1)[-1]}:{f.lineno} ({f.name})"


def main(n: int = 2000, seed: int = 1) -> None:
    rng = random.Random(seed)
    seeds, tables = seed_queries(), seed_tables()
    counts: collections.Counter = collections.Counter()
    unpositioned: dict[str, tuple[str, str]] = {}
    others: dict[str, tuple[str, str]] = {}
    slowest = (0.0, "")
    start = time.perf_counter()
    for _ in range(n):
        sql = mutate(rng.choice(seeds), rng)
        if rng.random() < 0.3:
            sql = mutate(sql, rng)
        t0 = time.perf_counter()
        out = run_in_process(sql, tables)
        slowest = max(slowest, (time.perf_counter() - t0, sql))
        if out.kind == "rows":
            counts["rows"] += 1
        elif out.kind == "cep":
            ok = positioned(out.error, sql)
            counts["cep positioned" if ok else "cep unpositioned"] += 1
            if not ok:
                key = f"{type(out.error).__name__}: {out.error.message[:60]}"
                unpositioned.setdefault(key, (sql, str(out.error)))
        else:
            counts["other"] += 1
            key = f"{type(out.error).__name__}: {str(out.error).splitlines()[0][:80] if str(out.error) else ''}"
            others.setdefault(key, (sql, f"{repr(out.error)[:200]} at {_origin(out.error)}"))
    elapsed = time.perf_counter() - start
    failed = n - counts["rows"]
    print(f"mutants tried: {n} in {elapsed:.1f} s (slowest {slowest[0]:.2f} s)")
    print(f"  rows: {counts['rows']}")
    print(f"  failed: {failed}; positioned CepError: {counts['cep positioned']} "
          f"({100 * counts['cep positioned'] / max(failed, 1):.1f}% of failures)")
    print(f"  CepError without a position in the text: {counts['cep unpositioned']}")
    print(f"  other exception types: {counts['other']}")
    for title, group in (("unpositioned CepErrors", unpositioned), ("other exceptions", others)):
        if group:
            print(f"\n{title} ({len(group)} distinct):")
            for key, (sql, text) in sorted(group.items()):
                print(f"- {key}\n    mutant: {sql[:400]!r}\n    error: {text[:300]!r}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
