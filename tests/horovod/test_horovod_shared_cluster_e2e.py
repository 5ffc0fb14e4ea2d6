"""Elastic Horovod on a shared, finite cluster, with the real Horovod in kubesim's process runtime.

Three nodes with 2 GPUs each (`hvd_shared.py`). A low-priority elastic job of the PyTorch example
(one GPU per worker, 2..6 workers) fills the six GPUs; then, in turn, three disruptions each take
two of its workers: a high-priority static job preempts them; `kubectl drain` evicts a node's two;
a node dies (kubesim's node down) and the taint manager deletes its two. Each time the job must
shrink to its survivors without failing and keep training (Horovod's world: rank 0's size and
the pods its ranks run in), replace the lost workers under names Horovod never saw without using
`maxReplacements` (0 here), keep its one launcher, and grow back to six once the GPUs are free:
the urgent job done, the node uncordoned, the node back up. One cluster for the three acts saves
two starts of the job: CI's budget for this test is five minutes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import hvd_image
import pytest
from hvd_shared import (
    ELASTIC,
    GO,
    HIGH,
    LOW,
    MAX,
    MIN,
    NODES,
    STATIC,
    condition,
    current_size,
    describe,
    disruption,
    elastic_job,
    fqdn,
    is_ready,
    job_events,
    mpijob,
    output_lines,
    pods,
    rank_hosts,
    started,
    static_job,
)

from kubesim.app import KubeSim
from kubesim.cluster import EventType
from kubesim.controllers import resource_type
from kubesim.registry import ResourceType
from kubesim.settings import SimSettings
from kubesim.testing import Kubectl, eventually
from operator_testing import operator_process

REPO = Path(__file__).resolve().parents[2]
CRD = REPO / "crds" / "kubeflow.org_mpijobs.yaml"
RESOURCE = "mpijob.v2beta1.kubeflow.org"

pytestmark = [pytest.mark.kubectl, hvd_image.NEEDS_SSHD]


@pytest.fixture
def kubesim_settings(
    process_runtime: None, horovod_venv: Path, tmp_path_factory: pytest.TempPathFactory
) -> SimSettings:
    return hvd_image.sim_settings(tmp_path_factory, horovod_venv, nodes=NODES)


class Scene:
    """The cluster of one scenario and what the tests read from it."""

    def __init__(self, sim: KubeSim, kubectl: Kubectl, root: Path) -> None:
        self.sim = sim
        self.kubectl = kubectl
        self.root = root
        self.lost: dict[str, str] = {}
        """Elastic worker host names (FQDN) -> the DisruptionTarget reason their pod got."""
        self.unschedulable: set[str] = set()
        """Elastic worker host names (FQDN) whose pod the scheduler found no room for."""
        self.mark = 0
        """How many lines the launcher had written when the disruption began."""
        self.launcher_uid = ""

    async def run(self, *args: str, stdin: str | None = None, limit: float = 60) -> str:
        rc, out, err = await self.kubectl(*args, stdin=stdin, limit=limit)
        assert rc == 0, f"kubectl {' '.join(args)}: {err}"
        return out

    def workers(self) -> list[dict[str, Any]]:
        return pods(self.sim, ELASTIC, "worker")

    def launcher(self) -> dict[str, Any]:
        found = pods(self.sim, ELASTIC, "launcher")
        assert len(found) == 1, [p["metadata"]["name"] for p in found]
        return found[0]

    def since_mark(self) -> list[str]:
        return output_lines(self.sim)[self.mark :]

    def report(self) -> str:
        """What a failure message needs: pods, the job's status and events, the launcher's log."""
        lines = ["elastic workers:"]
        lines += [f"  {describe(pod)}" for pod in self.workers()]
        job = mpijob(self.sim, ELASTIC)
        lines.append(f"status: {json.dumps(job.get('status'))}")
        for e in job_events(self.sim, ELASTIC):
            lines.append(f"  event {e['type']} {e['reason']}: {e['message']}")
        lines.append(f"lost: {self.lost}")
        lines.append(f"ranks started since the disruption: {started(self.since_mark())}")
        log = output_lines(self.sim, timed=True)
        (self.root / "launcher.log").write_text("\n".join(log))
        lines += [f"launcher log (all of it in {self.root / 'launcher.log'}):", *log[-40:]]
        return "\n".join(lines)

    async def until(self, check: Callable[[], Any], what: str, within: float) -> Any:
        try:
            return await eventually(check, sim=self.sim, what=what, within=within)
        except BaseException:
            print(self.report())
            raise

    async def world(self, hosts: set[str], within: float = 240, *, exact: bool = True) -> None:
        """Waits until Horovod trains in a world of exactly `hosts` (not `exact`: of at least
        `MIN` of them): rank 0 reports as many processes, since the driver's last reset, as there
        are worker pods running a rank, and those pods are the hosts."""

        async def formed() -> bool:
            size = current_size(self.since_mark())
            if size is None:
                return False
            ranks = await rank_hosts(self.sim)
            if exact:
                return size == len(hosts) and ranks == hosts
            return size == len(ranks) >= MIN and ranks <= hosts

        what = f"Horovod to train on {'' if exact else 'some of '}{sorted(hosts)}"
        await self.until(formed, what, within)

    async def go(self, job: str) -> None:
        """Lets `job`'s launcher start training (`hvd_shared.GO`)."""
        kubelet = self.sim.controllers.kubelet
        assert kubelet is not None
        [launcher] = pods(self.sim, job, "launcher")
        key = (launcher["metadata"]["namespace"], launcher["metadata"]["name"])
        container = launcher["spec"]["containers"][0]["name"]
        run = kubelet._workers[key].runs[container]  # type: ignore[attr-defined]
        code, out = await run.exec(["touch", GO], 20)
        assert code == 0, out

    @contextmanager
    def watching_losses(self) -> Iterator[None]:
        """Records each elastic worker that gets a DisruptionTarget condition or is found no room,
        as kubesim commits it (the pod may have moved on by the time a test looks)."""
        pod_type = resource_type(self.sim.cluster, "v1", "Pod")

        def record(
            _event: EventType, rt: ResourceType, pod: dict[str, Any], _old: dict[str, Any] | None
        ) -> None:
            labels = pod["metadata"].get("labels") or {}
            if rt != pod_type or labels.get("training.kubeflow.org/job-name") != ELASTIC:
                return
            host = fqdn(str(pod["spec"].get("hostname")))
            reason = disruption(pod)
            if reason is not None:
                self.lost.setdefault(host, reason)
            for c in (pod.get("status") or {}).get("conditions") or []:
                if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable":
                    self.unschedulable.add(host)

        self.sim.cluster.add_listener(record)
        try:
            yield
        finally:
            self.sim.cluster.remove_listener(record)


async def install(scene: Scene) -> None:
    """The CRD and two PriorityClasses: before the operator starts, which exits when the CRD is
    not there (as it would in a cluster: install the CRD first)."""
    await scene.run("apply", "-f", str(CRD))
    await scene.run("wait", "--for=condition=Established", "crd/mpijobs.kubeflow.org")
    await scene.run("create", "priorityclass", LOW, "--value=100")
    await scene.run("create", "priorityclass", HIGH, "--value=1000")


async def start(scene: Scene) -> None:
    """The elastic job, trained by Horovod on all six GPUs."""
    await scene.run("apply", "-f", "-", stdin=json.dumps(elastic_job()))
    await scene.world({fqdn(f"{ELASTIC}-worker-{i}") for i in range(MAX)})
    per_node: dict[str, int] = {}
    for pod in scene.workers():
        per_node[pod["spec"]["nodeName"]] = per_node.get(pod["spec"]["nodeName"], 0) + 1
    assert per_node == {node.name: 2 for node in NODES}, per_node
    scene.launcher_uid = scene.launcher()["metadata"]["uid"]


def begin(scene: Scene) -> set[str]:
    """An act starts at six Ready workers, all in Horovod's world: returns their host names."""
    hosts = {fqdn(p["spec"]["hostname"]) for p in scene.workers() if is_ready(p)}
    assert len(hosts) == MAX, scene.report()
    scene.mark = len(output_lines(scene.sim))
    scene.lost = {}
    return hosts


def spare_nodes(scene: Scene) -> list[str]:
    """The nodes without the launcher (losing the launcher is another story: the Job
    controller's)."""
    launcher_node = scene.launcher()["spec"]["nodeName"]
    return [n.name for n in NODES if n.name != launcher_node]


def on_node(scene: Scene, node: str) -> set[str]:
    return {fqdn(p["spec"]["hostname"]) for p in scene.workers() if p["spec"]["nodeName"] == node}


async def survivors_world(scene: Scene, survivors: set[str]) -> None:
    """Horovod trains on exactly the survivors. A survivor's rank may also die in the reset (Gloo
    aborts on a peer lost mid-message): Horovod blacklists it for its cooldown (5-10 s here), then
    takes it back in a reset of its own. The acts give capacity back only after that, because
    Horovod 0.28.1 drops a host addition that lands during any reset (docs/elastic.md)."""
    await scene.world(survivors, exact=False)
    await scene.world(survivors)


async def shrinks_and_heals(scene: Scene, full: set[str], lost: set[str]) -> set[str]:
    """What every act shares once `lost` are gone: Horovod trains on the survivors, the job has
    not failed, and the lost indices are replaced under fresh host names. Returns those."""
    survivors = full - lost
    await survivors_world(scene, survivors)
    assert not condition(mpijob(scene.sim, ELASTIC), "Failed"), scene.report()

    def replacements() -> set[str] | None:
        current = {fqdn(p["spec"]["hostname"]) for p in scene.workers()}
        fresh = current - full
        return fresh if len(fresh) == len(lost) and current == survivors | fresh else None

    fresh: set[str] = await scene.until(
        replacements, "the lost workers to be replaced under fresh host names", 120
    )
    assert scene.launcher()["metadata"]["uid"] == scene.launcher_uid, "the launcher was replaced"
    return fresh


async def grown_back(scene: Scene, survivors: set[str], fresh: set[str], reason: str) -> None:
    """Back at six workers: Horovod trains on the survivors and the replacements, the job never
    failed, its one launcher never restarted, the budget is untouched and the events say why the
    workers went."""
    await scene.world(survivors | fresh)
    # Horovod itself started ranks on the new names, and never again on a lost one.
    ranked = set(started(scene.since_mark()))
    assert fresh <= ranked <= survivors | fresh, scene.report()
    job = mpijob(scene.sim, ELASTIC)
    report = scene.report()
    assert condition(job, "Running"), report
    assert not condition(job, "Failed"), report
    launcher = scene.launcher()
    assert launcher["metadata"]["uid"] == scene.launcher_uid, report
    restarts = [s.get("restartCount") for s in launcher["status"]["containerStatuses"]]
    assert restarts == [0], report
    assert job["status"]["elastic"]["replacements"] == 0, report
    messages = " ".join(e["message"] for e in job_events(scene.sim, ELASTIC))
    assert reason in messages, report


async def preemption(scene: Scene) -> None:
    """A high-priority static job of two one-GPU workers takes two GPUs, then gives them back."""
    full = begin(scene)
    with scene.watching_losses():
        await scene.run("apply", "-f", "-", stdin=json.dumps(static_job()))

        def preempted() -> set[str] | None:
            return set(scene.lost) if len(scene.lost) >= 2 else None

        lost = await scene.until(preempted, "two elastic workers to be preempted", 120)
        assert set(scene.lost.values()) == {"PreemptionByScheduler"}, scene.lost
        fresh = await shrinks_and_heals(scene, full, lost)
        await scene.go(STATIC)

        def succeeded() -> bool:
            return condition(mpijob(scene.sim, STATIC), "Succeeded")

        await scene.until(succeeded, f"{STATIC} to succeed", 240)
        # The replacements waited for the urgent job's GPUs rather than take them back.
        assert fresh <= scene.unschedulable, scene.report()
        await grown_back(scene, full - lost, fresh, "PreemptionByScheduler")
        assert len(scene.lost) == 2, scene.lost


async def drain(scene: Scene, node: str) -> None:
    """`kubectl drain` evicts the node's two workers; `kubectl uncordon` gives the room back."""
    full = begin(scene)
    lost = on_node(scene, node)
    with scene.watching_losses():
        command = ("drain", node, "--ignore-daemonsets", "--delete-emptydir-data")
        await scene.run(*command, "--timeout=120s", limit=150)
        assert scene.lost == dict.fromkeys(lost, "EvictionByEvictionAPI"), scene.lost
        fresh = await shrinks_and_heals(scene, full, lost)

        # The cordoned node was the only room: the replacements wait, Pending, for it.
        for pod in scene.workers():
            if fqdn(pod["spec"]["hostname"]) in fresh:
                assert pod["status"].get("phase") == "Pending", scene.report()
                assert not pod["spec"].get("nodeName"), scene.report()
        await scene.run("uncordon", node)
        await grown_back(scene, full - lost, fresh, "EvictionByEvictionAPI")
        assert on_node(scene, node) == fresh, scene.report()


async def node_death(scene: Scene, node: str) -> None:
    """The node dies: Horovod loses its two hosts at once; the taint manager deletes the pods
    (their short `unreachable` toleration); the node's return frees their GPUs for replacements."""
    full = begin(scene)
    lost = on_node(scene, node)
    kubelet = scene.sim.controllers.kubelet
    assert kubelet is not None
    with scene.watching_losses():
        kubelet.node_down(node)
        await survivors_world(scene, full - lost)
        assert not condition(mpijob(scene.sim, ELASTIC), "Failed"), scene.report()

        # No kubelet confirms those deletes while the node is down: the pods stay Terminating.
        def deleted() -> bool:
            return scene.lost == dict.fromkeys(lost, "DeletionByTaintManager")

        await scene.until(deleted, "the taint manager to delete the dead node's workers", 120)
        kubelet.node_up(node)
        fresh = await shrinks_and_heals(scene, full, lost)
        await grown_back(scene, full - lost, fresh, "DeletionByTaintManager")


@pytest.mark.timeout(900)
async def test_an_elastic_job_shrinks_for_preemption_a_drain_and_a_dead_node_and_grows_back(
    kubesim: KubeSim, kubectl: Kubectl, tmp_path: Path
) -> None:
    scene = Scene(kubesim, kubectl, tmp_path)
    assert kubesim.kubeconfig_path is not None
    timeline: dict[str, float] = {}
    began = time.monotonic()
    await install(scene)
    async with operator_process(kubesim.kubeconfig_path, tmp_path / "operator.log"):
        await start(scene)
        timeline["full"] = time.monotonic() - began
        await preemption(scene)
        timeline["preemption"] = time.monotonic() - began
        first, *_, last = spare_nodes(scene)
        await drain(scene, first)
        timeline["drain"] = time.monotonic() - began
        await node_death(scene, last)
        timeline["node death"] = time.monotonic() - began
    print(f"timeline (s since the cluster started, each act back at six): {timeline}")
