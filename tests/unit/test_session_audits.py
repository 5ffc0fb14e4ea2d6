"""The session audits wired into tests/conftest.py fail a pytest run, each in a pytest of its own
(pytester): `request_audit` on an operator request no install grants, naming the request and its
test; `secret_audit` on a private key in a test's output. A run with only granted requests
passes."""

from __future__ import annotations

from pathlib import Path

import pytest

import operator_testing

pytest_plugins = ["pytester"]
TESTS = Path(__file__).resolve().parents[1]

HEADER = """
from kubesim.control import Control, RecordedRequest
from kubesim.store import Store


def send(verb: str, resource: str, name: str = "") -> None:
    Control(Store(history_size=10)).record(
        RecordedRequest(
            method="GET", path="/api/v1/x", query="", verb=verb, group="", version="v1",
            resource=resource, namespace="default", name=name, subresource="",
            user_agent="mpi-operator/0.1.0", content_type="",
        )
    )
"""


@pytest.fixture(autouse=True)
def source_roots(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child pytest imports this tree's kubesim and operator, whichever checkout the venv points
    at."""
    monkeypatch.setenv("PYTHONPATH", operator_testing.source_env()["PYTHONPATH"])


def run(pytester: pytest.Pytester, body: str) -> pytest.RunResult:
    pytester.makepyfile(test_case=HEADER + body)
    options = ["-o", f"pythonpath={TESTS}", "-p", "no:cacheprovider", "-p", "no:randomly"]
    return pytester.runpytest_subprocess("-p", "request_audit", "-p", "secret_audit", *options)


def test_a_request_no_install_grants_fails_the_session_naming_it_and_its_test(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
def test_sends() -> None:
    send("list", "pods")
    send("delete", "configmaps", "c")
""",
    )
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*DENIED: delete configmaps.core in a namespace, first sent by "
            "test_case.py::test_sends: refused*"
        ]
    )
    assert "DENIED: list pods" not in result.stdout.str()


def test_granted_requests_pass(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
def test_sends() -> None:
    send("list", "pods")
    send("update", "configmaps", "c")
""",
    )
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*2 distinct operator requests*"])


def test_a_private_key_in_a_tests_output_fails_the_session(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run(
        pytester,
        """
from mpi_operator.desired.secret import generate_ssh_keys


def test_prints_a_key() -> None:
    print("building the secret:", generate_ssh_keys().private_key_pem.decode())
""",
    )
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*private key material outside Secrets*", "*test_prints_a_key: Captured stdout*"]
    )
    # pytester echoes the child's output, key and all, into this test's: drop it, or this session's
    # own secret audit would (rightly) report it.
    capsys.readouterr()
