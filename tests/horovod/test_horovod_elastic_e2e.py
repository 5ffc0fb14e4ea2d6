"""Real Horovod end to end: a compiled Horovod 0.28.1 (PyTorch CPU + Gloo) runs an elastic training
job as the launcher process of an MPIJob on kubesim, with the operator reconciling it, and follows
`kubectl scale` and a killed worker.

- `scripts/build_horovod.sh` builds Horovod from the PyPI sdist with our C++17 CMake fix into a
  cached venv (about 2.5 minutes the first time; skipped, not failed, only when PyPI cannot be
  reached).
- `horovodrun --min-np/--max-np --network-interface lo --host-discovery-script` runs in this
  process's machine, standing for the launcher container. Its discovery script (`hvd_discover.py`)
  runs the launcher pod's *mounted* `/etc/mpi/discover_hosts.sh`, read through kubesim's file
  endpoint, so what Horovod sees is exactly what the kubelet delivered to the launcher.
- The host names that script prints do not resolve, so Horovod launches every worker through `ssh`;
  a stand-in `ssh` on its PATH (`hvd_standin_ssh.py`) runs the command locally for as long as the
  worker pod with that `spec.hostname` is Ready in kubesim, and kills it when the pod's container
  dies or the pod is deleted, logging which sessions the cluster killed.
- `hvd_train.py` logs, per batch and rank, the world size and the host Horovod placed the rank on;
  the assertions read the worlds Horovod really formed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml
from chaoslib.invariants import is_ready

from integration.elastic.harness import (
    JOB_LABEL,
    ROLE_LABEL,
    elastic_job,
    host,
    launcher_pod,
    mounted_hosts,
    worker_pods,
)
from integration.reconcile.harness import NS, wait_condition
from kubesim.app import KubeSim
from kubesim.cluster import EventType
from kubesim.controllers import resource_type
from kubesim.registry import ResourceType
from kubesim.settings import SimSettings
from kubesim.testing import Kubectl, eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
JOB = "hvd"
GRACE_SECONDS = 8
SETTLE_SECONDS = 5


@pytest.fixture
def kubesim_settings() -> SimSettings:
    # kubesim's default 60 s volume sync: the launcher's mounted script follows within a second or
    # two only because the operator touches the launcher pod.
    return SimSettings(
        start_seconds=0.2, ready_seconds=0.3, job_backoff_seconds=0.1, bookmark_seconds=0.5
    )


class Run:
    """One `horovodrun` job and the files it leaves: the per-batch training log and the ssh
    sessions."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.train_log = root / "train.jsonl"
        self.ssh_log = root / "ssh.jsonl"
        self.output = root / "horovodrun.out"
        self.stop = root / "STOP"
        self.pods = root / "pods.log"
        self.proc: asyncio.subprocess.Process | None = None
        self.copier: asyncio.Task[None] | None = None

    @staticmethod
    def _lines(path: Path) -> list[dict[str, Any]]:
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def batches(self) -> list[dict[str, Any]]:
        return [r for r in self._lines(self.train_log) if r["event"] == "batch"]

    def sessions(self) -> list[dict[str, Any]]:
        return self._lines(self.ssh_log)

    def worlds(self, since: float) -> list[tuple[int, frozenset[str]]]:
        """(size, hosts) of every complete world that trained a batch after `since`, in order."""
        by_batch: dict[tuple[int, int], set[str]] = defaultdict(set)
        first: dict[tuple[int, int], float] = {}
        for r in self.batches():
            if r["t"] >= since:
                key = (r["batch"], r["size"])
                by_batch[key].add(r["host"])
                first.setdefault(key, r["t"])
        complete = [(first[k], k[1], frozenset(h)) for k, h in by_batch.items() if len(h) == k[1]]
        worlds: list[tuple[int, frozenset[str]]] = []
        for _, size, hosts in sorted(complete, key=lambda w: w[0]):
            if not worlds or worlds[-1] != (size, hosts):
                worlds.append((size, hosts))
        return worlds

    async def copy_output(self, proc: asyncio.subprocess.Process) -> None:
        """horovodrun's output with the wall time of each line (its own log lines carry none)."""
        assert proc.stdout is not None
        with self.output.open("w") as out:
            async for line in proc.stdout:
                out.write(f"{time.time():.2f} {line.decode(errors='replace')}")
                out.flush()

    def tail(self) -> str:
        """The end of horovodrun's output and the pod timeline, for failure messages."""
        text = self.output.read_text(errors="replace") if self.output.exists() else ""
        pods = self.pods.read_text() if self.pods.exists() else ""
        return "\n".join(
            ["horovodrun:", *text.splitlines()[-40:], "worker pods:", *pods.splitlines()[-20:]]
        )


@pytest_asyncio.fixture
async def run(tmp_path: Path) -> AsyncIterator[Run]:
    result = Run(tmp_path)
    try:
        yield result
    finally:
        # Leave nothing behind, even when an assertion stopped the test mid-job: horovodrun's group
        # and every worker the stand-in ssh started in a session of its own.
        if result.proc is not None and result.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(result.proc.pid, signal.SIGKILL)
            await result.proc.wait()
        if result.copier is not None:
            await result.copier
        for session in result.sessions():
            if "pgid" in session:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(session["pgid"], signal.SIGKILL)


@contextlib.contextmanager
def pod_timeline(sim: KubeSim, job: str, path: Path) -> Iterator[None]:
    """Writes each change of `job`'s worker pods (host name, phase, readiness, deletion) to `path`
    as kubesim commits it, so that a failure can be read against horovodrun's timestamped output."""
    pods = resource_type(sim.cluster, "v1", "Pod")
    seen: dict[str, str] = {}
    with path.open("w") as out:

        def record(
            event: EventType, rt: ResourceType, pod: dict[str, Any], _old: dict[str, Any] | None
        ) -> None:
            labels = pod["metadata"].get("labels") or {}
            if rt != pods or labels.get(JOB_LABEL) != job or labels.get(ROLE_LABEL) != "worker":
                return
            name = pod["metadata"]["name"]
            deleting = event == "DELETED" or bool(pod["metadata"].get("deletionTimestamp"))
            state = (
                f"{pod['spec'].get('hostname')} {(pod.get('status') or {}).get('phase')} "
                f"ready={is_ready(pod)} deleting={deleting}"
            )
            if seen.get(name) != state:
                seen[name] = state
                out.write(f"{time.time():.2f} {name} {state}\n")
                out.flush()

        sim.cluster.add_listener(record)
        try:
            yield
        finally:
            sim.cluster.remove_listener(record)


def fqdn(index: int, incarnation: int = 0) -> str:
    return host(JOB, index, incarnation)


TRAIN_COMMAND = [
    *("horovodrun", "-np", "2", "--min-np", "1", "--max-np", "3", "--network-interface", "eth0"),
    *("--host-discovery-script", "/etc/mpi/discover_hosts.sh", "--log-level", "INFO"),
    *("python", str(HERE / "hvd_train.py")),
]
"""A launcher command as a user writes it; `start_horovodrun` maps it onto this machine."""


async def start_horovodrun(
    run: Run, venv: Path, sim: KubeSim, launcher: str, command: list[str]
) -> None:
    """Runs a launcher container's `command` here: horovodrun and python from `venv`, `lo` for
    `eth0`, the kubesim-backed discovery script for /etc/mpi/discover_hosts.sh, /examples/ from this
    repository."""
    bin_dir = run.root / "bin"
    bin_dir.mkdir()
    python = venv / "bin" / "python"
    (bin_dir / "ssh").write_text(
        f'#!/bin/sh\nexec "{python}" "{HERE / "hvd_standin_ssh.py"}" "$@"\n'
    )
    discover = bin_dir / "discover_hosts"
    discover.write_text(f'#!/bin/sh\nexec "{python}" "{HERE / "hvd_discover.py"}"\n')
    for script in (bin_dir / "ssh", discover):
        script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "HOROVOD_", "PYTHON"))}
    env.update(
        PATH=f"{bin_dir}:{venv / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        HVD_KUBESIM_URL=sim.url,
        HVD_NAMESPACE=NS,
        HVD_LAUNCHER_POD=launcher,
        HVD_SSH_LOG=str(run.ssh_log),
        HVD_TRAIN_LOG=str(run.train_log),
        HVD_STOP=str(run.stop),
        OMP_NUM_THREADS="1",
    )
    local = {
        "horovodrun": str(venv / "bin" / "horovodrun"),
        "python": str(python),
        "eth0": "lo",
        "/etc/mpi/discover_hosts.sh": str(discover),
    }
    argv = [
        str(REPO / a.lstrip("/")) if a.startswith("/examples/") else local.get(a, a)
        for a in command
    ]
    run.proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=run.root,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    run.copier = asyncio.create_task(run.copy_output(run.proc))


async def wait_world(run: Run, sim: KubeSim, want: set[str], since: float, limit: float) -> float:
    """Waits until Horovod trains a batch with exactly the hosts `want`; returns when it first
    did."""

    async def check() -> float | None:
        assert run.proc is not None
        assert run.proc.returncode is None, (
            f"horovodrun exited {run.proc.returncode}:\n{run.tail()}"
        )
        worlds = run.worlds(since)
        assert (len(want), frozenset(want)) in worlds, f"worlds so far: {worlds}"
        return time.time()

    try:
        # Re-checked on every change of the cluster (the pods Horovod trains on) and once a second.
        return await eventually(
            check, sim=sim, what=f"Horovod to train with {sorted(want)}", within=limit
        )
    except BaseException:
        print(run.tail())
        raise


@pytest.mark.timeout(1500)
async def test_real_horovodrun_follows_kubectl_scale_and_a_replaced_worker(
    horovod_venv: Path,
    kube: Kube,
    kubesim: KubeSim,
    kubectl: Kubectl,
    http: aiohttp.ClientSession,
    operator: Manager,
    run: Run,
) -> None:
    manifest = elastic_job(JOB, workers=2, min_replicas=1, max_replicas=3, grace=GRACE_SECONDS)
    manifest["spec"]["elasticPolicy"]["settleSeconds"] = SETTLE_SECONDS
    await kube.create(resources.MPIJOB, manifest)
    await wait_condition(kube, JOB, "Running")
    pod = await launcher_pod(kube, JOB)
    assert pod is not None

    with pod_timeline(kubesim, JOB, run.pods):
        # 1. Start: horovodrun -np 2 forms a world of the two workers discovery lists.
        started = time.time()
        await start_horovodrun(run, horovod_venv, kubesim, pod["metadata"]["name"], TRAIN_COMMAND)
        await wait_world(run, kubesim, {fqdn(0), fqdn(1)}, started, limit=120)

        # 2. kubectl scale out: the third worker joins Horovod's world.
        t = time.time()
        rc, _, err = await kubectl("scale", f"mpijob.v2beta1.kubeflow.org/{JOB}", "--replicas=3")
        assert rc == 0, err
        grown = await wait_world(run, kubesim, {fqdn(0), fqdn(1), fqdn(2)}, t, limit=90)

        # 3. A worker's container dies: Horovod blacklists its host name, the operator replaces the
        #    pod under a fresh name (-r1), and the replacement rejoins Horovod's world.
        t = time.time()
        kubesim.controllers.kubelet.kill(NS, f"{JOB}-worker-1", exit_code=137)
        healed = await wait_world(run, kubesim, {fqdn(0), fqdn(1, 1), fqdn(2)}, t, limit=120)
        killed = [s for s in run.sessions() if s["event"] == "end" and s["host"] == fqdn(1)]
        assert killed, "no ended ssh session for the killed worker"
        assert killed[0]["killed"] == "container exited 137", killed
        assert f"blacklist failing host: {fqdn(1)}" in run.output.read_text(errors="replace"), (
            run.tail()
        )

        # 4. kubectl scale in to 1: both extra hosts leave discovery in one graceful change (a pure
        #    removal, coalesced); Horovod lets their workers go (exit 134) well before the pods are
        #    deleted.
        t = time.time()
        rc, _, err = await kubectl("scale", f"mpijob.v2beta1.kubeflow.org/{JOB}", "--replicas=1")
        assert rc == 0, err
        shrunk = await wait_world(run, kubesim, {fqdn(0)}, t, limit=120)
        worlds = run.worlds(t)
        assert [size for size, _ in worlds] == [3, 1], f"Horovod went through {worlds}"

        async def scaled_in() -> bool:
            return sorted(await worker_pods(kube, JOB)) == [f"{JOB}-worker-0"]

        await eventually(
            scaled_in,
            sim=kubesim,
            what="the scaled-in pods to be deleted after their grace",
            within=GRACE_SECONDS * 3,
        )

        # 5. Out and straight back in, the removal one second after the launcher's script listed the
        #    new host: unpaced, Horovod 0.28.1 loses a removal that lands while it resets for the
        #    addition and the host trains on. Paced (settleSeconds), the host is let go, not killed
        #    with its pod.
        t = time.time()
        rc, _, err = await kubectl("scale", f"mpijob.v2beta1.kubeflow.org/{JOB}", "--replicas=2")
        assert rc == 0, err

        async def listed_again() -> str | None:
            hosts = await mounted_hosts(kube, kubesim, http, JOB)
            return hosts[1][0] if hosts and len(hosts) == 2 else None

        rejoined = await eventually(
            listed_again,
            sim=kubesim,
            what="the launcher's script to list a second worker",
            within=30,
        )
        assert rejoined != fqdn(1), "index 1 came back under the host name Horovod blacklisted"
        await asyncio.sleep(
            1.0
        )  # the scenario's timing (a removal inside settleSeconds), not a wait
        rc, _, err = await kubectl("scale", f"mpijob.v2beta1.kubeflow.org/{JOB}", "--replicas=1")
        assert rc == 0, err
        limit = SETTLE_SECONDS + GRACE_SECONDS * 3
        await eventually(
            scaled_in, sim=kubesim, what="the second scale-in's pod to be deleted", within=limit
        )
        assert run.worlds(t)[-1] == (1, frozenset({fqdn(0)})), run.worlds(t)

        # 6. Stop training: every rank returns together and horovodrun exits 0.
        run.stop.touch()
        assert run.proc is not None
        async with asyncio.timeout(60):
            assert await run.proc.wait() == 0, run.tail()

    ends = {s["host"]: s for s in run.sessions() if s["event"] == "end"}
    for leaver in (fqdn(2), fqdn(1, 1), rejoined):
        assert ends[leaver]["killed"] is None, (
            f"{leaver} was killed by its pod's deletion: {ends[leaver]}"
        )
        assert ends[leaver]["exit"] == 134, (
            f"{leaver} did not leave as a removed host: {ends[leaver]}"
        )
    cluster_killed = [s for s in ends.values() if s["killed"] == "pod deleted"]
    assert not cluster_killed, f"workers killed before Horovod let them go: {cluster_killed}"
    timeline = {"grown": grown - started, "healed": healed - started, "shrunk": shrunk - started}
    print(f"timeline (s since horovodrun started): {timeline}")


EXAMPLE = REPO / "examples" / "elastic" / "pytorch-synthetic-elastic.yaml"


async def wait_output(run: Run, sim: KubeSim, text: str, since: float, limit: float) -> None:
    """Waits until a line of horovodrun's output written after `since` contains `text`."""

    async def check() -> bool:
        assert run.proc is not None
        assert run.proc.returncode is None, (
            f"horovodrun exited {run.proc.returncode}:\n{run.tail()}"
        )
        lines = run.output.read_text(errors="replace").splitlines() if run.output.exists() else []
        return any(text in line and float(line.split(" ", 1)[0]) >= since for line in lines)

    try:
        await eventually(check, sim=sim, what=f"horovodrun to print {text!r}", within=limit)
    except BaseException:
        print(run.tail())
        raise


@pytest.mark.timeout(1500)
async def test_the_pytorch_example_trains_elastically_under_real_horovodrun(
    horovod_venv: Path, kube: Kube, kubesim: KubeSim, kubectl: Kubectl, operator: Manager, run: Run
) -> None:
    """examples/elastic/pytorch-synthetic-elastic.yaml as shipped (2 slots per worker), its launcher
    command taken from the pod the operator created, its script run with `--model tiny` (no
    torchvision here)."""
    manifest = yaml.safe_load(EXAMPLE.read_text())
    name = manifest["metadata"]["name"]
    await kube.create(resources.MPIJOB, manifest, namespace=NS)
    await wait_condition(kube, name, "Running")
    pod = await launcher_pod(kube, name)
    assert pod is not None
    container = pod["spec"]["containers"][0]
    command = [*container["command"], *container.get("args", [])]
    assert "/etc/mpi/discover_hosts.sh" in command, command
    tiny = ["--model", "tiny", "--iterations", "1000000", "--batches-per-iteration", "5"]
    tiny += ["--image-size", "32"]

    with pod_timeline(kubesim, name, run.pods):
        t = time.time()
        await start_horovodrun(
            run, horovod_venv, kubesim, pod["metadata"]["name"], [*command, *tiny]
        )
        await wait_output(run, kubesim, "on 4 processes", t, limit=120)
        for replicas, processes in ((3, 6), (1, 2)):
            t = time.time()
            resource = f"mpijob.v2beta1.kubeflow.org/{name}"
            rc, _, err = await kubectl("scale", resource, f"--replicas={replicas}")
            assert rc == 0, err
            await wait_output(run, kubesim, f"on {processes} processes", t, limit=120)

    sessions = run.sessions()
    hosts = {s["host"] for s in sessions if s["event"] == "start"}
    assert hosts == {host(name, i) for i in range(3)}, hosts
    killed = [s for s in sessions if s["event"] == "end" and s["killed"]]
    assert not killed, f"workers killed by the cluster: {killed}"
