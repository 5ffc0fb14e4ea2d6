"""What a chaos driver does to a cluster as a user would (scales through each path, suspends), the
operator requests it may fail, and the retry that lets the driver's own writes ride out a fault.

Shared by `tests/integration/elastic/chaos_driver.py` and `bench/chaos.py`; the order of every tuple
is part of a seed's schedule (the drivers draw from them with `random.Random`), so append, never
reorder.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from mpi_operator.kube import errors, resources
from mpi_operator.kube.client import Kube

NS = "default"
SCALE_PATHS = ("merge", "json", "scale")
FAULT_STATUSES = (500, 503, 429)
"""Injected answers: a 429 carries Retry-After (kubesim's default 1 s), which the operator
honours."""
FAULT_PATHS = (
    rf"^/api/v1/namespaces/{NS}/pods",
    rf"^/api/v1/namespaces/{NS}/configmaps",
    rf"^/apis/kubeflow\.org/v2beta1/namespaces/{NS}/mpijobs",
    rf"^/apis/kubeflow\.org/v2beta1/namespaces/{NS}/mpijobs/[^/]+/status$",
    rf"^/apis/batch/v1/namespaces/{NS}/jobs",
    rf"^/api/v1/namespaces/{NS}/events",
)
"""The operator's own writes and reads of one namespace (kubesim's file endpoint is not under
/api)."""
WATCH_PATHS = (r"^/api/v1/pods$", r"^/api/v1/configmaps$", r"^/apis/kubeflow\.org/v2beta1/mpijobs$")
"""The informers' cluster-wide LIST and WATCH (the operator has no namespaced reads)."""
FAULT_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "*")


async def scale(kube: Kube, job: str, replicas: int, via: str, *, namespace: str = NS) -> None:
    """Sets Worker.replicas by a merge patch, a JSON patch, an edit (PUT) or the scale
    subresource."""
    if via == "merge":
        patch = {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": replicas}}}}
        await kube.patch(resources.MPIJOB, job, patch, namespace=namespace)
    elif via == "json":
        ops = [
            {"op": "replace", "path": "/spec/mpiReplicaSpecs/Worker/replicas", "value": replicas}
        ]
        await kube.patch(resources.MPIJOB, job, ops, namespace=namespace, patch_type="json")
    elif via == "edit":  # kubectl edit: GET, change, PUT with the resourceVersion read
        obj = await kube.get(resources.MPIJOB, job, namespace)
        obj["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = replicas
        await kube.replace(resources.MPIJOB, obj)
    else:
        assert via == "scale"
        await kube.patch(
            resources.MPIJOB,
            job,
            {"spec": {"replicas": replicas}},
            namespace=namespace,
            subresource="scale",
        )


async def suspend(kube: Kube, job: str, value: bool, *, namespace: str = NS) -> None:
    """`kubectl patch --type merge -p '{"spec":{"runPolicy":{"suspend":...}}}'`."""
    await kube.patch(
        resources.MPIJOB, job, {"spec": {"runPolicy": {"suspend": value}}}, namespace=namespace
    )


async def retry_transient(call: Callable[[], Awaitable[object]], *, attempts: int = 3) -> bool:
    """Runs a driver's write; the client retries 5xx and 429 five times already, and a chaos step
    may outlast that once. False when the object is gone (a step raced a deletion), which is no
    error."""
    for attempt in range(attempts):
        try:
            await call()
            return True
        except errors.NotFound:
            return False
        except errors.ApiError as exc:
            if attempt == attempts - 1 or not (exc.status >= 500 or exc.status == 429):
                raise
            await asyncio.sleep(0.2)
    return False
