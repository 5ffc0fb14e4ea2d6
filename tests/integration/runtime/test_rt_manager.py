"""The manager against kubesim over HTTP with a recording reconciler: cache sync then keys (MPIJobs, owned
children, launcher pods via their Job), one reconcile per key at a time, error backoff, PermanentError,
requeue_after, graceful and forced shutdown, leader election, and /healthz, /readyz, /metrics."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml

from kubesim.app import KubeSim
from mpi_operator.controller import leaderelection, manager
from mpi_operator.controller.types import ManagerDeps, PermanentError, Result
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.kube.resources import Resource
from mpi_operator.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
CRD = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", False, "CustomResourceDefinition")
OWNED = {"training.kubeflow.org/operator-name": "mpi-operator"}
NS = "default"


@pytest.fixture
def kubesim_run_controllers() -> bool:
    return False


@pytest_asyncio.fixture
async def kube(kubesim: KubeSim) -> AsyncIterator[Kube]:
    client = await Kube.from_kubeconfig(str(kubesim.kubeconfig_path), qps=0, burst=1)
    try:
        yield client
    finally:
        await client.close()


async def install_crd(kube: Kube) -> None:
    crd = yaml.safe_load((ROOT / "crds" / "kubeflow.org_mpijobs.yaml").read_text())
    await kube.create(CRD, crd)
    async with asyncio.timeout(5):
        while True:
            got = await kube.get(CRD, crd["metadata"]["name"])
            if any(c["type"] == "Established" for c in (got.get("status") or {}).get("conditions") or []):
                return
            await asyncio.sleep(0.02)


@pytest_asyncio.fixture
async def crd(kube: Kube) -> None:
    await install_crd(kube)


def mpijob_body(name: str) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "main", "image": "mpioperator/mpi-pi:openmpi"}]}}
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template},
                "Worker": {"replicas": 1, "template": template},
            }
        },
    }


def controller_ref(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }


def pod_body(name: str, owner: dict[str, Any] | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "labels": labels or OWNED}
    if owner is not None:
        meta["ownerReferences"] = [controller_ref(owner)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }


class RecordingReconciler:
    """Records calls, checks that no key is reconciled twice at once, and misbehaves on demand."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.calls: list[tuple[str, float]] = []
        self.finished: list[str] = []
        self.active: set[str] = set()
        self.overlaps: list[str] = []
        self.max_parallel = 0
        self.script: dict[str, list[BaseException | Result]] = {}
        self.deps: ManagerDeps | None = None

    def factory(self, deps: ManagerDeps) -> RecordingReconciler:
        self.deps = deps
        return self

    def called_keys(self) -> list[str]:
        return [k for k, _ in self.calls]

    async def reconcile(self, key: str) -> Result:
        if key in self.active:
            self.overlaps.append(key)
        self.active.add(key)
        self.max_parallel = max(self.max_parallel, len(self.active))
        self.calls.append((key, time.monotonic()))
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            step = self.script.get(key, [])
            outcome = step.pop(0) if step else Result()
            if isinstance(outcome, BaseException):
                raise outcome
            self.finished.append(key)
            return outcome
        finally:
            self.active.discard(key)


async def eventually(check: Callable[[], object], limit: float = 5.0) -> None:
    async with asyncio.timeout(limit):
        while not check():  # noqa: ASYNC110 (polls state owned by other tasks and processes)
            await asyncio.sleep(0.01)


def settings_for(kubesim: KubeSim, **overrides: Any) -> Settings:
    base = Settings(
        kubeconfig=str(kubesim.kubeconfig_path),
        qps=0,
        workers=2,
        leader_elect=False,
        metrics_address="127.0.0.1:0",
        backoff_base_seconds=0.05,
        lease_namespace=NS,
        lease_duration_seconds=1.0,
        renew_deadline_seconds=0.6,
        retry_period_seconds=0.15,
    )
    return dataclasses.replace(base, **overrides)


@contextlib.asynccontextmanager
async def running(mgr: manager.Manager, *, wait_started: bool = True) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(mgr.run())
    try:
        if wait_started:
            started = asyncio.create_task(mgr.started.wait())
            done, _ = await asyncio.wait({task, started}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
            started.cancel()
            if task in done:
                task.result()
            assert mgr.started.is_set()
        yield task
    finally:
        mgr.request_stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 10)


async def http_get(mgr: manager.Manager, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(mgr.server.url + path) as response:
        return response.status, await response.text()


@pytest.mark.usefixtures("crd")
async def test_keys_for_mpijobs_and_owned_children_arrive_after_cache_sync(
    kubesim: KubeSim, kube: Kube
) -> None:
    before = await kube.create(resources.MPIJOB, mpijob_body("before"))
    rec = RecordingReconciler()
    mgr = manager.Manager(settings_for(kubesim), rec.factory)
    async with running(mgr):
        assert mgr.readiness.caches_synced
        await eventually(lambda: rec.called_keys() == ["default/before"])
        assert rec.deps is not None
        assert rec.deps.stores.mpijobs.get("default/before") is not None

        job = await kube.create(resources.MPIJOB, mpijob_body("pi"))
        await eventually(lambda: "default/pi" in rec.called_keys())

        await kube.create(resources.POD, pod_body("pi-worker-0", job))
        await eventually(lambda: rec.called_keys().count("default/pi") == 2)
        assert rec.deps.stores.pods.get("default/pi-worker-0") is not None

        launcher = await kube.create(
            resources.JOB,
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": "pi-launcher",
                    "namespace": NS,
                    "ownerReferences": [controller_ref(job)],
                },
                "spec": {
                    "template": {
                        "metadata": {"labels": OWNED},
                        "spec": {"restartPolicy": "Never", "containers": [{"name": "l", "image": "x"}]},
                    }
                },
            },
        )
        await eventually(lambda: rec.called_keys().count("default/pi") == 3)
        await kube.create(resources.POD, pod_body("pi-launcher-abcde", launcher))
        await eventually(lambda: rec.called_keys().count("default/pi") == 4)

        # Not ours: unlabelled (never even cached), or labelled but without an MPIJob controller.
        await kube.create(resources.POD, pod_body("stranger", job, labels={"app": "x"}))
        await kube.create(resources.POD, pod_body("orphan", None))
        await kube.create(resources.POD, pod_body("before-worker-0", before))  # a real one, as a fence
        await eventually(lambda: rec.called_keys().count("default/before") == 2)
        assert rec.called_keys().count("default/pi") == 4
        assert rec.deps.stores.pods.get("default/stranger") is None
        assert rec.overlaps == []


@pytest.mark.usefixtures("crd")
async def test_one_key_is_never_reconciled_concurrently(kubesim: KubeSim, kube: Kube) -> None:
    rec = RecordingReconciler(delay=0.05)
    mgr = manager.Manager(settings_for(kubesim, workers=4), rec.factory)
    async with running(mgr):
        for name in ("a", "b", "c"):
            await kube.create(resources.MPIJOB, mpijob_body(name))
        for i in range(8):
            for name in ("a", "b", "c"):
                patch = {"metadata": {"annotations": {"n": str(i)}}}
                await kube.patch(resources.MPIJOB, name, patch, namespace=NS)
        await eventually(lambda: len(mgr.queue) == 0 and not mgr.queue.processing and len(rec.calls) >= 6)
    assert rec.overlaps == []
    assert rec.max_parallel > 1  # different keys do run in parallel
    assert set(rec.called_keys()) == {"default/a", "default/b", "default/c"}
    assert len(rec.calls) < 3 * 9  # events that arrive while a key waits are coalesced


@pytest.mark.usefixtures("crd")
async def test_errors_requeue_with_growing_backoff_until_success(kubesim: KubeSim, kube: Kube) -> None:
    rec = RecordingReconciler()
    rec.script["default/flaky"] = [RuntimeError("boom"), RuntimeError("boom"), RuntimeError("boom")]
    mgr = manager.Manager(settings_for(kubesim), rec.factory)
    async with running(mgr):
        await kube.create(resources.MPIJOB, mpijob_body("flaky"))
        await eventually(lambda: rec.finished == ["default/flaky"])
        await asyncio.sleep(0.3)
        times = [t for k, t in rec.calls if k == "default/flaky"]
        assert len(times) == 4  # three failures, one success, then quiet
        gaps = [b - a for a, b in itertools.pairwise(times)]
        # 50 ms, 100 ms, 200 ms: exponential per-key backoff (timers never fire early, so lower bounds hold)
        assert gaps[0] >= 0.045
        assert gaps[1] >= 0.095
        assert gaps[2] >= 0.195
        assert mgr.queue.num_requeues("default/flaky") == 0  # forgotten after the success
        status, text = await http_get(mgr, "/metrics")
    assert status == 200
    assert 'workqueue_retries_total{name="mpijobs"} 3.0' in text
    assert "mpi_operator_reconcile_errors_total 3.0" in text
    assert 'mpi_operator_reconcile_total{result="error"} 3.0' in text
    assert 'mpi_operator_reconcile_total{result="success"} 1.0' in text


@pytest.mark.usefixtures("crd")
async def test_permanent_error_is_not_requeued_until_the_next_event(kubesim: KubeSim, kube: Kube) -> None:
    rec = RecordingReconciler()
    rec.script["default/bad"] = [PermanentError("spec.mpiReplicaSpecs: invalid")]
    mgr = manager.Manager(settings_for(kubesim), rec.factory)
    async with running(mgr):
        await kube.create(resources.MPIJOB, mpijob_body("bad"))
        await eventually(lambda: rec.called_keys() == ["default/bad"])
        await asyncio.sleep(0.4)
        assert rec.called_keys() == ["default/bad"]
        assert mgr.queue.waiting == 0
        await kube.patch(resources.MPIJOB, "bad", {"metadata": {"labels": {"fixed": "yes"}}}, namespace=NS)
        await eventually(lambda: rec.finished == ["default/bad"])


@pytest.mark.usefixtures("crd")
async def test_requeue_after_brings_the_key_back(kubesim: KubeSim, kube: Kube) -> None:
    rec = RecordingReconciler()
    rec.script["default/timer"] = [Result(requeue_after=0.3)]
    mgr = manager.Manager(settings_for(kubesim), rec.factory)
    async with running(mgr):
        await kube.create(resources.MPIJOB, mpijob_body("timer"))
        await eventually(lambda: len(rec.calls) == 2)
    first, second = (t for _, t in rec.calls)
    assert 0.25 < second - first < 1.0


@pytest.mark.usefixtures("crd")
@pytest.mark.parametrize(
    ("grace", "stops", "finishes"),
    [(5.0, 1, True), (0.1, 1, False), (5.0, 2, False)],
    ids=["drains-in-flight", "cancels-after-grace", "second-stop-cancels-at-once"],
)
async def test_stop_drains_in_flight_reconciles_within_the_grace_period(
    kubesim: KubeSim, kube: Kube, grace: float, stops: int, finishes: bool
) -> None:
    rec = RecordingReconciler(delay=0.5)
    mgr = manager.Manager(settings_for(kubesim), rec.factory, shutdown_grace=grace)
    task = asyncio.create_task(mgr.run())
    try:
        await asyncio.wait_for(mgr.started.wait(), 10)
        await kube.create(resources.MPIJOB, mpijob_body("slow"))
        await eventually(lambda: rec.active == {"default/slow"})
        for _ in range(stops):
            mgr.request_stop()
        status, text = await http_get(mgr, "/readyz")
        assert (status, text) == (503, "not ready: shutting down\n")
        await asyncio.wait_for(task, 5)
    finally:
        task.cancel()
    assert rec.finished == (["default/slow"] if finishes else [])
    assert rec.active == set()
    assert mgr.queue.processing == frozenset()


@pytest.mark.usefixtures("crd")
async def test_sigterm_stops_run_gracefully(kubesim: KubeSim, kube: Kube) -> None:
    rec = RecordingReconciler()
    await kube.create(resources.MPIJOB, mpijob_body("pi"))
    task = asyncio.create_task(manager.run(settings_for(kubesim), rec.factory))
    await eventually(lambda: rec.finished == ["default/pi"], limit=10)  # handlers are installed by now
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(task, 10)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers removed again


@pytest.mark.parametrize(
    ("install", "overrides", "message"),
    [
        (False, {}, r"the MPIJob CRD \(mpijobs\.kubeflow\.org, kubeflow\.org/v2beta1\) is not installed"),
        (True, {"gang_scheduling": "volcano"}, r"needs the podgroups\.scheduling\.volcano\.sh CRD"),
    ],
    ids=["no-mpijob-crd", "gang-scheduling-without-podgroup-crd"],
)
async def test_missing_crd_is_fatal_with_a_clear_message(
    kubesim: KubeSim, kube: Kube, install: bool, overrides: dict[str, Any], message: str
) -> None:
    if install:
        await install_crd(kube)
    mgr = manager.Manager(settings_for(kubesim, **overrides), RecordingReconciler().factory)
    with pytest.raises(manager.CRDNotInstalled, match=message):
        await asyncio.wait_for(mgr.run(), 10)
    with pytest.raises(aiohttp.ClientConnectionError):  # the health server is closed again
        await http_get(mgr, "/healthz")


@pytest.mark.usefixtures("crd")
async def test_namespace_scoping_watches_only_the_given_namespaces(kubesim: KubeSim, kube: Kube) -> None:
    for name in ("team-a", "team-b"):
        await kube.create(
            resources.NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
    rec = RecordingReconciler()
    mgr = manager.Manager(settings_for(kubesim, namespaces=("team-a", "team-b")), rec.factory)
    async with running(mgr):
        for namespace in ("default", "team-b", "team-a"):
            await kube.create(
                resources.MPIJOB, {**mpijob_body("pi"), "metadata": {"name": "pi", "namespace": namespace}}
            )
        await eventually(lambda: sorted(rec.called_keys()) == ["team-a/pi", "team-b/pi"])
        await asyncio.sleep(0.2)
        assert "default/pi" not in rec.called_keys()
    watches = kubesim.control.recorded(verb="watch", resource="mpijobs")
    assert {r.namespace for r in watches} == {"team-a", "team-b"}


@pytest.mark.usefixtures("crd")
async def test_readyz_waits_for_cache_sync(kubesim: KubeSim) -> None:
    kubesim.control.inject_error(500, method="GET", path="/api/v1/secrets$", count=None)
    rec = RecordingReconciler()
    mgr = manager.Manager(settings_for(kubesim), rec.factory)
    async with running(mgr, wait_started=False):
        await eventually(lambda: mgr.server.port != 0 and mgr.informers, limit=10)
        assert await http_get(mgr, "/healthz") == (200, "ok\n")
        await eventually(lambda: mgr.readiness.unsynced() == ["secrets"], limit=10)
        status, text = await http_get(mgr, "/readyz")
        assert (status, text) == (503, "not ready: informer caches not synced: secrets\n")
        kubesim.control.clear_faults()
        await asyncio.wait_for(mgr.started.wait(), 10)
        assert await http_get(mgr, "/readyz") == (200, "ok\n")


@pytest.mark.usefixtures("crd")
async def test_leader_election_gates_workers_readiness_and_is_leader(kubesim: KubeSim, kube: Kube) -> None:
    await kube.create(resources.MPIJOB, mpijob_body("pi"))
    held = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "mpi-operator", "namespace": NS},
        "spec": {"holderIdentity": "other", "leaseDurationSeconds": 60},
    }
    lease = await kube.create(resources.LEASE, held)
    rec = RecordingReconciler()
    mgr = manager.Manager(settings_for(kubesim, leader_elect=True), rec.factory, identity="me")
    async with running(mgr, wait_started=False):
        await eventually(lambda: mgr.readiness.caches_synced, limit=10)
        await asyncio.sleep(0.3)
        assert await http_get(mgr, "/readyz") == (503, "not ready: not the leader\n")
        assert "mpi_operator_is_leader 0.0" in (await http_get(mgr, "/metrics"))[1]
        assert rec.calls == []  # a standby keeps its caches warm but reconciles nothing
        assert len(mgr.queue) == 1  # ... and its queue already knows what to do
        await kube.replace(resources.LEASE, {**lease, "spec": {**lease["spec"], "holderIdentity": ""}})
        await asyncio.wait_for(mgr.started.wait(), 5)
        await eventually(lambda: rec.called_keys() == ["default/pi"])
        assert await http_get(mgr, "/readyz") == (200, "ok\n")
        metrics = (await http_get(mgr, "/metrics"))[1]
        assert "mpi_operator_is_leader 1.0" in metrics
        assert 'rest_client_requests_total{code="200",method="PUT"}' in metrics
    got = await kube.get(resources.LEASE, "mpi-operator", NS)
    assert got["spec"]["holderIdentity"] == ""  # released on shutdown
    assert got["spec"]["leaseTransitions"] == 1
    events, _ = await kube.list(resources.EVENT, NS)
    assert any(e["reason"] == "LeaderElection" and e["message"] == "me became leader" for e in events)


@pytest.mark.usefixtures("crd")
async def test_losing_the_lease_is_fatal_and_stops_workers_at_once(kubesim: KubeSim, kube: Kube) -> None:
    rec = RecordingReconciler(delay=5.0)
    mgr = manager.Manager(settings_for(kubesim, leader_elect=True), rec.factory, identity="me")
    task = asyncio.create_task(mgr.run())
    try:
        await asyncio.wait_for(mgr.started.wait(), 10)
        await kube.create(resources.MPIJOB, mpijob_body("pi"))
        await eventually(lambda: rec.active == {"default/pi"})
        kubesim.control.inject_error(500, method="PUT", path="/leases/mpi-operator$", count=None)
        with pytest.raises(leaderelection.LeadershipLost, match="lost the lease default/mpi-operator"):
            await asyncio.wait_for(task, 5)
    finally:
        task.cancel()
    assert rec.finished == []  # cancelled, not drained: a new leader may already be writing
    assert rec.active == set()
    got = await kube.get(resources.LEASE, "mpi-operator", NS)
    assert got["spec"]["holderIdentity"] == "me"  # not released: it was not ours to give any more


@pytest.mark.usefixtures("crd")
async def test_metrics_exposition_has_upstream_and_runtime_series(kubesim: KubeSim, kube: Kube) -> None:
    rec = RecordingReconciler()
    mgr = manager.Manager(settings_for(kubesim), rec.factory)
    async with running(mgr):
        await kube.create(resources.MPIJOB, mpijob_body("pi"))
        await eventually(lambda: rec.finished == ["default/pi"])
        assert rec.deps is not None
        rec.deps.metrics.job_created()
        rec.deps.metrics.set_job_info(launcher="pi-launcher", namespace=NS)
        status, text = await http_get(mgr, "/metrics")
    assert status == 200
    for line in (
        "mpi_operator_jobs_created_total 1.0",
        "mpi_operator_jobs_successful_total 0.0",
        "mpi_operator_jobs_failed_total 0.0",
        'mpi_operator_job_info{launcher="pi-launcher",namespace="default"} 1.0',
        "mpi_operator_is_leader 1.0",
        'workqueue_depth{name="mpijobs"} 0.0',
        'workqueue_adds_total{name="mpijobs"} 1.0',
        "mpi_operator_reconcile_duration_seconds_count 1.0",
        'rest_client_requests_total{code="200",method="GET"}',
    ):
        assert line in text, line
