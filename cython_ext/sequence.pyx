# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The in-process fast path of SQL:2016 matching for a pattern that is a sequence of
greedy quantified variables (``A B+ C``, ``A{2,} B? C*``) whose DEFINEs depend on the row
alone (PREV/NEXT included), ONE ROW PER MATCH, AFTER MATCH SKIP PAST LAST ROW.

With every condition known per row (label masks), the preferred match from a start row is
the first success of a backtracking search: element 0 takes as many rows as it can (its
run of true rows, capped at its max), then element 1 from there, and so on, giving back
one row at a time on failure. Whether elements e.. match from row r depends only on the
masks and the partition end, never on the start row, so a failed (e, r) is remembered for
the whole partition; the failed positions of each element are linked to the next lower
position (a union-find with path compression), so the give-back loop jumps over them and
every (element, row) is decided at most once: linear in rows times elements.

The result equals the general VM's (cython_ext/matcher.pyx; property-tested in
tests/test_local_sequence.py). No module-level state: re-entrant, runs without the GIL.
"""
import numpy as np
cimport numpy as cnp
from libc.stdlib cimport malloc, realloc, free
from cepsql._ext.interrupt cimport Countdown, interrupted, raise_interrupt, watch_flag

ctypedef long long i64

cnp.import_array()


cdef struct Search:
    i64 width                   # the longest partition: the scratch arrays' row stride
    i64* run_end                # [n_elems, width]: first row >= r failing the element's label
    i64* parent                 # [n_elems + 1, width + 1]: failed-position links
    const int* label
    const i64* lo
    const i64* hi               # -1: unbounded
    const unsigned char* always # [n_elems]: 1 when the element's label holds on every row
    int n_elems
    i64 pend
    i64* counts                 # [n_elems] of the current attempt


cdef inline i64 _find(Search* s, int e, i64 x) noexcept nogil:
    """The largest position <= x where elements e.. have not failed (-1 if none).
    Positions here and in _try are relative to the partition's first row."""
    cdef i64* p = s.parent + e * (s.width + 1)
    cdef i64 root = x, nxt
    while root >= 0 and p[root] != root:
        root = p[root]
    while x >= 0 and p[x] != x:  # path compression
        nxt = p[x]
        p[x] = root
        x = nxt
    return root


cdef int _try(Search* s, int e, i64 r) noexcept nogil:
    """Whether elements e.. match from row r (their counts in s.counts), preferred first."""
    cdef i64 avail, top, x
    if e == s.n_elems:
        return 1
    if r >= s.pend:
        avail = 0
    elif s.always[e]:
        avail = s.pend - r
    else:
        avail = s.run_end[e * s.width + r] - r
    top = avail if s.hi[e] < 0 or s.hi[e] > avail else s.hi[e]
    if top >= s.lo[e]:
        if e == s.n_elems - 1:
            s.counts[e] = top
            return 1
        x = _find(s, e + 1, r + top)
        while x >= r + s.lo[e]:
            if _try(s, e + 1, x):
                s.counts[e] = x - r
                return 1
            x = _find(s, e + 1, x - 1)
    s.parent[e * (s.width + 1) + r] = r - 1  # (e, r) fails from every start
    return 0


def _fixed_prefix(lows, highs):
    """(elements int32[], offsets int64[]): the elements whose first row lies at a fixed
    offset from the start row (every element before them has a fixed count) and which
    need at least one row - rows every match from that start must hold."""
    elems, offsets, offset = [], [], 0
    for k in range(len(lows)):
        if lows[k] >= 1:
            elems.append(k)
            offsets.append(offset)
        if lows[k] != highs[k]:
            break
        offset += lows[k]
    return np.asarray(elems, dtype=np.int32), np.asarray(offsets, dtype=np.int64)


def match_sequences(cnp.ndarray masks, cnp.ndarray bounds, cnp.ndarray labels,
                    cnp.ndarray lows, cnp.ndarray highs, always=None, cancel=None):
    """Matches of the sequence (labels[e]{lows[e], highs[e]}, highs -1 unbounded, every
    low sum >= 1) in every partition [bounds[k], bounds[k+1]) of the rows, masks
    uint8[n_labels, n_rows] giving each label's DEFINE per row; always: optional
    uint8[n_labels], 1 for labels known to hold on every row (no DEFINE: their masks are
    not read). Returns (start rows int64[m], counts int64[m, n_elems], partition index
    int64[m]). cancel: the run's cancel flag (interrupt.pxd), set by another thread."""
    cdef const unsigned char[:, ::1] mm = np.ascontiguousarray(masks, dtype=np.uint8)
    cdef const i64[::1] bb = np.ascontiguousarray(bounds, dtype=np.int64)
    cdef const int[::1] ll = np.ascontiguousarray(labels, dtype=np.int32)
    cdef const i64[::1] lo = np.ascontiguousarray(lows, dtype=np.int64)
    cdef const i64[::1] hi = np.ascontiguousarray(highs, dtype=np.int64)
    cdef int n_elems = ll.shape[0]
    cdef cnp.ndarray always_arr = np.zeros(max(n_elems, 1), dtype=np.uint8)
    if always is not None and n_elems:
        always_arr[:n_elems] = np.asarray(always, dtype=np.uint8)[np.asarray(labels)]
    cdef i64 n = mm.shape[1]
    cdef i64 n_parts = bb.shape[0] - 1
    cdef i64 width = int(np.max(np.diff(bounds))) if len(bounds) > 1 else 0
    # scratch for the longest partition only: it stays in cache and is reused
    cdef cnp.ndarray run_end_arr = np.empty(max(n_elems, 1) * max(width, 1), dtype=np.int64)
    cdef cnp.ndarray parent_arr = np.empty((n_elems + 1) * (width + 1), dtype=np.int64)
    cdef const unsigned char* mask
    cdef cnp.ndarray counts_arr = np.zeros(max(n_elems, 1), dtype=np.int64)
    cdef Search s
    cdef cnp.ndarray pre_elem_arr, pre_off_arr
    pre_elem_arr, pre_off_arr = _fixed_prefix(lows, highs)
    cdef const int* pre_elem = <const int*> cnp.PyArray_DATA(pre_elem_arr)
    cdef const i64* pre_off = <const i64*> cnp.PyArray_DATA(pre_off_arr)
    cdef int i, n_pre = len(pre_elem_arr)
    cdef i64 k, r, ps, pe, pos, length, end, cap = 1024, m = 0
    cdef i64* run
    cdef int e, found, oom = 0, stopped = 0
    cdef Countdown countdown
    cdef i64* out_start = <i64*> malloc(cap * sizeof(i64))
    cdef i64* out_part = <i64*> malloc(cap * sizeof(i64))
    cdef i64* out_counts = <i64*> malloc(cap * max(n_elems, 1) * sizeof(i64))
    cdef i64* grown
    if out_start == NULL or out_part == NULL or out_counts == NULL:
        free(out_start); free(out_part); free(out_counts)
        raise MemoryError("cepsql sequence matcher ran out of memory")
    if n_elems == 0 or mm.shape[0] == 0:
        n = 0
        n_parts = 0
    s.width = width
    s.run_end = <i64*> cnp.PyArray_DATA(run_end_arr)
    s.parent = <i64*> cnp.PyArray_DATA(parent_arr)
    s.label = &ll[0] if n_elems else NULL
    s.lo = &lo[0] if n_elems else NULL
    s.hi = &hi[0] if n_elems else NULL
    s.always = <const unsigned char*> cnp.PyArray_DATA(always_arr)
    s.n_elems = n_elems
    s.counts = <i64*> cnp.PyArray_DATA(counts_arr)
    countdown.ticks = 0
    cancel_view = watch_flag(&countdown, cancel)
    with nogil:
        for k in range(n_parts):
            ps = bb[k]
            pe = bb[k + 1]
            s.pend = pe - ps
            for e in range(n_elems):
                if s.always[e]:
                    continue  # run_end not read
                mask = &mm[0, 0] + s.label[e] * n + ps
                run = s.run_end + e * width
                end = pe - ps  # the first failing row at or after r (a select, no branch)
                r = pe - ps - 1
                while r >= 0:
                    end = end if mask[r] else r
                    run[r] = end
                    r -= 1
            # only elements 1 .. n_elems - 1 are looked up (_find); the others'
            # failure links are written but never read
            for e in range(1, n_elems):
                for r in range(pe - ps + 1):
                    s.parent[e * (width + 1) + r] = r
            pos = 0
            while pos < pe - ps:
                if interrupted(&countdown):
                    stopped = 1
                    break
                # the rows every match from pos must hold (a fixed-width prefix): most
                # start rows fail here without a search
                found = 1
                for i in range(n_pre):
                    r = pos + pre_off[i]
                    if r >= pe - ps or not (s.always[pre_elem[i]]
                                            or mm[s.label[pre_elem[i]], ps + r]):
                        found = 0
                        break
                if found:
                    found = _try(&s, 0, pos)
                if not found:
                    pos += 1
                    continue
                if m == cap:
                    cap *= 2
                    grown = <i64*> realloc(out_start, cap * sizeof(i64))
                    if grown == NULL:
                        oom = 1
                        break
                    out_start = grown
                    grown = <i64*> realloc(out_part, cap * sizeof(i64))
                    if grown == NULL:
                        oom = 1
                        break
                    out_part = grown
                    grown = <i64*> realloc(out_counts, cap * n_elems * sizeof(i64))
                    if grown == NULL:
                        oom = 1
                        break
                    out_counts = grown
                out_start[m] = ps + pos
                out_part[m] = k
                length = 0
                for e in range(n_elems):
                    out_counts[m * n_elems + e] = s.counts[e]
                    length += s.counts[e]
                m += 1
                pos += length if length > 0 else 1
            if oom or stopped:
                break
    try:
        if stopped:  # Ctrl-C
            raise_interrupt()
        if oom:
            raise MemoryError("cepsql sequence matcher ran out of memory")
        if m == 0:
            empty = np.zeros(0, dtype=np.int64)
            return empty, np.zeros((0, n_elems), dtype=np.int64), empty.copy()
        starts = np.array(<i64[:m]> out_start, dtype=np.int64)
        parts = np.array(<i64[:m]> out_part, dtype=np.int64)
        counts = np.array(<i64[:m * n_elems]> out_counts, dtype=np.int64).reshape(m, n_elems)
        return starts, counts, parts
    finally:
        free(out_start)
        free(out_part)
        free(out_counts)


def sequence_leaves(cnp.ndarray first, cnp.ndarray counts, cnp.ndarray parts,
                    cnp.ndarray bounds, cnp.ndarray labels, cnp.ndarray member,
                    cnp.ndarray leaves, rows=None):
    """Per match and MEASURES leaf, the row it reads (-1: none), or for CLASSIFIER leaves
    the label code of that row, as the general VM resolves them for a whole match (ONE
    ROW PER MATCH: FINAL). first/counts/parts: match_sequences' output; member:
    uint8[n_sets, n_labels]; leaves: int32[q, 6] (set id, logical (1 LAST), logical
    offset, physical offset, final, kind (1 CLASSIFIER)). rows: when given, the input
    row of each matched position (row leaves are mapped through it)."""
    cdef const i64[::1] f = np.ascontiguousarray(first, dtype=np.int64)
    cdef const i64[:, ::1] c = np.ascontiguousarray(counts, dtype=np.int64)
    cdef const i64[::1] pp = np.ascontiguousarray(parts, dtype=np.int64)
    cdef const i64[::1] bb = np.ascontiguousarray(bounds, dtype=np.int64)
    cdef const int[::1] ll = np.ascontiguousarray(labels, dtype=np.int32)
    cdef const unsigned char[:, ::1] mem = np.ascontiguousarray(member, dtype=np.uint8)
    cdef const int[:, ::1] lv = np.ascontiguousarray(leaves, dtype=np.int32).reshape(-1, 6)
    cdef bint mapped = rows is not None
    cdef const i64[::1] rr = np.ascontiguousarray(rows if mapped else np.zeros(1),
                                                  dtype=np.int64)
    cdef i64 m = f.shape[0], i, length, idx, left, pos, j, off
    cdef int n_elems = c.shape[1], n_leaves = lv.shape[0], q, e, set_id, logical, kind
    cdef i64 loff, poff, code
    cdef cnp.ndarray out_arr = np.full((m, n_leaves), -1, dtype=np.int64)
    cdef i64[:, ::1] out = out_arr
    with nogil:
        for i in range(m):
            length = 0
            for e in range(n_elems):
                length += c[i, e]
            for q in range(n_leaves):
                set_id = lv[q, 0]
                logical = lv[q, 1]
                loff = lv[q, 2]
                poff = lv[q, 3]
                kind = lv[q, 5]
                idx = -1
                if set_id < 0:
                    if loff < length:
                        idx = (length - 1 - loff) if logical == 1 else loff
                elif logical == 1:  # LAST: count member rows from the match's end
                    left = loff
                    pos = length
                    e = n_elems - 1
                    while e >= 0:
                        pos -= c[i, e]
                        if mem[set_id, ll[e]]:
                            if left < c[i, e]:
                                idx = pos + c[i, e] - 1 - left
                                break
                            left -= c[i, e]
                        e -= 1
                else:  # FIRST: from the match's start
                    left = loff
                    pos = 0
                    for e in range(n_elems):
                        if mem[set_id, ll[e]]:
                            if left < c[i, e]:
                                idx = pos + left
                                break
                            left -= c[i, e]
                        pos += c[i, e]
                if idx < 0:
                    continue
                j = f[i] + idx + poff
                if j < bb[pp[i]] or j >= bb[pp[i] + 1]:
                    continue
                if kind == 1:  # CLASSIFIER: the label of row j when it lies in the match
                    off = j - f[i]
                    code = -1
                    pos = 0
                    for e in range(n_elems):
                        if pos <= off < pos + c[i, e]:
                            code = ll[e]
                        pos += c[i, e]
                    out[i, q] = code
                else:
                    out[i, q] = rr[j] if mapped else j
    return out_arr
