"""A job with more workers than one sync creates (`planning.WORKER_WINDOW`): its first sync writes
the `Created` condition with the first window, so the user sees a reaction at once, and each later
window is a sync of its own, queued behind the other jobs. The windows create every worker exactly
once (the pods a sync created count as observed until the pod cache shows them, so a requeued sync
that runs before the watch delivers them creates nothing twice), the launcher Job comes after the
last worker, as upstream's order has it, and the converged job writes nothing. Before, one sync
created every worker and wrote no status until they all existed.

A big job deleted while its windows are being created gets no child more than 1 s after the deletion
(the issue's bound, measured by kubesim's clock of commits)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_discovery import hostfile
from mpi_operator.api.constants import MAX_WORKER_REPLICAS
from mpi_operator.kube import errors, resources
from mpi_operator.kube.client import Kube
from mpi_operator.objects import is_pod_ready
from mpi_operator.planning import WORKER_WINDOW
from mpi_operator.runtime.manager import Manager

from .harness import NS, OPERATOR_AGENT, idle, mpijob, pods_of, quiet, wait_condition

WORKERS = 5 * WORKER_WINDOW + 3
LATE = 1.0
"""The issue's bound: a create already in flight when the job is deleted may land within this."""


@dataclass
class Timeline:
    """What kubesim committed, in order, with the monotonic time of each commit."""

    created: list[tuple[float, str, str]] = field(default_factory=list)
    """(time, kind, name) of every object added."""
    condition: dict[str, int] = field(default_factory=dict)
    """Condition type -> position in `created` when an MPIJob first had it True."""
    deleted: dict[str, float] = field(default_factory=dict)
    """MPIJob name -> time of its deletion."""

    def __call__(self, kind: str, rt: Any, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        meta = obj["metadata"]
        if rt.kind == "MPIJob":
            if kind == "DELETED":
                self.deleted.setdefault(meta["name"], time.monotonic())
            for cond in (obj.get("status") or {}).get("conditions") or []:
                if cond.get("status") == "True":
                    self.condition.setdefault(cond["type"], len(self.created))
        elif kind == "ADDED":
            self.created.append((time.monotonic(), rt.kind, meta["name"]))

    def position(self, kind: str, name: str) -> int:
        return next(i for i, (_, k, n) in enumerate(self.created) if (k, n) == (kind, name))


def pod_creates(kubesim: KubeSim) -> list[int | None]:
    """The HTTP status of each pod create the operator sent."""
    return [
        r.status
        for r in kubesim.control.recorded(verb="create", resource="pods", user_agent=OPERATOR_AGENT)
    ]


async def test_a_big_job_is_created_window_by_window_and_says_so_first(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    timeline = Timeline()
    kubesim.cluster.add_listener(timeline)
    # The operator's pod watch goes blind for a while (its next list and watch are slow), so the
    # windows after the first are planned before the cache has shown the pods the earlier ones
    # created.
    await eventually(lambda: kubesim.control.open_watches() > 0, what="the operator's watches")
    kubesim.control.inject_latency(1.0, method="GET", path="/pods$", count=2)
    kubesim.control.drop_watches()
    await kube.create(resources.MPIJOB, mpijob("big", workers=WORKERS), namespace=NS)
    await wait_condition(kube, "big", "Running", within=120)

    last_worker = timeline.position("Pod", f"big-worker-{WORKERS - 1}")
    assert timeline.condition["Created"] <= timeline.position(
        "Pod", f"big-worker-{WORKER_WINDOW}"
    ), "the Created condition was not written with the first window"
    assert timeline.position("Job", "big-launcher") > last_worker, (
        "the launcher came before the last worker"
    )
    assert pod_creates(kubesim).count(201) == WORKERS, "a worker was created twice, or not at all"
    assert 409 not in pod_creates(kubesim), "a requeued window created in-flight workers again"

    async def all_ready() -> bool:
        pods = await pods_of(kube, "big", "worker")
        return len(pods) == WORKERS and all(is_pod_ready(pod) for pod in pods)

    # Until every worker is Ready, discover_hosts.sh still changes; then nothing should.
    await eventually(all_ready, sim=kubesim, within=120, what="every worker Ready")
    assert await quiet(kubesim, kube, operator, "big") == []


async def test_a_deleted_big_job_gets_no_child_more_than_1s_after_its_deletion(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    timeline = Timeline()
    kubesim.cluster.add_listener(timeline)
    # Each pod create takes a while, so the job is still being created when it goes.
    kubesim.control.inject_latency(0.02, method="POST", path="/pods$")
    body = mpijob(
        "big", workers=MAX_WORKER_REPLICAS, worker_annotations={"kubesim/start-seconds": "3600"}
    )
    await kube.create(resources.MPIJOB, body, namespace=NS)
    await eventually(
        lambda: sum(1 for _, kind, _ in timeline.created if kind == "Pod") > 2 * WORKER_WINDOW,
        sim=kubesim,
        within=60,
        what="a few windows of workers",
    )
    await kube.delete(resources.MPIJOB, "big", namespace=NS)
    await eventually(
        lambda: idle(operator), within=60, what="the operator done with the deleted job"
    )
    deleted = timeline.deleted["big"]
    late = [
        (round(at - deleted, 3), name)
        for at, kind, name in timeline.created
        if at - deleted >= LATE
    ]
    assert late == [], f"children created more than {LATE} s after the deletion: {late}"
    created = sum(1 for _, kind, _ in timeline.created if kind == "Pod")
    assert created < MAX_WORKER_REPLICAS, (
        "every worker was created: the deletion came too late to test"
    )
    last = max(at for at, _, _ in timeline.created) - deleted
    print(f"{created} workers created, the last child {last:.3f} s after the deletion")


@pytest.mark.parametrize("workers", [2000, MAX_WORKER_REPLICAS])
async def test_an_elastic_job_of_thousands_of_workers_is_accepted_and_runs(
    kubesim: KubeSim, kube: Kube, operator: Manager, workers: int
) -> None:
    """The ceiling is computed from the ConfigMap's limit (tests/unit/api/test_ceiling.py): a job at
    it, and the issue's 2,000 workers, are accepted by the CRD and the operator, and every worker
    ends up Ready and listed in discover_hosts.sh."""
    body = mpijob(
        "big", workers=workers, elasticPolicy={"minReplicas": 500, "maxReplicas": workers}
    )
    await kube.create(resources.MPIJOB, body, namespace=NS)

    async def all_listed() -> bool:
        try:
            config_map = await kube.get(resources.CONFIG_MAP, "big-config", NS)
        except errors.NotFound:
            return False
        script = (config_map.get("data") or {}).get("discover_hosts.sh", "")
        return len(hostfile.parse_discover_hosts(script)) == workers

    await eventually(all_listed, sim=kubesim, within=300, what=f"{workers} workers listed")
    await wait_condition(kube, "big", "Running", within=120)
