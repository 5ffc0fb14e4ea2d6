"""The simulated kubelet's pure pod lifecycle: annotations + times + restartPolicy -> status."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.controllers import podstate as ps


def ts(t: float) -> str:
    return f"T{t:.3f}"


def timing(**kw: Any) -> ps.PodTiming:
    return ps.PodTiming(**{"start": 1.0, "ready": 1.0, **kw})


def pod(
    restart_policy: str = "Never", *, containers: tuple[str, ...] = ("main",), **spec: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "spec": {
            "restartPolicy": restart_policy,
            "containers": [{"name": n, "image": f"img-{n}"} for n in containers],
            **spec,
        },
        "status": {"phase": "Pending"},
    }


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({}, ps.PodTiming(start=1.0, ready=2.0)),
        (
            {ps.START_SECONDS: "0.5", ps.READY_SECONDS: "3", ps.RUN_SECONDS: "2", ps.EXIT_CODE: "7"},
            ps.PodTiming(start=0.5, ready=3.0, run=2.0, exit_code=7),
        ),
        ({ps.READY: "false"}, ps.PodTiming(start=1.0, ready=2.0, never_ready=True)),
        ({ps.READY: "False"}, ps.PodTiming(start=1.0, ready=2.0, never_ready=True)),
        (
            {ps.START_SECONDS: "soon", ps.RUN_SECONDS: "-1", ps.EXIT_CODE: "x"},
            ps.PodTiming(start=1.0, ready=2.0),
        ),
        (
            {ps.TERMINATION_SECONDS: "0", ps.TERMINATION_EXIT_CODE: "0"},
            ps.PodTiming(start=1.0, ready=2.0, termination=0.0, termination_exit_code=0),
        ),
    ],
    ids=["defaults", "all-set", "never-ready", "never-ready-case", "garbage-ignored", "sigterm-trapped"],
)
def test_timing_from_annotations(annotations: dict[str, str], expected: ps.PodTiming) -> None:
    assert ps.PodTiming.from_annotations(annotations, start_default=1.0, ready_default=2.0) == expected


@pytest.mark.parametrize(
    ("run", "expected"), [("0", 0.5), ("0.2", 0.5), ("3", 3.0)], ids=["zero", "short", "long"]
)
def test_run_seconds_has_a_floor(run: str, expected: float) -> None:
    timing = ps.PodTiming.from_annotations(
        {ps.RUN_SECONDS: run}, start_default=1, ready_default=1, min_run=0.5
    )
    assert timing.run == expected


# (timing, restartPolicy, now) -> (stage, phase, restartCount, exit code of the final/last termination)
ADVANCE_CASES = [
    ("pending-before-start", timing(), "Never", 0.9, ("Pending", "Pending", 0, None)),
    ("running-at-start", timing(), "Never", 1.0, ("Running", "Running", 0, None)),
    ("runs-forever-without-run-seconds", timing(), "Never", 1e6, ("Running", "Running", 0, None)),
    ("never-exit-0-succeeds", timing(run=2.0), "Never", 3.0, ("Terminated", "Succeeded", 0, 0)),
    ("never-exit-1-fails", timing(run=2.0, exit_code=1), "Never", 3.0, ("Terminated", "Failed", 0, 1)),
    (
        "exit-due-exactly-at-now",
        timing(run=2.0, exit_code=1),
        "Never",
        2.999,
        ("Running", "Running", 0, None),
    ),
    (
        "onfailure-restarts-on-error",
        timing(run=2.0, exit_code=1),
        "OnFailure",
        3.5,
        ("Running", "Running", 1, 1),
    ),
    (
        "onfailure-restarts-twice",
        timing(run=2.0, exit_code=1),
        "OnFailure",
        5.0,
        ("Running", "Running", 2, 1),
    ),
    ("onfailure-exit-0-succeeds", timing(run=2.0), "OnFailure", 3.0, ("Terminated", "Succeeded", 0, 0)),
    ("always-restarts-on-success", timing(run=2.0), "Always", 3.5, ("Running", "Running", 1, 0)),
    ("always-restarts-on-error", timing(run=1.0, exit_code=3), "Always", 4.5, ("Running", "Running", 3, 3)),
    ("zero-run-always-is-bounded", timing(run=0.0), "Always", 2.0, ("Running", "Running", 100, 0)),
]


@pytest.mark.parametrize(
    ("t", "policy", "now", "expected"), [c[1:] for c in ADVANCE_CASES], ids=[c[0] for c in ADVANCE_CASES]
)
def test_advance(t: ps.PodTiming, policy: ps.RestartPolicy, now: float, expected: tuple[Any, ...]) -> None:
    rt = ps.advance(ps.PodRuntime(created_at=0.0), t, policy, now)
    ended = rt.termination or rt.last_termination
    assert (rt.stage, rt.phase, rt.restart_count, ended.exit_code if ended else None) == expected


def test_advance_waits_for_volumes_then_starts_when_they_mount() -> None:
    rt0 = ps.PodRuntime(created_at=0.0)
    assert ps.advance(rt0, timing(), "Never", 0.5, can_start=False) == rt0
    blocked = ps.advance(rt0, timing(), "Never", 5.0, can_start=False)
    assert (blocked.stage, blocked.volumes_blocked) == ("Pending", True)
    started = ps.advance(blocked, timing(), "Never", 7.0, can_start=True)
    assert (started.stage, started.container_started_at) == ("Running", 7.0)
    assert not ps.is_ready(started, timing(), 7.5)


def test_restart_keeps_last_termination_times() -> None:
    rt = ps.advance(ps.PodRuntime(created_at=0.0), timing(run=2.0, exit_code=1), "OnFailure", 3.5)
    assert rt.last_termination == ps.Termination(1, "Error", 1.0, 3.0)
    assert rt.container_started_at == 3.0


@given(
    start=st.floats(0, 5),
    run=st.one_of(st.none(), st.floats(0.01, 5)),
    code=st.integers(0, 3),
    policy=st.sampled_from(["Always", "OnFailure", "Never"]),
    t1=st.floats(0, 20),
    dt=st.floats(0, 20),
)
def test_advance_in_steps_equals_advance_at_once(
    start: float, run: float | None, code: int, policy: ps.RestartPolicy, t1: float, dt: float
) -> None:
    t = timing(start=start, run=run, exit_code=code)
    rt0 = ps.PodRuntime(created_at=0.0)
    stepped = ps.advance(ps.advance(rt0, t, policy, t1), t, policy, t1 + dt)
    at_once = ps.advance(rt0, t, policy, t1 + dt)
    if at_once.restart_count < ps.MAX_EXITS_PER_ADVANCE:
        assert stepped == at_once


@pytest.mark.parametrize(
    ("t", "now", "expected"),
    [
        (timing(), 0.0, 1.0),
        (timing(), 1.5, 2.0),
        (timing(run=0.5), 1.2, 1.5),
        (timing(), 2.5, None),
        (timing(never_ready=True), 1.5, None),
    ],
    ids=["start", "ready", "exit-before-ready", "nothing-left", "never-ready"],
)
def test_next_deadline(t: ps.PodTiming, now: float, expected: float | None) -> None:
    rt = ps.advance(ps.PodRuntime(created_at=0.0), t, "Never", now)
    assert ps.next_deadline(rt, t, now) == expected


def conditions(status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status["conditions"]}


PLACED = ps.Placement("172.18.0.2", "10.244.0.9")


@pytest.mark.parametrize(
    ("t", "now", "phase", "ready", "state"),
    [
        (timing(), 0.5, "Pending", "False", "waiting"),
        (timing(), 1.5, "Running", "False", "running"),
        (timing(), 2.5, "Running", "True", "running"),
        (timing(never_ready=True), 50.0, "Running", "False", "running"),
        (timing(run=3.0, exit_code=2), 5.0, "Failed", "False", "terminated"),
        (timing(run=3.0), 5.0, "Succeeded", "False", "terminated"),
    ],
    ids=["pending", "running-unready", "ready", "kept-unready", "failed", "succeeded"],
)
def test_render_status(t: ps.PodTiming, now: float, phase: str, ready: str, state: str) -> None:
    p = pod()
    rt = ps.advance(ps.PodRuntime(created_at=0.0), t, "Never", now)
    status = ps.render_status(p, rt, t, now, PLACED, ts)
    assert status["phase"] == phase
    assert conditions(status)["Ready"] == ready
    assert conditions(status)["ContainersReady"] == ready
    assert conditions(status)["PodScheduled"] == "True"
    (cs,) = status["containerStatuses"]
    assert list(cs["state"]) == [state]
    assert cs["ready"] is (ready == "True")
    assert ("podIP" in status) is (phase != "Pending")
    assert status["hostIP"] == "172.18.0.2"
    if state == "terminated":
        assert cs["state"]["terminated"]["exitCode"] == t.exit_code
        assert cs["state"]["terminated"]["reason"] == ("Completed" if t.exit_code == 0 else "Error")


def test_render_keeps_transition_time_of_unchanged_conditions() -> None:
    t = timing()
    p = pod()
    rt = ps.advance(ps.PodRuntime(created_at=0.0), t, "Never", 1.5)
    first = ps.render_status(p, rt, t, 1.5, PLACED, ts)
    p["status"] = first
    again = ps.render_status(p, rt, t, 1.7, PLACED, ts)
    assert again == first
    ready = ps.render_status(p, rt, t, 2.2, PLACED, ts)
    by_type = {c["type"]: c for c in ready["conditions"]}
    assert by_type["Ready"]["lastTransitionTime"] == ts(2.2)
    assert by_type["PodScheduled"]["lastTransitionTime"] == first["conditions"][-1]["lastTransitionTime"]


def test_render_sorts_containers_and_lists_unready_ones() -> None:
    p = pod(containers=("worker", "sidecar"))
    rt = ps.advance(ps.PodRuntime(created_at=0.0), timing(), "Always", 1.5)
    status = ps.render_status(p, rt, timing(), 1.5, PLACED, ts)
    assert [c["name"] for c in status["containerStatuses"]] == ["sidecar", "worker"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["message"] == "containers with unready status: [sidecar worker]"


def test_restart_shows_last_state_and_count() -> None:
    t = timing(run=1.0, exit_code=1)
    rt = ps.advance(ps.PodRuntime(created_at=0.0), t, "OnFailure", 2.5)
    (cs,) = ps.render_status(pod("OnFailure"), rt, t, 2.5, PLACED, ts)["containerStatuses"]
    assert cs["restartCount"] == 1
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    assert "running" in cs["state"]
    assert cs["containerID"] != cs["lastState"]["terminated"]["containerID"]


def test_evicted_pod_is_failed_with_reason() -> None:
    rt = ps.evicted(ps.advance(ps.PodRuntime(created_at=0.0), timing(), "Always", 3.0), "low memory", 3.0)
    status = ps.render_status(pod("Always"), rt, timing(), 3.0, PLACED, ts)
    assert (status["phase"], status["reason"], status["message"]) == ("Failed", "Evicted", "low memory")
    assert conditions(status)["DisruptionTarget"] == "True"
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == ps.SIGKILL_EXIT_CODE


@pytest.mark.parametrize(
    ("before_now", "exit_code", "phase", "code"),
    [(0.5, 143, "Failed", ps.SIGKILL_EXIT_CODE), (1.5, 143, "Failed", 143), (1.5, 0, "Succeeded", 0)],
    ids=["pending-killed", "running-sigterm", "sigterm-trapped-exit-0"],
)
def test_stopped_for_deletion(before_now: float, exit_code: int, phase: str, code: int) -> None:
    rt = ps.stopped(ps.advance(ps.PodRuntime(created_at=0.0), timing(), "Always", before_now), exit_code, 2.0)
    assert rt.phase == phase
    assert rt.termination is not None
    assert rt.termination.exit_code == code


def test_kill_follows_restart_policy() -> None:
    running = ps.advance(ps.PodRuntime(created_at=0.0), timing(), "Never", 1.5)
    assert ps.container_exited(running, 9, 1.6, "Never").phase == "Failed"
    assert ps.container_exited(running, 9, 1.6, "OnFailure").restart_count == 1
    pending = ps.PodRuntime(created_at=0.0)
    assert ps.container_exited(pending, 9, 0.1, "Never") == pending


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ([{}], "BestEffort"),
        ([{"requests": {"cpu": "1"}}], "Burstable"),
        ([{"limits": {"cpu": "1", "memory": "1Gi"}}], "Guaranteed"),
        ([{"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}], "Burstable"),
        ([{"limits": {"cpu": "1", "memory": "1Gi"}}, {}], "Burstable"),
    ],
    ids=["none", "requests", "limits-only", "requests-below-limits", "one-container-unbounded"],
)
def test_qos_class(resources: list[dict[str, Any]], expected: str) -> None:
    spec = {"containers": [{"name": f"c{i}", "resources": r} for i, r in enumerate(resources)]}
    assert ps.qos_class(spec) == expected
