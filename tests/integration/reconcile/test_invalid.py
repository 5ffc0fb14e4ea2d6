"""Bad input (upstream `TestDoNothingWithInvalidMPIJob`, plus what upstream lacks): an invalid
MPIJob creates nothing and explains itself field by field in an `Invalid` condition and a
`ValidationError` Warning (once, not on every sync); fixing the spec recovers. Junk the CRD schema
would refuse (stored behind the API's back) never crashes the operator, which keeps reconciling
other jobs. A typo in a pod template does not stop the job but becomes a Warning event naming the
field."""

from __future__ import annotations

import copy
import json
from typing import Any

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.api.normalize import LAST_APPLIED
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .harness import (
    NS,
    OPERATOR_AGENT,
    conditions,
    events_for,
    get_job,
    list_names,
    mpijob,
    operator_writes,
    settle,
    store_past_admission,
    wait_condition,
    wait_event,
)


async def all_children(kube: Kube) -> list[str]:
    names = []
    for resource in (
        resources.SERVICE,
        resources.CONFIG_MAP,
        resources.SECRET,
        resources.POD,
        resources.JOB,
    ):
        names += await list_names(kube, resource)
    return names


async def test_invalid_job_creates_nothing_explains_itself_and_recovers_when_fixed(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    body = mpijob("pi")
    # Accepted by the CRD schema (pod templates are free-form) but not a runnable MPIJob.
    body["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"] = [
        {"name": "main"}
    ]
    body["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"] = []
    await kube.create(resources.MPIJOB, body)

    job = await wait_condition(kube, "pi", "Invalid")
    cond = conditions(job)["Invalid"]
    assert cond["reason"] == "ValidationError"
    assert cond["message"].startswith("Found validation errors: [")
    assert (
        "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].image: Required value"
        in cond["message"]
    )
    assert "spec.mpiReplicaSpecs.Worker.template.spec.containers: Required value" in cond["message"]
    assert [c["type"] for c in job["status"]["conditions"]] == [
        "Invalid"
    ]  # `kubectl get mpij` shows it
    event = await wait_event(kube, "pi", "ValidationError")
    assert (event["type"], event["message"]) == ("Warning", cond["message"])

    # Nothing created, and further syncs (an unrelated update) repeat neither the event nor the
    # write.
    await settle(kube, operator, "pi")
    kubesim.control.clear_requests()
    await kube.patch(resources.MPIJOB, "pi", {"metadata": {"labels": {"x": "y"}}}, namespace=NS)
    await settle(kube, operator, "pi")
    writes = operator_writes(kubesim)
    assert writes == [], writes
    assert await all_children(kube) == []
    events = [e for e in await events_for(kube, "pi") if e["reason"] == "ValidationError"]
    assert [e.get("count", 1) for e in events] == [1]

    fix = {
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {
                    "template": {"spec": {"containers": [{"name": "main", "image": "mpi:1"}]}}
                },
                "Worker": {
                    "template": {"spec": {"containers": [{"name": "main", "image": "mpi:1"}]}}
                },
            }
        }
    }
    await kube.patch(resources.MPIJOB, "pi", fix, namespace=NS)
    job = await wait_condition(kube, "pi", "Running")
    assert "Invalid" not in conditions(job)
    assert job["status"]["conditions"][0]["type"] == "Created"
    assert job["status"]["observedGeneration"] == 2


async def test_the_event_names_a_typo_the_api_server_dropped_and_its_fix(
    kube: Kube, operator: Manager
) -> None:
    # As `kubectl apply --validate=false` leaves it: the typo pruned, but kept in the annotation.
    body = mpijob("typo")
    body["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"] = [
        {"name": "main"}
    ]
    applied = copy.deepcopy(body)
    applied["spec"]["slotPerWorker"] = 2
    body["metadata"]["annotations"] = {LAST_APPLIED: json.dumps(applied)}
    await kube.create(resources.MPIJOB, body)
    event = await wait_event(kube, "typo", "ValidationError")
    hint = 'unknown field, dropped by the API server; did you mean "slotsPerWorker"?'
    assert f"spec.slotPerWorker: {hint}" in event["message"], event["message"]


async def test_junk_objects_never_crash_the_operator(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    await kube.create(resources.MPIJOB, mpijob("junk", workers=1))
    await wait_condition(kube, "junk", "Running")

    # `spec: 5` and a status of the wrong type, written past admission (the CRD schema refuses
    # them).
    def junk(job: dict[str, Any]) -> None:
        job["spec"] = 5
        job["status"] = ["not", "a", "status"]
        job["metadata"]["generation"] = 2

    store_past_admission(kubesim, "junk", junk)

    event = await wait_event(kube, "junk", "ValidationError")
    assert "spec" in event["message"]
    # Still alive and reconciling: a new job converges.
    await kube.create(resources.MPIJOB, mpijob("ok", workers=1))
    await wait_condition(kube, "ok", "Running")
    assert operator.workers is not None
    assert not any(task.done() for task in operator.workers.tasks)


async def test_pod_template_typo_is_reported_and_the_job_still_runs(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    worker = {"name": "main", "image": "mpi:1", "resources": {"request": {"cpu": "1"}}}
    await kube.create(resources.MPIJOB, mpijob("pi", worker_container=worker))
    event = await wait_event(kube, "pi", "PodTemplateWarning")
    assert event["type"] == "Warning"
    assert "mpiReplicaSpecs.Worker.template" in event["message"]
    assert "spec.containers[0].resources.request" in event["message"]
    await wait_condition(kube, "pi", "Running")
    # The only warnings the API sent the operator are about the user's typo.
    warnings = kubesim.control.warnings(user_agent=OPERATOR_AGENT)
    assert warnings
    assert all("resources.request" in w for w in warnings), warnings

    async def one_event() -> bool:
        return (
            len([e for e in await events_for(kube, "pi") if e["reason"] == "PodTemplateWarning"])
            == 1
        )

    await eventually(one_event, what="a single PodTemplateWarning event (both workers aggregated)")
    job = await get_job(kube, "pi")
    assert "Invalid" not in conditions(job)
