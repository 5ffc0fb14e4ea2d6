"""What the reconciler remembers of a job (`reconcile.memory`) lives in one place, and a deleted job
leaves nothing of it behind: one `forget` when the job leaves the cache."""

from __future__ import annotations

from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.reconcile.reconciler import MPIJobReconciler
from mpi_operator.runtime.manager import Manager

from .harness import NS, mpijob, wait_condition


async def test_a_deleted_job_leaves_nothing_in_the_memory(kube: Kube, operator: Manager) -> None:
    await kube.create(resources.MPIJOB, mpijob("pi"))
    await kube.create(resources.MPIJOB, mpijob("other"))
    await wait_condition(kube, "pi", "Running")
    assert operator.workers is not None
    reconciler = operator.workers.reconciler
    assert isinstance(reconciler, MPIJobReconciler)
    memory = reconciler.memories.get(f"{NS}/pi")
    assert memory is not None
    assert memory.status_written_at is not None

    await kube.delete(resources.MPIJOB, "pi", namespace=NS)

    def forgotten() -> bool:
        return f"{NS}/pi" not in reconciler.memories

    await eventually(forgotten, what="the deleted job's memory forgotten")
    assert f"{NS}/other" in reconciler.memories
