"""Noticing that the API server is back after an outage, sooner than a watch's backoff would.

Two failures say the server is not there, not that it is busy: no answer at all
(`kube.errors.TransientError`: refused, reset), and a 502, 503 or 504 without `Retry-After`
repeated across requests (a load balancer with no server behind it). For those, one
`RecoveryProber` per API client probes a cheap endpoint at most once a second while anyone waits,
and wakes every waiter when it answers; each then retries after its own small jitter. Other answers
(429, a wait named by `Retry-After`, 500) keep their backoff. Why: "Probe for the server's return"
in docs/architecture.md. The probe is an injected coroutine function (`Kube.ping`), so this module
does not depend on the HTTP client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable

from mpi_operator.flowcontrol import Clock, MonotonicClock
from mpi_operator.kube import errors

log = logging.getLogger(__name__)

PROBE_INTERVAL = 1.0
"""Seconds between probes at least: never more than one a second, whatever the number of
waiters."""
PROBE_JITTER = 0.25
"""Each probe waits up to this share of the interval more, so replicas of the operator that lost
the server at the same instant do not probe in lockstep."""
UNAVAILABLE_REPEATS = 2
"""Unavailable answers (`errors.is_unavailable`) in a row, across requests, that count as a lost
server: one alone may be a proxy's hiccup."""
SPREAD = 0.5
"""A waiter resumes up to this many seconds (uniformly) after the server is seen back: N watches
relisting or re-watching are spread over half a second instead of arriving together."""


class RecoveryProber:
    """One probing loop shared by every reflector of a client: see the module doc."""

    def __init__(
        self,
        probe: Callable[[], Awaitable[object]],
        *,
        clock: Clock | None = None,  # None for the real clock
        interval: float = PROBE_INTERVAL,
        spread: float = SPREAD,
        rng: random.Random | None = None,
    ) -> None:
        self._probe = probe
        self._clock: Clock = clock or MonotonicClock()
        self.interval = interval
        self.spread = spread
        self._rng = rng or random.Random()
        self._back = asyncio.Event()
        self._back.set()
        self._task: asyncio.Task[None] | None = None
        self._unavailable = 0
        self.probes = 0
        """Probes sent so far (answered or not)."""

    @property
    def probing(self) -> bool:
        """The server is believed unreachable and a probe loop runs."""
        return self._task is not None

    def lost(self) -> None:
        """A request got no answer: probe until the server answers (one loop, however many call
        this)."""
        if self._task is not None:
            return
        self._back.clear()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="api-recovery-probe")

    def noticed(self, failure: BaseException) -> bool:
        """Whether `failure` says the server is not there (see the module doc); if so, probing
        starts, or goes on, and the caller may `wait()`."""
        if errors.is_unavailable(failure):
            self._unavailable += 1
            if self._unavailable < UNAVAILABLE_REPEATS and self._task is None:
                return False
        elif not isinstance(failure, errors.TransientError):
            return False
        self.lost()
        return True

    def answered(self) -> None:
        """A request of this client succeeded: unavailable answers before it were not an
        outage."""
        self._unavailable = 0

    async def wait(self) -> None:
        """Returns once a probe has been answered (at once when no outage is known)."""
        await self._back.wait()

    def jitter(self) -> float:
        """The pause a waiter takes after `wait()` returns, before it retries: 0 to `spread`
        seconds."""
        return self._rng.uniform(0.0, self.spread)

    async def stop(self) -> None:
        """Stops probing (at shutdown); waiters are left waiting (their own backoff still ends)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        sent = 0
        while True:
            await self._clock.sleep(self.interval * (1.0 + PROBE_JITTER * self._rng.random()))
            self.probes += 1
            sent += 1
            try:
                await self._probe()
            except errors.ApiError as exc:
                if errors.is_unavailable(exc):  # the gateway answers, with no server behind it
                    log.debug("API server still unavailable: %s", exc)
                    continue
                # An error answer is an answer: the server is there, and the waiters' own requests
                # will meet whatever it says (and back off from it as usual).
                log.info("API server answers again (%s)", exc)
            except Exception as exc:  # no answer (or a probe bug): keep probing
                log.debug("API server still unreachable: %s", exc)
                continue
            else:
                log.info("API server answers again after %d probes", sent)
            # Cleared before the waiters run, so one of them failing again starts a new loop.
            self._task = None
            self._unavailable = 0
            self._back.set()
            return
