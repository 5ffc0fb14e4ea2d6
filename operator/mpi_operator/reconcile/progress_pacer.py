"""How long a static job's progress write waits for its peers (`planning.progress` says which
writes, and why), from when the job last wrote its status (`memory.JobMemory.status_written_at`).
Memory of past writes only delays a write by at most `period`; a restart forgets it and writes at
once, which is what it did before."""

from __future__ import annotations


def progress_hold(last_write: float | None, now: float, period: float, *, settled: bool) -> float:
    """Seconds a progress write should wait (0: send it now)."""
    if settled or period <= 0 or last_write is None:
        return 0.0
    return max(0.0, last_write + period - now)
