"""Shared helpers of the reconciler conformance suite (a helper module, not a test module).

The real `Manager` (no leader election) with the real reconciler against the `kubesim` fixture over
HTTP, driven by a test client with its own user agent (so the operator's requests can be told apart
in kubesim's request record), MPIJob manifests, and waits that fail saying what was awaited and what
was seen last. The fixtures (`kube`, `operator`) are in tests/conftest.py, this tier's
`kubesim_settings` in its conftest.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import operator_testing
from kubesim.app import KubeSim
from kubesim.store import clone
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import DEFAULT_USER_AGENT, Kube
from mpi_operator.kube.resources import Resource
from mpi_operator.runtime import manager

CRD = operator_testing.CRD
NS = "default"
IMAGE = "mpioperator/mpi-pi:openmpi"
OPERATOR_AGENT = DEFAULT_USER_AGENT
"""The operator's requests carry this user agent; the test client's carry
`operator_testing.TEST_AGENT`."""
WITHIN = 30.0
"""The ceiling of this suite's waits: what a broken run waits before failing, not a speed
requirement."""

FAST_PODS = {"kubesim/start-seconds": "0.1", "kubesim/ready-seconds": "0.1"}


@contextlib.asynccontextmanager
async def running_operator(kubesim: KubeSim, **overrides: Any) -> AsyncIterator[manager.Manager]:
    """A started Manager with the MPIJob reconciler (`overrides`: Settings fields); stopped on
    exit."""
    settings = operator_testing.quick_settings(kubesim, **overrides)
    async with operator_testing.running_operator(settings) as mgr:
        yield mgr


def pod_group_crd(resource: Resource) -> dict[str, Any]:
    """A minimal stand-in for a gang scheduler's PodGroup CRD (free-form spec and status): the
    operator only writes PodGroups, and kubesim's gang schedulers act once the kind is served."""
    schema = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{resource.plural}.{resource.group}"},
        "spec": {
            "group": resource.group,
            "scope": "Namespaced",
            "names": {"plural": resource.plural, "singular": "podgroup", "kind": "PodGroup"},
            "versions": [
                {
                    "name": resource.version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                }
            ],
        },
    }


async def install_pod_groups(kube: Kube, resource: Resource) -> None:
    """Installs the PodGroup CRD and waits until the kind is served."""
    await kube.create(CRD, pod_group_crd(resource))

    async def served() -> bool:
        try:
            await kube.list(resource, NS)
        except Exception:
            return False
        return True

    await eventually(served, what=f"{resource.plural}.{resource.group} to be served")


def container(name: str = "main", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": IMAGE, **fields}


def mpijob(
    name: str,
    *,
    workers: int = 2,
    api_version: str = "kubeflow.org/v2beta1",
    launcher_annotations: dict[str, str] | None = None,
    worker_annotations: dict[str, str] | None = None,
    launcher_container: dict[str, Any] | None = None,
    worker_container: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A v2beta1 MPIJob manifest; `spec` takes camelCase fields (`runPolicy={...}`)."""

    def template(annotations: dict[str, str] | None, main: dict[str, Any] | None) -> dict[str, Any]:
        return {
            "metadata": {"annotations": {**FAST_PODS, **(annotations or {})}},
            "spec": {"containers": [main or container()]},
        }

    body: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "launcherCreationPolicy": "AtStartup",
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "template": template(launcher_annotations, launcher_container),
                },
                "Worker": {
                    "replicas": workers,
                    "template": template(worker_annotations, worker_container),
                },
            },
            **copy.deepcopy(spec),
        },
    }
    return body


async def get_job(kube: Kube, name: str) -> dict[str, Any]:
    return await kube.get(resources.MPIJOB, name, NS)


def conditions(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (job.get("status") or {}).get("conditions") or []}


def condition_true(job: dict[str, Any], kind: str) -> bool:
    return conditions(job).get(kind, {}).get("status") == "True"


async def wait_condition(
    kube: Kube, name: str, kind: str, within: float = WITHIN
) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        job = await get_job(kube, name)
        return job if condition_true(job, kind) else None

    return await eventually(check, within=within, what=f"MPIJob {name} condition {kind}=True")


async def list_names(kube: Kube, resource: Resource, selector: str | None = None) -> list[str]:
    items, _ = await kube.list(resource, NS, label_selector=selector)
    return sorted(
        i["metadata"]["name"] for i in items if not i["metadata"].get("deletionTimestamp")
    )


async def pods_of(kube: Kube, name: str, role: str) -> list[dict[str, Any]]:
    items, _ = await kube.list(
        resources.POD,
        NS,
        label_selector=f"training.kubeflow.org/job-name={name},training.kubeflow.org/job-role={role}",
    )
    return items


async def events_for(kube: Kube, name: str) -> list[dict[str, Any]]:
    items, _ = await kube.list(resources.EVENT, NS, field_selector=f"involvedObject.name={name}")
    return items


async def wait_event(kube: Kube, name: str, reason: str, within: float = WITHIN) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        return next((e for e in await events_for(kube, name) if e.get("reason") == reason), None)

    return await eventually(check, within=within, what=f"an event {reason} on {name}")


def store_past_admission(
    kubesim: KubeSim, name: str, change: Callable[[dict[str, Any]], None]
) -> None:
    """Rewrites the stored MPIJob `name` behind the API server's back (as an old CRD without a rule,
    or a direct etcd write, would leave it): `change` edits a copy, which is committed as a MODIFIED
    event."""
    cluster = kubesim.cluster
    rt = cluster.registry.by_plural("kubeflow.org", "v2beta1", "mpijobs")
    assert rt is not None
    old = cluster.store.get(rt.storage_key, NS, name)
    assert old is not None
    new: dict[str, Any] = clone(old)
    change(new)
    cluster._commit("MODIFIED", rt, new, old)


def controller_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    return next(
        (r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None
    )


def operator_writes(kubesim: KubeSim) -> list[str]:
    """Every write the operator sent, as `verb resource/name[/subresource]`."""
    return [
        f"{r.verb} {r.resource}/{r.name}{'/' + r.subresource if r.subresource else ''}"
        for r in kubesim.control.recorded(user_agent=OPERATOR_AGENT)
        if r.verb in ("create", "update", "patch", "delete", "deletecollection")
    ]


def reconciles(mgr: manager.Manager) -> float:
    """Reconciles that ran to the end, whatever their result."""
    registry = mgr.metrics.registry
    return sum(
        registry.get_sample_value("mpi_operator_reconcile_total", {"result": result}) or 0.0
        for result in ("success", "requeue_after", "error", "permanent_error")
    )


def idle(mgr: manager.Manager) -> bool:
    """Nothing queued or being reconciled, and no Event write pending (the recorder writes in the
    background, in a task of that name)."""
    recording = any(t.get_name() == "event-recorder" and not t.done() for t in asyncio.all_tasks())
    return len(mgr.queue) == 0 and not mgr.queue.processing and not recording


_pokes = itertools.count()


async def settle(kube: Kube, mgr: manager.Manager, name: str) -> None:
    """Returns once `mgr` has reconciled MPIJob `name` as it is now and has nothing left to do.

    Instead of waiting "long enough" for the operator to finish, this makes it look at the job once
    more (an annotation change, which the operator owns nothing of), waits until its informer has
    seen that change (its event handlers run in the same step as the cache update, so the job is
    queued by then), and then until the operator is idle (`idle`)."""
    before = reconciles(mgr)
    patch = {"metadata": {"annotations": {"test.mpi-operator/poke": str(next(_pokes))}}}
    poked = await kube.patch(resources.MPIJOB, name, patch, namespace=NS)
    version = poked["metadata"]["resourceVersion"]

    def seen_and_idle() -> bool:
        cached = mgr.stores.mpijobs.get(f"{NS}/{name}") if mgr.stores is not None else None
        assert cached is not None, f"MPIJob {name} not in the operator's cache"
        assert int(cached["metadata"]["resourceVersion"]) >= int(version), "the poke not seen yet"
        return reconciles(mgr) > before and idle(mgr)

    await eventually(
        seen_and_idle, within=WITHIN, what=f"the operator to reconcile {name} and go idle"
    )


async def quiet(kubesim: KubeSim, kube: Kube, mgr: manager.Manager, name: str) -> list[str]:
    """The operator's writes while it settles (`settle`) MPIJob `name` once more, starting from an
    idle operator: what a converged job's reconcile writes, which should be nothing."""
    await settle(kube, mgr, name)
    kubesim.control.clear_requests()
    await settle(kube, mgr, name)
    return operator_writes(kubesim)
