"""The manager against kubesim over HTTP with a recording reconciler: cache sync then keys (MPIJobs,
owned children, launcher pods via their Job), one reconcile per key at a time, error backoff,
PermanentError, requeue_after, graceful and forced shutdown, leader election, and /healthz, /readyz,
/metrics.

The manager runs on a `FakeClock`: backoffs, requeues, grace periods and lease timing are asserted
in exact fake seconds, and "nothing more happens" is shown by moving fake time far ahead, not by
waiting."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.flowcontrol import FakeClock
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime import leaderelection, manager
from mpi_operator.runtime.types import ManagerDeps, PermanentError, Result
from mpi_operator.settings import Settings
from operator_testing import plain_mpijob

OWNED = {"training.kubeflow.org/operator-name": "mpi-operator"}
NS = "default"
QUEUE = {"name": "mpijobs"}
RETRY_PERIOD = 2.0
RENEW_DEADLINE = 10.0


@pytest_asyncio.fixture
async def kube(kubesim: KubeSim) -> AsyncIterator[Kube]:
    client = await Kube.from_kubeconfig(str(kubesim.kubeconfig_path), qps=0, burst=1)
    try:
        yield client
    finally:
        await client.close()


@pytest_asyncio.fixture
async def crd(kube: Kube, install_mpijob_crd: Callable[[Kube], Awaitable[None]]) -> None:
    await install_mpijob_crd(kube)


def controller_ref(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }


def pod_body(
    name: str, owner: dict[str, Any] | None, labels: dict[str, str] | None = None
) -> dict[str, Any]:
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
    """Records calls (with the manager's clock time), checks that no key is reconciled twice at
    once, holds every reconcile while `gate` is closed, and misbehaves on demand."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.gate.set()
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
        assert self.deps is not None
        if key in self.active:
            self.overlaps.append(key)
        self.active.add(key)
        self.max_parallel = max(self.max_parallel, len(self.active))
        self.calls.append((key, self.deps.clock.now()))
        try:
            await self.gate.wait()
            step = self.script.get(key, [])
            outcome = step.pop(0) if step else Result()
            if isinstance(outcome, BaseException):
                raise outcome
            self.finished.append(key)
            return outcome
        finally:
            self.active.discard(key)


def launcher_body(job: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job["metadata"]["name"] + "-launcher",
            "namespace": NS,
            "ownerReferences": [controller_ref(job)],
        },
        "spec": {
            "template": {
                "metadata": {"labels": OWNED},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "l", "image": "x"}]},
            }
        },
    }


def calls_made(rec: RecordingReconciler, count: int) -> bool:
    return len(rec.calls) == count


def settings_for(kubesim: KubeSim, **overrides: Any) -> Settings:
    base = Settings(
        kubeconfig=str(kubesim.kubeconfig_path),
        qps=0,
        workers=2,
        leader_elect=False,
        metrics_address="127.0.0.1:0",
        backoff_base_seconds=0.05,
        lease_namespace=NS,
        lease_duration_seconds=15.0,
        renew_deadline_seconds=RENEW_DEADLINE,
        retry_period_seconds=RETRY_PERIOD,
    )
    return dataclasses.replace(base, **overrides)


@pytest.fixture
def new_manager(
    kubesim: KubeSim, fake_clock: FakeClock, fake_wall: Callable[[], datetime]
) -> Callable[..., manager.Manager]:
    """A Manager on the fake clock and wall clock; keyword arguments go to `Settings` except the
    Manager's own (`shutdown_grace`, `identity`)."""

    def build(rec: RecordingReconciler, **overrides: Any) -> manager.Manager:
        options = {k: overrides.pop(k) for k in ("shutdown_grace", "identity") if k in overrides}
        return manager.Manager(
            settings_for(kubesim, **overrides),
            rec.factory,
            clock=fake_clock,
            now=fake_wall,
            **options,
        )

    return build


@contextlib.asynccontextmanager
async def running(
    mgr: manager.Manager, *, wait_started: bool = True
) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(mgr.run())
    try:
        if wait_started:
            started = asyncio.create_task(mgr.started.wait())
            done, _ = await asyncio.wait(
                {task, started}, timeout=30, return_when=asyncio.FIRST_COMPLETED
            )
            started.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await started
            if task in done:
                task.result()
            assert mgr.started.is_set()
        yield task
    finally:
        mgr.request_stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 30)


async def http_get(mgr: manager.Manager, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(mgr.server.url + path) as response:
        return response.status, await response.text()


@pytest.mark.usefixtures("crd")
async def test_keys_for_mpijobs_and_owned_children_arrive_after_cache_sync(
    kube: Kube, new_manager: Callable[..., manager.Manager]
) -> None:
    before = await kube.create(resources.MPIJOB, plain_mpijob("before"))
    rec = RecordingReconciler()
    mgr = new_manager(rec)
    async with running(mgr):
        assert mgr.readiness.caches_synced
        await eventually(lambda: rec.called_keys() == ["default/before"])
        assert rec.deps is not None
        assert rec.deps.stores.mpijobs.get("default/before") is not None

        job = await kube.create(resources.MPIJOB, plain_mpijob("pi"))
        await eventually(lambda: "default/pi" in rec.called_keys())

        await kube.create(resources.POD, pod_body("pi-worker-0", job))
        await eventually(lambda: rec.called_keys().count("default/pi") == 2)
        assert rec.deps.stores.pods.get("default/pi-worker-0") is not None

        launcher = await kube.create(resources.JOB, launcher_body(job))
        await eventually(lambda: rec.called_keys().count("default/pi") == 3)
        await kube.create(resources.POD, pod_body("pi-launcher-abcde", launcher))
        await eventually(lambda: rec.called_keys().count("default/pi") == 4)

        # Not ours: unlabelled (never even cached), or labelled but without an MPIJob controller.
        await kube.create(resources.POD, pod_body("stranger", job, labels={"app": "x"}))
        await kube.create(resources.POD, pod_body("orphan", None))
        await kube.create(
            resources.POD, pod_body("before-worker-0", before)
        )  # a real one, as a fence
        await eventually(lambda: rec.called_keys().count("default/before") == 2)
        assert rec.called_keys().count("default/pi") == 4
        assert rec.deps.stores.pods.get("default/stranger") is None
        assert rec.overlaps == []


@pytest.mark.usefixtures("crd")
async def test_a_launcher_jobs_pod_counts_alone_do_not_enqueue_its_mpijob(
    kube: Kube, new_manager: Callable[..., manager.Manager]
) -> None:
    rec = RecordingReconciler()
    mgr = new_manager(rec)
    async with running(mgr):
        assert rec.deps is not None
        jobs = rec.deps.stores.jobs
        job = await kube.create(resources.MPIJOB, plain_mpijob("pi"))
        await kube.create(resources.JOB, launcher_body(job))
        await eventually(lambda: rec.called_keys().count("default/pi") == 2)

        async def patched(status: dict[str, Any]) -> None:
            """Patches the launcher's status and waits until the cache (so the handler) saw it."""
            answer = await kube.patch_status(
                resources.JOB, "pi-launcher", {"status": status}, namespace=NS
            )
            version = answer["metadata"]["resourceVersion"]
            await eventually(
                lambda: (
                    (jobs.get("default/pi-launcher") or {})["metadata"]["resourceVersion"]
                    == version
                )
            )

        def adds() -> float:
            return mgr.metrics.registry.get_sample_value("workqueue_adds_total", QUEUE) or 0.0

        before = adds()
        await patched({"startTime": "2026-11-29T00:00:00Z", "active": 1})  # read: startTime
        await eventually(lambda: rec.called_keys().count("default/pi") == 3)
        assert adds() == before + 1
        await patched({"ready": 1, "terminating": 0})  # the Job controller's counts only
        await patched({"active": 0, "ready": 0})
        assert adds() == before + 1
        await patched({"failed": 1})
        await eventually(lambda: rec.called_keys().count("default/pi") == 4)


@pytest.mark.usefixtures("crd")
async def test_one_key_is_never_reconciled_concurrently(
    kube: Kube, new_manager: Callable[..., manager.Manager]
) -> None:
    rec = RecordingReconciler()
    rec.gate.clear()  # every reconcile is held in flight until the gate opens
    mgr = new_manager(rec, workers=4)
    async with running(mgr):
        for name in ("a", "b", "c"):
            await kube.create(resources.MPIJOB, plain_mpijob(name))
        await eventually(lambda: rec.active == {"default/a", "default/b", "default/c"})
        for i in range(8):
            for name in ("a", "b", "c"):
                patch = {"metadata": {"annotations": {"n": str(i)}}}
                await kube.patch(resources.MPIJOB, name, patch, namespace=NS)

        def all_patches_seen() -> bool:
            cached = [mgr.informers["mpijobs"].store.get(f"default/{name}") for name in "abc"]
            return all(o is not None and o["metadata"]["annotations"]["n"] == "7" for o in cached)

        await eventually(all_patches_seen)
        assert len(mgr.queue) == 0, "a key being reconciled is not queued for a second worker"
        rec.gate.set()
        await eventually(
            lambda: len(rec.finished) == 6 and not mgr.queue.processing and len(mgr.queue) == 0
        )
    assert rec.overlaps == []
    assert rec.max_parallel == 3  # different keys do run in parallel
    # The 24 events that arrived while a key was in flight collapsed into one more reconcile per
    # key.
    assert sorted(rec.called_keys()) == sorted(["default/a", "default/b", "default/c"] * 2)


@pytest.mark.usefixtures("crd")
async def test_errors_requeue_with_growing_backoff_until_success(
    kube: Kube, fake_clock: FakeClock, new_manager: Callable[..., manager.Manager]
) -> None:
    rec = RecordingReconciler()
    rec.script["default/flaky"] = [RuntimeError("boom"), RuntimeError("boom"), RuntimeError("boom")]
    mgr = new_manager(rec)
    async with running(mgr):
        await kube.create(resources.MPIJOB, plain_mpijob("flaky"))
        for failures in range(1, 4):
            await eventually(functools.partial(calls_made, rec, failures))
            await fake_clock.step(
                sleepers=0, timers=1
            )  # the key's retry timer: nothing else runs then
        await eventually(lambda: rec.finished == ["default/flaky"])
        await eventually(lambda: not mgr.queue.processing)
        times = [t for k, t in rec.calls if k == "default/flaky"]
        # 50 ms, 100 ms, 200 ms of fake time: exponential per-key backoff from backoff_base_seconds.
        assert [b - a for a, b in itertools.pairwise(times)] == pytest.approx([0.05, 0.1, 0.2])
        assert mgr.queue.num_requeues("default/flaky") == 0  # forgotten after the success
        assert fake_clock.pending_timers == 0, "then quiet: no retry is scheduled any more"
        status, text = await http_get(mgr, "/metrics")
    assert len(rec.calls) == 4  # three failures, one success
    assert status == 200
    assert 'workqueue_retries_total{name="mpijobs"} 3.0' in text
    assert "mpi_operator_reconcile_errors_total 3.0" in text
    assert 'mpi_operator_reconcile_total{result="error"} 3.0' in text
    assert 'mpi_operator_reconcile_total{result="success"} 1.0' in text
    # Reconcile durations are taken on the manager's clock: none of these took any fake time.
    assert "mpi_operator_reconcile_duration_seconds_sum 0.0" in text


@pytest.mark.usefixtures("crd")
async def test_permanent_error_is_not_requeued_until_the_next_event(
    kube: Kube, fake_clock: FakeClock, new_manager: Callable[..., manager.Manager]
) -> None:
    rec = RecordingReconciler()
    rec.script["default/bad"] = [PermanentError("spec.mpiReplicaSpecs: invalid")]
    mgr = new_manager(rec)
    async with running(mgr):
        await kube.create(resources.MPIJOB, plain_mpijob("bad"))
        await eventually(lambda: rec.called_keys() == ["default/bad"] and not mgr.queue.processing)
        assert mgr.queue.waiting == 0
        assert fake_clock.pending_timers == 0, "no retry of any kind is scheduled"
        fake_clock.advance(3600.0)  # an hour later, still nothing queued
        assert len(mgr.queue) == 0
        assert rec.called_keys() == ["default/bad"]
        await kube.patch(
            resources.MPIJOB, "bad", {"metadata": {"labels": {"fixed": "yes"}}}, namespace=NS
        )
        await eventually(lambda: rec.finished == ["default/bad"])


@pytest.mark.usefixtures("crd")
async def test_requeue_after_brings_the_key_back(
    kube: Kube, fake_clock: FakeClock, new_manager: Callable[..., manager.Manager]
) -> None:
    rec = RecordingReconciler()
    rec.script["default/timer"] = [Result(requeue_after=30.0)]
    mgr = new_manager(rec)
    async with running(mgr):
        await kube.create(resources.MPIJOB, plain_mpijob("timer"))
        await eventually(lambda: len(rec.calls) == 1 and not mgr.queue.processing)
        await fake_clock.parked(sleepers=0, timers=1)
        fake_clock.advance(29.0)
        assert len(mgr.queue) == 0, "not before its time"
        fake_clock.advance(1.0)
        await eventually(lambda: len(rec.calls) == 2)
    first, second = (t for _, t in rec.calls)
    assert second - first == pytest.approx(30.0)


@pytest.mark.usefixtures("crd")
@pytest.mark.parametrize(
    ("stops", "advance_past_grace", "finishes"),
    [(1, False, True), (1, True, False), (2, False, False)],
    ids=["drains-in-flight", "cancels-after-grace", "second-stop-cancels-at-once"],
)
async def test_stop_drains_in_flight_reconciles_within_the_grace_period(
    kube: Kube,
    fake_clock: FakeClock,
    new_manager: Callable[..., manager.Manager],
    stops: int,
    advance_past_grace: bool,
    finishes: bool,
) -> None:
    grace = 20.0
    rec = RecordingReconciler()
    rec.gate.clear()
    mgr = new_manager(rec, shutdown_grace=grace)
    async with running(mgr) as task:
        await kube.create(resources.MPIJOB, plain_mpijob("slow"))
        await eventually(lambda: rec.active == {"default/slow"})
        for _ in range(stops):
            mgr.request_stop()
        status, text = await http_get(mgr, "/readyz")
        assert (status, text) == (503, "not ready: shutting down\n")
        if stops == 1:
            await fake_clock.parked()  # the drain is waiting, its grace period running on the clock
            assert not task.done()
            if advance_past_grace:
                fake_clock.advance(grace - 1.0)
                assert fake_clock.sleepers == 1, (
                    "a second before the grace period ends, still draining"
                )
                fake_clock.advance(1.0)
            else:
                rec.gate.set()  # the in-flight reconcile finishes within the grace period
        await asyncio.wait_for(task, 30)
    assert rec.finished == (["default/slow"] if finishes else [])
    assert rec.active == set()
    assert mgr.queue.processing == frozenset()


@pytest.mark.usefixtures("crd")
async def test_sigterm_stops_run_gracefully(
    kubesim: KubeSim, kube: Kube, fake_clock: FakeClock
) -> None:
    rec = RecordingReconciler()
    await kube.create(resources.MPIJOB, plain_mpijob("pi"))
    task = asyncio.create_task(manager.run(settings_for(kubesim), rec.factory, clock=fake_clock))
    await eventually(lambda: rec.finished == ["default/pi"])  # handlers are installed by now
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(task, 30)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers removed again


@pytest.mark.parametrize(
    ("install", "overrides", "message"),
    [
        (
            False,
            {},
            r"the MPIJob CRD \(mpijobs\.kubeflow\.org, kubeflow\.org/v2beta1\) is not installed",
        ),
        (True, {"gang_scheduling": "volcano"}, r"needs the podgroups\.scheduling\.volcano\.sh CRD"),
    ],
    ids=["no-mpijob-crd", "gang-scheduling-without-podgroup-crd"],
)
async def test_missing_crd_is_fatal_with_a_clear_message(
    kube: Kube,
    install_mpijob_crd: Callable[[Kube], Awaitable[None]],
    new_manager: Callable[..., manager.Manager],
    install: bool,
    overrides: dict[str, Any],
    message: str,
) -> None:
    if install:
        await install_mpijob_crd(kube)
    mgr = new_manager(RecordingReconciler(), **overrides)
    with pytest.raises(manager.CRDNotInstalled, match=message):
        await asyncio.wait_for(mgr.run(), 30)
    with pytest.raises(aiohttp.ClientConnectionError):  # the health server is closed again
        await http_get(mgr, "/healthz")


@pytest.mark.usefixtures("crd")
async def test_namespace_scoping_watches_only_the_given_namespaces(
    kubesim: KubeSim, kube: Kube, new_manager: Callable[..., manager.Manager]
) -> None:
    for name in ("team-a", "team-b"):
        await kube.create(
            resources.NAMESPACE,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )
    rec = RecordingReconciler()
    mgr = new_manager(rec, namespaces=("team-a", "team-b"))
    async with running(mgr):
        for namespace in ("default", "team-b", "team-a"):
            await kube.create(
                resources.MPIJOB,
                {**plain_mpijob("pi"), "metadata": {"name": "pi", "namespace": namespace}},
            )
        await eventually(lambda: sorted(rec.called_keys()) == ["team-a/pi", "team-b/pi"])
        assert mgr.informers["mpijobs"].store.get("default/pi") is None
    # Nothing outside the two namespaces was ever listed or watched, so default/pi could not reach
    # the operator however long it ran (no need to wait and see that it does not).
    for verb in ("list", "watch"):
        requests = kubesim.control.recorded(
            verb=verb, resource="mpijobs", user_agent="mpi-operator"
        )
        assert {r.namespace for r in requests} == {"team-a", "team-b"}, verb
    assert rec.called_keys().count("default/pi") == 0


@pytest.mark.usefixtures("crd")
async def test_readyz_waits_for_cache_sync(
    kubesim: KubeSim, fake_clock: FakeClock, new_manager: Callable[..., manager.Manager]
) -> None:
    kubesim.control.inject_error(500, method="GET", path="/api/v1/secrets$", count=None)
    rec = RecordingReconciler()
    mgr = new_manager(rec)
    async with running(mgr, wait_started=False):
        # The preflight LIST of secrets and the informer's are retried on the clock: let it run.
        await fake_clock.run_until(eventually(lambda: mgr.readiness.unsynced() == ["secrets"]))
        assert await http_get(mgr, "/healthz") == (200, "ok\n")
        # The secrets LIST waits for its next retry on the clock: time stands still, it stays
        # unsynced.
        await fake_clock.parked()
        status, text = await http_get(mgr, "/readyz")
        assert (status, text) == (503, "not ready: informer caches not synced: secrets\n")
        assert not mgr.started.is_set()
        kubesim.control.clear_faults()
        await fake_clock.run_until(mgr.started.wait())
        assert await http_get(mgr, "/readyz") == (200, "ok\n")


@pytest.mark.usefixtures("crd")
async def test_leader_election_gates_workers_readiness_and_is_leader(
    kube: Kube, fake_clock: FakeClock, new_manager: Callable[..., manager.Manager]
) -> None:
    await kube.create(resources.MPIJOB, plain_mpijob("pi"))
    held = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "mpi-operator", "namespace": NS},
        "spec": {"holderIdentity": "other", "leaseDurationSeconds": 60},
    }
    lease = await kube.create(resources.LEASE, held)
    rec = RecordingReconciler()
    mgr = new_manager(rec, leader_elect=True, identity="me")
    async with running(mgr, wait_started=False):
        # The elector has read the lease, found it held, and waits for its next try on the clock.
        await eventually(lambda: mgr.elector is not None and mgr.elector.observed_holder == "other")
        await fake_clock.parked()
        assert mgr.readiness.caches_synced
        assert await http_get(mgr, "/readyz") == (503, "not ready: not the leader\n")
        assert "mpi_operator_is_leader 0.0" in (await http_get(mgr, "/metrics"))[1]
        assert rec.calls == []  # a standby keeps its caches warm but reconciles nothing
        assert len(mgr.queue) == 1  # ... and its queue already knows what to do
        await kube.replace(
            resources.LEASE, {**lease, "spec": {**lease["spec"], "holderIdentity": ""}}
        )
        await fake_clock.run_until(mgr.started.wait())
        assert RETRY_PERIOD <= fake_clock.now() <= RETRY_PERIOD * (1 + leaderelection.JITTER_FACTOR)
        await eventually(lambda: rec.called_keys() == ["default/pi"])
        assert await http_get(mgr, "/readyz") == (200, "ok\n")
        metrics = (await http_get(mgr, "/metrics"))[1]
        assert "mpi_operator_is_leader 1.0" in metrics
        assert 'rest_client_requests_total{code="200",method="PUT"}' in metrics
    got = await kube.get(resources.LEASE, "mpi-operator", NS)
    assert got["spec"]["holderIdentity"] == ""  # released on shutdown
    assert got["spec"]["leaseTransitions"] == 1
    events, _ = await kube.list(resources.EVENT, NS)
    assert any(
        e["reason"] == "LeaderElection" and e["message"] == "me became leader" for e in events
    )


@pytest.mark.usefixtures("crd")
async def test_losing_the_lease_is_fatal_and_stops_workers_at_once(
    kubesim: KubeSim, kube: Kube, fake_clock: FakeClock, new_manager: Callable[..., manager.Manager]
) -> None:
    rec = RecordingReconciler()
    rec.gate.clear()  # the reconcile would never finish by itself
    mgr = new_manager(rec, leader_elect=True, identity="me")
    task = asyncio.create_task(mgr.run())
    try:
        await asyncio.wait_for(mgr.started.wait(), 30)
        await kube.create(resources.MPIJOB, plain_mpijob("pi"))
        await eventually(lambda: rec.active == {"default/pi"})
        kubesim.control.inject_error(500, method="PUT", path="/leases/mpi-operator$", count=None)
        with pytest.raises(
            leaderelection.LeadershipLost, match="lost the lease default/mpi-operator"
        ):
            await fake_clock.run_until(task)
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
    # Renewals fail from the first one (one retry period in) until the renew deadline has passed.
    assert fake_clock.now() == pytest.approx(RETRY_PERIOD + RENEW_DEADLINE)
    assert rec.finished == []  # cancelled, not drained: a new leader may already be writing
    assert rec.active == set()
    got = await kube.get(resources.LEASE, "mpi-operator", NS)
    assert got["spec"]["holderIdentity"] == "me"  # not released: it was not ours to give any more


@pytest.mark.usefixtures("crd")
async def test_metrics_exposition_has_upstream_and_runtime_series(
    kube: Kube, new_manager: Callable[..., manager.Manager]
) -> None:
    rec = RecordingReconciler()
    mgr = new_manager(rec)
    async with running(mgr):
        await kube.create(resources.MPIJOB, plain_mpijob("pi"))
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
