"""Shared harness of the reconciler conformance suite (a helper module, not a test module).

The real `Manager` (no leader election) with the real reconciler against the `kubesim` fixture over
HTTP, a test client with its own user agent (so the operator's requests can be told apart in kubesim's
request record), MPIJob manifests, and bounded polling helpers that fail with a message saying what was
awaited and what was seen last. Test modules import the fixtures they use from here.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import pytest_asyncio
import yaml

import operator_testing
from kubesim.app import KubeSim
from kubesim.settings import SimSettings
from mpi_operator.controller import manager
from mpi_operator.kube import resources
from mpi_operator.kube.client import DEFAULT_USER_AGENT, Kube
from mpi_operator.kube.resources import Resource
from mpi_operator.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
CRD = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", False, "CustomResourceDefinition")
NS = "default"
IMAGE = "mpioperator/mpi-pi:openmpi"
OPERATOR_AGENT = DEFAULT_USER_AGENT
"""The operator's requests carry this user agent; the test client's carry `rc-test`."""
T = TypeVar("T")

FAST_PODS = {"kubesim/start-seconds": "0.1", "kubesim/ready-seconds": "0.1"}


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return SimSettings(start_seconds=0.1, ready_seconds=0.1, job_backoff_seconds=0.1, bookmark_seconds=0.5)


@pytest_asyncio.fixture
async def kube(kubesim: KubeSim) -> AsyncIterator[Kube]:
    client = await Kube.from_kubeconfig(str(kubesim.kubeconfig_path), qps=0, burst=1, user_agent="rc-test")
    try:
        await install_crd(client)
        yield client
    finally:
        await client.close()


async def install_crd(kube: Kube) -> None:
    crd = yaml.safe_load((ROOT / "crds" / "kubeflow.org_mpijobs.yaml").read_text())
    await kube.create(CRD, crd)

    async def established() -> bool:
        got = await kube.get(CRD, crd["metadata"]["name"])
        return any(c["type"] == "Established" for c in (got.get("status") or {}).get("conditions") or [])

    await eventually(established, "the MPIJob CRD to be established")


def settings_for(kubesim: KubeSim, **overrides: Any) -> Settings:
    return operator_testing.operator_settings(
        kubesim, **{"backoff_base_seconds": 0.05, "backoff_max_seconds": 1.0, **overrides}
    )


@contextlib.asynccontextmanager
async def running_operator(kubesim: KubeSim, **overrides: Any) -> AsyncIterator[manager.Manager]:
    """A started Manager with the MPIJob reconciler; stopped (and awaited) on exit."""
    async with operator_testing.running_operator(settings_for(kubesim, **overrides)) as mgr:
        yield mgr


@pytest_asyncio.fixture
async def operator(kubesim: KubeSim, kube: Kube) -> AsyncIterator[manager.Manager]:
    async with running_operator(kubesim) as mgr:
        yield mgr


async def eventually(
    check: Callable[[], Awaitable[T]], what: str, limit: float = 10.0, interval: float = 0.05
) -> T:
    """Polls `check` until it returns something truthy; fails after `limit` seconds saying `what`."""
    last: Any = None
    try:
        async with asyncio.timeout(limit):
            while True:
                try:
                    last = await check()
                except AssertionError as exc:
                    last = exc
                else:
                    if last:
                        return last
                await asyncio.sleep(interval)
    except TimeoutError:
        pytest.fail(f"timed out after {limit}s waiting for {what}; last seen: {last!r}")


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
                "Launcher": {"replicas": 1, "template": template(launcher_annotations, launcher_container)},
                "Worker": {"replicas": workers, "template": template(worker_annotations, worker_container)},
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


async def wait_condition(kube: Kube, name: str, kind: str, limit: float = 10.0) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        job = await get_job(kube, name)
        return job if condition_true(job, kind) else None

    return await eventually(check, f"MPIJob {name} condition {kind}=True", limit)


async def list_names(kube: Kube, resource: Resource, selector: str | None = None) -> list[str]:
    items, _ = await kube.list(resource, NS, label_selector=selector)
    return sorted(i["metadata"]["name"] for i in items if not i["metadata"].get("deletionTimestamp"))


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


async def wait_event(kube: Kube, name: str, reason: str, limit: float = 10.0) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        return next((e for e in await events_for(kube, name) if e.get("reason") == reason), None)

    return await eventually(check, f"an event {reason} on {name}", limit)


def controller_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    return next((r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def operator_writes(kubesim: KubeSim) -> list[str]:
    """Every write the operator sent, as `verb resource/name[/subresource]`."""
    return [
        f"{r.verb} {r.resource}/{r.name}{'/' + r.subresource if r.subresource else ''}"
        for r in kubesim.control.recorded(user_agent=OPERATOR_AGENT)
        if r.verb in ("create", "update", "patch", "delete", "deletecollection")
    ]


async def quiet(kubesim: KubeSim, seconds: float = 1.0) -> list[str]:
    """The operator's writes over a window of `seconds` starting now."""
    kubesim.control.clear_requests()
    await asyncio.sleep(seconds)  # a window of observation, not a wait for a condition
    return operator_writes(kubesim)
