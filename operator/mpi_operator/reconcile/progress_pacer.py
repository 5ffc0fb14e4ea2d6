"""When each static job last wrote its progress, so the next progress write can wait for its peers
(`planning.progress` says which writes, and why). Memory of past writes only delays a write by at most
`period`; a restart forgets it and writes at once, which is what it did before."""

from __future__ import annotations

from mpi_operator.flowcontrol import Clock


class ProgressPacer:
    def __init__(self, clock: Clock, period: float) -> None:
        self._clock = clock
        self._period = period
        self._last: dict[str, float] = {}

    def hold(self, key: str, *, settled: bool) -> float:
        """Seconds a progress write of `key` should wait (0: send it now)."""
        if settled or self._period <= 0:
            return 0.0
        last = self._last.get(key)
        if last is None:
            return 0.0
        return max(0.0, last + self._period - self._clock.now())

    def wrote(self, key: str) -> None:
        self._last[key] = self._clock.now()

    def forget(self, key: str) -> None:
        self._last.pop(key, None)
