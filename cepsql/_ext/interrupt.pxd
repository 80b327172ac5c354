# cython: language_level=3
"""Ctrl-C inside the evaluators' no-GIL loops (issue 24, A4). Signal handlers run only
when the interpreter gets control, which a loop that never takes the GIL never gives:
every INTERRUPT_STEPS calls, ``interrupted`` takes the GIL and runs the pending handlers
(PyErr_CheckSignals). A true result means a handler raised (KeyboardInterrupt for
SIGINT) and the exception is set: the loop unwinds like an out-of-memory error, and the
``def`` that released the GIL calls ``raise_interrupt()`` once it holds it again.

Usage, one countdown per evaluator object (no module state):

    cdef int ticks                      # a field, set to INTERRUPT_STEPS
    if interrupted(&self.ticks): ...    # in the loop: stop, return an error code
    raise_interrupt()                   # after ``with nogil:``, when it stopped

Signals reach only the main thread: evaluators running in other threads see no
handler run here (their caller's thread gets the KeyboardInterrupt)."""

cdef extern from "Python.h":
    int _check_signals "PyErr_CheckSignals" ()
    void* _error_occurred "PyErr_Occurred" ()

cdef enum: INTERRUPT_STEPS = 4096


cdef inline bint interrupted(int* ticks) noexcept nogil:
    """Count one step; every INTERRUPT_STEPS steps, whether a signal handler raised."""
    ticks[0] -= 1
    if ticks[0] > 0:
        return False
    ticks[0] = INTERRUPT_STEPS
    with gil:
        return _check_signals() != 0


cdef inline int raise_interrupt() except -1:
    """Propagate what the signal handler raised (with the GIL held)."""
    if _error_occurred() == NULL:
        raise KeyboardInterrupt
    return -1
