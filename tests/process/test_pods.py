"""Pods of the process runtime run real programs: exit codes, restarts, signals and grace, logs."""

from __future__ import annotations

import asyncio
from typing import Any

from kubesim.app import KubeSim
from kubesim.cluster import DeleteOptions
from kubesim.testing import Kubectl, wait_for

from .procrt_helpers import (
    container_status,
    create,
    exited,
    get_pod,
    is_gone,
    log_text,
    phase,
    pod,
    processes_with,
    rt,
    shell,
    sleeper,
    terminated,
)


async def test_exit_code_output_and_environment_come_from_the_process(kubesim: KubeSim) -> None:
    script = 'echo "out $(hostname) $MY_VAR $POD_NAME"; echo "err $(id -u)" >&2; exit 3'
    env = [
        {"name": "MY_VAR", "value": "v1"},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    create(
        kubesim, pod("exits", shell("main", script, env=env), restartPolicy="Never", hostname="h-1")
    )
    await wait_for(kubesim, lambda: phase(kubesim, "exits") == "Failed")
    ended = terminated(kubesim, "exits")
    assert ended is not None
    assert (ended["exitCode"], ended["reason"]) == (3, "Error")
    assert get_pod(kubesim, "exits")["status"]["podIP"].startswith("10.244.")
    assert log_text(kubesim, "exits").splitlines() == ["out h-1 v1 exits", "err 0"]


async def test_restart_policy_restarts_the_real_process_with_back_off(kubesim: KubeSim) -> None:
    # Each run appends to an emptyDir, so the count shows the process really ran again.
    script = (
        'echo run >> /data/runs; n=$(wc -l < /data/runs); echo "run $n"; [ "$n" -ge 3 ] || exit 1'
    )
    create(
        kubesim,
        pod(
            "crashes",
            shell("main", script, volumeMounts=[{"name": "data", "mountPath": "/data"}]),
            restartPolicy="OnFailure",
            volumes=[{"name": "data", "emptyDir": {}}],
        ),
    )
    await wait_for(kubesim, lambda: phase(kubesim, "crashes") == "Succeeded", within=90)
    status = container_status(kubesim, "crashes")
    assert status["restartCount"] == 2
    assert status["lastState"]["terminated"]["exitCode"] == 1
    assert log_text(kubesim, "crashes").strip() == "run 3"


async def test_deletion_sends_sigterm_then_sigkill_after_the_grace_period(kubesim: KubeSim) -> None:
    polite = "trap 'echo got TERM; exit 0' TERM; echo up; while :; do sleep 0.1; done"
    stubborn = "trap 'echo ignoring TERM' TERM; echo up; while :; do sleep 0.1; done"
    create(kubesim, pod("polite", shell("main", polite)))
    create(kubesim, pod("stubborn", shell("main", stubborn), terminationGracePeriodSeconds=3))
    # No handler at all: as pid 1 of a container, the process never sees the SIGTERM.
    plain = {
        "name": "main",
        "image": "debian:bookworm",
        "command": ["python3", "-c", "print('up', flush=True); import time; time.sleep(1000)"],
    }
    create(kubesim, pod("plain", plain, terminationGracePeriodSeconds=3))
    for name in ("polite", "stubborn", "plain"):
        await wait_for(kubesim, lambda n=name: "up" in log_text(kubesim, n))
    seen: dict[str, str] = {}

    def listener(event: str, _rt: object, obj: dict[str, object], _old: object) -> None:
        meta = obj.get("metadata") or {}
        state = (((obj.get("status") or {}).get("containerStatuses") or [{}])[0]).get("state") or {}  # type: ignore[union-attr]
        if "terminated" in state:
            seen[str(meta["name"])] = str(state["terminated"]["exitCode"])  # type: ignore[index]

    kubesim.cluster.add_listener(listener)  # type: ignore[arg-type]
    try:
        pods = rt(kubesim, "Pod")
        for name in ("polite", "stubborn", "plain"):
            kubesim.cluster.delete(pods, "default", name)
        await wait_for(kubesim, lambda: len(seen) == 3, within=60)
    finally:
        kubesim.cluster.remove_listener(listener)  # type: ignore[arg-type]
    # The polite container ended on SIGTERM by itself; the others were killed after their grace.
    assert seen == {"polite": "0", "stubborn": "137", "plain": "137"}


async def test_kubectl_logs_follows_a_running_container(kubesim: KubeSim, kubectl: Kubectl) -> None:
    script = "echo first; while [ ! -e /tmp/go ]; do sleep 0.1; done; echo second; exit 0"
    create(kubesim, pod("talker", shell("main", script), restartPolicy="Never"))
    await wait_for(kubesim, lambda: "first" in log_text(kubesim, "talker"))
    rc, out, err = await kubectl("logs", "talker", "--tail=1")
    assert (rc, out) == (0, "first\n"), err
    follow = kubectl("logs", "-f", "talker", limit=60)
    import asyncio

    task = asyncio.ensure_future(follow)
    kubelet = kubesim.controllers.kubelet
    assert kubelet is not None
    run = kubelet._workers[("default", "talker")].runs["main"]  # type: ignore[attr-defined]
    code, _ = await run.exec(["touch", "/tmp/go"], 10)
    assert code == 0
    rc, out, err = await task
    assert (rc, out) == (0, "first\nsecond\n"), err


async def test_a_volume_that_cannot_be_set_up_keeps_the_pod_creating_and_says_why(
    kubesim: KubeSim,
) -> None:
    claim = {"name": "data", "persistentVolumeClaim": {"claimName": "nowhere"}}
    main = shell("main", "true", volumeMounts=[{"name": "data", "mountPath": "/data"}])
    create(kubesim, pod("stuck", main, volumes=[claim]))

    def creating() -> str:
        waiting = container_status(kubesim, "stuck")["state"]["waiting"]
        assert waiting["reason"] == "ContainerCreating"
        return str(waiting.get("message", ""))

    message = await wait_for(kubesim, creating)
    assert "data" in message, message
    assert phase(kubesim, "stuck") == "Pending"
    kubesim.cluster.delete(rt(kubesim, "Pod"), "default", "stuck")

    await wait_for(kubesim, lambda: is_gone(kubesim, "stuck"), within=60)


async def test_deleting_a_pod_removes_it_once_its_processes_are_gone(kubesim: KubeSim) -> None:
    create(kubesim, pod("short", shell("main", "sleep 1000")))
    await wait_for(kubesim, lambda: phase(kubesim, "short") == "Running")
    kubesim.cluster.delete(
        rt(kubesim, "Pod"), "default", "short", options=DeleteOptions(grace_period_seconds=1)
    )

    await wait_for(kubesim, lambda: is_gone(kubesim, "short"), within=60)


async def test_init_containers_run_in_order_and_a_sidecar_serves_the_main_container(
    kubesim: KubeSim,
) -> None:
    # Two init containers write in turn; a sidecar (restartPolicy Always) keeps serving HTTP beside
    # the main container, which reads from it over the pod's loopback, and is stopped once the main
    # one ends.
    shared = [{"name": "shared", "mountPath": "/shared"}]
    first = shell("first", "echo one >> /shared/order", volumeMounts=shared)
    second = shell("second", "echo two >> /shared/order", volumeMounts=shared)
    server = {
        "name": "server",
        "image": "debian:bookworm",
        "command": ["python3", "-m", "http.server", "8080", "--directory", "/shared"],
        "restartPolicy": "Always",
        "volumeMounts": shared,
        # The kubelet probes the pod's IP, from outside the pod: the next init container waits for
        # it.
        "startupProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
    }
    fetch = (
        'python3 -c "import urllib.request as u; '
        "print(u.urlopen('http://127.0.0.1:8080/order').read().decode(), end='')\""
    )
    create(
        kubesim,
        pod(
            "sidecar",
            shell("main", fetch),
            initContainers=[first, second, server],
            restartPolicy="Never",
            volumes=[{"name": "shared", "emptyDir": {}}],
        ),
    )
    await wait_for(kubesim, lambda: phase(kubesim, "sidecar") == "Succeeded", within=60)
    assert log_text(kubesim, "sidecar").splitlines() == ["one", "two"]

    def init_statuses() -> dict[str, dict[str, Any]]:
        return {
            s["name"]: s for s in get_pod(kubesim, "sidecar")["status"]["initContainerStatuses"]
        }

    # The phase ignores sidecars (KEP-753); the kubelet stops them after the main container ends.
    await wait_for(kubesim, lambda: "terminated" in init_statuses()["server"]["state"])
    statuses = init_statuses()
    assert [statuses[n]["state"]["terminated"]["exitCode"] for n in ("first", "second")] == [0, 0]
    assert statuses["first"]["ready"]
    assert statuses["second"]["ready"]


async def test_a_node_going_down_kills_its_pods_processes_and_reports_nothing(
    kubesim: KubeSim,
) -> None:
    marker = "kubesim-node-down-marker"
    script = sleeper(marker)
    create(kubesim, pod("victim", shell("main", script)))
    await wait_for(kubesim, lambda: "up" in log_text(kubesim, "victim"))
    await wait_for(kubesim, lambda: phase(kubesim, "victim") == "Running")
    pids = processes_with(marker)
    assert len(pids) == 1
    kubelet = kubesim.controllers.kubelet
    assert kubelet is not None
    node = str(get_pod(kubesim, "victim")["spec"]["nodeName"])

    kubelet.node_down(node)
    await asyncio.wait_for(exited(pids[0]), 30)
    # The dead kubelet does not report the death: the pod is Running as far as the API knows.
    assert phase(kubesim, "victim") == "Running"

    kubelet.node_up(node)
    await wait_for(kubesim, lambda: len(processes_with(marker)) == 1)


async def test_a_pod_deleted_while_its_node_is_down_ends_when_the_node_returns(
    kubesim: KubeSim,
) -> None:
    """As the taint manager leaves it: Terminating on a dead node. The returning kubelet finishes
    the delete; it does not start the pod again."""
    marker = "kubesim-deleted-while-down-marker"
    script = sleeper(marker)
    create(kubesim, pod("doomed", shell("main", script)))
    await wait_for(kubesim, lambda: "up" in log_text(kubesim, "doomed"))
    pids = processes_with(marker)
    assert len(pids) == 1
    kubelet = kubesim.controllers.kubelet
    assert kubelet is not None
    node = str(get_pod(kubesim, "doomed")["spec"]["nodeName"])

    kubelet.node_down(node)
    await asyncio.wait_for(exited(pids[0]), 30)
    kubesim.cluster.delete(rt(kubesim, "Pod"), "default", "doomed")
    assert get_pod(kubesim, "doomed")["metadata"]["deletionTimestamp"]

    kubelet.node_up(node)
    await wait_for(kubesim, lambda: is_gone(kubesim, "doomed"))
    assert processes_with(marker) == []
