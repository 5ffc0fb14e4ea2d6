"""Noticing that the API server is back after an outage, sooner than a watch's backoff would.

A failure that got no answer at all (`kube.errors.TransientError`: refused, reset) says nothing
about load, so one `RecoveryProber` per API client probes a cheap endpoint about once a second
(jittered) while anyone waits, and wakes every waiter when it answers; each then retries after its
own small jitter. Failures that did get an answer (5xx, 429, ERROR events) keep the plain backoff.
Why: "Probe for the server's return" in docs/architecture.md. The probe is an injected coroutine
function (`Kube.ping`), so this module does not depend on the HTTP client.
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
"""Seconds between probes at most; each waits between half and all of it (jitter), so replicas of
the operator that lost the server at the same instant do not probe in lockstep."""
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
            await self._clock.sleep(self.interval * (0.5 + 0.5 * self._rng.random()))
            self.probes += 1
            sent += 1
            try:
                await self._probe()
            except errors.ApiError as exc:
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
            self._back.set()
            return
