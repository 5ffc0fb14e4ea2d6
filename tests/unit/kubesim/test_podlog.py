"""kubesim.podlog on pod objects: the text of each container state and the API server's refusals."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim import errors, podlog


def pod(*statuses: dict[str, Any], containers: tuple[str, ...] = ("main",)) -> dict[str, Any]:
    return {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": c, "image": f"img/{c}"} for c in containers]},
        "status": {"containerStatuses": list(statuses)},
    }


RUNNING = {"name": "main", "state": {"running": {"startedAt": "T1"}}, "restartCount": 0}
RESTARTED = {
    "name": "main",
    "state": {"running": {"startedAt": "T3"}},
    "lastState": {
        "terminated": {"exitCode": 137, "reason": "Error", "startedAt": "T1", "finishedAt": "T2"}
    },
    "restartCount": 1,
}


@pytest.mark.parametrize(
    ("obj", "container", "previous", "lines"),
    [
        (pod(RUNNING), None, False, ["started at T1; running"]),
        (
            pod(RESTARTED),
            "main",
            False,
            ["started at T3; running", "restarted 1 time(s); --previous shows the last run"],
        ),
        (pod(RESTARTED), None, True, ["started at T1", "exited with code 137 (Error) at T2"]),
    ],
    ids=["running", "restarted", "previous"],
)
def test_the_log_is_the_recorded_life(
    obj: dict[str, Any], container: str | None, previous: bool, lines: list[str]
) -> None:
    text = podlog.pod_log(obj, container, previous=previous)
    assert text.splitlines() == [
        '[kubesim] container "main" (image img/main) is simulated by kubesim: it writes no output',
        *(f"[kubesim] {line}" for line in lines),
    ]


@pytest.mark.parametrize(
    ("obj", "container", "previous", "message"),
    [
        (
            pod(containers=("a", "b")),
            None,
            False,
            "a container name must be specified for pod p, choose one of: [a b]",
        ),
        (pod(RUNNING), "x", False, "container x is not valid for pod p"),
        (pod(RUNNING), None, True, 'previous terminated container "main" in pod "p" not found'),
        (pod(), None, False, 'container "main" in pod "p" is waiting to start: ContainerCreating'),
        (
            pod({"name": "main", "state": {"waiting": {"reason": "PodInitializing"}}}),
            None,
            False,
            'container "main" in pod "p" is waiting to start: PodInitializing',
        ),
    ],
    ids=["several-unnamed", "unknown", "no-previous", "no-status", "waiting"],
)
def test_refusals(obj: dict[str, Any], container: str | None, previous: bool, message: str) -> None:
    with pytest.raises(errors.StatusError) as raised:
        podlog.pod_log(obj, container, previous=previous)
    assert raised.value.code == 400
    assert str(raised.value.message) == message
