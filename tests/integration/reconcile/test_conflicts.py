"""Objects with the job's child names that it does not control are never adopted or overwritten; the
job reports each with upstream's `ErrResourceExists` Warning and retries with backoff, and recovers
once the object is gone (upstream `TestConfigMapNotControlledByUs`,
`TestWorkerServiceNotControlledByUs`, `TestSecretNotControlledByUs`, `TestWorkerNotControlledByUs`,
`TestLauncherNotControlledByUs`).

Both ways a stranger can hide: carrying the operator's watch label (cached, so the plan sees it) and
carrying no label at all (invisible to the label-filtered informers: found behind the create's
409)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.kube.resources import Resource
from mpi_operator.runtime.manager import Manager

from .harness import NS, OPERATOR_AGENT, condition_true, get_job, mpijob, wait_event

POD_SPEC = {"containers": [{"name": "c", "image": "busybox"}]}
STRANGERS: dict[str, tuple[Resource, str, dict[str, Any]]] = {
    "service": (resources.SERVICE, "pi", {"spec": {"clusterIP": "None", "selector": {"a": "b"}}}),
    "configmap": (resources.CONFIG_MAP, "pi-config", {"data": {"hostfile": "mine\n"}}),
    "secret": (resources.SECRET, "pi-ssh", {"type": "Opaque", "data": {"k": "dg=="}}),
    "worker": (
        resources.POD,
        "pi-worker-0",
        {"metadata": {"annotations": {"kubesim/start-seconds": "3600"}}, "spec": POD_SPEC},
    ),
    "launcher": (
        resources.JOB,
        "pi-launcher",
        {"spec": {"suspend": True, "template": {"spec": {**POD_SPEC, "restartPolicy": "Never"}}}},
    ),
}
WATCH_LABEL = {"training.kubeflow.org/operator-name": "mpi-operator"}


@pytest.mark.parametrize("labelled", [True, False], ids=["cached", "invisible"])
@pytest.mark.parametrize("which", list(STRANGERS))
async def test_foreign_child_is_reported_never_adopted_and_the_job_recovers(
    kubesim: KubeSim, kube: Kube, operator: Manager, which: str, labelled: bool
) -> None:
    resource, name, extra = STRANGERS[which]
    body: dict[str, Any] = {"apiVersion": resource.api_version, "kind": resource.kind, **extra}
    body["metadata"] = {**extra.get("metadata", {}), "name": name, "namespace": NS}
    if labelled:
        body["metadata"]["labels"] = dict(WATCH_LABEL)
    stranger = await kube.create(resource, body)
    await kube.create(resources.MPIJOB, mpijob("pi"))

    event = await wait_event(kube, "pi", "ErrResourceExists")
    assert event["type"] == "Warning"
    assert event["message"] == (
        f'Resource "{name}" of Kind "{resource.kind}" already exists and is not managed by MPIJob'
    )

    async def retried() -> bool:
        events = [e for e in await _events(kube) if e.get("reason") == "ErrResourceExists"]
        return sum(e.get("count", 1) for e in events) >= 2

    await eventually(retried, what="a retry reporting the conflict again")
    now = await kube.get(resource, name, NS)
    writes = [
        r.verb
        for r in kubesim.control.recorded(
            resource=resource.plural, name=name, user_agent=OPERATOR_AGENT
        )
        if r.verb not in ("get", "list", "watch")
    ]
    assert writes == [], f"the operator wrote to the stranger: {writes}"
    assert not now["metadata"].get("ownerReferences"), "adopted"
    if "data" in stranger:
        assert now["data"] == stranger["data"]
    assert not condition_true(await get_job(kube, "pi"), "Running")

    await kube.delete(resource, name, namespace=NS, grace_period_seconds=0)

    async def recovered() -> bool:
        try:
            obj = await kube.get(resource, name, NS)
        except Exception:
            return False
        refs = obj["metadata"].get("ownerReferences") or []
        return any(r.get("kind") == "MPIJob" and r.get("controller") for r in refs)

    await eventually(recovered, what=f"the job to create its own {name}", within=15)


async def _events(kube: Kube) -> list[dict[str, Any]]:
    items, _ = await kube.list(resources.EVENT, NS, field_selector="involvedObject.name=pi")
    return items
