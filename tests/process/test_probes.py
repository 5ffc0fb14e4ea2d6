"""Probes of the process runtime, evaluated against real processes: sockets, HTTP servers, exec'd
commands.

Probe periods are 1 simulated second, 0.1 s of real time at PROCESS_TIME_SCALE; an attempt's own
timeout is in real seconds, as the processes run at real speed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kubesim.app import KubeSim
from kubesim.procrt.containers import ContainerRun
from kubesim.testing import wait_for

from .procrt_helpers import container_status, create, get_pod, is_ready, log_text, pod, shell

SLEEP = "sleep 1000"
TCP_LISTEN = "0A"
"""The LISTEN state in /proc/net/tcp."""

# A directory server like `python3 -m http.server`, which also logs the header the probe sends.
HTTP_SERVER = """
import functools, http.server, sys
class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):
        print(self.headers.get("X-Probe"), self.headers.get("User-Agent"), fmt % args, flush=True)
http.server.HTTPServer(("", 8080), functools.partial(Handler, directory="/srv")).serve_forever()
"""


def _run(sim: KubeSim, name: str, container: str = "main") -> ContainerRun:
    kubelet = sim.controllers.kubelet
    assert kubelet is not None
    return kubelet._workers[("default", name)].runs[container]  # type: ignore[attr-defined,no-any-return]


async def _out(sim: KubeSim, name: str, *argv: str) -> str:
    code, out = await _run(sim, name).exec(list(argv), 20)
    assert code == 0, f"{argv}: exit {code}: {out!r}"
    return out.decode()


def _inside(sim: KubeSim, name: str, path: str) -> str:
    """`path` in the running container now ("" if absent), through its init's root, for wait_for."""
    try:
        return Path(f"/proc/{_run(sim, name).pid1}/root{path}").read_text()
    except (FileNotFoundError, KeyError):
        return ""


def _listening(pid: int, port: int) -> bool:
    """Whether something listens on TCP `port` in the network namespace of process `pid`."""
    lines = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    return any(
        int(fields[1].split(":")[1], 16) == port and fields[3] == TCP_LISTEN
        for fields in (line.split() for line in lines)
    )


def _process_exists(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def _condition(obj: dict[str, Any], kind: str) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return str(c["status"])
    return None


def _running(sim: KubeSim, name: str) -> bool:
    return bool(container_status(sim, name).get("state", {}).get("running"))


@contextmanager
def _pod_updates(sim: KubeSim, name: str, seen: list[dict[str, Any]]) -> Iterator[None]:
    """Appends every committed version of pod `name` to `seen` (listeners run at each commit)."""

    def listener(_event: str, _rt: object, obj: dict[str, Any], _old: object) -> None:
        if obj.get("kind") == "Pod" and obj["metadata"]["name"] == name:
            seen.append(obj)

    sim.cluster.add_listener(listener)
    try:
        yield
    finally:
        sim.cluster.remove_listener(listener)


async def test_tcp_readiness_by_named_port_waits_for_the_listener(kubesim: KubeSim) -> None:
    container = shell(
        "main",
        "sleep 1; exec python3 -m http.server 8080",
        ports=[{"name": "web", "containerPort": 8080}],
        readinessProbe={"tcpSocket": {"port": "web"}, "periodSeconds": 1},
    )
    listening_when: dict[str, bool] = {}

    def listener(_event: str, _rt: object, obj: dict[str, Any], _old: object) -> None:
        # At the very commit that makes the pod Ready (or shows it running unready): is 8080
        # listening?
        if obj.get("kind") != "Pod" or obj["metadata"]["name"] != "tcp":
            return
        state = (((obj.get("status") or {}).get("containerStatuses") or [{}])[0]).get("state") or {}
        if "running" not in state:
            return
        ready = _condition(obj, "Ready")
        if ready is not None and ready not in listening_when:
            listening_when[ready] = _listening(_run(kubesim, "tcp").pid1 or 0, 8080)

    kubesim.cluster.add_listener(listener)
    try:
        create(kubesim, pod("tcp", container))
        await wait_for(kubesim, lambda: is_ready(kubesim, "tcp"))
    finally:
        kubesim.cluster.remove_listener(listener)
    # Running but not listening yet (the `sleep 1`): not Ready. Ready came with the listener.
    assert listening_when == {"False": False, "True": True}
    assert container_status(kubesim, "tcp")["ready"] is True


async def test_http_readiness_follows_the_status_code_and_sends_the_header(
    kubesim: KubeSim,
) -> None:
    container = shell(
        "main",
        f"mkdir -p /srv && exec python3 -c '{HTTP_SERVER}'",
        readinessProbe={
            "httpGet": {
                "path": "/healthz.txt",
                "port": 8080,
                "httpHeaders": [{"name": "X-Probe", "value": "from-kubelet"}],
            },
            "periodSeconds": 1,
            "failureThreshold": 1,
        },
    )
    create(kubesim, pod("http", container))
    # No file to serve: the server answers 404, twice at least, and the pod stays unready.
    await wait_for(
        kubesim, lambda: log_text(kubesim, "http").count('"GET /healthz.txt HTTP/1.1" 404') >= 2
    )
    assert not is_ready(kubesim, "http")
    assert container_status(kubesim, "http")["ready"] is False
    lines = log_text(kubesim, "http").splitlines()
    assert lines[0].startswith("from-kubelet kube-probe/"), lines

    await _out(kubesim, "http", "sh", "-c", "echo ok > /srv/healthz.txt")
    await wait_for(kubesim, lambda: is_ready(kubesim, "http"))
    # The server logs the request on its own time: the Ready status can be written before the line
    # is.
    await wait_for(kubesim, lambda: '"GET /healthz.txt HTTP/1.1" 200' in log_text(kubesim, "http"))
    # And back: the file gone, 404 again, unready after one failure (failureThreshold 1).
    await _out(kubesim, "http", "rm", "/srv/healthz.txt")
    await wait_for(kubesim, lambda: not is_ready(kubesim, "http"))


async def test_exec_readiness_flips_and_the_pod_conditions_follow(kubesim: KubeSim) -> None:
    probe = {
        "exec": {"command": ["test", "-e", "/tmp/ready"]},
        "periodSeconds": 1,
        "failureThreshold": 1,
    }
    create(kubesim, pod("flip", shell("main", SLEEP, readinessProbe=probe)))
    seen: list[dict[str, Any]] = []
    with _pod_updates(kubesim, "flip", seen):
        await wait_for(kubesim, lambda: _running(kubesim, "flip"))
        for step in ("touch /tmp/ready", "rm /tmp/ready", "touch /tmp/ready"):
            await _out(kubesim, "flip", "sh", "-c", step)
            want = step.startswith("touch")

            def reached(want: bool = want) -> bool:
                return is_ready(kubesim, "flip") is want

            await wait_for(kubesim, reached)
            status = get_pod(kubesim, "flip")
            assert _condition(status, "ContainersReady") == str(want)
            assert container_status(kubesim, "flip")["ready"] is want
    # Ready went False -> True -> False -> True, each change once, and never by a restart.
    readiness = [_condition(obj, "Ready") for obj in seen if _running_in(obj)]
    changes = [value for i, value in enumerate(readiness) if i == 0 or value != readiness[i - 1]]
    assert changes[-4:] == ["False", "True", "False", "True"]
    assert container_status(kubesim, "flip")["restartCount"] == 0


def _running_in(obj: dict[str, Any]) -> bool:
    statuses = (obj.get("status") or {}).get("containerStatuses") or [{}]
    return "running" in (statuses[0].get("state") or {})


async def test_liveness_failure_kills_and_restarts_the_container(kubesim: KubeSim) -> None:
    # Each run counts itself on an emptyDir (which outlives runs) and arms its own liveness file in
    # /tmp (which does not: every run gets a new /tmp).
    script = "echo run >> /data/runs; touch /tmp/alive; exec sleep 1000"
    check = ["sh", "-c", "echo probe >> /data/probes; test -e /tmp/alive"]
    container = shell(
        "main",
        script,
        volumeMounts=[{"name": "data", "mountPath": "/data"}],
        livenessProbe={"exec": {"command": check}, "periodSeconds": 1, "failureThreshold": 2},
    )
    create(kubesim, pod("live", container, volumes=[{"name": "data", "emptyDir": {}}]))
    # Healthy: probed again and again, and left alone.
    await wait_for(kubesim, lambda: _inside(kubesim, "live", "/data/probes").count("probe") >= 3)
    assert _inside(kubesim, "live", "/data/runs") == "run\n"
    assert container_status(kubesim, "live")["restartCount"] == 0
    first = _run(kubesim, "live")
    await _out(kubesim, "live", "rm", "/tmp/alive")
    await wait_for(
        kubesim,
        lambda: (
            container_status(kubesim, "live")["restartCount"] == 1 and _running(kubesim, "live")
        ),
    )
    status = container_status(kubesim, "live")
    # The kubelet stopped the run: SIGTERM, which sleep as the container's pid 1 never sees (it has
    # no handler), then SIGKILL after the grace period (128 + 9).
    assert status["lastState"]["terminated"]["exitCode"] == 137
    assert status["lastState"]["terminated"]["reason"] == "Error"
    assert not first.running
    assert first.exit_code == 137
    assert first.pid1 is not None
    assert not _process_exists(first.pid1)
    await wait_for(kubesim, lambda: _inside(kubesim, "live", "/data/runs") == "run\nrun\n")
    assert _run(kubesim, "live") is not first


async def test_startup_probe_holds_back_readiness_and_liveness(kubesim: KubeSim) -> None:
    # Each probe logs its attempts to /tmp, so the test sees which probes ran and in what order.
    def recording(kind: str, check: str) -> dict[str, Any]:
        command = ["sh", "-c", f"echo {kind} >> /tmp/attempts; {check}"]
        return {"exec": {"command": command}, "periodSeconds": 1}

    container = shell(
        "main",
        SLEEP,
        startupProbe={**recording("startup", "test -e /tmp/started"), "failureThreshold": 1000},
        readinessProbe=recording("readiness", "true"),
        livenessProbe=recording("liveness", "true"),
    )
    create(kubesim, pod("slow", container))
    # Several failed startup attempts: nothing else probed, neither started nor ready.
    await wait_for(kubesim, lambda: _inside(kubesim, "slow", "/tmp/attempts").count("startup") >= 3)
    status = container_status(kubesim, "slow")
    assert (status["started"], status["ready"]) == (False, False)
    assert not is_ready(kubesim, "slow")
    assert set(_inside(kubesim, "slow", "/tmp/attempts").split()) == {"startup"}

    await _out(kubesim, "slow", "touch", "/tmp/started")
    await wait_for(kubesim, lambda: is_ready(kubesim, "slow"))
    # A few periods of the other probes, long enough for a startup probe that went on to show
    # itself.
    await wait_for(
        kubesim, lambda: _inside(kubesim, "slow", "/tmp/attempts").count("liveness") >= 3
    )
    attempts = _inside(kubesim, "slow", "/tmp/attempts").split()
    first_other = min(attempts.index("readiness"), attempts.index("liveness"))
    # The startup probe stopped at its first success; the others only began after it.
    assert set(attempts[:first_other]) == {"startup"}
    assert "startup" not in attempts[first_other:]
    status = container_status(kubesim, "slow")
    assert (status["started"], status["ready"], status["restartCount"]) == (True, True, 0)


async def test_an_exec_probe_that_times_out_is_killed_and_reaped(kubesim: KubeSim) -> None:
    # Each attempt logs its start, then outlives its 1 s timeout by far.
    probe = {
        "exec": {"command": ["sh", "-c", "echo attempt >> /tmp/attempts; exec sleep 30"]},
        "timeoutSeconds": 1,
        "periodSeconds": 1,
    }
    create(kubesim, pod("stuck", shell("main", SLEEP, readinessProbe=probe)))
    # A second attempt starts only after the first one timed out.
    await wait_for(
        kubesim, lambda: _inside(kubesim, "stuck", "/tmp/attempts").count("attempt") >= 2
    )
    assert not is_ready(kubesim, "stuck")
    processes = (await _out(kubesim, "stuck", "ps", "-eo", "stat=,args=")).splitlines()
    # The timed-out command is gone, and reaped: no zombie of it is left for the machine's init.
    assert [p for p in processes if p.startswith("Z")] == []
    assert len([p for p in processes if p.endswith("sleep 30")]) <= 1
