"""The simulated kubelet's pure pod lifecycle: annotations + times + restartPolicy -> status."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.controllers import podstate as ps
from kubesim.controllers import podstatus


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
            {
                ps.START_SECONDS: "0.5",
                ps.READY_SECONDS: "3",
                ps.RUN_SECONDS: "2",
                ps.EXIT_CODE: "7",
            },
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
    ids=[
        "defaults",
        "all-set",
        "never-ready",
        "never-ready-case",
        "garbage-ignored",
        "sigterm-trapped",
    ],
)
def test_timing_from_annotations(annotations: dict[str, str], expected: ps.PodTiming) -> None:
    assert (
        ps.PodTiming.from_annotations(annotations, start_default=1.0, ready_default=2.0) == expected
    )


@pytest.mark.parametrize(
    ("run", "expected"), [("0", 0.5), ("0.2", 0.5), ("3", 3.0)], ids=["zero", "short", "long"]
)
def test_run_seconds_has_a_floor(run: str, expected: float) -> None:
    timing = ps.PodTiming.from_annotations(
        {ps.RUN_SECONDS: run}, start_default=1, ready_default=1, min_run=0.5
    )
    assert timing.run == expected


# (timing, restartPolicy, now) -> (stage, phase, restartCount, exit code of the final/last
# termination)
ADVANCE_CASES = [
    ("pending-before-start", timing(), "Never", 0.9, ("Pending", "Pending", 0, None)),
    ("running-at-start", timing(), "Never", 1.0, ("Running", "Running", 0, None)),
    ("runs-forever-without-run-seconds", timing(), "Never", 1e6, ("Running", "Running", 0, None)),
    ("never-exit-0-succeeds", timing(run=2.0), "Never", 3.0, ("Terminated", "Succeeded", 0, 0)),
    (
        "never-exit-1-fails",
        timing(run=2.0, exit_code=1),
        "Never",
        3.0,
        ("Terminated", "Failed", 0, 1),
    ),
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
    (
        "onfailure-exit-0-succeeds",
        timing(run=2.0),
        "OnFailure",
        3.0,
        ("Terminated", "Succeeded", 0, 0),
    ),
    ("always-restarts-on-success", timing(run=2.0), "Always", 3.5, ("Running", "Running", 1, 0)),
    (
        "always-restarts-on-error",
        timing(run=1.0, exit_code=3),
        "Always",
        4.5,
        ("Running", "Running", 3, 3),
    ),
    ("zero-run-always-is-bounded", timing(run=0.0), "Always", 2.0, ("Running", "Running", 100, 0)),
]


@pytest.mark.parametrize(
    ("t", "policy", "now", "expected"),
    [c[1:] for c in ADVANCE_CASES],
    ids=[c[0] for c in ADVANCE_CASES],
)
def test_advance(
    t: ps.PodTiming, policy: ps.RestartPolicy, now: float, expected: tuple[Any, ...]
) -> None:
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


PLACED = podstatus.Placement("172.18.0.2", "10.244.0.9")


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
    status = podstatus.render_status(p, rt, t, now, PLACED, ts)
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
    first = podstatus.render_status(p, rt, t, 1.5, PLACED, ts)
    p["status"] = first
    again = podstatus.render_status(p, rt, t, 1.7, PLACED, ts)
    assert again == first
    ready = podstatus.render_status(p, rt, t, 2.2, PLACED, ts)
    by_type = {c["type"]: c for c in ready["conditions"]}
    assert by_type["Ready"]["lastTransitionTime"] == ts(2.2)
    assert (
        by_type["PodScheduled"]["lastTransitionTime"]
        == first["conditions"][-1]["lastTransitionTime"]
    )


def test_render_sorts_containers_and_lists_unready_ones() -> None:
    p = pod(containers=("worker", "sidecar"))
    rt = ps.advance(ps.PodRuntime(created_at=0.0), timing(), "Always", 1.5)
    status = podstatus.render_status(p, rt, timing(), 1.5, PLACED, ts)
    assert [c["name"] for c in status["containerStatuses"]] == ["sidecar", "worker"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["message"] == "containers with unready status: [sidecar worker]"


def test_restart_shows_last_state_and_count() -> None:
    t = timing(run=1.0, exit_code=1)
    rt = ps.advance(ps.PodRuntime(created_at=0.0), t, "OnFailure", 2.5)
    (cs,) = podstatus.render_status(pod("OnFailure"), rt, t, 2.5, PLACED, ts)["containerStatuses"]
    assert cs["restartCount"] == 1
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    assert "running" in cs["state"]
    assert cs["containerID"] != cs["lastState"]["terminated"]["containerID"]


def test_evicted_pod_is_failed_with_reason() -> None:
    rt = ps.evicted(
        ps.advance(ps.PodRuntime(created_at=0.0), timing(), "Always", 3.0), "low memory", 3.0
    )
    status = podstatus.render_status(pod("Always"), rt, timing(), 3.0, PLACED, ts)
    assert (status["phase"], status["reason"], status["message"]) == (
        "Failed",
        "Evicted",
        "low memory",
    )
    assert conditions(status)["DisruptionTarget"] == "True"
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == ps.SIGKILL_EXIT_CODE


@pytest.mark.parametrize(
    ("before_now", "exit_code", "phase", "code"),
    [
        (0.5, 143, "Failed", ps.SIGKILL_EXIT_CODE),
        (1.5, 143, "Failed", 143),
        (1.5, 0, "Succeeded", 0),
    ],
    ids=["pending-killed", "running-sigterm", "sigterm-trapped-exit-0"],
)
def test_stopped_for_deletion(before_now: float, exit_code: int, phase: str, code: int) -> None:
    rt = ps.stopped(
        ps.advance(ps.PodRuntime(created_at=0.0), timing(), "Always", before_now), exit_code, 2.0
    )
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
        (
            [{"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}],
            "Burstable",
        ),
        ([{"limits": {"cpu": "1", "memory": "1Gi"}}, {}], "Burstable"),
    ],
    ids=["none", "requests", "limits-only", "requests-below-limits", "one-container-unbounded"],
)
def test_qos_class(resources: list[dict[str, Any]], expected: str) -> None:
    spec = {"containers": [{"name": f"c{i}", "resources": r} for i, r in enumerate(resources)]}
    assert podstatus.qos_class(spec) == expected


# --- init containers ------------------------------------------------------------------------------


def init_pod(*init: str, restart_policy: str = "Never") -> dict[str, Any]:
    """A pod whose init containers are named by `init`; a `+` prefix makes one a sidecar."""
    containers = [
        {
            "name": n.lstrip("+"),
            "image": f"img-{n.lstrip('+')}",
            **({"restartPolicy": "Always"} if n[0] == "+" else {}),
        }
        for n in init
    ]
    return pod(restart_policy, initContainers=containers)


def init_timing(*init: str, **kw: Any) -> ps.PodTiming:
    spec = init_pod(*init)["spec"]
    return ps.PodTiming.from_annotations(
        {k: str(v) for k, v in kw.items()},
        start_default=1.0,
        ready_default=1.0,
        init_containers=spec["initContainers"],
    )


@pytest.mark.parametrize(
    ("annotations", "containers", "expected"),
    [
        ({}, [], ps.PodTiming(start=1.0, ready=2.0, init=0.1)),
        (
            {ps.INIT_SECONDS: "3", ps.INIT_EXIT_CODE: "2"},
            [{"name": "a"}, {"name": "b", "restartPolicy": "Always"}],
            ps.PodTiming(
                start=1.0, ready=2.0, init=3.0, init_exit_code=2, init_sidecars=(False, True)
            ),
        ),
        (
            {ps.INIT_SECONDS: "-1", ps.INIT_EXIT_CODE: "x"},
            [{"name": "a"}],
            ps.PodTiming(1.0, 2.0, init_sidecars=(False,)),
        ),
    ],
    ids=["default-0.1s", "all-set", "garbage-ignored"],
)
def test_init_timing_from_annotations(
    annotations: dict[str, str], containers: list[dict[str, Any]], expected: ps.PodTiming
) -> None:
    got = ps.PodTiming.from_annotations(
        annotations, start_default=1.0, ready_default=2.0, init_containers=containers
    )
    assert got == expected


@pytest.mark.parametrize(
    ("exit_code", "expected"),
    [("0", 0.0), ("1", 0.5)],
    ids=["completes-unfloored", "restarts-floored"],
)
def test_only_a_failing_init_container_has_the_run_floor(exit_code: str, expected: float) -> None:
    t = ps.PodTiming.from_annotations(
        {ps.INIT_SECONDS: "0", ps.INIT_EXIT_CODE: exit_code},
        start_default=1,
        ready_default=1,
        min_run=0.5,
    )
    assert t.init == expected


# (init containers, annotations, restartPolicy, now) ->
#   (stage, phase, init containers started, restarts of the current one, when the app container
#   started)
INIT_CASES = [
    ("pending-before-sandbox", ("a",), {}, "Never", 0.5, ("Pending", "Pending", 0, 0, None)),
    (
        "first-init-runs",
        ("a", "b"),
        {"init-seconds": 2},
        "Never",
        1.0,
        ("Initializing", "Pending", 1, 0, None),
    ),
    (
        "second-init-runs",
        ("a", "b"),
        {"init-seconds": 2},
        "Never",
        3.0,
        ("Initializing", "Pending", 2, 0, None),
    ),
    (
        "all-done-app-starts",
        ("a", "b"),
        {"init-seconds": 2},
        "Never",
        5.0,
        ("Running", "Running", 2, 0, 5.0),
    ),
    ("default-init-seconds", ("a",), {}, "Never", 1.1, ("Running", "Running", 1, 0, 1.1)),
    (
        "sidecar-does-not-block",
        ("+s", "a"),
        {"init-seconds": 2},
        "Never",
        1.0,
        ("Initializing", "Pending", 2, 0, None),
    ),
    (
        "sidecar-last-starts-app",
        ("a", "+s"),
        {"init-seconds": 2},
        "Never",
        3.0,
        ("Running", "Running", 2, 0, 3.0),
    ),
    ("only-sidecars", ("+s", "+t"), {}, "Never", 1.0, ("Running", "Running", 2, 0, 1.0)),
    (
        "failure-never-fails-pod",
        ("a", "b"),
        {"init-seconds": 2, "init-exit-code": 3},
        "Never",
        3.0,
        ("Terminated", "Failed", 1, 0, None),
    ),
    (
        "failure-onfailure-restarts",
        ("a",),
        {"init-seconds": 2, "init-exit-code": 3},
        "OnFailure",
        6.0,
        ("Initializing", "Pending", 1, 2, None),
    ),
    (
        "failure-always-restarts",
        ("a",),
        {"init-seconds": 2, "init-exit-code": 1},
        "Always",
        3.5,
        ("Initializing", "Pending", 1, 1, None),
    ),
]


@pytest.mark.parametrize(
    ("init", "annotations", "policy", "now", "expected"),
    [c[1:] for c in INIT_CASES],
    ids=[c[0] for c in INIT_CASES],
)
def test_advance_through_init_containers(
    init: tuple[str, ...],
    annotations: dict[str, Any],
    policy: ps.RestartPolicy,
    now: float,
    expected: tuple[Any, ...],
) -> None:
    t = init_timing(*init, **{f"kubesim/{k}": v for k, v in annotations.items()})
    rt = ps.advance(ps.PodRuntime(created_at=0.0), t, policy, now)
    assert (
        rt.stage,
        rt.phase,
        len(rt.init_runs),
        rt.init_restart_count,
        rt.container_started_at,
    ) == expected


def test_init_container_failure_with_never_is_the_pods_termination() -> None:
    t = init_timing("a", **{ps.INIT_SECONDS: 2, ps.INIT_EXIT_CODE: 3})
    rt = ps.advance(ps.PodRuntime(created_at=0.0), t, "Never", 10.0)
    assert rt.termination == ps.Termination(3, "Error", 1.0, 3.0)


def init_states(status: dict[str, Any]) -> list[tuple[str, bool, bool, dict[str, Any]]]:
    """(state kind, started, ready, state body) of each init container status."""
    return [
        (next(iter(s["state"])), s["started"], s["ready"], next(iter(s["state"].values())))
        for s in status["initContainerStatuses"]
    ]


def condition_of(status: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == ctype)


def test_render_while_the_first_init_container_runs() -> None:
    p, t = init_pod("setup", "warm"), init_timing("setup", "warm", **{ps.INIT_SECONDS: 2})
    rt = ps.advance(ps.PodRuntime(created_at=0.0), t, "Never", 1.5)
    status = podstatus.render_status(p, rt, t, 1.5, PLACED, ts)
    assert status["phase"] == "Pending"
    assert init_states(status) == [
        ("running", True, False, {"startedAt": ts(1.0)}),
        ("waiting", False, False, {"reason": "PodInitializing"}),
    ]
    initialized = condition_of(status, "Initialized")
    assert (initialized["status"], initialized["reason"]) == ("False", "ContainersNotInitialized")
    assert initialized["message"] == "containers with incomplete status: [setup warm]"
    assert conditions(status)["PodReadyToStartContainers"] == "True"
    assert conditions(status)["Ready"] == "False"
    assert status["podIP"] == PLACED.pod_ip
    (cs,) = status["containerStatuses"]
    assert cs["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert all(s["imageID"] for s in status["initContainerStatuses"])  # admission requires it


def test_render_before_the_sandbox_lists_every_init_container_waiting() -> None:
    p, t = init_pod("setup"), init_timing("setup")
    status = podstatus.render_status(p, ps.PodRuntime(created_at=0.0), t, 0.5, PLACED, ts)
    assert init_states(status) == [("waiting", False, False, {"reason": "PodInitializing"})]
    assert conditions(status)["PodReadyToStartContainers"] == "False"
    assert "podIP" not in status


def test_render_after_init_is_initialized_then_ready() -> None:
    p, t = init_pod("setup"), init_timing("setup", **{ps.INIT_SECONDS: 2})
    rt = ps.advance(ps.PodRuntime(created_at=0.0), t, "Never", 4.5)
    status = podstatus.render_status(p, rt, t, 4.5, PLACED, ts)
    assert (status["phase"], conditions(status)["Initialized"], conditions(status)["Ready"]) == (
        "Running",
        "True",
        "True",
    )
    ((kind, started, ready, body),) = init_states(status)
    assert (kind, started, ready) == ("terminated", False, True)
    assert (body["exitCode"], body["reason"], body["startedAt"], body["finishedAt"]) == (
        0,
        "Completed",
        ts(1.0),
        ts(3.0),
    )
    assert status["containerStatuses"][0]["state"] == {"running": {"startedAt": ts(3.0)}}


def test_render_failed_init_container_under_never() -> None:
    p, t = init_pod("setup", "warm"), init_timing("setup", "warm", **{ps.INIT_EXIT_CODE: 2})
    rt = ps.advance(ps.PodRuntime(created_at=0.0), t, "Never", 5.0)
    status = podstatus.render_status(p, rt, t, 5.0, PLACED, ts)
    assert status["phase"] == "Failed"
    assert [
        (kind, body.get("exitCode"), body.get("reason")) for kind, _, _, body in init_states(status)
    ] == [
        ("terminated", 2, "Error"),
        ("waiting", None, "PodInitializing"),
    ]
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert conditions(status)["Initialized"] == "False"


def test_render_restarted_init_container_shows_count_and_last_state() -> None:
    p, t = (
        init_pod("setup", restart_policy="OnFailure"),
        init_timing("setup", **{ps.INIT_SECONDS: 1, ps.INIT_EXIT_CODE: 4}),
    )
    rt = ps.advance(ps.PodRuntime(created_at=0.0), t, "OnFailure", 3.5)
    (init,) = podstatus.render_status(p, rt, t, 3.5, PLACED, ts)["initContainerStatuses"]
    assert init["restartCount"] == 2
    assert init["lastState"]["terminated"]["exitCode"] == 4
    assert init["state"] == {"running": {"startedAt": ts(3.0)}}
    assert init["containerID"] != init["lastState"]["terminated"]["containerID"]


def test_sidecar_keeps_running_and_is_stopped_with_the_pod() -> None:
    p = init_pod("+proxy", "setup")
    t = init_timing("+proxy", "setup", **{ps.INIT_SECONDS: 1, ps.RUN_SECONDS: 2})
    running = podstatus.render_status(
        p, ps.advance(ps.PodRuntime(created_at=0.0), t, "Never", 3.5), t, 3.5, PLACED, ts
    )
    assert [s[:3] for s in init_states(running)] == [
        ("running", True, True),
        ("terminated", False, True),
    ]
    assert conditions(running)["Initialized"] == "True"
    rt = ps.advance(ps.PodRuntime(created_at=0.0), t, "Never", 10.0)
    done = podstatus.render_status(p, rt, t, 10.0, PLACED, ts)
    assert done["phase"] == "Succeeded"
    proxy = done["initContainerStatuses"][0]["state"]["terminated"]
    assert (proxy["exitCode"], proxy["finishedAt"]) == (ps.SIGTERM_EXIT_CODE, ts(4.0))


@pytest.mark.parametrize(
    ("end", "code", "reason"),
    [
        (lambda rt: ps.stopped(rt, ps.SIGTERM_EXIT_CODE, 1.5), ps.SIGTERM_EXIT_CODE, None),
        (lambda rt: ps.evicted(rt, "low memory", 1.5), ps.SIGKILL_EXIT_CODE, "Evicted"),
    ],
    ids=["deleted", "evicted"],
)
def test_pod_ended_during_init(end: Any, code: int, reason: str | None) -> None:
    p, t = init_pod("setup"), init_timing("setup", **{ps.INIT_SECONDS: 5})
    rt = end(ps.advance(ps.PodRuntime(created_at=0.0), t, "Always", 1.2))
    status = podstatus.render_status(p, rt, t, 1.5, PLACED, ts)
    assert (status["phase"], status.get("reason")) == ("Failed", reason)
    init = status["initContainerStatuses"][0]["state"]["terminated"]
    assert (init["exitCode"], init["startedAt"], init["finishedAt"]) == (code, ts(1.0), ts(1.5))
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert ps.next_deadline(rt, t, 1.5) is None


def test_next_deadline_is_the_running_init_containers_exit() -> None:
    t = init_timing("a", "b", **{ps.INIT_SECONDS: 2})
    rt = ps.advance(ps.PodRuntime(created_at=0.0), t, "Never", 3.5)
    assert ps.next_deadline(rt, t, 3.5) == 5.0


def test_kill_during_init_leaves_the_pod_alone() -> None:
    t = init_timing("a")
    rt = ps.advance(ps.PodRuntime(created_at=0.0), t, "Never", 1.05)
    assert ps.container_exited(rt, 9, 1.06, "Never") == rt


@given(
    init=st.lists(st.booleans(), max_size=3),
    init_seconds=st.floats(0.01, 3),
    init_code=st.integers(0, 2),
    run=st.one_of(st.none(), st.floats(0.01, 5)),
    policy=st.sampled_from(["Always", "OnFailure", "Never"]),
    t1=st.floats(0, 20),
    dt=st.floats(0, 20),
)
def test_init_in_steps_equals_at_once(
    init: list[bool],
    init_seconds: float,
    init_code: int,
    run: float | None,
    policy: ps.RestartPolicy,
    t1: float,
    dt: float,
) -> None:
    t = timing(run=run, init=init_seconds, init_exit_code=init_code, init_sidecars=tuple(init))
    rt0 = ps.PodRuntime(created_at=0.0)
    stepped = ps.advance(ps.advance(rt0, t, policy, t1), t, policy, t1 + dt)
    at_once = ps.advance(rt0, t, policy, t1 + dt)
    if at_once.restart_count + at_once.init_restart_count + len(init) < ps.MAX_EXITS_PER_ADVANCE:
        assert stepped == at_once
