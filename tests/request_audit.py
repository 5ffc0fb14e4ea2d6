"""A pytest plugin: every request the operator sends over the session must be granted by deploy/'s
RBAC and the chart's (`rbac_audit`), checked once at the end of the session.

What is collected: each API request any in-process kubesim records from a client whose user agent
starts with `mpi-operator/` (the operator's client and its leader-election client), aggregated to
its RBAC attributes with the test that first sent it; and, through `KUBESIM_REQUEST_LOG`, the same
from every `mpi-operator sim` child process the tests start. Requests of the runtime tier are left
out (`NOT_THE_OPERATOR`). The session fails, with a report naming the request and the test, when an
install would refuse a request, when a granted rule has no row in deploy/README.md's rule table, or
when reconcile tests passed but no operator request was seen (the collection broke). "Every granted
rule is used or explained" needs the whole suite: it is checked when the run selected every test (no
-k, -m, deselection, path or node id narrower than `tests/`, no early stop), or when
`RBAC_AUDIT_UNUSED=1`; tests/e2e/test_least_privilege.py checks it for one job's life.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pytest

import rbac_audit
from kubesim.control import (
    LOG_FIELDS,
    REQUEST_LOG_ENV,
    Control,
    RecordedRequest,
    observe_requests,
)
from session_audits import SessionAudits

FORCE_UNUSED_ENV = "RBAC_AUDIT_UNUSED"


def as_request(
    fields: Mapping[str, object], named: Iterable[tuple[str, str]]
) -> rbac_audit.Request:
    """The RBAC attributes of one request, from a `RecordedRequest`'s fields or a line of the
    log."""
    return rbac_audit.request_of(
        named_resources=named, **{k: str(fields.get(k, "")) for k in LOG_FIELDS}
    )


OPERATOR_TIERS = ("tests/integration/reconcile/", "tests/integration/elastic/")
"""Tests that run the operator in process: if any passed, the operator sent requests."""
NOT_THE_OPERATOR = (
    "tests/integration/runtime/",
    "tests/integration/kube/",
    "tests/integration/cache/",
)
"""Tests whose `mpi-operator/` requests are not the operator's: the runtime, kube and cache tiers
drive the generic client, informers, event recorder and leader elector directly, with the default
user agent (which the client tests check), and choose what they send (ConfigMap CRUD, CRDs,
namespaces, a Lease patch). The operator's own use of those parts runs in the reconcile, elastic and
e2e tiers."""


class RequestAudit:
    def __init__(self) -> None:
        self.first: dict[rbac_audit.Request, str] = {}
        self.current = "(outside a test)"
        self.operator_tests = 0
        self.deselected = 0
        self.named = {("coordination.k8s.io", "leases")}
        self.report: rbac_audit.Report | None = None
        self.problem: str | None = None
        self.unused_checked = False
        self._stop: Callable[[], None] | None = None
        fd, log = tempfile.mkstemp(prefix="kubesim-requests-", suffix=".jsonl")
        os.close(fd)
        self.log = Path(log)
        self._saved_env = os.environ.get(REQUEST_LOG_ENV)

    def start(self) -> None:
        self.named |= {n for i in rbac_audit.kustomize_installs() for n in i.named_resources()}
        os.environ[REQUEST_LOG_ENV] = str(self.log)
        self._stop = observe_requests(self.observe)

    def stop(self) -> None:
        if self._stop is not None:
            self._stop()
        if self._saved_env is None:
            os.environ.pop(REQUEST_LOG_ENV, None)
        else:
            os.environ[REQUEST_LOG_ENV] = self._saved_env
        self.log.unlink(missing_ok=True)

    def observe(self, control: Control, r: RecordedRequest) -> None:
        if not r.user_agent.startswith(rbac_audit.OPERATOR_AGENT) or self.current.startswith(
            NOT_THE_OPERATOR
        ):
            return
        request = as_request(vars(r), self.named)
        self.first.setdefault(request, self.current)

    def read_children(self) -> None:
        """The requests `mpi-operator sim` children logged (tests/… named by their
        PYTEST_CURRENT_TEST)."""
        if not self.log.exists():
            return
        for line in self.log.read_text().splitlines():
            try:
                got = json.loads(line)
            except ValueError:
                continue  # a line a killed child did not finish
            if not str(got.get("user_agent", "")).startswith(rbac_audit.OPERATOR_AGENT):
                continue
            request = as_request(got, self.named)
            test = str(got.get("test", "")).rsplit(" (", 1)[0] or "(a child process)"
            if test.startswith(NOT_THE_OPERATOR):
                continue
            self.first.setdefault(request, f"{test} (in an `mpi-operator sim` child)")

    def run(self, check_unused: bool) -> None:
        self.read_children()
        resource_requests = [r for r in self.first if r.scope != "nonresource"]
        if self.operator_tests and not resource_requests:
            self.problem = (
                f"{self.operator_tests} tests ran the operator but no operator request was "
                "recorded: "
                "the request collection (kubesim.control.observe_requests) is broken"
            )
            return
        if not self.first:
            return
        installs = rbac_audit.kustomize_installs()
        try:
            installs += rbac_audit.chart_installs()
        except ImportError:
            self.problem = "helm-python-sdk is not installed: the chart's RBAC was not audited"
        self.unused_checked = check_unused
        self.report = rbac_audit.audit(
            self.first,
            installs,
            rbac_audit.readme_rules(rbac_audit.README.read_text()),
            check_unused=check_unused,
        )


def whole_suite(args: list[str], invocation_dir: Path, *, narrowed: bool) -> bool:
    """The run selected every test: its arguments name `tests/` or the repository (or nothing), and
    nothing `narrowed` it (-k, -m, a deselection, an early stop)."""
    if narrowed:
        return False
    tests = (rbac_audit.ROOT / "tests").resolve()
    for arg in args or [str(tests)]:
        path = Path(arg.split("::")[0])
        path = (path if path.is_absolute() else invocation_dir / path).resolve()
        if "::" in arg or path not in (tests, rbac_audit.ROOT):
            return False
    return True


def _whole_suite(session: pytest.Session, audit: RequestAudit) -> bool:
    config = session.config
    if os.environ.get(FORCE_UNUSED_ENV) == "1":
        return True
    narrowed = bool(
        config.getoption("keyword", "")
        or config.getoption("markexpr", "")
        or audit.deselected
        or session.shouldstop
        or config.getoption("exitfirst", False)
        or config.getoption("maxfail", 0)
    )
    return whole_suite(list(config.args), Path(config.invocation_params.dir), narrowed=narrowed)
    if config.getoption("keyword", "") or config.getoption("markexpr", "") or audit.deselected:
        return False
    if session.shouldstop or config.getoption("exitfirst", False) or config.getoption("maxfail", 0):
        return False
    tests = (rbac_audit.ROOT / "tests").resolve()
    for arg in config.args or [str(tests)]:
        path = Path(arg.split("::")[0])
        path = (path if path.is_absolute() else Path(config.invocation_params.dir) / path).resolve()
        if "::" in arg or path not in (tests, rbac_audit.ROOT):
            return False
    return True


_AUDITS = SessionAudits(RequestAudit)


def pytest_configure(config: pytest.Config) -> None:
    _AUDITS.configure(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    _AUDITS.unconfigure(config)


def pytest_deselected(items: list[pytest.Item]) -> None:
    # pytest_deselected has no config argument: the audit is found through the items.
    if items:
        _AUDITS.of(items[0].config).deselected += len(items)


def pytest_runtest_logstart(nodeid: str) -> None:
    if (audit := _AUDITS.current) is not None:
        audit.current = nodeid


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    audit = _AUDITS.current
    if audit is None or report.when != "call" or not report.passed:
        return
    if report.nodeid.startswith(OPERATOR_TIERS):
        audit.operator_tests += 1


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    audit = _AUDITS.of(session.config)
    audit.run(_whole_suite(session, audit))
    if audit.problem is not None or (audit.report is not None and not audit.report.ok):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    audit = _AUDITS.of(config)
    report = audit.report
    if report is None and audit.problem is None:
        return
    failed = audit.problem is not None or (report is not None and not report.ok)
    terminalreporter.section(
        "operator requests vs deploy/ RBAC (tests/request_audit.py)", red=failed
    )
    kinds = len(audit.first)
    used = (
        "every granted rule used or explained in deploy/README.md"
        if audit.unused_checked
        else (f"unused rules not checked (part of the suite; {FORCE_UNUSED_ENV}=1 forces it)")
    )
    terminalreporter.line(f"{kinds} distinct operator requests; {used}")
    if audit.problem is not None:
        terminalreporter.line(audit.problem, red=True)
    for line in report.lines() if report is not None else ():
        terminalreporter.line(line, red=True)
    if config.getoption("verbose") > 0:
        for request, first in sorted(audit.first.items()):
            terminalreporter.line(f"  {request.describe()}  [first: {first}]")
