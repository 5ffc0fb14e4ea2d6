"""The latency scenarios of bench/report.py, each on a small cluster of its own.

Scale reaction: one elastic job, `Worker.replicas` patched up one at a time through the scale
subresource (`steps` times); per step, the time from the PATCH until the new worker pod is on a pod
watch.

Discovery comparison: the time from a scale-out (2 -> 3 workers) until the launcher pod's *mounted*
`discover_hosts.sh` (kubesim's file endpoint) lists the new worker, in two arms patched at the same
moment: elastic jobs, whose launcher pod the operator annotates after each change of the script so
that the kubelet refreshes the volume at once, and static jobs, which get the same ConfigMap update
and no annotation, so their launcher sees it at the kubelet's periodic volume sync (kubesim's
`volume_sync_seconds`, 60 s by default, jittered per pod), as with the upstream operator. Both arms
also time the ConfigMap itself, so the operator's part and the kubelet's part of the delay can be
told apart.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time
from typing import Any

from opbench_jobs import elastic_mpijob, static_mpijob
from opbench_processes import (
    JOBS,
    NS,
    PODS,
    Api,
    Cluster,
    Operator,
    indices,
    poll,
    requests,
    watch,
    watch_running,
)
from opbench_report import pct, summary

from mpi_discovery.hostfile import parse_discover_hosts


async def _watch_new_pods(
    api: Api, rv: str, job: str, seen: dict[int, float], arrived: asyncio.Event
) -> None:
    """Monotonic time each worker index of `job` first appeared on a pod watch; `arrived` set on
    each."""
    async for event in watch(api, PODS, rv, f"mpi_job_name={job},mpi_role_type=worker"):
        if event["type"] == "ADDED":
            for index in indices({event["object"].get("metadata", {}).get("name", "")}):
                seen.setdefault(index, time.monotonic())
                arrived.set()


async def reaction(c: Cluster, args: argparse.Namespace) -> dict[str, Any]:
    name, first = "reaction", 2
    api, op = c.api, c.op
    rv = (await api.call("GET", JOBS))["metadata"]["resourceVersion"]
    job = elastic_mpijob(name, workers=first, max_replicas=first + args.steps, settle=1, grace=1)
    await api.call("POST", JOBS, job)
    await asyncio.wait_for(watch_running(api, rv, {name}), args.timeout)
    rv = (await api.call("GET", PODS))["metadata"]["resourceVersion"]
    seen: dict[int, float] = {}
    arrived = asyncio.Event()
    watcher = asyncio.create_task(_watch_new_pods(api, rv, name, seen, arrived))
    before, usage0, sim0 = await op.scrape(api.session), op.usage(), c.sim.usage()
    times, starts = [], []
    try:
        for replicas in range(first + 1, first + args.steps + 1):
            started = time.monotonic()
            await api.call(
                "PATCH", f"{JOBS}/{name}/scale", {"spec": {"replicas": replicas}}, merge=True
            )
            async with asyncio.timeout(args.timeout):
                while replicas - 1 not in seen:  # the watch stamps the time; this only waits for it
                    arrived.clear()
                    await arrived.wait()
            times.append(seen[replicas - 1] - started)
            starts.append((replicas - 1, started))
            await asyncio.sleep(args.step_pause_seconds)
    finally:
        watcher.cancel()
    after, usage1, sim1 = await op.scrape(api.session), op.usage(), c.sim.usage()
    # Read after the last step: a log line may reach this process after the pod's watch event.
    decided = [_logged_create(op, f"{name}-worker-{i}", t) - t for i, t in starts]
    return {
        "steps": len(times),
        "latencies_s": times,
        "p50_ms": 1000 * pct(times, 50),
        "p99_ms": 1000 * pct(times, 99),
        "max_ms": 1000 * max(times),
        "operator_decided_p50_ms": 1000 * pct([d for d in decided if not math.isnan(d)], 50),
        "operator_decided_p99_ms": 1000 * pct([d for d in decided if not math.isnan(d)], 99),
        "requests_per_step": {k: v / len(times) for k, v in requests(after, before).items()},
        "operator_cpu_ms_per_step": 1000 * (usage1["cpu_s"] - usage0["cpu_s"]) / len(times),
        "kubesim_cpu_ms_per_step": 1000 * (sim1["cpu_s"] - sim0["cpu_s"]) / len(times),
        "client_flags": _client_flags(args),
    }


def _logged_create(op: Operator, pod: str, since: float) -> float:
    """When the operator logged `create Pod .../<pod>` (just before sending it), NaN if it did
    not."""
    found = (
        t
        for t, verb, kind, name in op.logged_writes(since)
        if (verb, kind) == ("create", "Pod") and name.endswith(f"/{pod}")
    )
    return next(found, math.nan)


def _client_flags(args: argparse.Namespace) -> str:
    flags = [f"--qps {args.operator_qps:g}"] if args.operator_qps is not None else []
    flags += [f"--burst {args.operator_burst}"] if args.operator_burst is not None else []
    return " ".join(flags) or "the defaults (no --qps, --burst)"


async def _config_lists(api: Api, job: str, index: int) -> bool:
    cm = await api.call("GET", f"/api/v1/namespaces/{NS}/configmaps/{job}-config")
    hosts = {
        h.split(".", 1)[0]
        for h, _ in parse_discover_hosts(cm.get("data", {}).get("discover_hosts.sh", ""))
    }
    return index in indices(hosts)


async def discovery(c: Cluster, args: argparse.Namespace) -> dict[str, Any]:
    arms = {
        "annotation": [f"elastic-{i}" for i in range(args.discovery_samples)],
        "configmap_only": [f"static-{i}" for i in range(args.discovery_samples)],
    }
    api = c.api
    rv = (await api.call("GET", JOBS))["metadata"]["resourceVersion"]
    for name in arms["annotation"]:
        await api.call("POST", JOBS, elastic_mpijob(name, settle=1, grace=1))
    for name in arms["configmap_only"]:
        await api.call("POST", JOBS, static_mpijob(name, 2))
    names = {n for ns in arms.values() for n in ns}
    await asyncio.wait_for(watch_running(api, rv, names), args.timeout)
    launchers: dict[str, str] = {}

    async def launchers_running() -> bool:
        for pod in await api.pods("mpi_role_type=launcher"):
            job = pod["metadata"]["labels"]["mpi_job_name"]
            if job in names and (pod.get("status") or {}).get("phase") == "Running":
                launchers.setdefault(job, pod["metadata"]["name"])
        return len(launchers) == len(names)

    await poll(launchers_running, args.timeout, 0.2)

    async def one(job: str) -> tuple[float, float]:
        """Seconds from the PATCH until the ConfigMap, and until the mounted script, list worker
        2."""
        started = time.monotonic()
        await api.call("PATCH", f"{JOBS}/{job}/scale", {"spec": {"replicas": 3}}, merge=True)

        async def mounted() -> bool:
            return 2 in indices(await api.hosts(launchers[job]) or set())

        config = await poll(lambda: _config_lists(api, job, 2), args.timeout, args.poll_seconds)
        return config - started, await poll(mounted, args.timeout, args.poll_seconds) - started

    results = await asyncio.gather(*(one(n) for ns in arms.values() for n in ns))
    timed = dict(zip([n for ns in arms.values() for n in ns], results, strict=True))
    out: dict[str, Any] = {"volume_sync_seconds": args.volume_sync_seconds or 60.0}
    for arm, jobs in arms.items():
        out[arm] = {
            "configmap_s": summary([timed[j][0] for j in jobs]),
            "mounted_s": summary([timed[j][1] for j in jobs]),
            "mounted_samples_s": [timed[j][1] for j in jobs],
            "configmap_samples_s": [timed[j][0] for j in jobs],
        }
    out["ratio_p50"] = (
        out["configmap_only"]["mounted_s"]["p50"] / out["annotation"]["mounted_s"]["p50"]
    )
    return out
