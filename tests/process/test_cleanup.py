"""Nothing of the process runtime outlives its run: not when kubesim stops, not when it is
killed."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import subprocess
import tempfile
from pathlib import Path

from kubesim.procrt.sandbox import STATE_BASE_NAME, StateDir
from kubesim.testing import eventually
from operator_testing import sim_process

from .procrt_helpers import exited, processes_with


def _netns_holders() -> dict[int, str]:
    """pid -> the network namespace it is in, for every process of the machine."""
    held = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                held[int(entry.name)] = os.readlink(entry / "ns" / "net")
            except OSError:
                continue
    return held


def _netns_in_use() -> set[str]:
    return set(_netns_holders().values())


def _host_links() -> list[str]:
    out = subprocess.run(["ip", "-o", "link"], check=True, capture_output=True, text=True).stdout
    return sorted(line.split(":")[1].strip() for line in out.splitlines())


def _host_mounts() -> list[str]:
    return sorted(line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines())


async def _run(*argv: str, stdin: str = "") -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate(stdin.encode())
    return int(proc.returncode or 0), out.decode()


async def test_a_killed_run_leaves_no_process_namespace_link_or_mount(
    process_runtime: None, tmp_path: Path
) -> None:
    marker = f"kubesim-cleanup-{secrets.token_hex(4)}"
    netns_before, links_before, mounts_before = _netns_in_use(), _host_links(), _host_mounts()
    kubeconfig = tmp_path / "kubeconfig"
    async with sim_process(kubeconfig, tmp_path / "sim.out", "--runtime", "process") as sim:
        # A pod whose container starts a child that ignores SIGTERM, under an emptyDir in memory.
        script = (
            f"(trap '' TERM; exec -a {marker}-child sleep 1000) & exec -a {marker}-main sleep 1000"
        )
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "victim", "namespace": "default"},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "debian:bookworm",
                        "command": ["bash", "-c", script],
                        "volumeMounts": [{"name": "mem", "mountPath": "/mem"}],
                    }
                ],
                "volumes": [{"name": "mem", "emptyDir": {"medium": "Memory"}}],
            },
        }
        kubectl = ["kubectl", f"--kubeconfig={kubeconfig}"]
        created = await _run(*kubectl, "create", "-f", "-", stdin=json.dumps(pod))
        assert created[0] == 0, created[1]
        waited = await _run(
            *kubectl, "wait", "--for=condition=Ready", "pod/victim", "--timeout=60s"
        )
        assert waited[0] == 0, waited[1]

        def both() -> list[int] | None:
            # Ready says the container started, not that bash has exec'ed both sleeps yet.
            found = processes_with(marker)
            return found if len(found) == 2 else None

        pids = await eventually(both, within=30, what="the pod's two processes")
        # Every process of the run in a namespace of its own (sandboxes, shims, containers): the
        # kernel ends them one after another once kubesim is gone, so the checks below wait for all
        # of them.
        holders = [pid for pid, ns in _netns_holders().items() if ns not in netns_before]
        assert len(_netns_in_use() - netns_before) >= 2  # the bridge's and the pod's
        state_dirs = [
            p
            for p in (Path(tempfile.gettempdir()) / STATE_BASE_NAME).iterdir()
            if p.name.startswith(f"{sim.pid}-")
        ]
        assert len(state_dirs) == 1
        # Killed, not stopped: nothing of kubesim's own shutdown may take part in the cleanup.
        sim.send_signal(signal.SIGKILL)
        await sim.wait()
    async with asyncio.timeout(30):
        await asyncio.gather(*(exited(pid) for pid in {*pids, *holders}))
    assert processes_with(marker) == []
    # Every namespace the run made was held only by its processes: none is held any more.
    assert _netns_in_use() - netns_before == set()
    assert _host_links() == links_before
    assert _host_mounts() == mounts_before
    # The state directory stays until the next runtime starts, which removes it.
    assert state_dirs[0].exists()
    fresh = StateDir()
    try:
        assert state_dirs[0] in fresh.swept
        assert not state_dirs[0].exists()
    finally:
        fresh.close()
