# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""SQL:2016 row-pattern matcher: a Pike-style regex VM over a compiled pattern program,
with DEFINE conditions run by a small stack VM over typed column arrays.

Threads are kept in preference order. Two threads that reach the same instruction at
the same row with the same observable state (what DEFINE can still read: the first and
last rows of the tracked variables, the loop progress slots, or the whole label history
when conditions look deeper) are equivalent: only the preferred one is kept. That keeps
nested quantifiers such as (A+)+ polynomial.

Start rows (issue 13): a failing attempt scanning far would make the search quadratic
when run from every start row. Three remedies, each leaving the results unchanged:
  - one pass (_scan): when no DEFINE can tell start rows apart (_start_free), every
    start row is simulated at once, later starts merging into earlier ones;
  - failed-attempt memo (_memo_has): otherwise, when the state holds all DEFINE reads
    (_memo_safe), attempts skip configurations earlier failed attempts reached;
  - early stop (_dead_at): a thread stops once a row-local label it still needs holds
    on no later row of the partition, and no start is tried closer to the partition's
    end than the fewest rows any match consumes (_min_rows: (A{700}){700} needs 490,000);
  - value-keyed FIRST rows (_memo_key): a FIRST(A.x)-only set's first row enters memo
    keys as the earliest row with the same values, so starts whose FIRST values agree
    share failures ((A*)*B with B AS FIRST(A.x) = 5);
  - probes (_probe): in a partition still open at the chunk's end, a start no match
    can end within the chunk is shown undecided by following a few threads only.
Starts stay fully separate only with WITHIN, label history (PREV(CLASSIFIER()),
LAST(A.x, n)), or universal references that read the start (FIRST(x), LAST(x, n)).

Everything in the hot loop works on C arrays; no Python object is touched per row.
"""
from libc.stdlib cimport malloc, realloc, free, calloc
from libc.string cimport memcpy, memcmp
from libc.math cimport fabs, sqrt, log, exp, floor, ceil, pow, log10, fmod, isnan

import numpy as np
cimport numpy as cnp

cnp.import_array()


# pattern program opcodes (cepsql/runtime/program.py)
from cepsql._ext.buffers cimport *
from cepsql._ext.vm cimport *
from cepsql._ext.aggregates cimport *
from cepsql._ext.interrupt cimport Countdown, interrupted, raise_interrupt, watch_flag

cdef enum: OP_LABEL = 0
cdef enum: OP_SPLIT = 1
cdef enum: OP_JUMP = 2
cdef enum: OP_DONE = 3
cdef enum: OP_ANCHOR_START = 4
cdef enum: OP_ANCHOR_END = 5
cdef enum: OP_SAVE = 6
cdef enum: OP_LOOP_BACK = 7
cdef enum: OP_EXCL_BEGIN = 8
cdef enum: OP_EXCL_END = 9
cdef enum: OP_PERM_BEGIN = 10
cdef enum: OP_PERM_NEXT = 11
cdef enum: OP_PERM_TRY = 12
cdef enum: OP_FAIL = 13
cdef enum: OP_CLEAR = 14
cdef enum: OP_COUNT_BEGIN = 15
cdef enum: OP_COUNT_LOOP = 16
cdef enum: OP_COUNT_BOUNDS = 17
cdef enum: OP_COUNT_NEXT = 18

# condition opcodes and aggregate function codes: vm.pxd

# skip modes
cdef enum: SKIP_PAST_LAST = 0
cdef enum: SKIP_NEXT_ROW = 1
cdef enum: SKIP_TO_FIRST = 2
cdef enum: SKIP_TO_LAST = 3

cdef enum: PRE_ERROR = 16  # pre[] cell: PRE_ERROR + the VM error the row's DEFINE raised
cdef enum: MEMO_MAX_WORDS = 1 << 23  # failed-attempt memo: keys of at most 64 MiB
cdef enum: MEMO_SPAN = 16   # keys are noted from this many rows into an attempt on:
                            # shorter failures cost little, and skip the memo's cost
cdef enum: MEMO_PROBE = 64  # a failed attempt noting more keys than this with no hit
                            # switches the memo off for the partition
cdef enum: A_LIST = 6  # ARRAY_AGG (MEASURES only)
# error codes returned to Python
cdef enum: ERR_SKIP_FIRST_ROW = 1
cdef enum: ERR_SKIP_ABSENT = 2
cdef enum: ERR_MEMORY = 3

# state layout: [0] history node, [1] exclusion depth, [2] start row, then 3 per tracked
# set (first, last, count), then 5 per DEFINE aggregate (rows, non-null rows, sum, min,
# max), then loop slots. Equivalence compares from ST_SETS on: the history only when
# conditions read it, the exclusion depth follows from the instruction, and the start row
# is never read in one-pass mode (see _scan).
cdef enum: ST_HIST = 0
cdef enum: ST_EXCL = 1
cdef enum: ST_START = 2
cdef enum: ST_SETS = 3
# a loop slot: the row its iteration began at while that iteration consumed nothing;
# SLOT_MOVED once it consumed a row (or outside the loop, after OP_CLEAR)
cdef enum: SLOT_MOVED = -1
# _min_rows saturates here (also: cannot reach DONE); a smaller lower bound stays sound
cdef enum: ROWS_NEVER = 1 << 30
cdef enum: PROBE_THREADS = 8  # threads a probe follows (_probe)


cdef struct ThreadList:
    int n
    int cap
    int* pcs
    i64* states
    int* next_same      # chain of threads at the same pc
    int* head           # pc -> first thread at that pc (-1)
    int* touched        # pcs with a head set, for reset
    int n_touched


cdef class SqlSpec:
    """Everything a SqlMatcher is built from, by name: the compiled pattern program and
    conditions (cepsql/runtime/compile.py), SKIP and output modes, the window (kind 0
    none, 1 ROWS, 2 INTERVAL in microseconds), the epsilon closure depth and the exact
    lane (xconsts, ansi, dlane, mlane; see vm.pxd). One object instead of positional
    arrays and set_* calls."""
    cdef readonly object prog, n_labels, n_slots, code, cond_off, consts, refs, member
    cdef readonly object leaves, daggs, maggs, row_local, skip_mode, skip_set, all_rows
    cdef readonly object empty_mode, full_history, window_kind, window_size, closure_depth
    cdef readonly object xconsts, ansi, dlane, mlane, dprog

    def __init__(self, *, prog, n_labels, n_slots, code, cond_off, consts, refs, member,
                 leaves, daggs, maggs, row_local, skip_mode, skip_set, all_rows,
                 empty_mode, full_history, window_kind, window_size, closure_depth,
                 xconsts, ansi, dlane, mlane, dprog=None):
        self.prog = prog
        self.n_labels = n_labels
        self.n_slots = n_slots
        self.code = code
        self.cond_off = cond_off
        self.consts = consts
        self.refs = refs
        self.member = member
        self.leaves = leaves
        self.daggs = daggs
        self.maggs = maggs
        self.row_local = row_local
        self.skip_mode = skip_mode
        self.skip_set = skip_set
        self.all_rows = all_rows
        self.empty_mode = empty_mode
        self.full_history = full_history
        self.window_kind = window_kind
        self.window_size = window_size
        self.closure_depth = closure_depth
        self.xconsts = xconsts
        self.ansi = ansi
        self.dlane = dlane
        self.mlane = mlane
        self.dprog = dprog  # DEFINE aggregates' arguments computed at the row (see _agg_row)


cdef class SqlResult:
    """What SqlMatcher.run returns, on success and on a runtime error alike. error: 0,
    or the runtime error code (ERR_*; match_no is then the matches numbered so far and
    the output is partial: the caller raises). rows, match_numbers, leaves[n_out, n_leaves],
    aggregates[n_out, n_maggs, 2], list_rows: the output; resume: (resume_pos, match_no,
    covered) of the last partition."""
    cdef readonly int error
    cdef readonly i64 match_no
    cdef readonly object rows, match_numbers, leaves, aggregates, list_rows, resume

    def __init__(self, int error, i64 match_no, rows, match_numbers, leaves, aggregates,
                 list_rows, resume):
        self.error = error
        self.match_no = match_no
        self.rows = rows
        self.match_numbers = match_numbers
        self.leaves = leaves
        self.aggregates = aggregates
        self.list_rows = list_rows
        self.resume = resume


cdef class SqlMatcher(ConditionHost):
    """One compiled query. ``run`` matches every partition of a chunk of sorted rows."""
    # program
    cdef int* prog
    cdef int n_prog
    cdef int n_labels
    # conditions
    cdef int* code
    cdef int* cond_off
    cdef double* consts
    cdef int n_consts
    cdef double* vstack
    cdef unsigned char* nstack
    # row refs used by DEFINE: set, logical, loff, poff, final
    cdef int* refs
    cdef int n_refs
    cdef unsigned char* member   # n_sets * n_labels
    cdef int n_sets
    cdef int* set_tracked        # set id -> tracked index (-1)
    cdef unsigned char* set_first  # set id -> some FIRST(set.x, n) reads its first row
    cdef unsigned char* set_count  # set id -> some FIRST(set.x, n > 0) reads its exact count
    cdef unsigned char* set_by_value  # set id -> its first row is read only as FIRST(set.x)
    cdef int* loop_slots         # the slots OP_SAVE writes (unbounded loops' progress)
    cdef int n_loop_slots
    cdef int n_tracked
    cdef int n_slots
    cdef int agg_base            # first state word of the DEFINE aggregates
    cdef int slot_base           # first state word of the loop slots
    cdef int* daggs              # DEFINE aggregates: set, function, column
    cdef int n_daggs
    cdef int* dagg_slot          # per DEFINE aggregate: its state slot (AGG_W words)
    cdef unsigned char* dagg_own  # 1: the aggregate steps its slot (0: an identical one does)
    cdef int* dprog              # per DEFINE aggregate: code of its column's / its value
    cdef bint any_dprog          # column's argument computed at the row (-1: a column)
    cdef int* maggs              # MEASURES aggregates: set, function, column, final
    cdef int n_maggs
    cdef i64* acc                # running accumulators per measure aggregate (5 words)
    cdef i64* drows              # scratch: the rows a DISTINCT DEFINE aggregate reads
    cdef i64 drows_cap
    cdef i64* facc               # final accumulators
    cdef unsigned char* row_local  # label -> DEFINE depends on the row alone
    cdef unsigned char* pre        # precomputed row-local DEFINE results [label, row]
    cdef int S                   # state size (i64 words)
    cdef int full_history
    # early stop (see _required_masks): required row-local labels per instruction
    cdef unsigned long long* req  # pc -> bits of the labels every path from pc consumes
    cdef int* label_bit          # label -> bit in req (-1: not tracked)
    cdef i64* last_true          # label -> last partition row its DEFINE can hold (-1 none)
    cdef int one_pass_ok         # all starts can be simulated in one pass (see _scan)
    # failed-attempt memo (per-start search, see _memo_has): configurations (row, pc,
    # compared state) that failed attempts reached have no completion from any start
    cdef int memo_ok             # DEFINE reads nothing start-dependent beyond the state
    cdef int use_memo
    cdef int memo_run            # usable in the current run
    cdef int memo_on             # active in the current partition
    cdef i64 memo_hits           # configurations the current attempt found in the memo
    cdef i64 memo_span           # keys are noted from this many rows into an attempt on
    cdef int KW                  # words per key: row, pc, state words from ST_SETS
    cdef i64* memo_tab           # open addressing, memo_cap keys; row -1 = empty slot
    cdef i64 memo_cap, memo_n
    cdef i64* memo_pend          # keys the current attempt reached
    cdef i64 pend_n, pend_cap
    cdef i64 memo_floor          # keys of rows below it are stale (no attempt reaches them)
    cdef i64 memo_max            # most keys kept (and noted per attempt)
    # value-keyed first rows (see _memo_key): tracked sets whose first row DEFINE reads
    # only as FIRST(set.col) column values; canon[row] = the partition's earliest row
    # with the same bits in every VM column
    cdef int* valkey             # tracked indexes
    cdef int n_valkey
    cdef i64* canon
    cdef int n_cols
    # fewest rows any match consumes (_min_rows) and, in an open partition, the rows left
    # to probes that show an attempt is undecided (_probe)
    cdef i64 min_rows
    cdef i64 probe_left
    cdef readonly i64 thread_steps  # live threads advanced over a row, every run so far:
                                    # tests check the search grows linearly with it
    cdef int use_one_pass        # set_search switches: one pass where possible,
    cdef int use_early_stop      # early stop on required labels
    cdef i64 undecided_start     # earliest start whose outcome needs rows not seen yet
    # searched PERMUTE (items with inner choices, see _attempt): its mask slot (-1 none),
    # item count, and the order prefix the current attempt forces on it
    cdef int perm_slot
    cdef int perm_n
    cdef int forced[64]
    cdef int forced_len
    cdef int last_found          # _try_match reached DONE (even when also undecided)
    cdef i64 winner_start_
    # EXPLAIN ANALYZE counters (always on: one integer add where the loops act anyway)
    cdef readonly i64 n_attempts   # start rows tried (a start retried after a chunk counts again)
    cdef readonly i64 n_states     # thread states entered (instruction, state) pairs
    cdef readonly i64 peak_states  # most thread states alive at one row
    cdef readonly i64 n_matches    # matches output
    # leaves for output: set, logical, loff, poff, final, kind
    cdef int* leaves
    cdef int n_leaves
    cdef int skip_mode
    cdef int skip_set
    cdef int all_rows
    cdef int empty_mode          # 0 show, 1 omit, 2 with unmatched
    # per-run data
    cdef const double* vals
    cdef const unsigned char* nulls
    cdef i64 n_rows
    cdef i64 pstart, pend, s
    cdef readonly i64 match_no   # matches numbered so far in the current partition (read by the streaming backend)
    # history arena
    cdef i64* node_row
    cdef int* node_label
    cdef i64* node_parent
    cdef unsigned char* node_excl
    cdef i64 n_nodes, cap_nodes
    # threads
    cdef ThreadList la, lb
    cdef i64* tmp
    cdef i64* winner
    cdef int oom
    cdef int stop                # a signal handler raised (Ctrl-C): unwind, then raise
    cdef Countdown countdown     # to the next Ctrl-C / cancel check (interrupt.pxd)
    cdef object cancel_ref       # the run's cancel flag it watches (cancel_with)
    cdef i64 winner_end_
    # streaming: the last partition of a chunk may continue in the next chunk ("open");
    # anything that would need rows past its end makes the current attempt undecided
    cdef int open_
    cdef int undecided
    cdef i64 anchor_start
    # WITHIN window (SQL:2016 mode): 0 none, 1 rows, 2 time (microseconds)
    cdef int window_kind
    cdef double window_size
    cdef const double* wts
    cdef const unsigned char* wnull

    def __cinit__(self):
        self.prog = NULL

    def cancel_with(self, flag):
        """Stop as on Ctrl-C once flag[0] (uint8 array) is set, by another thread."""
        self.cancel_ref = watch_flag(&self.countdown, flag)

    def __init__(self, SqlSpec spec):
        """The matcher of spec's pattern, ready to run."""
        cdef cnp.ndarray prog = spec.prog, code = spec.code, cond_off = spec.cond_off
        cdef cnp.ndarray consts = spec.consts, refs = spec.refs, member = spec.member
        cdef cnp.ndarray leaves = spec.leaves, daggs = spec.daggs, maggs = spec.maggs
        cdef cnp.ndarray row_local = spec.row_local
        cdef int n_labels = spec.n_labels, n_slots = spec.n_slots
        cdef int skip_mode = spec.skip_mode, skip_set = spec.skip_set
        cdef int all_rows = spec.all_rows, empty_mode = spec.empty_mode
        cdef int full_history = spec.full_history
        cdef int i, t
        prog = np.ascontiguousarray(prog, dtype=np.int32)
        self.n_prog = prog.shape[0]
        self.prog = <int*> self._copy(prog)
        self.n_labels = n_labels
        self.n_slots = n_slots
        code = np.ascontiguousarray(code, dtype=np.int32)
        self.code = <int*> self._copy(code if code.size else np.zeros(1, np.int32))
        self.cond_off = <int*> self._copy(np.ascontiguousarray(cond_off, dtype=np.int32)
                                          if cond_off.size else np.full(1, -1, np.int32))
        consts = np.ascontiguousarray(consts, dtype=np.float64)
        self.n_consts = consts.shape[0]
        self.consts = <double*> self._copy(consts if consts.size else np.zeros(1))
        stack = max(int(code.size) + 8, 16)
        self.vstack = <double*> malloc(stack * sizeof(double))
        self.nstack = <unsigned char*> malloc(stack)
        if _lane_init(&self.xl, stack) or self.vstack == NULL or self.nstack == NULL:
            raise MemoryError("cepsql matcher ran out of memory")
        refs = np.ascontiguousarray(refs, dtype=np.int32).reshape(-1, 5)
        self.n_refs = refs.shape[0]
        self.refs = <int*> self._copy(refs if refs.size else np.zeros(5, np.int32))
        member = np.ascontiguousarray(member, dtype=np.uint8)
        self.n_sets = member.shape[0]
        self.member = <unsigned char*> self._copy(member)
        leaves = np.ascontiguousarray(leaves, dtype=np.int32).reshape(-1, 6)
        self.n_leaves = leaves.shape[0]
        self.leaves = <int*> self._copy(leaves if leaves.size else np.zeros(6, np.int32))
        # tracked sets: every non-universal set a DEFINE reference reads
        self.set_tracked = <int*> malloc(max(self.n_sets, 1) * sizeof(int))
        if self.set_tracked == NULL:
            raise MemoryError("cepsql matcher ran out of memory")
        for i in range(self.n_sets):
            self.set_tracked[i] = -1
        self.n_tracked = 0
        # only FIRST references read a set's first row, and only FIRST(set.x, n > 0) its
        # exact count; LAST(set.x) reads its last row, every reference whether the set
        # has a row: the other words stay fixed so that states differing only there
        # compare equal (threads of different start rows merge, failed attempts' memo
        # keys match later starts)
        self.set_first = <unsigned char*> calloc(max(self.n_sets, 1), 1)
        self.set_count = <unsigned char*> calloc(max(self.n_sets, 1), 1)
        self.set_by_value = <unsigned char*> calloc(max(self.n_sets, 1), 1)
        if self.set_first == NULL or self.set_count == NULL or self.set_by_value == NULL:
            raise MemoryError("cepsql matcher ran out of memory")
        for i in range(self.n_refs):
            t = self.refs[i * 5]
            if t >= 0 and self.set_tracked[t] < 0:
                self.set_tracked[t] = self.n_tracked
                self.n_tracked += 1
            if t >= 0 and self.refs[i * 5 + 1] == 0:
                self.set_first[t] = 1
                if self.refs[i * 5 + 2] > 0:
                    self.set_count[t] = 1
        self._value_keyed_sets()
        daggs = np.ascontiguousarray(daggs, dtype=np.int32).reshape(-1, 3)
        self.n_daggs = daggs.shape[0]
        self.daggs = <int*> self._copy(daggs if daggs.size else np.zeros(3, np.int32))
        dprog = np.full((max(self.n_daggs, 1), 2), -1, np.int32) if spec.dprog is None \
            else np.ascontiguousarray(spec.dprog, dtype=np.int32).reshape(-1, 2)
        self.any_dprog = bool((dprog >= 0).any())
        self.dprog = <int*> self._copy(dprog if dprog.size else np.full(2, -1, np.int32))
        n_agg_slots = self._share_define_aggregates(daggs, dprog, spec.dlane)
        maggs = np.ascontiguousarray(maggs, dtype=np.int32).reshape(-1, 4)
        self.n_maggs = maggs.shape[0]
        self.maggs = <int*> self._copy(maggs if maggs.size else np.zeros(4, np.int32))
        self.acc = <i64*> calloc(AGG_W * self.n_maggs + 1, sizeof(i64))
        self.facc = <i64*> calloc(AGG_W * self.n_maggs + 1, sizeof(i64))
        if self.acc == NULL or self.facc == NULL:
            raise MemoryError("cepsql matcher ran out of memory")
        self.row_local = <unsigned char*> self._copy(
            np.ascontiguousarray(row_local, dtype=np.uint8) if row_local.size
            else np.zeros(1, np.uint8))
        self.pre = NULL
        self.agg_base = ST_SETS + 3 * self.n_tracked
        self.loop_slots = <int*> malloc(max(n_slots, 1) * sizeof(int))
        if self.loop_slots == NULL:
            raise MemoryError("cepsql matcher ran out of memory")
        self.n_loop_slots = 0
        for i in range(self.n_prog):
            if self.prog[i * 3] == OP_SAVE:
                self.loop_slots[self.n_loop_slots] = self.prog[i * 3 + 1]
                self.n_loop_slots += 1
        self.slot_base = self.agg_base + AGG_W * n_agg_slots
        self.S = self.slot_base + n_slots
        self.full_history = full_history
        self.skip_mode = skip_mode
        self.skip_set = skip_set
        self.all_rows = all_rows
        self.empty_mode = empty_mode
        self.cap_nodes = 1024
        self.node_row = <i64*> malloc(self.cap_nodes * sizeof(i64))
        self.node_label = <int*> malloc(self.cap_nodes * sizeof(int))
        self.node_parent = <i64*> malloc(self.cap_nodes * sizeof(i64))
        self.node_excl = <unsigned char*> malloc(self.cap_nodes)
        if self.node_row == NULL or self.node_label == NULL or self.node_parent == NULL or \
                self.node_excl == NULL:
            raise MemoryError("cepsql matcher ran out of memory")
        self._list_init(&self.la)
        self._list_init(&self.lb)
        self.tmp = <i64*> malloc((self.n_prog + 2) * self.S * sizeof(i64))
        self.winner = <i64*> malloc(self.S * sizeof(i64))
        self.label_bit = <int*> malloc(max(n_labels, 1) * sizeof(int))
        self.last_true = <i64*> malloc(max(n_labels, 1) * sizeof(i64))
        self.req = <unsigned long long*> malloc(max(self.n_prog, 1) * sizeof(unsigned long long))
        if self.tmp == NULL or self.winner == NULL or self.label_bit == NULL or \
                self.last_true == NULL or self.req == NULL:
            raise MemoryError("cepsql matcher ran out of memory")
        self._required_masks()
        self.min_rows = self._min_rows()
        self.perm_slot = -1
        self.perm_n = 0
        self.forced_len = 0
        for i in range(self.n_prog):
            if self.prog[i * 3] == OP_PERM_BEGIN and self.prog[i * 3 + 2] > 0:
                self.perm_slot = self.prog[i * 3 + 1]
                self.perm_n = self.prog[i * 3 + 2]
        # a searched PERMUTE forces an order prefix per attempt: one start at a time, and
        # no memo (a configuration that failed under one prefix may match under another)
        self.one_pass_ok = self._start_free() and self.perm_slot < 0
        self.use_one_pass = 1
        self.use_early_stop = 1
        self.memo_ok = self._memo_safe() and self.perm_slot < 0
        self.use_memo = 1
        self.memo_span = MEMO_SPAN
        self.KW = 2 + self.S - ST_SETS
        self.memo_max = max(1024, MEMO_MAX_WORDS // self.KW)
        self.memo_tab = NULL
        self.memo_pend = NULL
        self.memo_cap = self.memo_n = self.pend_n = self.pend_cap = 0
        self._set_window(spec.window_kind, spec.window_size)
        self._set_closure_depth(spec.closure_depth)
        self._set_exact(spec.xconsts, spec.ansi, spec.dlane, spec.mlane)

    cdef int _required_masks(self) except -1:
        """req[pc]: the row-local labels (up to 64, one bit each) that every path from pc
        to DONE consumes. A thread at pc on row r is dead once one of them can no longer
        hold on any row >= r. Greatest fixpoint over the program graph; paths are
        over-approximated (both arms of every branch), which only shrinks the sets.
        A PERMUTE's dispatch loop can leave once every item is used, which the graph
        cannot see, so entering one (PERM_BEGIN) also requires what each of its items
        requires up to its end (a first fixpoint, with items ending at the dispatch):
        PERMUTE(A+, ..., B) with no B left stops at once."""
        cdef int bits = 0, label, pc
        cdef unsigned long long* item_req = <unsigned long long*> malloc(
            max(self.n_prog, 1) * sizeof(unsigned long long))
        if item_req == NULL:
            raise MemoryError("cepsql matcher ran out of memory")
        for label in range(self.n_labels):
            self.label_bit[label] = -1
            if self.row_local[label] and self.cond_off[label] >= 0 and bits < 64:
                self.label_bit[label] = bits
                bits += 1
        self._requirement_fixpoint(item_req, item_req, True)
        self._requirement_fixpoint(self.req, item_req, False)
        free(item_req)
        return 0

    cdef void _requirement_fixpoint(self, unsigned long long* req,
                                    unsigned long long* items, bint item_scope):
        """One greatest fixpoint of _required_masks into req. item_scope: a jump back to
        a PERMUTE's dispatch ends the path (what an item requires up to its end); items:
        those sets, added at PERM_BEGIN."""
        cdef int pc, op, a, b, i, n
        cdef unsigned long long ALL = ~(<unsigned long long> 0), new
        cdef bint changed = True
        for pc in range(self.n_prog):
            req[pc] = ALL
        while changed:
            changed = False
            pc = self.n_prog - 1
            while pc >= 0:
                op = self.prog[pc * 3]
                a = self.prog[pc * 3 + 1]
                b = self.prog[pc * 3 + 2]
                if op == OP_DONE:
                    new = 0
                elif op == OP_FAIL:
                    new = ALL
                elif op == OP_LABEL:
                    new = req[pc + 1]
                    if self.label_bit[a] >= 0:
                        new |= (<unsigned long long> 1) << self.label_bit[a]
                elif op == OP_SPLIT:
                    new = req[a] & req[b]
                elif op == OP_JUMP:
                    new = 0 if item_scope and self.prog[a * 3] == OP_PERM_NEXT else req[a]
                elif op == OP_LOOP_BACK or op == OP_PERM_NEXT or op == OP_PERM_TRY:
                    new = req[b] & req[pc + 1]
                elif op == OP_COUNT_LOOP:
                    new = req[b] & req[pc + 2]
                elif op == OP_COUNT_NEXT:
                    new = req[b]
                elif op == OP_PERM_BEGIN:
                    # layout: PERM_BEGIN, PERM_NEXT (a & 63 = n items), n PERM_TRY (b = item)
                    new = req[pc + 1]
                    n = self.prog[(pc + 1) * 3 + 1] & 63
                    for i in range(n):
                        new |= items[self.prog[(pc + 2 + i) * 3 + 2]]
                else:  # anchors, SAVE, CLEAR, COUNT_BEGIN, exclusion marks: fall through
                    new = req[pc + 1]
                if new != req[pc]:
                    req[pc] = new
                    changed = True
                pc -= 1

    cdef int _start_free(self):
        """Whether the one pass applies: _memo_safe, and no tracked variable positions or
        DEFINE aggregates. Those are compared too, but hold absolute rows and sums that
        mostly differ between starts (FIRST(A.x) after A, sum(A.x)): later starts would
        seldom merge and, on long matches, only add work. Such patterns keep the
        per-start search, with the failed-attempt memo (_memo_has) where _memo_safe."""
        return self._memo_safe() and not self.n_tracked and not self.n_daggs

    cdef int _memo_safe(self):
        """Whether a configuration's future is the same from every start row: DEFINE
        reads no start-dependent reference (as in _start_free) and no label history. The
        compared state then holds all it reads (tracked positions, DEFINE aggregates,
        slots); WITHIN (start-dependent) is checked in run()."""
        cdef int i
        if self.full_history:
            return 0
        for i in range(self.n_refs):
            if self.refs[i * 5] < 0 and (self.refs[i * 5 + 1] != 1 or self.refs[i * 5 + 2] != 0):
                return 0
        return 1

    cdef int _value_keyed_sets(self) except -1:
        """valkey: the tracked sets whose first row DEFINE reads only through
        FIRST(set.col) with no offsets (logical FIRST 0, physical 0), i.e. only as that
        row's column values. CLASSIFIER(FIRST(set)) reads the label history, which makes
        the conditions full_history and switches the memo off (_memo_safe), and
        FIRST(set.col, n > 0) or PREV(FIRST(set.col)) other rows: such sets keep their
        row. Failed-attempt memo keys then hold a canonical row with the same values
        instead (_memo_key)."""
        cdef int i, t
        for t in range(self.n_sets):
            self.set_by_value[t] = self.set_first[t] and not self.set_count[t]
        for i in range(self.n_refs):
            t = self.refs[i * 5]
            if t >= 0 and self.refs[i * 5 + 1] == 0 and \
                    (self.refs[i * 5 + 2] != 0 or self.refs[i * 5 + 3] != 0):
                self.set_by_value[t] = 0
        self.valkey = <int*> malloc(max(self.n_sets, 1) * sizeof(int))
        if self.valkey == NULL:
            raise MemoryError("cepsql matcher ran out of memory")
        self.n_valkey = 0
        for t in range(self.n_sets):
            if self.set_by_value[t] and self.set_tracked[t] >= 0:
                self.valkey[self.n_valkey] = self.set_tracked[t]
                self.n_valkey += 1
        return 0

    cdef i64 _min_rows(self) except -1:
        """The fewest rows a match can consume (a lower bound: every branch open), so
        that no start row closer than that to the partition's end is tried. Counted
        loops and PERMUTEs are measured first, innermost first (they sit at higher pcs):
        a loop's body as the fewest rows from its start to its COUNT_NEXT, the loop then
        costing min iterations times that; a PERMUTE as the sum of its items' fewest rows
        (each from its start to its jump back to the dispatch: every item is used)."""
        cdef i64* dist = <i64*> malloc(max(self.n_prog, 1) * sizeof(i64))
        cdef i64* body = <i64*> calloc(max(self.n_prog, 1), sizeof(i64))
        cdef int pc, done, i, n, first, last
        cdef i64 best
        if dist == NULL or body == NULL:
            free(dist)
            free(body)
            raise MemoryError("cepsql matcher ran out of memory")
        pc = self.n_prog - 1
        while pc >= 0:
            if self.prog[pc * 3] == OP_COUNT_BEGIN:
                done = self.prog[(pc + 1) * 3 + 2] - 1   # its COUNT_NEXT
                self._rows_fixpoint(dist, body, pc + 3, done, done)
                body[pc] = dist[pc + 3]
            elif self.prog[pc * 3] == OP_PERM_BEGIN:
                # PERM_BEGIN, PERM_NEXT (n items, b = exit), n PERM_TRY (b = item start),
                # FAIL, then the items in order, each ending with a JUMP to PERM_NEXT
                n = self.prog[(pc + 1) * 3 + 1] & 63
                for i in range(n):
                    first = self.prog[(pc + 2 + i) * 3 + 2]
                    last = (self.prog[(pc + 3 + i) * 3 + 2] if i + 1 < n
                            else self.prog[(pc + 1) * 3 + 2]) - 1
                    self._rows_fixpoint(dist, body, first, last, last)
                    body[pc] = min(body[pc] + dist[first], ROWS_NEVER)
            pc -= 1
        self._rows_fixpoint(dist, body, 0, self.n_prog - 1, -1)
        best = dist[0]
        free(dist)
        free(body)
        return best

    cdef void _rows_fixpoint(self, i64* dist, i64* body, int lo, int hi,
                             int target) noexcept:
        """dist[pc] for pc in [lo, hi]: the fewest rows from pc to target (a counted
        loop's COUNT_NEXT) or, target -1, to DONE; ROWS_NEVER when unreachable. body[pc]
        of each COUNT_BEGIN inside: its loop body's fewest rows."""
        cdef int pc, op, a, b
        cdef i64 new, lo_count
        cdef bint changed = True
        for pc in range(lo, hi + 1):
            dist[pc] = ROWS_NEVER
        while changed:
            changed = False
            pc = hi
            while pc >= lo:
                op = self.prog[pc * 3]
                a = self.prog[pc * 3 + 1]
                b = self.prog[pc * 3 + 2]
                if pc == target or (op == OP_DONE and target < 0):
                    new = 0
                elif op == OP_FAIL or op == OP_DONE or op == OP_COUNT_BOUNDS:
                    new = ROWS_NEVER
                elif op == OP_LABEL:
                    new = min(dist[pc + 1] + 1, ROWS_NEVER)
                elif op == OP_SPLIT:
                    new = min(dist[a], dist[b])
                elif op == OP_JUMP:
                    new = dist[a]
                elif op == OP_LOOP_BACK or op == OP_PERM_NEXT or op == OP_PERM_TRY:
                    new = min(dist[b], dist[pc + 1])
                elif op == OP_COUNT_LOOP:
                    new = dist[b]   # any counter: the exit is the fewest
                elif op == OP_COUNT_NEXT:
                    new = dist[b]
                elif op == OP_PERM_BEGIN:
                    new = min(body[pc] + dist[self.prog[(pc + 1) * 3 + 2]], ROWS_NEVER)
                elif op == OP_COUNT_BEGIN:
                    # the counter starts at 0: min iterations of the body, then the exit
                    lo_count = self.prog[(pc + 2) * 3 + 1]
                    new = dist[self.prog[(pc + 1) * 3 + 2]]
                    if lo_count > 0 and body[pc] > 0:
                        if body[pc] >= ROWS_NEVER or lo_count > (ROWS_NEVER - new) // body[pc]:
                            new = ROWS_NEVER
                        else:
                            new += lo_count * body[pc]
                else:  # anchors, SAVE, CLEAR, exclusion marks: fall through
                    new = dist[pc + 1]
                if new < dist[pc]:
                    dist[pc] = new
                    changed = True
                pc -= 1

    cdef int _share_define_aggregates(self, cnp.ndarray daggs, cnp.ndarray dprog,
                                      object dlane) except -1:
        """Give identical DEFINE aggregates (the same set, function, column and lane, no
        argument computed at the row: AVG(B.price) read by two DEFINEs) one state slot,
        stepped once per row taken and compared once when threads merge; returns the
        number of slots."""
        cdef int k, slots = 0
        lanes = None if dlane is None else np.asarray(dlane, dtype=np.int32).reshape(-1, 4)
        self.dagg_slot = <int*> malloc(max(self.n_daggs, 1) * sizeof(int))
        self.dagg_own = <unsigned char*> calloc(max(self.n_daggs, 1), 1)
        if self.dagg_slot == NULL or self.dagg_own == NULL:
            raise MemoryError("cepsql matcher ran out of memory")
        owners = {}
        for k in range(self.n_daggs):
            key = None
            if lanes is not None and lanes.shape[0] == self.n_daggs and \
                    not _agg_listed(daggs[k, 1]) and dprog[k, 0] < 0 and dprog[k, 1] < 0:
                key = (tuple(daggs[k].tolist()), tuple(lanes[k].tolist()))
            if key is not None and key in owners:
                self.dagg_slot[k] = self.dagg_slot[owners[key]]
                continue
            if key is not None:
                owners[key] = k
            self.dagg_slot[k] = slots
            self.dagg_own[k] = 1
            slots += 1
        return slots

    cdef void* _copy(self, cnp.ndarray arr) except NULL:
        cdef size_t nbytes = arr.nbytes if arr.nbytes > 0 else 8
        cdef void* p = malloc(nbytes)
        if p == NULL:
            raise MemoryError("cepsql matcher ran out of memory")
        if arr.nbytes > 0:
            memcpy(p, cnp.PyArray_DATA(arr), arr.nbytes)
        return p

    cdef int _list_init(self, ThreadList* L) except -1:
        cdef int i
        L.n = 0
        L.cap = 16
        L.pcs = <int*> malloc(L.cap * sizeof(int))
        L.states = <i64*> malloc(L.cap * self.S * sizeof(i64) + 8)
        L.next_same = <int*> malloc(L.cap * sizeof(int))
        L.head = <int*> malloc(self.n_prog * sizeof(int) + 8)
        L.touched = <int*> malloc(self.n_prog * sizeof(int) + 8)
        if L.pcs == NULL or L.states == NULL or L.next_same == NULL or L.head == NULL or \
                L.touched == NULL:
            raise MemoryError("cepsql matcher ran out of memory")
        L.n_touched = 0
        for i in range(self.n_prog):
            L.head[i] = -1

    cdef void _list_free(self, ThreadList* L):
        free(L.pcs); free(L.states); free(L.next_same); free(L.head); free(L.touched)

    def __dealloc__(self):
        if self.prog == NULL:
            return
        free(self.prog); free(self.code); free(self.cond_off); free(self.consts)
        free(self.dprog)
        free(self.vstack); free(self.nstack); free(self.refs); free(self.member)
        _lane_free(&self.xl)
        free(self.leaves); free(self.set_tracked); free(self.set_first)
        free(self.set_count); free(self.set_by_value); free(self.valkey); free(self.canon)
        free(self.loop_slots)
        free(self.daggs); free(self.dagg_slot); free(self.dagg_own); free(self.maggs); free(self.acc); free(self.facc); free(self.drows)
        free(self.row_local); free(self.pre)
        free(self.node_row); free(self.node_label); free(self.node_parent); free(self.node_excl)
        self._list_free(&self.la)
        self._list_free(&self.lb)
        free(self.tmp); free(self.winner)
        free(self.label_bit); free(self.last_true); free(self.req)
        free(self.memo_tab); free(self.memo_pend)

    # ------------------------------------------------------------------ threads
    cdef inline void _undecided_here(self) noexcept nogil:
        """The thread being followed (start row self.s) needs rows not seen yet."""
        self.undecided = 1
        if self.s < self.undecided_start:
            self.undecided_start = self.s

    cdef inline void _list_clear(self, ThreadList* L) noexcept nogil:
        cdef int i
        for i in range(L.n_touched):
            L.head[L.touched[i]] = -1
        L.n_touched = 0
        L.n = 0

    cdef int _list_grow(self, ThreadList* L) noexcept nogil:
        cdef int cap = L.cap * 2
        cdef int* pcs = <int*> realloc(L.pcs, cap * sizeof(int))
        cdef int* nxt
        cdef i64* st
        if pcs == NULL:
            return -1
        L.pcs = pcs
        nxt = <int*> realloc(L.next_same, cap * sizeof(int))
        if nxt == NULL:
            return -1
        L.next_same = nxt
        st = <i64*> realloc(L.states, cap * self.S * sizeof(i64) + 8)
        if st == NULL:
            return -1
        L.states = st
        L.cap = cap
        return 0

    cdef bint _same_history(self, i64 a, i64 b) noexcept nogil:
        while a != b:
            if a < 0 or b < 0:
                return False
            if self.node_label[a] != self.node_label[b]:
                return False
            a = self.node_parent[a]
            b = self.node_parent[b]
        return True

    cdef bint _equivalent(self, i64* x, i64* y) noexcept nogil:
        cdef int i
        for i in range(ST_SETS, self.S):
            if x[i] != y[i]:
                return False
        if self.full_history:
            return self._same_history(x[ST_HIST], y[ST_HIST])
        return True

    cdef void _add(self, ThreadList* L, int pc, i64* st, i64 r, int depth) noexcept nogil:
        cdef int op = self.prog[pc * 3]
        cdef int a = self.prog[pc * 3 + 1]
        cdef int b = self.prog[pc * 3 + 2]
        cdef i64* t
        cdef int k
        if op == OP_JUMP:
            self._add(L, a, st, r, depth)
            return
        # every other instruction is entered at most once per equivalent state and
        # position: the first (preferred) arrival wins. Entries at epsilon instructions
        # only mark the visit; the matching loop skips them.
        if not self._insert(L, pc, st):
            return
        if op == OP_SPLIT:
            t = self.tmp + (depth + 1) * self.S
            memcpy(t, st, self.S * sizeof(i64))
            self._add(L, a, t, r, depth + 1)
            memcpy(t, st, self.S * sizeof(i64))
            self._add(L, b, t, r, depth + 1)
            return
        if op == OP_ANCHOR_START:
            if r == self.anchor_start:
                self._add(L, pc + 1, st, r, depth)
            return
        if op == OP_ANCHOR_END:
            if r == self.pend:
                if self.open_:
                    self._undecided_here()
                else:
                    self._add(L, pc + 1, st, r, depth)
            return
        if op == OP_SAVE:
            st[self.slot_base + a] = r
            self._add(L, pc + 1, st, r, depth)
            return
        if op == OP_CLEAR:
            st[self.slot_base + a] = -1
            self._add(L, pc + 1, st, r, depth)
            return
        if op == OP_COUNT_BEGIN:
            st[self.slot_base + a] = 0
            self._add(L, pc + 1, st, r, depth)
            return
        if op == OP_COUNT_NEXT:
            st[self.slot_base + a] += 1
            self._add(L, b, st, r, depth)
            return
        if op == OP_COUNT_LOOP:
            self._count_loop(L, pc, st, r, depth)
            return
        if op == OP_LOOP_BACK:
            if r > st[self.slot_base + a]:
                self._add(L, b, st, r, depth)
            else:
                self._add(L, pc + 1, st, r, depth)
            return
        if op == OP_EXCL_BEGIN:
            st[ST_EXCL] += 1
            self._add(L, pc + 1, st, r, depth)
            return
        if op == OP_EXCL_END:
            st[ST_EXCL] -= 1
            self._add(L, pc + 1, st, r, depth)
            return
        if op == OP_PERM_BEGIN:
            st[self.slot_base + a] = 0
            self._add(L, pc + 1, st, r, depth)
            return
        if op == OP_PERM_NEXT:
            # every item used: leave (the mask is reset so later states can merge)
            k = self.slot_base + (a >> 6)
            if st[k] == ((<i64> 1) << (a & 63)) - 1:
                st[k] = -1
                self._add(L, b, st, r, depth)
            else:
                self._add(L, pc + 1, st, r, depth)
            return
        if op == OP_PERM_TRY:
            # item (a & 63) unused: take it first (preferred), then the later items
            k = self.slot_base + (a >> 6)
            if st[k] & ((<i64> 1) << (a & 63)) or \
                    ((a >> 6) == self.perm_slot and not self._perm_allowed(st[k], a & 63)):
                self._add(L, pc + 1, st, r, depth)
                return
            t = self.tmp + (depth + 1) * self.S
            memcpy(t, st, self.S * sizeof(i64))
            t[k] |= (<i64> 1) << (a & 63)
            self._add(L, b, t, r, depth + 1)
            memcpy(t, st, self.S * sizeof(i64))
            self._add(L, pc + 1, t, r, depth + 1)
            return

    cdef void _count_loop(self, ThreadList* L, int pc, i64* st, i64 r,
                          int depth) noexcept nogil:
        """A counted loop's branch (OP_COUNT_LOOP, bounds in the next instruction): the
        body while fewer than min iterations, the exit (counter cleared) after max, else
        both in the quantifier's preference order."""
        cdef int k = self.slot_base + (self.prog[pc * 3 + 1] >> 1)
        cdef int reluctant = self.prog[pc * 3 + 1] & 1, arm
        cdef i64 lo = self.prog[(pc + 1) * 3 + 1], hi = self.prog[(pc + 1) * 3 + 2]
        cdef i64* t
        if st[k] < lo:
            self._add(L, pc + 2, st, r, depth)
            return
        if st[k] >= hi:
            st[k] = -1
            self._add(L, self.prog[pc * 3 + 2], st, r, depth)
            return
        t = self.tmp + (depth + 1) * self.S
        for arm in range(2):
            memcpy(t, st, self.S * sizeof(i64))
            if arm == reluctant:
                self._add(L, pc + 2, t, r, depth + 1)
            else:
                t[k] = -1
                self._add(L, self.prog[pc * 3 + 2], t, r, depth + 1)

    cdef inline bint _perm_allowed(self, i64 used, int item) noexcept nogil:
        """Whether the searched PERMUTE may take item next: its position in the order
        (items used so far) is free or forced to that item."""
        cdef int k = 0
        while used:
            used &= used - 1
            k += 1
        return k >= self.forced_len or self.forced[k] == item

    cdef inline void _begin_attempt(self, i64 start, ThreadList* cur,
                                    ThreadList* nxt) noexcept nogil:
        """A fresh attempt at start (the search and the open-chunk probe): empty thread
        lists and history, the initial thread added (tmp[0..S) is the depth-0 buffer;
        _add copies it before SPLIT branches)."""
        self.s = start
        self.n_nodes = 0
        self.undecided = 0
        self._list_clear(cur)
        self._list_clear(nxt)
        self._init_state(self.tmp, start)
        self._add(cur, 0, self.tmp, start, 0)

    cdef int _attempt(self, i64 start) noexcept nogil:
        """_try_match, honouring a searched PERMUTE's preference: its orders come first,
        lexicographically by item position, its items' inner choices after (Trino: the
        alternation of the orders). The dispatch alone would interleave the two, so the
        order is fixed one position at a time: the earliest item with which some match
        exists (an existence run: any DONE), then, with the whole order forced, the
        preferred match. One run settles a start with no match; at most n(n+1)/2 runs
        otherwise, each over at most 2^n masks per instruction."""
        cdef int rc, k, i, placed
        cdef i64 used = 0
        if self.perm_slot < 0:
            return self._try_match(start)
        self.forced_len = 0
        rc = self._try_match(start)
        if rc <= 0 or (rc == 2 and not self.last_found):
            return rc
        for k in range(self.perm_n - 1):
            placed = 0
            for i in range(self.perm_n):
                if used & ((<i64> 1) << i):
                    continue
                self.forced[k] = i
                self.forced_len = k + 1
                rc = self._try_match(start)
                if rc < 0:
                    return rc
                if self.last_found:
                    used |= (<i64> 1) << i
                    placed = 1
                    break
                if rc == 2:
                    self.forced_len = 0
                    return 2   # an earlier order's outcome needs rows not seen yet
            if not placed:   # not reached: a feasible prefix has a feasible extension
                self.forced_len = 0
                return 0
        self.forced_len = 0
        return rc   # the run with the whole order forced: its preferred match

    cdef bint _insert(self, ThreadList* L, int pc, i64* st) noexcept nogil:
        """Add (pc, st) to L unless an equivalent entry is there; False when dropped."""
        cdef int k = L.head[pc]
        while k >= 0:
            if self._equivalent(L.states + k * self.S, st):
                return False
            k = L.next_same[k]
        if L.n == L.cap:
            if self._list_grow(L) != 0:
                self.oom = 1
                return False
        k = L.n
        L.pcs[k] = pc
        memcpy(L.states + k * self.S, st, self.S * sizeof(i64))
        if L.head[pc] < 0:
            L.touched[L.n_touched] = pc
            L.n_touched += 1
            L.next_same[k] = -1
        else:
            # append at the end of the chain (order within the chain does not matter)
            L.next_same[k] = L.head[pc]
        L.head[pc] = k
        L.n += 1
        self.n_states += 1
        return True

    cdef i64 _new_node(self, i64 row, int label, i64 parent, unsigned char excl) noexcept nogil:
        cdef i64 cap
        cdef int* p_label
        cdef unsigned char* p_excl
        if self.n_nodes == self.cap_nodes:
            cap = self.cap_nodes * 2
            # each block is replaced only once it grew, so none is lost when one fails
            if grow_i64(&self.node_row, cap) or grow_i64(&self.node_parent, cap):
                self.oom = 1
                return -1
            p_label = <int*> realloc(self.node_label, cap * sizeof(int))
            if p_label == NULL:
                self.oom = 1
                return -1
            self.node_label = p_label
            p_excl = <unsigned char*> realloc(self.node_excl, cap)
            if p_excl == NULL:
                self.oom = 1
                return -1
            self.node_excl = p_excl
            self.cap_nodes = cap
        self.node_row[self.n_nodes] = row
        self.node_label[self.n_nodes] = label
        self.node_parent[self.n_nodes] = parent
        self.node_excl[self.n_nodes] = excl
        self.n_nodes += 1
        return self.n_nodes - 1

    # ------------------------------------------------------------------ DEFINE
    cdef i64 _kth_last(self, i64 node, int set_id, i64 k) noexcept nogil:
        """Row of the k-th last (0 = last) history row whose label is in set_id."""
        while node >= 0:
            if self.member[set_id * self.n_labels + self.node_label[node]]:
                if k == 0:
                    return self.node_row[node]
                k -= 1
            node = self.node_parent[node]
        return -1

    cdef i64 _resolve(self, int ref, i64* st, i64 r, int label) noexcept nogil:
        """Row a DEFINE reference denotes at row r tentatively labelled label (-1: none)."""
        cdef int set_id = self.refs[ref * 5]
        cdef int logical = self.refs[ref * 5 + 1]
        cdef i64 loff = self.refs[ref * 5 + 2]
        cdef i64 poff = self.refs[ref * 5 + 3]
        cdef i64 j, cnt
        cdef int t
        cdef bint in_set
        if set_id < 0:
            if logical == 1:
                j = r - loff
                if j < self.s:
                    return -1
            else:
                j = self.s + loff
                if j > r:
                    return -1
        else:
            t = self.set_tracked[set_id]
            in_set = self.member[set_id * self.n_labels + label]
            cnt = st[ST_SETS + 3 * t + 2]
            if logical == 1:
                if in_set:
                    if loff == 0:
                        j = r
                    else:
                        j = self._kth_last(st[ST_HIST], set_id, loff - 1)
                elif loff == 0:
                    j = st[ST_SETS + 3 * t + 1] if cnt > 0 else -1
                else:
                    j = self._kth_last(st[ST_HIST], set_id, loff)
            else:
                if loff < cnt:
                    j = st[ST_SETS + 3 * t] if loff == 0 else self._kth_last(
                        st[ST_HIST], set_id, cnt - 1 - loff)
                elif loff == cnt and in_set:
                    j = r
                else:
                    j = -1
            if j < 0:
                return -1
        j += poff
        if j < self.pstart or j >= self.pend:
            if j >= self.pend and self.open_:
                self._undecided_here()
            return -1
        return j

    cdef int _label_at(self, i64 j, i64* st, i64 r, int label) noexcept nogil:
        cdef i64 node, steps
        if j < 0:
            return -1
        if j == r:
            return label
        if j < self.s or j > r:
            return -1
        node = st[ST_HIST]
        steps = r - 1 - j
        while steps > 0 and node >= 0:
            node = self.node_parent[node]
            steps -= 1
        return self.node_label[node] if node >= 0 else -1

    cdef bint _eval(self, int label, i64* st, i64 r) noexcept nogil:
        cdef int pc = self.cond_off[label]
        cdef int sp
        if pc < 0:
            return True
        sp = self._run(pc, label, st, r, 0)
        return sp > 0 and not self.nstack[sp - 1] and self.vstack[sp - 1] != 0.0

    cdef int _run(self, int pc, int label, i64* st, i64 r, int sp) noexcept nogil:
        """Run the code at pc (a DEFINE, or an aggregate argument computed at the row)
        at row r tentatively labelled label, on the stack above slot sp; returns the
        new top (the value is in slot top - 1)."""
        cdef int op, n, i
        cdef i64 j
        cdef double a, b, v
        cdef unsigned char na, nb
        cdef double* vs = self.vstack
        cdef unsigned char* ns = self.nstack
        while True:
            op = self.code[pc]
            if op == C_LOAD or op == X_LOAD:
                j = self._resolve(self.code[pc + 2], st, r, label)
                if j < 0:
                    vs[sp] = 0.0
                    ns[sp] = 1
                else:
                    n = self.code[pc + 1]
                    if op == C_LOAD:
                        vs[sp] = self.vals[n * self.n_rows + j]
                    else:
                        self.xl.xs[sp] = self.xl.cols[n * self.n_rows + j]
                    ns[sp] = self.nulls[n * self.n_rows + j]
                sp += 1
                pc += 3
            elif op == C_CONST:
                vs[sp] = self.consts[self.code[pc + 1]]
                ns[sp] = 0
                sp += 1
                pc += 2
            elif op == C_NULL:
                vs[sp] = 0.0
                ns[sp] = 1
                sp += 1
                pc += 1
            elif op == C_LOAD_CLS:
                j = self._resolve(self.code[pc + 1], st, r, label)
                n = self._label_at(j, st, r, label)
                vs[sp] = n
                ns[sp] = n < 0
                sp += 1
                pc += 2
            elif op == C_AGG or op == X_AGG:
                self._define_aggregate(self.code[pc + 1], st, r, label, &vs[sp],
                                       &self.xl.xs[sp], &ns[sp], sp)
                sp += 1
                pc += 2
            elif op == C_MATCHNO:
                vs[sp] = <double> self.match_no
                ns[sp] = 0
                sp += 1
                pc += 1
            else:
                pc = _stack_op(op, self.code, pc, vs, ns, &self.xl, &sp)
                if pc < 0:
                    break
        return sp

    cdef void _define_aggregate(self, int k, i64* st, i64 r, int label, double* dv,
                                x_i128* xv, unsigned char* isnull, int sp) noexcept nogil:
        """Aggregate k over the thread's rows plus row r tentatively labelled label (its
        value goes to stack slot sp)."""
        cdef int set_id = self.daggs[k * 3]
        cdef i64 a[AGG_W]
        if _agg_listed(self.daggs[k * 3 + 1]):
            self._distinct_aggregate(k, st, r, label, dv, xv, isnull)
            return
        memcpy(a, st + self.agg_base + AGG_W * self.dagg_slot[k], AGG_W * sizeof(i64))
        if set_id < 0 or self.member[set_id * self.n_labels + label]:
            self._agg_row(a, k, st, r, label, sp + 1)
        _agg_value(a, self.daggs[k * 3 + 1], self.xl.dlane + 4 * k, &self.xl, dv, xv, isnull)

    cdef void _distinct_aggregate(self, int k, i64* st, i64 r, int label, double* dv,
                                  x_i128* xv, unsigned char* isnull) noexcept nogil:
        """A DISTINCT aggregate over the thread's rows of its set (from the history, the
        state compared when threads merge: full_history) plus row r labelled label."""
        cdef int set_id = self.daggs[k * 3]
        cdef i64 node = st[ST_HIST]
        cdef i64 n = 0, i
        cdef i64 need = 1
        cdef i64* rows
        cdef i64* labs
        while node >= 0:
            need += 1
            node = self.node_parent[node]
        node = st[ST_HIST]
        if 2 * need > self.drows_cap:
            if grow_i64(&self.drows, 2 * need):
                self.oom = 1
                isnull[0] = 1
                return
            self.drows_cap = 2 * need
        rows = self.drows  # filled from the end: match order
        labs = self.drows + need
        if set_id < 0 or self.member[set_id * self.n_labels + label]:
            n += 1
            rows[need - n] = r
            labs[need - n] = label
        while node >= 0:
            if set_id < 0 or self.member[set_id * self.n_labels + self.node_label[node]]:
                n += 1
                rows[need - n] = self.node_row[node]
                labs[need - n] = self.node_label[node]
            node = self.node_parent[node]
        _agg_distinct(rows + need - n, labs + need - n, n, self.daggs, k, &self.xl,
                      self.vals, self.nulls, self.n_rows, dv, xv, isnull)

    cdef inline void _agg_row(self, i64* a, int k, i64* st, i64 r, int label,
                              int sp) noexcept nogil:
        """Step aggregate k's state a with row r labelled label (sp: the free stack)."""
        if self.any_dprog and (self.dprog[2 * k] >= 0 or self.dprog[2 * k + 1] >= 0):
            self._agg_computed_row(a, k, st, r, label, sp)
        else:
            _agg_define_row(a, self.daggs, k, &self.xl, self.vals, self.nulls, self.n_rows,
                            r, label)

    cdef void _agg_computed_row(self, i64* a, int k, i64* st, i64 r, int label,
                                int sp) noexcept nogil:
        """An aggregate whose argument reads MATCH_NUMBER(): the argument computed at row
        r (the attempt's number is constant within it), stepped as a one-row column."""
        cdef int func = self.daggs[k * 3 + 1]
        cdef const int* lane = self.xl.dlane + 4 * k
        cdef double d[2]
        cdef x_i128 x[2]
        cdef unsigned char n[2]
        self._argument(self.dprog[2 * k], self.daggs[k * 3 + 2], st, r, label, sp,
                       &d[0], &x[0], &n[0])
        if func == A_MAX_BY or func == A_MIN_BY:
            self._argument(self.dprog[2 * k + 1], lane[2], st, r, label, sp, &d[1], &x[1],
                           &n[1])
            _agg_step_by(a, func, lane, &d[0], &x[0], &n[0], &d[1], &x[1], &n[1], 0)
        else:
            _agg_step(a, func, lane, &d[0], &x[0], &n[0], 0, 0)

    cdef void _argument(self, int pc, int col, i64* st, i64 r, int label, int sp,
                        double* d, x_i128* x, unsigned char* n) noexcept nogil:
        """One argument's value at row r: its code's result, or the column's row."""
        cdef int top
        d[0] = 0.0
        x[0] = 0
        n[0] = 1
        if pc >= 0:
            top = self._run(pc, label, st, r, sp)
            if top > sp:
                d[0] = self.vstack[top - 1]
                x[0] = self.xl.xs[top - 1]
                n[0] = self.nstack[top - 1]
        elif col >= 0:
            d[0] = self.vals[col * self.n_rows + r]
            n[0] = self.nulls[col * self.n_rows + r]
            if self.xl.cols != NULL:
                x[0] = self.xl.cols[col * self.n_rows + r]

    cdef void _take(self, i64* st, i64* out, i64 r, int label) noexcept nogil:
        """out := st after mapping row r to label."""
        cdef int s_id, t, k
        memcpy(out, st, self.S * sizeof(i64))
        for k in range(self.n_daggs):
            s_id = self.daggs[k * 3]
            if not self.dagg_own[k] or (s_id >= 0 and not self.member[s_id * self.n_labels
                                                                     + label]):
                continue
            self._agg_row(out + self.agg_base + AGG_W * self.dagg_slot[k], k, st, r, label, 0)
        out[ST_HIST] = self._new_node(r, label, st[ST_HIST], st[ST_EXCL] > 0)
        for s_id in range(self.n_sets):
            t = self.set_tracked[s_id]
            if t >= 0 and self.member[s_id * self.n_labels + label]:
                out[ST_SETS + 3 * t + 1] = r
                if self.set_first[s_id] and out[ST_SETS + 3 * t + 2] == 0:
                    out[ST_SETS + 3 * t] = r
                if self.set_count[s_id]:
                    out[ST_SETS + 3 * t + 2] += 1
                else:
                    out[ST_SETS + 3 * t + 2] = 1  # count only tells "has a row"
        # a loop iteration that consumed a row has made progress, whichever row it began
        # at: all LOOP_BACK asks (the standard's empty-iteration rule). Forgetting the
        # row lets threads that differ only there merge: (A*)*B stays linear per start
        for k in range(self.n_loop_slots):
            if out[self.slot_base + self.loop_slots[k]] >= 0:
                out[self.slot_base + self.loop_slots[k]] = SLOT_MOVED

    # ------------------------------------------------------------------ matching
    cdef inline unsigned long long _dead_at(self, i64 r) noexcept nogil:
        """Bits of the required row-local labels whose DEFINE holds on no partition row
        >= r (none while the partition may continue in the next chunk: a thread needing
        such a label may still die here, which decides its start without carrying rows)."""
        if self.open_ or not self.use_early_stop:
            return 0
        return self._dead_in_chunk(r)

    cdef inline unsigned long long _dead_in_chunk(self, i64 r) noexcept nogil:
        """_dead_at as if the partition ended with the chunk."""
        cdef unsigned long long dead = 0
        cdef int label
        for label in range(self.n_labels):
            if self.label_bit[label] >= 0 and self.last_true[label] < r:
                dead |= (<unsigned long long> 1) << self.label_bit[label]
        return dead

    cdef inline bint _too_short(self, i64 r) noexcept nogil:
        """No match starting at row r or later fits before the end of the (closed)
        partition: every match consumes at least min_rows rows."""
        return not self.open_ and self.use_early_stop and r + self.min_rows > self.pend

    cdef inline bint _doomed(self, i64 start) noexcept nogil:
        """In an open partition, no match from start can end within the chunk: a label
        every match needs holds on no row left in it, or fewer than min_rows rows are
        left. The attempt's outcome is then "undecided" exactly when a thread is still
        alive at the chunk's end, which _probe can show cheaply."""
        return self.open_ and self.use_early_stop and self.probe_left > 0 and \
            ((self.req[0] & self._dead_in_chunk(start)) or
             start + self.min_rows > self.pend)

    cdef int _probe(self, i64 start) noexcept nogil:
        """For a _doomed start: follow only the PROBE_THREADS most preferred threads
        and return 1 when one of them is still alive at the chunk's end (or otherwise
        needs rows not seen yet), 0 when they all die first, -1 on out of memory or
        Ctrl-C. Exact: the kept threads are real configurations of the attempt, and the
        full run keeps each of them or an equivalent one (same future) unless a match
        cuts it, which a doomed start cannot reach; so the full run would also see rows
        past the chunk needed, and decide 2 (undecided). Without it an open chunk's
        first attempt simulates every thread to the chunk's end only to learn that
        (PERMUTE(A+, ..., B) with no B: every mask, 65,536 rows). The probes of one
        partition share a budget of rows (probe_left), so failing ones cost at most a
        constant factor."""
        cdef ThreadList* cur = &self.la
        cdef ThreadList* nxt = &self.lb
        cdef ThreadList* swap
        cdef i64 r = start
        cdef i64 pend_n = self.pend_n, hits = self.memo_hits
        cdef int shown = 0
        self._begin_attempt(start, cur, nxt)
        while cur.n > 0 and self.probe_left > 0:
            self.probe_left -= 1
            self._list_clear(nxt)
            if self._step(cur, nxt, r, 0):
                break   # not reached: a doomed start completes no match in the chunk
            if self.oom or self.stop:
                return -1
            if self.undecided:
                shown = 1
                break
            self._keep_first(nxt, PROBE_THREADS)
            swap = cur
            cur = nxt
            nxt = swap
            r += 1
        self._list_clear(cur)
        self._list_clear(nxt)
        if not shown:  # what it noted belongs to no attempt: the full run starts afresh
            self.pend_n = pend_n
            self.memo_hits = hits
            self.undecided = 0
        return 1 if shown else 0

    cdef inline void _keep_first(self, ThreadList* L, int k) noexcept nogil:
        """Cut L after its k-th thread (visit marks of epsilon instructions aside)."""
        cdef int i, op, seen = 0
        for i in range(L.n):
            op = self.prog[L.pcs[i] * 3]
            if op == OP_LABEL or op == OP_DONE:
                seen += 1
                if seen == k:
                    L.n = i + 1
                    return

    cdef void _init_state(self, i64* init, i64 start) noexcept nogil:
        cdef int i
        for i in range(self.S):
            init[i] = -1
        init[ST_EXCL] = 0
        init[ST_START] = start
        for i in range(self.n_tracked):
            init[ST_SETS + 3 * i + 2] = 0
        for i in range(self.agg_base, self.slot_base):
            init[i] = 0

    cdef int _step(self, ThreadList* cur, ThreadList* nxt, i64 r,
                   unsigned long long dead) noexcept nogil:
        """Advance the threads of cur (preference order) over row r into nxt. Returns 1
        when one reached DONE: it becomes the winner and the threads after it are cut."""
        cdef int i, pc, op, label, ok
        cdef i64* st
        cdef i64* nst
        cdef i64* key
        for i in range(cur.n):
            pc = cur.pcs[i]
            op = self.prog[pc * 3]
            if op != OP_LABEL and op != OP_DONE:
                continue  # a visit mark of an epsilon instruction
            if interrupted(&self.countdown):
                self.stop = 1
                return 0
            self.thread_steps += 1
            st = cur.states + i * self.S
            self.s = st[ST_START]
            if op == OP_DONE:
                memcpy(self.winner, st, self.S * sizeof(i64))
                self.winner_end_ = r
                self.winner_start_ = self.s
                return 1  # lower-preference threads are cut
            if r >= self.pend:
                if self.open_:
                    self._undecided_here()  # this thread could consume rows not seen yet
                continue
            if self.req[pc] & dead:
                continue  # a label this thread still needs holds on no later row
            if self.memo_on and (self.memo_n or r - self.s >= self.memo_span):
                key = self._memo_slot()
                if key == NULL:
                    self.oom = 1
                    return 0
                self._memo_key(key, pc, r, st)
                if self._memo_has(key):
                    self.memo_hits += 1
                    continue  # a failed attempt reached this configuration
                if r - self.s >= self.memo_span and self.pend_n < self.memo_max:
                    self.pend_n += 1  # noted: kept if this attempt fails
            if self.window_kind and not self._fits(r):
                continue  # row r would stretch the match beyond WITHIN
            label = self.prog[pc * 3 + 1]
            if self.row_local[label]:
                ok = self.pre[label * self.n_rows + r]
                if ok == 2:
                    self._undecided_here()
                    ok = 0
                elif ok >= PRE_ERROR:
                    if self.xl.error == 0:
                        self.xl.error = ok - PRE_ERROR
                    ok = 0
            else:
                ok = self._eval(label, st, r)
            if ok:
                nst = self.tmp + self.S  # depth-1 scratch is free between adds
                self._take(st, nst, r, label)
                self._add(nxt, pc + 1, nst, r + 1, 1)
        return 0

    # ------------------------------------------------------------------ failed-attempt memo
    # In the per-start search a failed attempt from row s explores every configuration it
    # reaches to the end (no DONE cuts it), so none of them completes. When the compared
    # state holds all that DEFINE reads (_memo_safe), a later attempt's thread in such a
    # configuration has the same - empty - future and is dropped: a failing stretch costs
    # about one attempt instead of one per start row. Keys are noted during an attempt
    # (from MEMO_SPAN rows in: only long attempts make the search quadratic) and kept
    # only if it fails; a match clears the memo (MATCH_NUMBER() moves on). The memo is
    # a subset of the dead configurations, so a missing key only costs time.

    cdef inline unsigned long long _memo_hash(self, i64* key) noexcept nogil:
        cdef unsigned long long h = 1469598103934665603ULL
        cdef int i
        for i in range(self.KW):
            h = (h ^ <unsigned long long> key[i]) * 1099511628211ULL
            h ^= h >> 29
        return h

    cdef inline void _memo_key(self, i64* key, int pc, i64 r, i64* st) noexcept nogil:
        """The configuration (row, pc, compared state), a value-keyed set's first row
        replaced by its canonical row (_canonical_rows). Sound: DEFINE reads that row
        only as FIRST(set.col) values (_value_keyed_sets), and the canonical row has the
        same bits in every VM column (value and null flag, both lanes), so every condition
        evaluates alike on either, and the two configurations have the same future. Without
        it a FIRST row differs with every start (B AS FIRST(A.x) = 5 after (A*)*): no key
        of a failed attempt would ever match a later start's, and the search stays
        quadratic."""
        cdef int i, w
        key[0] = r
        key[1] = pc
        memcpy(key + 2, st + ST_SETS, (self.S - ST_SETS) * sizeof(i64))
        for i in range(self.n_valkey):
            w = 2 + 3 * self.valkey[i]
            if key[w] >= 0:
                key[w] = self.canon[key[w]]

    cdef inline unsigned long long _row_hash(self, i64 j) noexcept nogil:
        cdef unsigned long long h = 1469598103934665603ULL, bits
        cdef int c
        for c in range(self.n_cols):
            memcpy(&bits, &self.vals[c * self.n_rows + j], 8)
            h = (h ^ bits ^ (<unsigned long long> self.nulls[c * self.n_rows + j] << 1)) \
                * 1099511628211ULL
            h ^= h >> 29
            if self.xl.cols != NULL:
                h = (h ^ <unsigned long long> self.xl.cols[c * self.n_rows + j]) \
                    * 1099511628211ULL
                h ^= h >> 29
        return h

    cdef inline bint _same_row_values(self, i64 i, i64 j) noexcept nogil:
        cdef int c
        for c in range(self.n_cols):
            if memcmp(&self.vals[c * self.n_rows + i], &self.vals[c * self.n_rows + j], 8) \
                    or self.nulls[c * self.n_rows + i] != self.nulls[c * self.n_rows + j]:
                return False
            if self.xl.cols != NULL and \
                    self.xl.cols[c * self.n_rows + i] != self.xl.cols[c * self.n_rows + j]:
                return False
        return True

    cdef int _canonical_rows(self) noexcept nogil:
        """canon[j] for the partition's rows: the earliest row with the same bits in
        every VM column (_memo_key). One hash table pass; -1 when out of memory."""
        cdef i64 n = self.pend - self.pstart, cap = 16, j, at
        cdef unsigned long long mask
        cdef i64* tab
        while cap < 2 * n:
            cap *= 2
        tab = <i64*> malloc(cap * sizeof(i64))
        if tab == NULL:
            return -1
        for j in range(cap):
            tab[j] = -1
        mask = <unsigned long long> (cap - 1)
        for j in range(self.pstart, self.pend):
            at = <i64> (self._row_hash(j) & mask)
            while tab[at] >= 0 and not self._same_row_values(tab[at], j):
                at = <i64> ((<unsigned long long> at + 1) & mask)
            if tab[at] < 0:
                tab[at] = j
            self.canon[j] = tab[at]
        free(tab)
        return 0

    cdef bint _memo_has(self, i64* key) noexcept nogil:
        cdef unsigned long long mask, at
        cdef i64* e
        if self.memo_n == 0:
            return False
        mask = <unsigned long long> (self.memo_cap - 1)
        at = self._memo_hash(key) & mask
        while True:
            e = self.memo_tab + at * self.KW
            if e[0] < 0:
                return False
            if memcmp(e, key, self.KW * sizeof(i64)) == 0:
                return True
            at = (at + 1) & mask

    cdef void _memo_put(self, i64* tab, i64 cap, i64* key) noexcept nogil:
        cdef unsigned long long mask = <unsigned long long> (cap - 1)
        cdef unsigned long long at = self._memo_hash(key) & mask
        cdef i64* e
        while True:
            e = tab + at * self.KW
            if e[0] < 0:
                memcpy(e, key, self.KW * sizeof(i64))
                return
            if memcmp(e, key, self.KW * sizeof(i64)) == 0:
                return
            at = (at + 1) & mask

    cdef i64* _memo_slot(self) noexcept nogil:
        """Room for the next key of the current attempt (NULL when out of memory)."""
        cdef i64 cap
        cdef i64* grown
        if self.pend_n == self.pend_cap:
            cap = max(1024, 2 * self.pend_cap)
            grown = <i64*> realloc(self.memo_pend, cap * self.KW * sizeof(i64))
            if grown == NULL:
                return NULL
            self.memo_pend = grown
            self.pend_cap = cap
        return self.memo_pend + self.pend_n * self.KW

    cdef int _memo_commit(self) noexcept nogil:
        """The attempt failed: its configurations join the memo (keys of rows below
        memo_floor are dropped whenever the table is rebuilt); -1 when out of memory."""
        cdef i64 need = self.memo_n + self.pend_n, cap, i
        cdef i64* tab
        cdef i64* e
        if need > self.memo_max:  # bound the memory: forget older failures
            self._memo_clear()  # (this attempt's too: a memo may hold fewer keys)
            need = 0
        if need * 2 > self.memo_cap:
            cap = 1024
            while cap < need * 2:
                cap *= 2
            tab = <i64*> malloc(cap * self.KW * sizeof(i64))
            if tab == NULL:
                return -1
            for i in range(cap):
                tab[i * self.KW] = -1
            self.memo_n = 0
            for i in range(self.memo_cap):
                e = self.memo_tab + i * self.KW
                if e[0] >= self.memo_floor:
                    self._memo_put(tab, cap, e)
                    self.memo_n += 1
            free(self.memo_tab)
            self.memo_tab = tab
            self.memo_cap = cap
        for i in range(self.pend_n):
            self._memo_put(self.memo_tab, self.memo_cap, self.memo_pend + i * self.KW)
        self.memo_n += self.pend_n  # duplicates counted too: the table only grows sooner
        self.pend_n = 0
        return 0

    cdef void _memo_clear(self) noexcept nogil:
        cdef i64 i
        if self.memo_cap > 8 * self.memo_n + 4096:  # mostly empty: give it back
            free(self.memo_tab)
            self.memo_tab = NULL
            self.memo_cap = 0
        elif self.memo_n:
            for i in range(self.memo_cap):
                self.memo_tab[i * self.KW] = -1
        self.memo_n = 0
        self.pend_n = 0

    cdef int _try_match(self, i64 start) noexcept nogil:
        """Preferred match starting at row start; returns 1 and fills self.winner
        (winner[ST_HIST] = last node) and self.winner_end_, 0 for none, 2 when rows not
        seen yet could change the outcome, -1 when out of memory."""
        cdef ThreadList* cur = &self.la
        cdef ThreadList* nxt = &self.lb
        cdef ThreadList* swap
        cdef i64 r = start
        cdef int found = 0
        if self._doomed(start):
            found = self._probe(start)
            if found:
                self.last_found = 0
                return 2 if found > 0 else -1
        self._begin_attempt(start, cur, nxt)
        while cur.n > 0:
            self._list_clear(nxt)
            if self._step(cur, nxt, r, self._dead_at(r)):
                found = 1
            if self.oom or self.stop:
                return -1
            if nxt.n > self.peak_states:
                self.peak_states = nxt.n
            swap = cur
            cur = nxt
            nxt = swap
            r += 1
        self._list_clear(cur)
        self._list_clear(nxt)
        self.last_found = found
        if self.undecided:
            return 2
        return found

    cdef int _scan(self, i64 p) noexcept nogil:
        """All start rows from p in one pass (Pike VM, unanchored leftmost-first): a new
        thread starts at every row behind the threads of earlier starts, so the thread
        list stays in (start row, preference) order. A later start's thread equivalent to
        an earlier one is dropped by _insert: with no start-dependent state (_start_free)
        their futures are the same, so either both complete - and the earlier start wins -
        or neither does. The first DONE reached in list order cuts everything after it,
        later starts included; the winner is the preferred match of the first start row
        that has one, exactly what _try_match from each row in turn would find.

        Returns 1 (winner_start_, winner_end_, winner), 0 when no start row in
        [p, pend) matches, 2 when the outcome of start undecided_start needs rows not
        seen yet (every earlier start has no match), -1 when out of memory."""
        cdef ThreadList* cur = &self.la
        cdef ThreadList* nxt = &self.lb
        cdef ThreadList* swap
        cdef i64 r = p
        cdef int found = 0, adding = 1
        cdef unsigned long long dead
        cdef i64 gc_at = 1 << 16
        self.undecided_start = self.pend + 1
        if self._doomed(p):
            found = self._probe(p)
            if found:
                self.undecided_start = p
                return 2 if found > 0 else -1
        self.n_nodes = 0
        self.undecided = 0
        self.undecided_start = self.pend + 1
        self._list_clear(cur)
        self._list_clear(nxt)
        while True:
            dead = self._dead_at(r)
            if adding and not found:
                if r >= self.pend or (self.req[0] & dead) or self._too_short(r):
                    adding = 0  # no later start can match (required labels are monotone)
                else:
                    if cur.n == 0:
                        self.n_nodes = 0  # no live thread refers to the history arena
                    self.s = r
                    self._init_state(self.tmp, r)
                    self._add(cur, 0, self.tmp, r, 0)
                    self.n_attempts += 1
            if cur.n == 0:
                if found or not adding:
                    break
                r += 1
                continue
            self._list_clear(nxt)
            if self._step(cur, nxt, r, dead):
                found = 1
            if self.oom or self.stop:
                return -1
            if nxt.n > self.peak_states:
                self.peak_states = nxt.n
            swap = cur
            cur = nxt
            nxt = swap
            r += 1
            if self.n_nodes > gc_at:  # starts keep coming: collect dead branches
                if self._compact_history(cur, found) != 0:
                    return -1
                gc_at = max(1 << 16, 2 * self.n_nodes)
        self._list_clear(cur)
        self._list_clear(nxt)
        if self.undecided and self.undecided_start <= (self.winner_start_ if found else self.pend):
            return 2
        return found

    cdef int _compact_history(self, ThreadList* L, int found) noexcept nogil:
        """Keep only the history nodes that the live threads of L (and the winner, when
        found) reach, renumbered in creation order (a parent precedes its children).
        In one pass the list may never empty, so dead branches would pile up; states
        never compare histories there (_start_free), so visit marks just lose theirs."""
        cdef i64 n = self.n_nodes, i, k = 0, node, parent
        cdef int op
        cdef i64* remap = <i64*> malloc(n * sizeof(i64) + 8)
        cdef i64* st
        if remap == NULL:
            return -1
        for i in range(n):
            remap[i] = -1
        for i in range(L.n + found):
            if i < L.n:
                op = self.prog[L.pcs[i] * 3]
                if op != OP_LABEL and op != OP_DONE:
                    continue
                node = L.states[i * self.S + ST_HIST]
            else:
                node = self.winner[ST_HIST]
            while node >= 0 and remap[node] < 0:
                remap[node] = 1
                node = self.node_parent[node]
        for i in range(n):
            if remap[i] < 0:
                continue
            remap[i] = k
            parent = self.node_parent[i]
            self.node_row[k] = self.node_row[i]
            self.node_label[k] = self.node_label[i]
            self.node_excl[k] = self.node_excl[i]
            self.node_parent[k] = remap[parent] if parent >= 0 else -1
            k += 1
        for i in range(L.n + found):
            st = L.states + i * self.S if i < L.n else self.winner
            node = st[ST_HIST]
            st[ST_HIST] = remap[node] if node >= 0 else -1
        self.n_nodes = k
        free(remap)
        return 0

    cdef bint _fits(self, i64 r) noexcept nogil:
        """Whether rows start..r stay within the WITHIN window."""
        if self.window_kind == 1:
            return r - self.s < self.window_size
        if self.wnull[self.s] or self.wnull[r]:
            return False
        return fabs(self.wts[r] - self.wts[self.s]) <= self.window_size

    def _set_closure_depth(self, int depth):
        """Scratch states for epsilon paths up to depth branches (PERMUTE re-enters its
        dispatch once per item, so a path can be longer than the program)."""
        cdef i64* grown
        if depth + 2 <= self.n_prog + 2:
            return
        grown = <i64*> realloc(self.tmp, (depth + 2) * self.S * sizeof(i64))
        if grown == NULL:
            raise MemoryError("pattern scratch space")
        self.tmp = grown

    def set_search(self, bint one_pass=True, bint early_stop=True, bint memo=True,
                   int memo_span=MEMO_SPAN, i64 memo_keys=0):
        """Switch the search strategies off (benchmark baselines, equivalence tests):
        one_pass - every start row in one pass where the pattern allows (_scan);
        early_stop - stop once a required label holds on no later row (_dead_at);
        memo - the per-start search skips configurations failed attempts reached;
        memo_span - rows into an attempt from which its configurations are noted (0 in
        tests: every failure feeds the memo); memo_keys - most keys kept (0: 64 MiB
        worth; tests make it tiny to exercise forgetting)."""
        self.use_one_pass = one_pass
        self.use_early_stop = early_stop
        self.use_memo = memo
        self.memo_span = max(memo_span, 0)
        self.memo_max = memo_keys if memo_keys > 0 else max(1024, MEMO_MAX_WORDS // self.KW)

    @property
    def fewest_rows(self):
        """The fewest rows any match of the pattern consumes (_min_rows; a bound)."""
        return self.min_rows

    @property
    def one_pass(self):
        """Whether run() simulates all start rows in one pass (else one start at a time)."""
        return bool(self.one_pass_ok and self.use_one_pass and self.window_kind == 0)

    @property
    def memo(self):
        """Whether the per-start search skips configurations failed attempts reached."""
        return bool(self.memo_ok and self.use_memo and not self.one_pass
                    and self.window_kind == 0)

    def _set_window(self, int kind, double size):
        """WITHIN n ROWS (kind 1) or WITHIN INTERVAL (kind 2, size in microseconds)."""
        self.window_kind = kind
        self.window_size = size

    def stats(self):
        """The counters of every run so far (EXPLAIN ANALYZE, runtime/run_stats.py)."""
        return dict(attempts=self.n_attempts, thread_states=self.n_states,
                    peak_thread_states=self.peak_states, matches_output=self.n_matches)

    def set_consts(self, cnp.ndarray consts):
        """Replace the constant pool (string literals are re-ranked per chunk)."""
        consts = np.ascontiguousarray(consts, dtype=np.float64)
        if consts.shape[0] != self.n_consts:
            raise ValueError("constant pool size changed")
        if consts.shape[0]:
            memcpy(self.consts, cnp.PyArray_DATA(consts), consts.nbytes)

    def run(self, cnp.ndarray values, cnp.ndarray nulls, cnp.ndarray bounds,
            int open_last=0, i64 cont_pos=-1, i64 cont_match_no=0, i64 cont_covered=0,
            int cont_has_start=0, window_ts=None, window_nulls=None):
        """Match every partition [bounds[k], bounds[k+1]) of the chunk.

        values: float64[n_cols, n_rows]; nulls: uint8[n_cols, n_rows].
        open_last: the last partition may continue in the next chunk; matching stops at
        the first start row whose outcome depends on rows not seen yet.
        cont_pos >= 0: the first partition continues one from the previous chunk, resuming
        at row cont_pos with cont_match_no matches so far and rows < cont_covered matched;
        cont_has_start says whether its true first row is still row 0 (for ``^``).
        Returns a SqlResult (its error set for a runtime error).
        """
        cdef const double[:, ::1] vv = np.ascontiguousarray(values, dtype=np.float64)
        cdef const unsigned char[:, ::1] nn = np.ascontiguousarray(nulls, dtype=np.uint8)
        cdef const i64[::1] bb = np.ascontiguousarray(bounds, dtype=np.int64)
        cdef const double[::1] wt
        cdef const unsigned char[::1] wn
        if self.window_kind == 2:
            wt = np.ascontiguousarray(window_ts, dtype=np.float64)
            wn = np.ascontiguousarray(window_nulls, dtype=np.uint8)
            if wt.shape[0] != values.shape[1] or wn.shape[0] != values.shape[1]:
                raise ValueError("window time column has the wrong length")
            self.wts = &wt[0] if wt.shape[0] > 0 else NULL
            self.wnull = &wn[0] if wn.shape[0] > 0 else NULL
        cdef Buf out[5]  # rows, match numbers, leaves, aggregates, list rows
        cdef i64 n_parts = bb.shape[0] - 1
        cdef i64 k, pos, end, covered, length, i
        cdef int found, err = 0
        cdef int one_pass = self.one_pass_ok and self.use_one_pass and self.window_kind == 0
        cdef i64 memo_before
        self.memo_run = (self.memo_ok and self.use_memo and not one_pass
                         and self.window_kind == 0)
        cdef i64 first
        cdef i64* labels = NULL
        cdef unsigned char* excl = NULL
        cdef i64 cap_labels = 0
        cdef i64 node
        cdef int skip_idx
        cdef i64 saved[5]
        cdef int q
        cdef i64 resume_pos = -1, resume_mn = 0, resume_cov = 0
        for i in range(5):
            out[i].data = NULL
            out[i].n = 0
            out[i].cap = 0
        self.n_rows = vv.shape[1]
        self.vals = &vv[0, 0] if vv.shape[0] > 0 and vv.shape[1] > 0 else NULL
        self.nulls = &nn[0, 0] if nn.shape[0] > 0 and nn.shape[1] > 0 else NULL
        self.n_cols = vv.shape[0]
        self.oom = 0
        free(self.pre)
        self.pre = <unsigned char*> malloc(self.n_labels * self.n_rows + 1)
        free(self.canon)
        self.canon = NULL
        if self.memo_run and self.n_valkey:
            self.canon = <i64*> malloc(self.n_rows * sizeof(i64) + 8)
        if self.pre == NULL or (self.memo_run and self.n_valkey and self.canon == NULL):
            raise MemoryError("cepsql matcher ran out of memory")
        with nogil:
            for k in range(n_parts):
                self.pstart = bb[k]
                self.pend = bb[k + 1]
                self.open_ = open_last and k == n_parts - 1
                self.match_no = 0
                pos = self.pstart
                covered = self.pstart
                self.anchor_start = self.pstart
                if k == 0 and cont_pos >= 0:
                    self.anchor_start = self.pstart if cont_has_start else -1
                    pos = cont_pos
                    covered = cont_covered
                    self.match_no = cont_match_no
                self._precompute()
                self._memo_clear()
                self.memo_on = self.memo_run
                self.probe_left = 2 * (self.pend - self.pstart) + 1024
                if self.memo_run and self.n_valkey and self._canonical_rows() != 0:
                    err = ERR_MEMORY
                    break
                while pos < self.pend:
                    if (self.req[0] & self._dead_at(pos)) or self._too_short(pos):
                        # a label every match needs holds on no row from pos on, or
                        # fewer rows are left than any match consumes
                        if self._unmatched_rows(pos, self.pend, covered, out) != 0:
                            err = ERR_MEMORY
                        pos = self.pend
                        break
                    self.match_no += 1  # tentative number visible to MATCH_NUMBER() in DEFINE
                    if one_pass:
                        found = self._scan(pos)
                        if found >= 0:
                            # the starts before the first matched (or undecided) one fail
                            first = (self.winner_start_ if found == 1 else
                                     self.undecided_start if found == 2 else self.pend)
                            if self._unmatched_rows(pos, first, covered, out) != 0:
                                err = ERR_MEMORY
                                break
                            pos = first
                    else:
                        self.pend_n = 0
                        self.memo_hits = 0
                        self.memo_floor = pos
                        memo_before = self.memo_n
                        self.n_attempts += 1
                        found = self._attempt(pos)
                        if self.memo_on and found == 0:
                            if memo_before and not self.memo_hits and self.pend_n > MEMO_PROBE:
                                # states carry start-specific words (e.g. FIRST rows):
                                # nothing merges, the memo would only cost
                                self.memo_on = 0
                                self._memo_clear()
                            elif self._memo_commit() != 0:
                                found = -1
                        elif found == 1:
                            self._memo_clear()
                    if found < 0:
                        err = ERR_MEMORY
                        break
                    if found == 2:
                        self.match_no -= 1
                        break  # undecided: resume here when more rows arrive
                    if not found:
                        self.match_no -= 1
                        if not one_pass:
                            if self._unmatched_rows(pos, pos + 1, covered, out) != 0:
                                err = ERR_MEMORY
                                break
                            pos += 1
                        continue
                    end = self.winner_end_
                    length = end - pos
                    if length > cap_labels:
                        cap_labels = length * 2 + 16
                        free(labels)
                        free(excl)
                        labels = <i64*> malloc(cap_labels * sizeof(i64))
                        excl = <unsigned char*> malloc(cap_labels)
                        if labels == NULL or excl == NULL:
                            err = ERR_MEMORY
                            break
                    node = self.winner[ST_HIST]
                    i = length - 1
                    while i >= 0:
                        labels[i] = self.node_label[node]
                        excl[i] = self.node_excl[node]
                        node = self.node_parent[node]
                        i -= 1
                    for q in range(5):
                        saved[q] = out[q].n
                    self.undecided = 0
                    if self._emit(pos, length, labels, excl, out) != 0:
                        err = ERR_MEMORY
                        break
                    if self.undecided:  # a measure reads rows not seen yet
                        for q in range(5):
                            out[q].n = saved[q]
                        self.match_no -= 1
                        break
                    self.n_matches += 1
                    if end > covered:
                        covered = end
                    if length == 0:
                        pos += 1
                    elif self.skip_mode == SKIP_PAST_LAST:
                        pos = end
                    elif self.skip_mode == SKIP_NEXT_ROW:
                        pos += 1
                    else:
                        skip_idx = self._skip_target(labels, length)
                        if skip_idx < 0:
                            err = ERR_SKIP_ABSENT
                            break
                        if skip_idx == 0:
                            err = ERR_SKIP_FIRST_ROW
                            break
                        pos += skip_idx
                if err:
                    break
                if self.open_:
                    resume_pos = pos if pos < self.pend else self.pend
                    resume_mn = self.match_no
                    resume_cov = covered
        free(labels)
        free(excl)
        if self.stop:  # Ctrl-C: drop the partial output
            self.stop = 0
            self.open_ = 0
            for q in range(5):
                free(out[q].data)
            raise_interrupt()
        rows = buf_to_numpy(&out[0], True)
        mns = buf_to_numpy(&out[1], True)
        lv = buf_to_numpy(&out[2], True).reshape(len(rows), self.n_leaves)
        ag = buf_to_numpy(&out[3], True).reshape(len(rows), self.n_maggs, 2)
        lists = buf_to_numpy(&out[4], True)
        self.open_ = 0
        return SqlResult(err, self.match_no, rows, mns, lv, ag, lists,
                         (resume_pos, resume_mn, resume_cov))

    cdef void _precompute(self) noexcept nogil:
        """Evaluate once per row the DEFINE conditions that depend on the row alone."""
        cdef int label, i
        cdef i64 r
        cdef i64* st = self.tmp
        for i in range(self.S):
            st[i] = -1
        self.s = self.pstart
        for label in range(self.n_labels):
            self.last_true[label] = -1  # the last row the DEFINE may hold on (early stop)
            if not self.row_local[label]:
                continue
            for r in range(self.pstart, self.pend):
                self.undecided = 0
                self.pre[label * self.n_rows + r] = self._eval(label, st, r)
                if self.undecided:
                    self.pre[label * self.n_rows + r] = 2
                if self.xl.error:  # an ANSI error: raised only if a thread tests this row
                    self.pre[label * self.n_rows + r] = PRE_ERROR + self.xl.error
                    self.xl.error = 0
                if self.pre[label * self.n_rows + r]:  # (an error cell may be tested)
                    self.last_true[label] = r
        self.undecided = 0

    cdef int _skip_target(self, i64* labels, i64 length) noexcept nogil:
        cdef i64 i
        if self.skip_mode == SKIP_TO_FIRST:
            for i in range(length):
                if self.member[self.skip_set * self.n_labels + labels[i]]:
                    return <int> i
        else:
            i = length - 1
            while i >= 0:
                if self.member[self.skip_set * self.n_labels + labels[i]]:
                    return <int> i
                i -= 1
        return -1

    cdef int _unmatched_rows(self, i64 a, i64 b, i64 covered, Buf* out) noexcept nogil:
        """WITH UNMATCHED ROWS: rows [a, b) that start no match, past the covered ones."""
        cdef i64 row
        if self.empty_mode != 2 or not self.all_rows:
            return 0
        for row in range(max(a, covered), b):
            if self._emit_unmatched(row, out) != 0:
                return -1
        return 0

    cdef int _emit_unmatched(self, i64 row, Buf* out) noexcept nogil:
        """WITH UNMATCHED ROWS: the row with every measure null."""
        cdef int q, func
        if buf_push(&out[0], row) or buf_push(&out[1], -1):
            return -1
        for q in range(self.n_leaves):
            if buf_push(&out[2], -1):
                return -1
        for q in range(self.n_maggs):
            func = self.maggs[q * 4 + 1]
            if _push_null_aggregate(&out[3], func, self.xl.mlane + 4 * q):
                return -1
        return 0

    cdef int _emit(self, i64 start, i64 length, i64* labels, unsigned char* excl,
                   Buf* out) noexcept nogil:
        """Output rows of one match: one row, or one per (non-excluded) matched row."""
        cdef i64 i
        cdef int q
        for q in range(AGG_W * self.n_maggs):
            self.acc[q] = 0
            self.facc[q] = 0
        for i in range(length):
            for q in range(self.n_maggs):
                self._acc_add(self.facc + AGG_W * q, q, start, i, labels[i])
        if not self.all_rows:
            if buf_push(&out[0], start) or buf_push(&out[1], self.match_no):
                return -1
            return self._emit_measures(start, length, length, labels, out)
        if length == 0:
            if self.empty_mode == 1:
                return 0
            if buf_push(&out[0], start) or buf_push(&out[1], self.match_no):
                return -1
            return self._emit_measures(start, 0, 0, labels, out)
        for i in range(length):
            for q in range(self.n_maggs):
                self._acc_add(self.acc + AGG_W * q, q, start, i, labels[i])
            if excl[i]:
                continue
            if buf_push(&out[0], start + i) or buf_push(&out[1], self.match_no):
                return -1
            if self._emit_measures(start, length, i + 1, labels, out) != 0:
                return -1
        return 0

    cdef void _acc_add(self, i64* a, int q, i64 start, i64 i, i64 label) noexcept nogil:
        """Add match row i to aggregate q's accumulator a when its label belongs to the
        aggregate's variable (min/max keep their rows)."""
        cdef int set_id = self.maggs[q * 4]
        cdef int col = self.maggs[q * 4 + 2]
        cdef i64 base = col * self.n_rows
        if set_id >= 0 and not self.member[set_id * self.n_labels + label]:
            return
        if col < 0:
            _agg_step(a, self.maggs[q * 4 + 1], self.xl.mlane + 4 * q, NULL, NULL, NULL,
                      start + i, 1)
        else:
            _agg_step(a, self.maggs[q * 4 + 1], self.xl.mlane + 4 * q, self.vals + base,
                      self.xl.cols + base, self.nulls + base, start + i, 1)

    cdef int _emit_measures(self, i64 start, i64 length, i64 upto, i64* labels,
                            Buf* out) noexcept nogil:
        """Leaves and aggregates of one output row (prefix upto = RUNNING, length = FINAL)."""
        cdef int q, func, set_id, col
        cdef i64* a
        cdef i64 i, p
        if self._emit_leaves(start, length, upto, labels, &out[2]) != 0:
            return -1
        for q in range(self.n_maggs):
            set_id = self.maggs[q * 4]
            func = self.maggs[q * 4 + 1]
            col = self.maggs[q * 4 + 2]
            a = (self.facc if (self.maggs[q * 4 + 3] or not self.all_rows) else self.acc) + AGG_W * q
            p = length if (self.maggs[q * 4 + 3] or not self.all_rows) else upto
            if func == A_LIST:
                if buf_push(&out[3], a[1] if a[1] > 0 else -1) or buf_push(&out[3], 0):
                    return -1  # no rows: NULL, like ARRAY_AGG of nothing
                for i in range(p):
                    if (set_id < 0 or self.member[set_id * self.n_labels + labels[i]]) and \
                            not self.nulls[col * self.n_rows + start + i]:
                        if buf_push(&out[4], start + i):
                            return -1
            elif _push_aggregate(&out[3], a, func, self.xl.mlane + 4 * q, &self.xl):
                return -1
        return 0

    cdef int _emit_leaves(self, i64 start, i64 length, i64 upto, i64* labels,
                          Buf* out) noexcept nogil:
        """Resolve every leaf reference against the match prefix of length upto
        (RUNNING) or the whole match (FINAL)."""
        cdef int q, set_id, logical, final, kind
        cdef i64 loff, poff, p, j, idx, cnt, i
        for q in range(self.n_leaves):
            set_id = self.leaves[q * 6]
            logical = self.leaves[q * 6 + 1]
            loff = self.leaves[q * 6 + 2]
            poff = self.leaves[q * 6 + 3]
            final = self.leaves[q * 6 + 4]
            kind = self.leaves[q * 6 + 5]
            p = length if final else upto
            idx = -1
            if set_id < 0:
                if loff < p:
                    idx = (p - 1 - loff) if logical == 1 else loff
            elif logical == 1:
                cnt = 0
                i = p - 1
                while i >= 0:
                    if self.member[set_id * self.n_labels + labels[i]]:
                        if cnt == loff:
                            idx = i
                            break
                        cnt += 1
                    i -= 1
            else:
                cnt = 0
                for i in range(p):
                    if self.member[set_id * self.n_labels + labels[i]]:
                        if cnt == loff:
                            idx = i
                            break
                        cnt += 1
            j = -1
            if idx >= 0:
                j = start + idx + poff
                if j < self.pstart or j >= self.pend:
                    if j >= self.pend and self.open_:
                        self.undecided = 1
                    j = -1
            if kind == 1 and j >= 0:
                # CLASSIFIER: the label of row j if it lies in the match
                j = labels[j - start] if (j >= start and j < start + length) else -1
            if buf_push(out, j):
                return -1
        return 0


    def row_local_masks(self, cnp.ndarray values, cnp.ndarray nulls, cnp.ndarray bounds):
        """uint8[n_labels, n_rows]: per row, whether each row-local DEFINE holds (1) or
        not (0, also for NULL), every partition [bounds[k], bounds[k+1]) closed; labels
        without DEFINE hold everywhere, other labels read 0. For the in-process sequence
        matcher (cepsql/backends/local/sequence.py); run's conditions, not its search."""
        cdef const double[:, ::1] vv = np.ascontiguousarray(values, dtype=np.float64)
        cdef const unsigned char[:, ::1] nn = np.ascontiguousarray(nulls, dtype=np.uint8)
        cdef const i64[::1] bb = np.ascontiguousarray(bounds, dtype=np.int64)
        cdef i64 k, n_parts = bb.shape[0] - 1
        cdef int label
        cdef cnp.ndarray out = np.zeros((self.n_labels, vv.shape[1]), dtype=np.uint8)
        self.n_rows = vv.shape[1]
        self.vals = &vv[0, 0] if vv.shape[0] > 0 and vv.shape[1] > 0 else NULL
        self.nulls = &nn[0, 0] if nn.shape[0] > 0 and nn.shape[1] > 0 else NULL
        free(self.pre)
        self.pre = <unsigned char*> malloc(self.n_labels * self.n_rows + 1)
        if self.pre == NULL:
            raise MemoryError("cepsql matcher ran out of memory")
        self.open_ = 0
        with nogil:
            for k in range(n_parts):
                self.pstart = bb[k]
                self.pend = bb[k + 1]
                self.match_no = 0
                self._precompute()
        for label in range(self.n_labels):
            if self.cond_off[label] < 0:
                out[label, :] = 1
            elif self.row_local[label] and self.n_rows:
                memcpy(<unsigned char*> cnp.PyArray_DATA(out) + label * self.n_rows,
                       self.pre + label * self.n_rows, self.n_rows)
        errors = out >= PRE_ERROR  # a row whose DEFINE raised: the error, reported now
        if errors.any():
            if self.xl.error == 0:
                self.xl.error = int(out[errors].flat[0]) - PRE_ERROR
            out[errors] = 0
        return out

