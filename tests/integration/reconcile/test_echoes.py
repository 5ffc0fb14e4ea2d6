"""The syncs that only the echoes of the operator's own writes cause are skipped
(`reconcile.echoes`), and nothing else is: a change by another writer after them is acted on as
before."""

from __future__ import annotations

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .harness import NS, WITHIN, mpijob, operator_writes, running_operator, settle

PENDING = {"kubesim/start-seconds": "3600"}
"""Workers that stay Pending, and no launcher until they are Ready: after the first sync, only the
echoes of its writes come back."""


def job(workers: int) -> dict[str, object]:
    return mpijob(
        "pi",
        workers=workers,
        worker_annotations=PENDING,
        launcherCreationPolicy="WaitForWorkersReady",
    )


def sample(mgr: Manager, name: str) -> float:
    return mgr.metrics.registry.get_sample_value(name) or 0.0


async def test_the_syncs_the_echoes_of_a_jobs_creates_cause_are_skipped(
    kubesim: KubeSim, kube: Kube
) -> None:
    async with running_operator(kubesim) as mgr:
        await kube.create(resources.MPIJOB, job(8), namespace=NS)

        def created() -> bool:
            return sum(w.startswith("create pods/") for w in operator_writes(kubesim)) == 8

        await eventually(created, sim=kubesim, within=WITHIN, what="the eight workers created")
        # Their ADDED events (and the scheduler's bindings, which no sync reads) queue the job
        # again: that sync hears only echoes.
        await eventually(
            lambda: sample(mgr, "mpi_operator_reconcile_echoes_total") >= 1,
            sim=kubesim,
            within=WITHIN,
            what="a sync skipped as an echo",
        )
        await settle(kube, mgr, "pi")
        # The echoes were heard, not planned: the settle's own sync is the only one without writes.
        assert sample(mgr, "mpi_operator_reconcile_without_writes_total") == 1 + sample(
            mgr, "mpi_operator_reconcile_echoes_total"
        )


async def test_a_change_by_another_writer_after_the_echoes_is_acted_on(
    kubesim: KubeSim, kube: Kube
) -> None:
    async with running_operator(kubesim) as mgr:
        await kube.create(resources.MPIJOB, job(2), namespace=NS)
        await eventually(
            lambda: sample(mgr, "mpi_operator_reconcile_echoes_total") >= 1,
            sim=kubesim,
            within=WITHIN,
            what="a sync skipped as an echo",
        )
        config = await kube.get(resources.CONFIG_MAP, "pi-config", NS)
        want = dict(config["data"])
        config["data"]["hostfile"] = "someone-else slots=9\n"
        await kube.replace(resources.CONFIG_MAP, config)

        async def restored() -> bool:
            now = await kube.get(resources.CONFIG_MAP, "pi-config", NS)
            return bool(now["data"] == want)

        await eventually(restored, sim=kubesim, within=WITHIN, what="the hostfile restored")
        await settle(kube, mgr, "pi")
