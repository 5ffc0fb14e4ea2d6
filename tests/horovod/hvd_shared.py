"""The shared-cluster scenarios' cluster, jobs and readings (a helper module, not a test module).

A 3-node kubesim (2 `nvidia.com/gpu` each) in the process runtime; a low-priority elastic job of the
PyTorch example (`--model tiny`, one GPU and one slot per worker, 2..6 workers) and a high-priority
static job of the same example. Horovod's world is read where it lives: rank 0 prints `on N
processes` per iteration, and the ranks run in the worker pods' containers (`pgrep`); with
`--log-level INFO` the driver logs `reset workers: N` as it forms each world and `start worker
process: HOST[SLOT]` as it starts a rank on a host.
"""

from __future__ import annotations

import re
import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from kubesim.app import KubeSim
from kubesim.nodes import NodeShape
from kubesim.procrt import logs
from kubesim.procrt.sandbox import SandboxError

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "elastic" / "pytorch-synthetic-elastic.yaml"
NS = "default"
NODES = tuple(
    NodeShape(
        f"kubesim-{i}",
        allocatable={"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2", "pods": "110"},
    )
    for i in (1, 2, 3)
)
ELASTIC = "elastic"
STATIC = "urgent"
MIN, MAX = 2, 6
LOW, HIGH = "batch-low", "prod-high"
TINY = ["--no-cuda", "--model", "tiny", "--batches-per-iteration", "5", "--image-size", "32"]
JOB_LABEL = "training.kubeflow.org/job-name"
ROLE_LABEL = "training.kubeflow.org/job-role"

RESET = re.compile(r"reset workers: (\d+)")
RANK = re.compile(r"_get_rank_and_size: (\S+) (\d+)")
TRAINED = re.compile(r"on (\d+) processes")
STARTED = re.compile(r"start worker process: (\S+)\[\d+\]")


def _job(name: str, priority: str, workers: int, launcher_command: list[str]) -> dict[str, Any]:
    """The shipped example with one GPU and one slot per worker and the pods at `priority`."""
    job: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    job["metadata"]["name"] = name
    spec = job["spec"]
    spec["slotsPerWorker"] = 1
    spec["runPolicy"] = {"cleanPodPolicy": "Running", "backoffLimit": 0}
    for role in ("Launcher", "Worker"):
        spec["mpiReplicaSpecs"][role]["template"]["spec"]["priorityClassName"] = priority
    launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    launcher["command"], launcher["args"] = launcher_command, []
    worker = spec["mpiReplicaSpecs"]["Worker"]
    worker["replicas"] = workers
    container = worker["template"]["spec"]["containers"][0]
    container["resources"]["limits"]["nvidia.com/gpu"] = 1
    return job


def elastic_job() -> dict[str, Any]:
    """Low priority, 2..6 workers, asking for 6: it fills the cluster's GPUs. `maxReplacements: 0`:
    every loss in these scenarios is a disruption, none a failing program, so none may use the
    budget. The short `unreachable` toleration is how a user has workers of a dead node replaced
    in seconds rather than the default five minutes."""
    command = [
        *("horovodrun", "-np", str(MIN), "--min-np", str(MIN), "--max-np", str(MAX)),
        # A survivor's rank may fail in a reset on a loaded machine; the cooldown lets it return.
        *("--blacklist-cooldown-range", "5", "10", "--log-level", "INFO"),
        *("--host-discovery-script", "/etc/mpi/discover_hosts.sh", "--network-interface", "eth0"),
        *("python", "/examples/elastic/pytorch_synthetic_elastic.py", *TINY),
        *("--iterations", "1000000"),
    ]
    job = _job(ELASTIC, LOW, MAX, command)
    # Horovod 0.28.1 loses a host addition that lands while it resets for the previous change (its
    # driver has no coordinator to notify yet): the pace must outlast a reset on a loaded machine.
    job["spec"]["elasticPolicy"] = {
        "minReplicas": MIN,
        "maxReplicas": MAX,
        "maxReplacements": 0,
        "settleSeconds": 20,
    }
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    worker["tolerations"] = [
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 10,
        }
    ]
    return job


GO = "/tmp/go"
"""The static job's launcher starts training once a test creates this file in it."""


def static_job(workers: int = 2) -> dict[str, Any]:
    """High priority, static: once `GO` exists, `horovodrun -np 2` over the hostfile, a few
    iterations, then done. Until then its workers hold their GPUs, so a test sees the elastic job
    shrink before the GPUs come back, however slowly Horovod resets on a loaded machine."""
    horovodrun = [
        *("horovodrun", "-np", str(workers), "--hostfile", "/etc/mpi/hostfile"),
        *("--network-interface", "eth0"),
        *("python", "/examples/elastic/pytorch_synthetic_elastic.py", *TINY),
        *("--iterations", "3"),
    ]
    wait = f"until [ -e {GO} ]; do sleep 0.2; done; exec {shlex.join(horovodrun)}"
    return _job(STATIC, HIGH, workers, ["sh", "-c", wait])


def fqdn(hostname: str, job: str = ELASTIC) -> str:
    """The name `discover_hosts.sh` lists for a worker pod's `spec.hostname`."""
    return f"{hostname}.{job}.{NS}.svc"


def pods(sim: KubeSim, job: str, role: str) -> list[dict[str, Any]]:
    rt = sim.cluster.registry.by_kind("v1", "Pod")
    assert rt is not None
    selector = f"{JOB_LABEL}={job},{ROLE_LABEL}={role}"
    return list(sim.cluster.list(rt, NS, label_selector=selector)["items"])


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def disruption(pod: dict[str, Any]) -> str | None:
    """The reason of the pod's `DisruptionTarget=True` condition, if it has one."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c["type"] == "DisruptionTarget" and c["status"] == "True":
            return str(c.get("reason"))
    return None


def mpijob(sim: KubeSim, name: str) -> dict[str, Any]:
    rt = sim.cluster.registry.by_kind("kubeflow.org/v2beta1", "MPIJob")
    assert rt is not None
    return sim.cluster.get(rt, NS, name)


def condition(job: dict[str, Any], kind: str) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)


def job_events(sim: KubeSim, name: str) -> list[dict[str, Any]]:
    rt = sim.cluster.registry.by_kind("v1", "Event")
    assert rt is not None
    return [
        e
        for e in sim.cluster.list(rt, NS)["items"]
        if e["involvedObject"].get("kind") == "MPIJob" and e["involvedObject"]["name"] == name
    ]


def output_lines(
    sim: KubeSim, job: str = ELASTIC, *, timed: bool = False, role: str = "launcher"
) -> list[str]:
    """Every output line of the containers of `job`'s pods of `role` (its launcher unless told),
    every run, in order (`timed`: each prefixed with the time the kubelet logged it)."""
    kubelet = sim.controllers.kubelet
    assert kubelet is not None
    found: list[tuple[datetime, str]] = []
    for pod in pods(sim, job, role):
        base = kubelet.log_dir(NS, pod["metadata"]["name"], pod["metadata"]["uid"])  # type: ignore[attr-defined]
        if base is None:
            continue
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            for run in range(int(status.get("restartCount") or 0) + 1):
                path = base / status["name"] / f"{run}.log"
                text = path.read_text(errors="replace") if path.exists() else ""
                for line in text.splitlines():
                    parsed = logs.parse(line)
                    if parsed is not None:
                        found.append((parsed[0], parsed[3]))
    found.sort(key=lambda t: t[0])
    return [f"{t:%H:%M:%S.%f} {text}" if timed else text for t, text in found]


def current_size(lines: list[str]) -> int | None:
    """The world size rank 0 last printed after the driver's last reset in `lines`: the world
    Horovod trains in now (None before its first iteration)."""
    size = None
    for line in lines:
        if RESET.search(line):
            size = None
        elif m := TRAINED.search(line):
            size = int(m[1])
    return size


def started(lines: list[str]) -> list[str]:
    """The hosts Horovod's driver started a rank on in `lines`, in order."""
    return [m[1] for line in lines if (m := STARTED.search(line))]


def describe(pod: dict[str, Any]) -> str:
    """A worker pod in one line of a failure message."""
    meta, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
    return (
        f"{meta['name']} host={spec.get('hostname')} node={spec.get('nodeName')} "
        f"ip={status.get('podIP')} {status.get('phase')} ready={is_ready(pod)} "
        f"deleting={bool(meta.get('deletionTimestamp'))} disruption={disruption(pod)}"
    )


async def in_worker(sim: KubeSim, pod: dict[str, Any], argv: list[str]) -> tuple[int, bytes] | None:
    """`argv` run in `pod`'s worker container as the kubelet's exec runs it (10 s at most); None
    when that container does not run (not started, or the kubelet holds an older pod of the
    name)."""
    kubelet = sim.controllers.kubelet
    assert kubelet is not None
    worker = kubelet._workers.get((NS, pod["metadata"]["name"]))  # type: ignore[attr-defined]
    run = worker.runs.get("worker") if worker is not None else None
    if run is None or pod["metadata"]["uid"] != worker.pod["metadata"]["uid"]:
        return None
    try:
        return await run.exec(argv, 10)  # type: ignore[no-any-return]
    except SandboxError:
        return None


async def rank_hosts(sim: KubeSim, job: str = ELASTIC) -> set[str]:
    """The hosts (FQDN) of the worker pods in whose container a rank of the example runs now."""
    found = set()
    for pod in pods(sim, job, "worker"):
        ran = await in_worker(sim, pod, ["pgrep", "-f", "pytorch_synthetic_elastic.py"])
        if ran is not None and ran[0] == 0:
            found.add(fqdn(pod["spec"]["hostname"], job))
    return found


def now() -> datetime:
    return datetime.now(UTC)
