"""Bounds that say why (issue 13): the CRD refuses more workers than the ceiling where it can; the
operator refuses the rest (the v1alpha1 `gpus` split, objects that got past admission, its own lower
`--max-workers-per-job`) with the `Invalid` condition and a `ValidationError` event naming the field
and the limit; and children the API would refuse for their size or labels make the job Invalid
before any write, instead of a retry loop. Before these bounds, `Worker.replicas: 2147483647` froze
the operator."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kubesim.app import KubeSim
from mpi_operator.api.constants import MAX_WORKER_REPLICAS
from mpi_operator.kube import errors, resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .harness import (
    NS,
    conditions,
    get_job,
    list_names,
    mpijob,
    operator_writes,
    quiet,
    running_operator,
    settle,
    store_past_admission,
    wait_condition,
    wait_event,
)

INT32_MAX = 2**31 - 1
CEILING_WORDS = f"must be no more than {MAX_WORKER_REPLICAS} workers, the most an MPIJob may have"
V1ALPHA1 = dataclasses.replace(resources.MPIJOB, version="v1alpha1")


async def children(kube: Kube) -> list[str]:
    names: list[str] = []
    for resource in (
        resources.SERVICE,
        resources.CONFIG_MAP,
        resources.SECRET,
        resources.POD,
        resources.JOB,
    ):
        names += await list_names(kube, resource)
    return names


def child_writes(kubesim: KubeSim) -> list[str]:
    """The operator's writes other than to an MPIJob's status and to Events (there should be
    none)."""
    return [
        w
        for w in operator_writes(kubesim)
        if not (w.startswith("patch mpijobs/") and w.endswith("/status")) and " events/" not in w
    ]


async def invalid_message(kube: Kube, name: str) -> str:
    job = await wait_condition(kube, name, "Invalid")
    condition = conditions(job)["Invalid"]
    assert condition["reason"] == "ValidationError"
    event = await wait_event(kube, name, "ValidationError")
    assert (event["type"], event["message"]) == ("Warning", condition["message"])
    return str(condition["message"])


async def test_the_crd_refuses_more_workers_than_the_ceiling_and_takes_the_ceiling(
    kube: Kube,
) -> None:
    with pytest.raises(errors.Invalid) as caught:
        await kube.create(resources.MPIJOB, mpijob("huge", workers=INT32_MAX))
    assert "spec.mpiReplicaSpecs.Worker.replicas" in caught.value.message
    assert f"less than or equal to {MAX_WORKER_REPLICAS}" in caught.value.message
    with pytest.raises(errors.Invalid, match=f"less than or equal to {MAX_WORKER_REPLICAS}"):
        await kube.create(
            resources.MPIJOB, mpijob("elastic", elasticPolicy={"maxReplicas": INT32_MAX})
        )

    await kube.create(
        resources.MPIJOB, mpijob("ceiling", workers=MAX_WORKER_REPLICAS)
    )  # no operator here
    with pytest.raises(errors.Invalid, match=f"less than or equal to {MAX_WORKER_REPLICAS}"):
        await kube.patch(
            resources.MPIJOB,
            "ceiling",
            {"spec": {"replicas": MAX_WORKER_REPLICAS + 1}},
            namespace=NS,
            subresource="scale",
        )
    job = await get_job(kube, "ceiling")
    assert job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == MAX_WORKER_REPLICAS


def v1alpha1_job(name: str, gpus: int) -> dict[str, Any]:
    container = {"name": "tf", "image": "mpioperator/tensorflow-benchmarks:latest"}
    return {
        "apiVersion": "kubeflow.org/v1alpha1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"gpus": gpus, "template": {"spec": {"containers": [container]}}},
    }


async def test_v1alpha1_gpus_2_31_is_refused_by_the_operator_naming_the_limit(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    # The API server cannot refuse it: the split depends on the template's GPUs and --gpus-per-node.
    await kube.create(V1ALPHA1, v1alpha1_job("tf", INT32_MAX))
    message = await invalid_message(kube, "tf")
    assert (
        f"spec.gpus: Invalid value: {INT32_MAX}: {INT32_MAX} workers of 1 nvidia.com/gpu: "
        in message
    )
    assert CEILING_WORDS in message
    assert await children(kube) == []
    assert child_writes(kubesim) == []


async def test_2_31_workers_past_admission_are_refused_and_the_operator_keeps_serving(
    kubesim: KubeSim, kube: Kube
) -> None:
    await kube.create(resources.MPIJOB, mpijob("huge", workers=1))

    # Stored behind the API server's back (an old CRD without the ceiling, or a direct etcd write).
    def huge(job: dict[str, Any]) -> None:
        job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = INT32_MAX

    store_past_admission(kubesim, "huge", huge)

    async with running_operator(kubesim):
        # kubesim, like an API server without CRD validation ratcheting, refuses any status write on
        # an object its schema refuses, so the event carries what the Invalid condition would.
        event = await wait_event(kube, "huge", "ValidationError")
        assert event["type"] == "Warning"
        words = f"spec.mpiReplicaSpecs.Worker.replicas: Invalid value: {INT32_MAX}: {CEILING_WORDS}"
        assert words in event["message"]
        assert await children(kube) == []
        # The loop was never held up: another job is served.
        await kube.create(resources.MPIJOB, mpijob("small", workers=1))
        await wait_condition(kube, "small", "Running")
    assert [w for w in child_writes(kubesim) if "huge" in w] == []


async def test_the_operator_limit_lowers_the_ceiling_and_a_fix_recovers(
    kubesim: KubeSim, kube: Kube
) -> None:
    async with running_operator(kubesim, max_workers_per_job=2) as mgr:
        await kube.create(resources.MPIJOB, mpijob("three", workers=3))
        message = await invalid_message(kube, "three")
        assert (
            "spec.mpiReplicaSpecs.Worker.replicas: Invalid value: 3: must be no more than 2 "
            "workers, the "
            "most this operator allows per MPIJob (--max-workers-per-job)" in message
        )
        assert await children(kube) == []
        await kube.create(resources.MPIJOB, mpijob("two", workers=2))
        await wait_condition(kube, "two", "Running")

        patch = {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 2}}}}
        await kube.patch(resources.MPIJOB, "three", patch, namespace=NS)
        job = await wait_condition(kube, "three", "Running")
        assert "Invalid" not in conditions(job)
        await settle(kube, mgr, "three")


def annotated(size: int) -> dict[str, str]:
    return {"example.com/notes": "n" * size}


# name -> (the MPIJob's overrides, what the Invalid message must say)
OVERSIZED = {
    "worker annotations over 256 KiB": (
        {"worker_annotations": annotated(300 * 1024)},
        (
            "Pod default/pi-worker-0 (and 1 more Pods): metadata.annotations: ",
            " bytes, more than the 262144 bytes (256 KiB) the API allows",
            "(from spec.mpiReplicaSpecs.Worker.template)",
        ),
    ),
    "launcher annotations over 256 KiB": (
        {"launcher_annotations": annotated(300 * 1024)},
        (
            "Job default/pi-launcher: spec.template.metadata.annotations: ",
            " bytes, more than the 262144 bytes (256 KiB) the API allows",
            "(from spec.mpiReplicaSpecs.Launcher.template)",
        ),
    ),
}


@pytest.mark.parametrize(("overrides", "words"), OVERSIZED.values(), ids=list(OVERSIZED))
async def test_children_the_api_would_refuse_make_the_job_invalid_without_a_write(
    kubesim: KubeSim,
    kube: Kube,
    operator: Manager,
    overrides: dict[str, Any],
    words: tuple[str, ...],
) -> None:
    await kube.create(resources.MPIJOB, mpijob("pi", **overrides))
    message = await invalid_message(kube, "pi")
    assert all(part in message for part in words), message
    assert await children(kube) == []
    assert child_writes(kubesim) == []
    # No retry loop: the next syncs write nothing and none of them fails.
    failed = reconciles_with(operator, "error")
    assert await quiet(kubesim, kube, operator, "pi") == []
    assert reconciles_with(operator, "error") == failed


async def test_a_worker_label_value_too_long_makes_the_job_invalid(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    body = mpijob("pi")
    body["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"]["labels"] = {"team": "t" * 64}
    await kube.create(resources.MPIJOB, body)
    message = await invalid_message(kube, "pi")
    assert (
        'metadata.labels[team]: value "tttttttttttttttttttttttttttttttttttttttt..." is 64 '
        "characters, more "
        "than the 63 a label value may have (from spec.mpiReplicaSpecs.Worker.template)" in message
    )
    assert await children(kube) == []
    assert child_writes(kubesim) == []
    assert await quiet(kubesim, kube, operator, "pi") == []


def reconciles_with(mgr: Manager, result: str) -> float:
    return (
        mgr.metrics.registry.get_sample_value("mpi_operator_reconcile_total", {"result": result})
        or 0.0
    )


async def test_host_names_longer_than_a_dns_name_make_the_job_invalid(
    kubesim: KubeSim, kube: Kube
) -> None:
    # With this --cluster-domain, `pi-worker-1.pi.default.svc.<domain>` is 270 characters: the
    # hostfile cannot list it, and before this check every sync failed building it, with no
    # condition and no event.
    domain = ".".join(["d" * 60] * 4)
    async with running_operator(kubesim, cluster_domain=domain):
        await kube.create(resources.MPIJOB, mpijob("pi", workers=2))
        message = await invalid_message(kube, "pi")
        assert 'metadata.name: Invalid value: "pi": the workers\' host names' in message
        assert "would be up to 270 characters, more than the 253 of a DNS name" in message
        assert await children(kube) == []
    assert child_writes(kubesim) == []
