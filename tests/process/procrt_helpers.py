"""Pods for the process-runtime tests, and reading them back."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from kubesim.app import KubeSim
from kubesim.errors import StatusError
from kubesim.registry import ResourceType

# Kubelet back-off (10 s) and grace periods run at this scale, so a restart test waits about a
# second.
PROCESS_TIME_SCALE = 0.1


def rt(sim: KubeSim, kind: str) -> ResourceType:
    found = sim.cluster.registry.by_kind("v1", kind)
    assert found is not None
    return found


def pod(name: str, *containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": spec.pop("labels", {"app": name}),
        },
        "spec": {"containers": list(containers), "terminationGracePeriodSeconds": 5, **spec},
    }


def shell(name: str, script: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "debian:bookworm", "command": ["sh", "-c", script], **extra}


def create(sim: KubeSim, obj: dict[str, Any]) -> dict[str, Any]:
    return sim.cluster.create(rt(sim, obj["kind"]), obj["metadata"].get("namespace"), obj).object


def get_pod(sim: KubeSim, name: str) -> dict[str, Any]:
    return sim.cluster.get(rt(sim, "Pod"), "default", name)


def is_gone(sim: KubeSim, name: str) -> bool:
    try:
        get_pod(sim, name)
    except StatusError as err:
        return err.code == 404
    return False


def phase(sim: KubeSim, name: str) -> str:
    return str(get_pod(sim, name).get("status", {}).get("phase", ""))


def container_status(sim: KubeSim, name: str, container: str | None = None) -> dict[str, Any]:
    statuses = get_pod(sim, name).get("status", {}).get("containerStatuses") or []
    for s in statuses:
        if container is None or s["name"] == container:
            return dict(s)
    raise KeyError(container)


def is_ready(sim: KubeSim, name: str) -> bool:
    conditions = get_pod(sim, name).get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def terminated(sim: KubeSim, name: str, container: str | None = None) -> dict[str, Any] | None:
    state = container_status(sim, name, container).get("state") or {}
    found = state.get("terminated")
    return dict(found) if found else None


def log_text(sim: KubeSim, name: str, container: str | None = None) -> str:
    """The container's current run's output, read as the API's log endpoint serves it."""
    kubelet = sim.controllers.kubelet
    assert kubelet is not None
    found = get_pod(sim, name)
    status = container_status(sim, name, container)
    base = kubelet.log_dir("default", name, found["metadata"]["uid"])  # type: ignore[attr-defined]
    path = base / status["name"] / f"{status['restartCount']}.log"
    if not path.exists():
        return ""
    return "".join(
        line.split(" ", 3)[3] if line.count(" ") >= 3 else "\n"
        for line in path.read_text().splitlines(True)
    )


def sleeper(marker: str) -> str:
    """A script whose one process carries `marker` and prints "up" only once it is that process,
    so a test that has seen "up" finds it in /proc."""
    return f"exec python3 -c 'import time; print(\"up\", flush=True); time.sleep(1000)' {marker}"


def processes_with(marker: str) -> list[int]:
    """The pids of the machine whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


async def exited(pid: int) -> None:
    """Returns once `pid` has ended (its pidfd turns readable)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    loop.add_reader(fd, done.set_result, None)
    try:
        await done
    finally:
        loop.remove_reader(fd)
        os.close(fd)
