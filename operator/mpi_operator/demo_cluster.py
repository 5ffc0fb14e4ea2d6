"""`mpi-operator demo --scene shared-cluster`: an elastic job on 3 nodes with 2 GPUs each.

A low-priority elastic job fills the six GPUs; a high-priority static job preempts two of its
workers, whose replacements wait Pending while it trains on fewer hosts; the static job succeeds and
the elastic job grows back. A drain of two nodes through the Eviction API stops at the job's
PodDisruptionBudget (minReplicas); the nodes are uncordoned and it grows back. A node dies: its
workers leave discovery, the taint manager deletes them, and they are replaced once it is back.
Each step shows the GPUs per node and job, the hosts the launcher's mounted discover_hosts.sh
lists, and the events of the scheduler and the operator. Steps, waits and timeline are `demo`'s.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

import aiohttp
import yaml

from kubesim.app import KubeSim
from kubesim.nodes import NodeShape
from kubesim.settings import SimSettings
from mpi_operator.api import constants as c
from mpi_operator.demo import (
    EXAMPLE,
    NAMESPACE,
    POD_TIMING,
    WIDTH,
    DemoFailed,
    Stage,
    Timeline,
    annotate_pods,
    launcher_hosts,
    run_scene,
    wait,
)
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.kube.errors import NotFound
from mpi_operator.objects import is_pod_ready

GPU = "nvidia.com/gpu"
NODE_NAMES = ("kubesim-1", "kubesim-2", "kubesim-3")
GPUS_PER_NODE = 2
ELASTIC, URGENT = "elastic", "urgent"
LETTERS = {ELASTIC: "E", URGENT: "U"}
LOW, HIGH = "batch-low", "prod-high"
MIN, MAX = 3, 6
URGENT_WORKERS = 2
URGENT_RUN_SECONDS = 6
"""How long the urgent job's launcher runs in kubesim before it exits 0."""
GRACE_SECONDS = 1
"""The pods' terminationGracePeriodSeconds (Kubernetes' default: 30)."""
SETTLE_SECONDS = 2
NODE_MONITOR_GRACE_SECONDS = 2.0
"""How long a dead node's kubelet is silent before the node is NotReady (kubernetes: 40 s)."""
UNREACHABLE_TOLERATION_SECONDS = 2
"""How long the elastic workers stay on a NotReady node (Kubernetes' default toleration: 300 s)."""
STEP_TIMEOUT_SECONDS = 60.0
"""A step's deadline: a step waits for the urgent job's run, a drain or a dead node."""
DRAIN_RETRY_SECONDS = 1.0
"""How often the drain retries a refused eviction (kubectl drain: every 5 s)."""
PRIORITY_CLASSES = resources.Resource(
    "scheduling.k8s.io", "v1", "priorityclasses", False, "PriorityClass"
)
NODES = resources.Resource("", "v1", "nodes", False, "Node")
Check = Callable[[], Awaitable[str | None]]
SUMMARIZED_REASONS = frozenset({"WorkersPending", "FailedScheduling"})
SHOWN_REASONS = SUMMARIZED_REASONS | {"Preempted", "WorkerDisrupted"}


def _job(name: str, priority: str, workers: int, command: list[str]) -> dict[str, Any]:
    """The elastic example as `name`: one GPU per worker, its pods at `priority`, kubesim's quick
    pod timing and a 1 s termination grace."""
    job: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    job["metadata"]["name"] = name
    spec = job["spec"]
    spec["runPolicy"]["schedulingPolicy"] = {"priorityClass": priority}
    spec["mpiReplicaSpecs"]["Worker"]["replicas"] = workers
    for role in ("Launcher", "Worker"):
        annotate_pods(job, role, POD_TIMING)
        spec["mpiReplicaSpecs"][role]["template"]["spec"]["terminationGracePeriodSeconds"] = (
            GRACE_SECONDS
        )
    spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"] = command
    worker = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["resources"]["limits"][GPU] = 1
    return job


def elastic_job() -> dict[str, Any]:
    """Low priority, MIN..MAX workers, asking for MAX: it fills the cluster's GPUs."""
    command = [
        *("horovodrun", "-np", str(MAX), "--min-np", str(MIN), "--max-np", str(MAX)),
        *("--host-discovery-script", "/etc/mpi/discover_hosts.sh", "--network-interface", "eth0"),
        *("python", "/horovod/examples/elastic/tensorflow2/tensorflow2_mnist_elastic.py"),
    ]
    job = _job(ELASTIC, LOW, MAX, command)
    job["spec"]["elasticPolicy"].update(
        minReplicas=MIN, maxReplicas=MAX, settleSeconds=SETTLE_SECONDS
    )
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["tolerations"] = [
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": UNREACHABLE_TOLERATION_SECONDS,
        }
    ]
    return job


def urgent_job() -> dict[str, Any]:
    """High priority and static: its launcher runs URGENT_RUN_SECONDS, then the job succeeds."""
    command = [
        *("horovodrun", "-np", str(URGENT_WORKERS), "--hostfile", "/etc/mpi/hostfile"),
        *("python", "/horovod/examples/elastic/tensorflow2/tensorflow2_mnist_elastic.py"),
    ]
    job = _job(URGENT, HIGH, URGENT_WORKERS, command)
    del job["spec"]["elasticPolicy"]
    annotate_pods(job, "Launcher", {"kubesim/run-seconds": str(URGENT_RUN_SECONDS)})
    return job


def sim_settings() -> SimSettings:
    allocatable = {"cpu": "16", "memory": "64Gi", GPU: str(GPUS_PER_NODE), "pods": "110"}
    nodes = tuple(NodeShape(name, allocatable=allocatable) for name in NODE_NAMES)
    return SimSettings(
        start_seconds=0.3,
        ready_seconds=0.5,
        nodes=nodes,
        node_monitor_grace_seconds=NODE_MONITOR_GRACE_SECONDS,
    )


def _job_of(pod: dict[str, Any]) -> str:
    return str((pod["metadata"].get("labels") or {}).get(c.LABEL_JOB_NAME, ""))


def _is_worker(pod: dict[str, Any], job: str) -> bool:
    labels = pod["metadata"].get("labels") or {}
    return labels.get(c.LABEL_JOB_NAME) == job and labels.get(c.LABEL_JOB_ROLE) == c.ROLE_WORKER


def _gpus(pod: dict[str, Any]) -> int:
    return sum(
        int(((ctr.get("resources") or {}).get("limits") or {}).get(GPU, 0))
        for ctr in pod["spec"]["containers"]
    )


def _running(pod: dict[str, Any]) -> bool:
    """Bound and not finished: the pod holds its node's resources."""
    phase = (pod.get("status") or {}).get("phase")
    return bool(pod["spec"].get("nodeName")) and phase not in ("Succeeded", "Failed")


class SharedCluster(Stage):
    """The scene's steps, and what each shows."""

    def __init__(
        self, sim: KubeSim, kube: Kube, http: aiohttp.ClientSession, timeline: Timeline
    ) -> None:
        super().__init__(sim, kube, http, timeline)
        self.seen_events: set[str] = set()
        self.seen_losses: set[str] = set()
        self.refused: dict[str, str] = {}
        """Pods whose eviction the drain was refused -> the API server's message."""

    def legend(self, out: TextIO) -> None:
        paragraphs = [
            f"Scene shared-cluster: 3 nodes with {GPUS_PER_NODE} GPUs each; a low-priority "
            f"elastic job ({MIN}..{MAX} workers, one GPU each) and a high-priority static job "
            f"({URGENT_WORKERS} workers). To finish in seconds: pods start at once, "
            f"terminationGracePeriodSeconds is {GRACE_SECONDS}s (default 30s), discovery settles "
            f"for {SETTLE_SECONDS}s, the urgent job's launcher runs {URGENT_RUN_SECONDS}s, the "
            f"drain retries every {DRAIN_RETRY_SECONDS:.0f}s (kubectl drain: 5s), a dead node is "
            f"NotReady after {NODE_MONITOR_GRACE_SECONDS:.0f}s (default 40s) and the workers "
            f"tolerate that for {UNREACHABLE_TOLERATION_SECONDS}s (default 300s).",
            "nodes: GPUs per node, E elastic, U urgent, lower case while terminating, . free.",
            "hosts: what discover_hosts.sh prints in the elastic launcher (worker-2-r1 stands for "
            f"{ELASTIC}-worker-2-r1.{ELASTIC}.{NAMESPACE}.svc, the replacement of worker-2, one "
            "slot each).",
            "lost: the hosts the elastic job lost since the step before, by kind and reason "
            "(status.elastic.losses; a Disruption is not counted against maxReplacements).",
            "event: the scheduler's and the operator's events (client-go's spam filter holds "
            "back an object's events past 25 in 5 minutes).",
            '"… until": the step being waited for, then what the cluster shows now.',
        ]
        lines = (textwrap.fill(text, WIDTH, break_on_hyphens=False) for text in paragraphs)
        out.write("".join(f"{line}\n" for line in lines) + "\n")

    async def pods(self) -> list[dict[str, Any]]:
        pods, _ = await self.kube.list(resources.POD, NAMESPACE)
        return sorted(pods, key=lambda p: p["metadata"]["name"])

    async def picture(self) -> str:
        """`kubesim-1 [EU]  kubesim-2 [E.] cordoned ...  2 elastic Pending`: each node's GPUs."""
        pods = await self.pods()
        nodes, _ = await self.kube.list(NODES)
        parts = []
        for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
            name = node["metadata"]["name"]
            used = ""
            for pod in pods:
                if pod["spec"].get("nodeName") == name and _running(pod):
                    letter = LETTERS.get(_job_of(pod), "?")
                    if pod["metadata"].get("deletionTimestamp"):
                        letter = letter.lower()
                    used += letter * _gpus(pod)
            gpus = int(node["status"]["allocatable"].get(GPU, 0))
            marks = " cordoned" if node["spec"].get("unschedulable") else ""
            marks += "" if _condition(node, "Ready") else " NotReady"
            parts.append(f"{name} [{used.ljust(gpus, '.')}]{marks}")
        pending = [p for p in pods if _is_worker(p, ELASTIC) and not p["spec"].get("nodeName")]
        if pending:
            parts.append(f"{len(pending)} elastic Pending")
        return "  ".join(parts)

    async def hosts(self) -> list[str]:
        """The hosts the elastic launcher lists, short."""
        listed = await launcher_hosts(self.sim, self.kube, self.http, ELASTIC) or []
        return [_short(h) for h in listed]

    async def show(self, step: str) -> None:
        """The step's row: the nodes, the hosts, then the events it brought."""
        self.timeline.step(step)
        self.timeline.detail("nodes", await self.picture())
        self.timeline.detail("hosts", " ".join(await self.hosts()) or "(none)")
        losses = [loss for loss in await self.losses() if loss["host"] not in self.seen_losses]
        self.seen_losses.update(loss["host"] for loss in losses)
        for kind, reason in sorted({(loss["kind"], loss["reason"]) for loss in losses}):
            hosts = [
                _short(x["host"]) for x in losses if (x["kind"], x["reason"]) == (kind, reason)
            ]
            self.timeline.detail("lost", f"{kind} ({reason}): {' '.join(hosts)}")
        for event in await self.new_events():
            what = event["involvedObject"]
            self.timeline.detail(
                "event",
                f"{event['reason']} {what['kind'].lower()}/{what['name']}: {event['message']}",
            )
        for pod, message in sorted(self.refused.items()):
            self.timeline.detail("drain", f"{pod}: {message}")

    async def new_events(self) -> list[dict[str, Any]]:
        """The shown events recorded since the last step, oldest first. The scheduler and the
        operator repeat FailedScheduling and WorkersPending as the count of Pending workers
        changes: of those, each job's last says it all."""
        events, _ = await self.kube.list(resources.EVENT, NAMESPACE)
        fresh = [
            e
            for e in sorted(events, key=lambda e: str(e.get("lastTimestamp") or ""))
            if e["metadata"]["uid"] not in self.seen_events and e.get("reason") in SHOWN_REASONS
        ]
        self.seen_events.update(e["metadata"]["uid"] for e in fresh)
        last: dict[tuple[str, str], str] = {}
        for event in fresh:
            if event["reason"] in SUMMARIZED_REASONS:
                job = event["involvedObject"]["name"].split("-worker-", 1)[0]
                last[(event["reason"], job)] = event["metadata"]["uid"]
        return [
            e
            for e in fresh
            if e["reason"] not in SUMMARIZED_REASONS or e["metadata"]["uid"] in last.values()
        ]

    async def until(self, step: str, check: Check) -> None:
        await wait(step, check, self.timeline, STEP_TIMEOUT_SECONDS)
        await self.show(step)

    async def elastic_state(self, pods: list[dict[str, Any]]) -> tuple[int, int, int]:
        """The elastic job's Ready workers among `pods`, its Pending ones, and the hosts its
        launcher lists."""
        workers = [p for p in pods if _is_worker(p, ELASTIC)]
        ready = sum(1 for p in workers if is_pod_ready(p))
        pending = sum(1 for p in workers if not p["spec"].get("nodeName"))
        return ready, pending, len(await self.hosts())

    async def run(self) -> None:
        for name, value in ((LOW, 100), (HIGH, 1000)):
            body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass"}
            await self.kube.create(
                PRIORITY_CLASSES, {**body, "metadata": {"name": name}, "value": value}
            )
        await self.kube.create(resources.MPIJOB, elastic_job(), NAMESPACE)
        self.timeline.step(f"submitted {ELASTIC} ({LOW}, {MIN}..{MAX} workers, 1 GPU each)")
        await self.until(f"{ELASTIC} fills the {MAX} GPUs", self.elastic_at(MAX))

        await self.kube.create(resources.MPIJOB, urgent_job(), NAMESPACE)
        self.timeline.step(f"submitted {URGENT} ({HIGH}, {URGENT_WORKERS} workers, 1 GPU each)")
        shrunk = MAX - URGENT_WORKERS
        await self.until(
            f"{URGENT} preempts {URGENT_WORKERS}; {ELASTIC} trains on {shrunk}",
            self.elastic_at(
                shrunk,
                pending=URGENT_WORKERS,
                urgent_ready=URGENT_WORKERS,
                disruptions=URGENT_WORKERS,
            ),
        )
        await self.until(
            f"{URGENT} succeeded; {ELASTIC} back to {MAX}",
            self.elastic_at(MAX, urgent_done=True),
        )

        nodes = await self.nodes_without_launcher()
        self.timeline.step(f"kubectl drain {' '.join(nodes)}: cordon, then evict their pods")
        await self.cordon(nodes, True)
        await self.until(f"the drain stops at the budget: {MIN} = minReplicas", self.drain(nodes))
        self.refused.clear()

        self.timeline.step(f"kubectl uncordon {' '.join(nodes)} (the drain given up)")
        await self.cordon(nodes, False)
        await self.until(f"{ELASTIC} back to {MAX} on the uncordoned nodes", self.elastic_at(MAX))

        dead = (await self.nodes_without_launcher())[0]
        self.timeline.step(f"{dead} dies: its kubelet stops and its containers are gone")
        await self.power(dead, "down")
        await self.until(
            f"{dead} NotReady, its workers deleted; {ELASTIC} trains on {MAX - GPUS_PER_NODE}",
            self.elastic_at(
                MAX - GPUS_PER_NODE,
                terminating=GPUS_PER_NODE,
                disruptions=URGENT_WORKERS + MAX - MIN + GPUS_PER_NODE,
            ),
        )
        self.timeline.step(f"{dead} back up: its kubelet finishes the deletes")
        await self.power(dead, "up")
        await self.until(f"{ELASTIC} back to {MAX}", self.elastic_at(MAX))

    def elastic_at(
        self,
        hosts: int,
        *,
        pending: int = 0,
        terminating: int = 0,
        disruptions: int | None = None,
        urgent_ready: int = 0,
        urgent_done: bool = False,
    ) -> Check:
        """A check: the elastic launcher lists `hosts`, `pending` elastic workers are unscheduled
        and `terminating` are being deleted, the job has counted `disruptions` (when given),
        `urgent_ready` urgent workers are Ready and, with `urgent_done`, the urgent job succeeded
        and its workers are gone. At MAX the job's budget must allow MAX - MIN evictions."""

        async def check() -> str | None:
            pods = await self.pods()
            ready, waiting, listed = await self.elastic_state(pods)
            urgent = [p for p in pods if _is_worker(p, URGENT)]
            urgent_up = sum(1 for p in urgent if is_pod_ready(p))
            deleting = sum(
                1 for p in pods if _is_worker(p, ELASTIC) and p["metadata"].get("deletionTimestamp")
            )
            seen = f"{ELASTIC} {ready} ready, {waiting} Pending, {deleting} Terminating, "
            seen += f"{listed} hosts"
            if urgent:
                seen += f"; {URGENT} {urgent_up}/{len(urgent)} ready"
            done = True
            if urgent_done:
                job = await self.kube.get(resources.MPIJOB, URGENT, NAMESPACE)
                done = _condition(job, "Succeeded") and not any(_running(p) for p in urgent)
                seen += f"; {URGENT} {'succeeded' if done else 'not done'}"
            budget_ok = True
            if hosts == MAX:
                allowed = await self.disruptions_allowed()
                budget_ok = allowed == MAX - MIN
                seen += "; no budget yet" if allowed is None else f"; budget allows {allowed}"
            counted = disruptions
            if disruptions is not None:
                counted = await self.disruptions()
                seen += f"; {counted} disruptions"
            want = (hosts, pending, urgent_ready, terminating, disruptions)
            got = (listed, waiting, urgent_up, deleting, counted)
            if got == want and done and budget_ok:
                return None
            return seen

        return check

    async def power(self, node: str, state: str) -> None:
        """kubesim's node fault: `down` stops the node's kubelet, `up` starts it again."""
        async with self.http.post(f"{self.sim.url}/kubesim/v1/nodes/{node}/{state}") as response:
            if response.status >= 300:
                raise DemoFailed(f"node {node} {state}: {response.status} {await response.text()}")

    async def elastic_status(self) -> dict[str, Any]:
        job = await self.kube.get(resources.MPIJOB, ELASTIC, NAMESPACE)
        return dict((job.get("status") or {}).get("elastic") or {})

    async def disruptions(self) -> int:
        """The elastic job's `status.elastic.disruptions`: the lost workers it has replaced."""
        return int((await self.elastic_status()).get("disruptions", 0))

    async def losses(self) -> list[dict[str, Any]]:
        """The elastic job's `status.elastic.losses`: its last lost workers, and why."""
        return list((await self.elastic_status()).get("losses") or [])

    async def disruptions_allowed(self) -> int | None:
        try:
            pdb = await self.kube.get(
                resources.POD_DISRUPTION_BUDGET, f"{ELASTIC}-workers", NAMESPACE
            )
        except NotFound:
            return None
        return int((pdb.get("status") or {}).get("disruptionsAllowed", 0))

    async def nodes_without_launcher(self) -> list[str]:
        selector = f"{c.LABEL_JOB_NAME}={ELASTIC},{c.LABEL_JOB_ROLE}={c.ROLE_LAUNCHER}"
        pods, _ = await self.kube.list(resources.POD, NAMESPACE, label_selector=selector)
        taken = {p["spec"].get("nodeName") for p in pods}
        return [name for name in NODE_NAMES if name not in taken][:2]

    async def cordon(self, nodes: list[str], unschedulable: bool) -> None:
        for node in nodes:
            await self.kube.patch(NODES, node, {"spec": {"unschedulable": unschedulable or None}})

    def drain(self, nodes: list[str]) -> Check:
        """A check that evicts the pods left on `nodes`, as `kubectl drain` does, retrying refused
        ones every DRAIN_RETRY_SECONDS; done when the elastic job is down to MIN hosts and the
        budget has refused the rest."""
        last_try = -DRAIN_RETRY_SECONDS

        async def check() -> str | None:
            nonlocal last_try
            now = asyncio.get_running_loop().time()
            if now - last_try >= DRAIN_RETRY_SECONDS:
                last_try = now
                for pod in await self.pods():
                    on_node = pod["spec"].get("nodeName") in nodes and _running(pod)
                    if on_node and not pod["metadata"].get("deletionTimestamp"):
                        await self.evict(pod["metadata"]["name"])
            ready, waiting, listed = await self.elastic_state(await self.pods())
            counted = await self.disruptions()
            if listed == ready == MIN and self.refused and counted == URGENT_WORKERS + MAX - MIN:
                return None
            return (
                f"{ELASTIC} {ready} ready, {waiting} Pending, {listed} hosts; {counted} disruptions"
            )

        return check

    async def evict(self, pod: str) -> None:
        """POSTs an Eviction for `pod`; a refusal is kept to show, as kubectl drain prints it."""
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod, "namespace": NAMESPACE},
        }
        url = f"{self.sim.url}/api/v1/namespaces/{NAMESPACE}/pods/{pod}/eviction"
        async with self.http.post(url, json=body) as response:
            if response.status == 429:
                self.refused[pod] = str((await response.json()).get("message"))
            elif response.status >= 300:
                raise DemoFailed(f"evicting {pod}: {response.status} {await response.text()}")
            else:
                self.refused.pop(pod, None)


def _short(host: str) -> str:
    """`elastic-worker-2-r1.elastic.default.svc:1` as `worker-2-r1`."""
    return host.split(".", 1)[0].removeprefix(f"{ELASTIC}-")


def _condition(obj: dict[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(cond["type"] == kind and cond["status"] == "True" for cond in conditions)


def main() -> int:
    return asyncio.run(run_scene(sys.stdout, sim_settings(), SharedCluster))
