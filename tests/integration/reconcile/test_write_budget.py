"""The writes of a static 8-worker job from create to Running: the 12 creates (Service, ConfigMap,
Secret, 8 worker pods, the launcher Job), the Created status, and once the pods have started one
status write (Running, counts) and one ConfigMap write (discover_hosts.sh), not one of each per pod
event (`planning.progress`). Events are counted apart. A count of writes, not a timing: the batch
period is set far beyond any wait here, so only the pods settling releases the held writes."""

from __future__ import annotations

from collections import Counter

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube

from .harness import (
    NS,
    get_job,
    mpijob,
    operator_writes,
    running_operator,
    settle,
    wait_condition,
)

WORKERS = 8
BUDGET = 15
"""12 creates + the Created status + one status and one ConfigMap write once the pods are up."""


async def test_a_static_job_reaches_running_within_the_write_budget(
    kubesim: KubeSim, kube: Kube
) -> None:
    async with running_operator(kubesim, progress_batch_seconds=3600.0) as operator:
        kubesim.control.clear_requests()
        await kube.create(resources.MPIJOB, mpijob("pi", workers=WORKERS))
        await wait_condition(kube, "pi", "Running")

        async def workers_ready() -> bool:
            status = (await get_job(kube, "pi"))["status"]["replicaStatuses"]
            return (
                status["Worker"].get("ready") == WORKERS and status["Launcher"].get("active") == 1
            )

        await eventually(workers_ready, what=f"Worker.ready == {WORKERS}, Launcher.active == 1")

        async def discovered() -> bool:
            cm = await kube.get(resources.CONFIG_MAP, "pi-config", NS)
            return cm["data"]["discover_hosts.sh"].count(":1") == WORKERS

        await eventually(discovered, what=f"discover_hosts.sh listing {WORKERS} workers")
        await settle(kube, operator, "pi")
        writes = operator_writes(kubesim)
        objects = [w for w in writes if not w.startswith("create events/")]
        listing = "\n".join(writes)
        assert len(objects) <= BUDGET, f"{len(objects)} object writes (budget {BUDGET}):\n{listing}"
        kinds = Counter(w.split("/")[0] for w in objects)
        assert kinds["create pods"] == WORKERS, listing
        assert kinds["create jobs"] == kinds["create services"] == kinds["create secrets"] == 1, (
            listing
        )
        assert kinds["create configmaps"] == 1, listing


async def test_without_batching_every_pod_event_is_written(kubesim: KubeSim, kube: Kube) -> None:
    # The budget test's counterpart: with progress_batch_seconds=0 the operator writes as upstream
    # does, so the count above is the batching's doing (and the budget test can fail).
    async with running_operator(kubesim, progress_batch_seconds=0.0) as operator:
        kubesim.control.clear_requests()
        await kube.create(resources.MPIJOB, mpijob("pi", workers=WORKERS))

        async def workers_ready() -> bool:
            status = (await get_job(kube, "pi")).get("status") or {}
            return (status.get("replicaStatuses") or {}).get("Worker", {}).get("ready") == WORKERS

        await eventually(workers_ready, what=f"Worker.ready == {WORKERS}")
        await settle(kube, operator, "pi")
        objects = [w for w in operator_writes(kubesim) if not w.startswith("create events/")]
        assert len(objects) > BUDGET, objects
