"""A pytest plugin: no private key material in what the suite's operators logged, recorded or wrote.

After each test it scans (with `secret_scan`): the test's captured output (stdout, stderr and log
records of setup, call and teardown: the in-process operator's warnings and errors, and whatever
subprocess output the test printed), the logs its child processes wrote into its `tmp_path`
(`*.log`, `*.out`, `*.err`: `mpi-operator run` and `mpi-operator sim` children), and every object of
every in-process kubesim the test talked to (Events, the status of every object, ConfigMaps, pods,
annotations; Secrets excepted, which legitimately hold the key), for PEM private-key markers and for
the bytes of the keys in that cluster's Secrets. A finding fails the session with the test and the
place.

Not covered here, and where it is instead: the in-process operator's INFO and DEBUG records are not
created at all unless a test raises the level (the root logger stays at WARNING), and the /metrics
text lives in each operator's own registry; tests/e2e/test_least_privilege.py runs a job's life at
DEBUG and scans both.

Tests that handle keys on purpose (the key generator's and the Secret builder's unit tests, which
print nothing of them; the process runtime's volume tests, whose pods read the mounted key) need no
exemption: only their output would be scanned, and they do not print keys.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import secret_scan
from kubesim.control import Control, RecordedRequest, observe_requests
from session_audits import SessionAudits


class SecretAudit:
    def __init__(self) -> None:
        self.controls: dict[int, Control] = {}
        self.findings: list[str] = []
        self.scanned_tests = 0
        self.tmp_paths: dict[str, Path] = {}
        self._stop: Callable[[], None] | None = None

    def start(self) -> None:
        self._stop = observe_requests(self.observe)

    def stop(self) -> None:
        if self._stop is not None:
            self._stop()

    def observe(self, control: Control, request: RecordedRequest) -> None:
        self.controls.setdefault(id(control), control)

    def scan(self, report: pytest.TestReport) -> None:
        """At the end of a test: its clusters and its captured output."""
        controls, self.controls = list(self.controls.values()), {}
        needles: set[str] = set()
        objects = []
        for control in controls:
            stored = list(control.stored_objects())
            objects += stored
            for obj in stored:
                if obj.get("kind") == "Secret":
                    needles |= secret_scan.key_needles(obj)
        found = [f"stored {leak}" for leak in secret_scan.object_leaks(objects, needles)]
        for title, text in report.sections:
            found += [f"{title}: {leak}" for leak in secret_scan.leaks(text, needles)]
        tmp_path = self.tmp_paths.pop(report.nodeid, None)
        for log in sorted(tmp_path.glob("*")) if tmp_path is not None and tmp_path.is_dir() else ():
            if log.suffix in LOG_SUFFIXES and log.is_file():
                text = log.read_bytes()[:LOG_BYTES].decode("utf-8", "replace")
                found += [f"{log.name}: {leak}" for leak in secret_scan.leaks(text, needles)]
        self.findings += [f"{report.nodeid}: {leak}" for leak in found]
        self.scanned_tests += 1


LOG_SUFFIXES = frozenset({".log", ".out", ".err"})
LOG_BYTES = 8 << 20
"""How much of each child log is read: a runaway log must not make the audit slow."""
_AUDITS = SessionAudits(SecretAudit)


def pytest_configure(config: pytest.Config) -> None:
    _AUDITS.configure(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    _AUDITS.unconfigure(config)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    tmp_path = getattr(item, "funcargs", {}).get("tmp_path")
    audit = _AUDITS.current
    if isinstance(tmp_path, Path) and audit is not None:
        audit.tmp_paths[item.nodeid] = tmp_path


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # The teardown report carries the sections of all three phases.
    audit = _AUDITS.current
    if report.when == "teardown" and audit is not None:
        audit.scan(report)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    if _AUDITS.of(session.config).findings:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    audit = _AUDITS.of(config)
    if not audit.findings:
        return
    terminalreporter.section(
        "private key material outside Secrets (tests/secret_audit.py)", red=True
    )
    for finding in audit.findings[:50]:
        terminalreporter.line(finding, red=True)
    if len(audit.findings) > 50:
        terminalreporter.line(f"... and {len(audit.findings) - 50} more", red=True)
