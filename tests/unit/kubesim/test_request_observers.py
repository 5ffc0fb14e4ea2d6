"""kubesim's process-wide request observers and the request log a test session reads from children
(`kubesim.control.observe_requests`, `log_requests_from_env`; used by tests/request_audit.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubesim.control import (
    REQUEST_LOG_ENV,
    Control,
    RecordedRequest,
    log_requests_from_env,
    observe_requests,
)
from kubesim.store import Store


# Not the operator's user agent: these requests are not the operator's, for tests/request_audit.py.
def request(name: str, user_agent: str = "observer-test/0.1.0") -> RecordedRequest:
    return RecordedRequest(
        method="DELETE", path=f"/api/v1/namespaces/default/pods/{name}", query="", verb="delete",
        group="", version="v1", resource="pods", namespace="default", name=name, subresource="",
        user_agent=user_agent, content_type="",
    )  # fmt: skip


def test_observers_see_every_recorded_request_of_every_control_until_stopped() -> None:
    seen: list[tuple[Control, str]] = []
    stop = observe_requests(lambda control, r: seen.append((control, r.name)))
    a, b = Control(Store(history_size=10)), Control(Store(history_size=10))
    try:
        a.record(request("w-0"))
        b.record(request("w-1"))
    finally:
        stop()
    a.record(request("w-2"))
    assert seen == [(a, "w-0"), (b, "w-1")]
    assert [r.name for r in a.requests] == ["w-0", "w-2"]


def test_the_request_log_holds_each_distinct_request_once_with_its_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "requests.jsonl"
    monkeypatch.setenv(REQUEST_LOG_ENV, str(log))
    stop = log_requests_from_env()
    assert stop is not None
    control = Control(Store(history_size=10))
    try:
        for name in ("w-0", "w-0", "w-1"):
            control.record(request(name))
        control.record(request("w-0", user_agent="kubectl/v1.31"))
    finally:
        stop()
    control.record(request("w-9"))
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(x["name"], x["user_agent"]) for x in lines] == [
        ("w-0", "observer-test/0.1.0"),
        ("w-1", "observer-test/0.1.0"),
        ("w-0", "kubectl/v1.31"),
    ]
    assert lines[0]["verb"] == "delete"
    assert lines[0]["test"].startswith("tests/unit/kubesim/test_request_observers.py::")


def test_without_the_variable_nothing_is_logged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUEST_LOG_ENV, raising=False)
    assert log_requests_from_env() is None
