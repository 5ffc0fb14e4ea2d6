"""What the simulated-controller tests share: a fast clock, polling with a deadline, type lookups.

Test modules import `kubesim_settings` and `sim` from here to run on a 100x clock (pytest finds
fixtures imported into a module); a module that needs other settings defines its own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from kubesim.app import KubeSim
from kubesim.errors import StatusError
from kubesim.registry import ResourceType
from kubesim.settings import SimSettings

SCALE = 0.01
"""Real seconds per simulated second: 100 simulated seconds pass in one real second."""


def fast_settings(**overrides: Any) -> SimSettings:
    return SimSettings(**{"time_scale": SCALE, "start_seconds": 1.0, "ready_seconds": 1.0, **overrides})


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return fast_settings()


@pytest.fixture
def sim(kubesim: KubeSim) -> KubeSim:
    """The `kubesim` fixture's cluster, running with the settings above."""
    return kubesim


async def eventually(check: Callable[[], Any], within: float = 3.0, poll: float = 0.002) -> Any:
    """Polls `check` until it returns something truthy; re-raises its last failure at the deadline."""
    deadline = time.monotonic() + within
    while True:
        try:
            result = check()
        except (AssertionError, KeyError, StatusError):
            if time.monotonic() > deadline:
                raise
        else:
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"still {result!r}")
        await asyncio.sleep(poll)


def rt(sim: KubeSim, api_version: str, kind: str) -> ResourceType:
    found = sim.cluster.registry.by_kind(api_version, kind)
    assert found is not None
    return found
