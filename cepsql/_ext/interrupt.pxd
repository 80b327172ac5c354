# cython: language_level=3
"""Ctrl-C inside the evaluators' no-GIL loops (issue 24, A4). Signal handlers run only
when the interpreter gets control, which a loop that never takes the GIL never gives:
every INTERRUPT_STEPS calls, ``interrupted`` takes the GIL and runs the pending handlers
(PyErr_CheckSignals). A true result means a handler raised (KeyboardInterrupt for
SIGINT) and the exception is set: the loop unwinds like an out-of-memory error, and the
``def`` that released the GIL calls ``raise_interrupt()`` once it holds it again.

Signals reach only the main thread. An evaluator running in another thread (the
in-process backend's slices, backends/local/threads.py) also watches its run's cancel
flag: a one-byte array the main thread sets when it catches the KeyboardInterrupt;
``interrupted`` then says true too, with no exception set, and ``raise_interrupt``
raises KeyboardInterrupt in that thread.

Usage, one Countdown per evaluator object (no module state):

    cdef Countdown stop                 # a field; stop.ticks = INTERRUPT_STEPS
    cdef object cancel_ref              # keeps the watched flag alive
    def cancel_with(self, flag):        # from Python: the run's flag (or None)
        self.cancel_ref = watch_flag(&self.stop, flag)
    if interrupted(&self.stop): ...     # in the loop: stop, return an error code
    raise_interrupt()                   # after ``with nogil:``, when it stopped
"""

cdef extern from "Python.h":
    int _check_signals "PyErr_CheckSignals" ()
    void* _error_occurred "PyErr_Occurred" ()

cdef enum: INTERRUPT_STEPS = 4096


cdef struct Countdown:
    int ticks                          # steps to the next check
    const unsigned char* cancel        # the run's cancel flag (watch_flag), or NULL


cdef inline object watch_flag(Countdown* c, flag):
    """Point c at flag[0] (a writable uint8 array another thread sets; None: no flag).
    Returns the view the caller keeps while c is used."""
    cdef const unsigned char[::1] view
    if flag is None:
        c.cancel = NULL
        return None
    view = flag
    c.cancel = &view[0]
    return view


cdef inline bint interrupted(Countdown* c) noexcept nogil:
    """Count one step; every INTERRUPT_STEPS steps, whether a signal handler raised or
    the run was cancelled (the flag is read with the GIL held, as it was written)."""
    c.ticks -= 1
    if c.ticks > 0:
        return False
    c.ticks = INTERRUPT_STEPS
    with gil:
        if c.cancel != NULL and c.cancel[0] != 0:
            return True
        return _check_signals() != 0


cdef inline int raise_interrupt() except -1:
    """Propagate what the signal handler raised, or KeyboardInterrupt when the run was
    cancelled (with the GIL held)."""
    if _error_occurred() == NULL:
        raise KeyboardInterrupt
    return -1
