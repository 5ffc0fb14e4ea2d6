"""The operator's caches hold what `cache.transforms` keeps, for objects that arrived by list and by
watch alike: pods without their containers and volumes (the bulk of a pod, never read back), every
kind without managedFields, and everything the reconcile reads still there (the rest of this tier
proves that)."""

from __future__ import annotations

from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .harness import NS, get_job, mpijob, wait_condition


async def test_cached_pods_keep_only_what_the_operator_reads(kube: Kube, operator: Manager) -> None:
    await kube.create(resources.MPIJOB, mpijob("pi"))
    await wait_condition(kube, "pi", "Running")

    async def workers_ready() -> bool:
        return (await get_job(kube, "pi"))["status"]["replicaStatuses"]["Worker"].get("ready") == 2

    await eventually(workers_ready, what="Worker.ready == 2")
    assert operator.stores is not None
    served = await kube.get(resources.POD, "pi-worker-0", NS)
    cached = operator.stores.pods.get(f"{NS}/pi-worker-0")
    assert cached is not None
    assert served["spec"]["containers"]
    assert "containers" not in cached["spec"]
    assert "volumes" not in cached["spec"]
    assert cached["metadata"]["labels"] == served["metadata"]["labels"]
    assert cached["metadata"]["ownerReferences"] == served["metadata"]["ownerReferences"]
    ready = [c for c in served["status"]["conditions"] if c["type"] == "Ready"]
    assert len(served["status"]["conditions"]) > 1
    assert cached["status"]["conditions"] == ready
    assert cached["status"]["phase"] == served["status"]["phase"] == "Running"
    launcher = operator.stores.jobs.get(f"{NS}/pi-launcher")
    assert launcher is not None
    assert launcher["spec"]["template"]["spec"]["containers"], "Jobs may be updated: kept whole"
