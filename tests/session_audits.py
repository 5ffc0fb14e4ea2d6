"""What the session-wide audit plugins (`request_audit`, `secret_audit`) share: one audit object per
pytest session, started at configure and stopped at unconfigure.

An audit is found two ways: through the config's stash, for hooks that get a config or session, and
as the innermost active one, for hooks that get neither (`pytest_runtest_logstart`, `_logreport`).
`pytester` runs a nested session in the same process, so the active audits form a stack, and the
nested session's hooks see its own audit, not the outer one's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

import pytest


class Audit(Protocol):
    def start(self) -> None: ...

    def stop(self) -> None: ...


A = TypeVar("A", bound=Audit)


class SessionAudits(Generic[A]):
    def __init__(self, factory: Callable[[], A]) -> None:
        self._factory = factory
        self._key = pytest.StashKey[A]()
        self._active: list[A] = []

    def configure(self, config: pytest.Config) -> None:
        audit = self._factory()
        audit.start()
        config.stash[self._key] = audit
        self._active.append(audit)

    def unconfigure(self, config: pytest.Config) -> None:
        if self._key in config.stash:
            audit = config.stash[self._key]
            audit.stop()
            self._active.remove(audit)

    def of(self, config: pytest.Config) -> A:
        return config.stash[self._key]

    @property
    def current(self) -> A | None:
        """The innermost session's audit; None outside any (a hook after unconfigure)."""
        return self._active[-1] if self._active else None
