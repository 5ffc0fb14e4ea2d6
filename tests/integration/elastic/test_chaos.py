"""Seeded chaos on the elastic path: scales, lost workers and API faults never make the launcher's
mounted `discover_hosts.sh` list a host Horovod cannot use, the operator never deletes a pod it
still lists, and once the faults stop every job converges to its desired size.

Each seed builds one or two elastic MPIJobs (min 1..2, max 4..5, scale-in grace 1 s, no settle) and
a random schedule (`chaos_driver.plan_schedule`): scales by merge patch, JSON patch or the scale
subresource (also flipped to a value and back), worker kills (exit 137), evictions and deletions,
injected 500/503/429 answers on the operator's writes and on its informers' LIST/WATCH, dropped
watches, compaction and pauses. The invariants and the windows they allow are in `chaos_driver`'s
docstring. After the schedule the faults are cleared and every job must converge within
`CONVERGE_SECONDS`: the mounted script lists exactly the desired workers, `status.elastic` agrees
(desired = ready = discovered, nothing draining, the bounds), `observedGeneration` is current, one
pod per index and none left terminating or draining, and the operator's manager task is still
running.

A failure message carries the seed and the recent schedule with the pods actually hit. The schedule
is a function of the seed; which pod a step hits is picked among the live workers at that moment, so
a replay hits the same pods as long as the cluster got to the same state (it usually does; timing
can differ).

Measured here (2 cores, a CI run beside): ~10 s a seed, the default three in ~32 s; seeds 1-30 and
61-105 run by hand pass (520+ operator deletions checked in the first 55 alone).

Run more seeds by hand with `CHAOS_SEEDS`, a comma-separated list of seeds or `a-b` ranges, e.g.
`CHAOS_SEEDS=1-40 .venv/bin/pytest -q -p no:randomly tests/integration/elastic/test_chaos.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import random
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from integration.reconcile.harness import NS, condition_true, get_job, wait_condition
from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.elastic import DRAINING_ANNOTATION
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .chaos_driver import Chaos, JobPlan, Watcher, plan_jobs, plan_schedule, usable
from .harness import mounted_hosts

DEFAULT_SEEDS = (6, 13, 24)
"""Chosen for coverage: between them one and two jobs, every kind of step, faults on the informers'
LIST/WATCH as well as on writes."""
STEPS = 28
CONVERGE_SECONDS = 30.0
"""Faults cleared -> every job at its desired size: the last replacement's start plus a scale-in
grace, after any informer backoff still running (`Watcher.resumes_at`, added to this); observed
0.01-4.3 s. A ceiling for a broken run, generous for a loaded machine."""
XFAIL: dict[int, str] = {}
"""Seeds that expose a known operator or kubesim bug (strict xfail, the reason says which)."""


def seeds() -> list[int]:
    text = os.environ.get("CHAOS_SEEDS", "").strip()
    if not text:
        return list(DEFAULT_SEEDS)
    out: list[int] = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return out


def seed_params() -> list[Any]:
    return [
        pytest.param(
            s,
            marks=[pytest.mark.xfail(strict=True, reason=XFAIL[s])] if s in XFAIL else [],
            id=f"seed{s}",
        )
        for s in seeds()
    ]


def operator_task() -> asyncio.Task[Any] | None:
    return next((t for t in asyncio.all_tasks() if t.get_name() == "operator"), None)


async def check_converged(
    kube: Kube, sim: KubeSim, http: aiohttp.ClientSession, watcher: Watcher, job: JobPlan
) -> bool:
    body = await get_job(kube, job.name)
    desired = body["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    status = body.get("status") or {}
    assert not condition_true(body, "Failed"), f"{job.name} failed: {status.get('conditions')}"
    assert status.get("observedGeneration") == body["metadata"]["generation"], (
        "observedGeneration lags"
    )
    elastic = status.get("elastic") or {}
    want = {"desired": desired, "ready": desired, "discovered": desired, "draining": 0}
    want |= {"minReplicas": job.min_replicas, "maxReplicas": job.max_replicas}
    assert {k: elastic.get(k) for k in want} == want, f"{job.name} status.elastic {elastic}"
    pods = sorted(
        watcher.worker_pods(job.name), key=lambda p: int(p["metadata"]["name"].rsplit("-", 1)[1])
    )
    names = [p["metadata"]["name"] for p in pods]
    assert names == [f"{job.name}-worker-{i}" for i in range(desired)], (
        f"{job.name} worker pods {names}"
    )
    assert all(usable(p) for p in pods), f"{job.name}: a worker is not usable"
    assert not any(DRAINING_ANNOTATION in (p["metadata"].get("annotations") or {}) for p in pods), (
        "draining"
    )
    hosts = await mounted_hosts(kube, sim, http, job.name)
    want_hosts = [f"{p['spec']['hostname']}.{job.name}.{NS}.svc" for p in pods]
    assert hosts is not None, f"{job.name}: no launcher"
    assert [h for h, _ in hosts] == want_hosts, f"{job.name} mounted {hosts}"
    return True


@pytest.mark.parametrize("seed", seed_params())
async def test_elastic_chaos_keeps_discovery_safe_and_converges(
    seed: int,
    kube: Kube,
    kubesim: KubeSim,
    http: aiohttp.ClientSession,
    operator: Manager,
    tmp_path: Path,
) -> None:
    rng = random.Random(seed)
    jobs = plan_jobs(rng)
    steps = plan_schedule(rng, jobs, STEPS)
    watcher = Watcher(kubesim, seed, jobs)
    kubesim.cluster.add_listener(watcher.on_change)
    consumers: list[asyncio.Task[None]] = []
    try:
        for job in jobs:
            await kube.create(resources.MPIJOB, job.manifest())
        for job in jobs:
            await wait_condition(kube, job.name, "Running")
        consumers = [asyncio.create_task(watcher.consume(job, http, tmp_path)) for job in jobs]
        await Chaos(kube, watcher).run(steps, stop=lambda: bool(watcher.violations))
        kubesim.control.clear_faults()
        watcher.note("faults cleared")
        cleared = time.monotonic()
        for job in jobs:
            try:
                converged = functools.partial(check_converged, kube, kubesim, http, watcher, job)
                limit = CONVERGE_SECONDS + max(watcher.resumes_at - time.monotonic(), 0.0)
                await eventually(converged, what=f"{job.name} to converge", within=limit)
            except AssertionError as exc:
                pytest.fail(f"{exc}\n{watcher.context()}")
            watcher.note(f"{job.name} converged")
        converge_seconds = time.monotonic() - cleared
        polls = watcher.polls

        def polled_twice_more() -> bool:  # every consumer reads the converged state at least once
            assert all(not c.done() for c in consumers), "a consumer stopped"
            return watcher.polls >= polls + 2 * len(jobs)

        await eventually(polled_twice_more, what="two more polls of the converged state per job")
        for consumer in consumers:
            assert not consumer.done(), f"a consumer stopped: {consumer}\n{watcher.context()}"
    finally:
        for consumer in consumers:
            consumer.cancel()
        for consumer in consumers:
            with contextlib.suppress(asyncio.CancelledError):
                await consumer
        kubesim.cluster.remove_listener(watcher.on_change)
    violations = list(watcher.violations)
    assert not violations, "\n\n".join(violations[:3])
    task = operator_task()
    assert task is not None, "the operator's manager task is gone"
    assert not task.done(), f"the operator's manager stopped: {task}\n{watcher.context()}"
    assert watcher.polls > 0, "the consumer never read a mounted script"
    assert sum(map(len, watcher.host_sets.values())) > len(jobs), (
        f"no host set ever changed: {watcher.host_sets}"
    )
    print(
        f"seed {seed}: {watcher.polls} polls, {watcher.operator_deletes} operator deletions, "
        f"{sum(map(len, watcher.host_sets.values()))} host sets, converged in "
        f"{converge_seconds:.2f}s, "
        f"listed-unusable lags {sorted(round(x, 3) for x in watcher.lags)} "
        f"after faults {sorted(round(x, 3) for x in watcher.fault_lags)}"
    )
