"""The big-job scenario of bench/report.py: one elastic job of thousands of workers.

One job of `--big-workers` workers (elasticPolicy `min = workers / 4`, `max = workers`) on kubesim's
timer runtime, timed in four steps against the launcher's *mounted* `discover_hosts.sh`:

1. create: until every worker is Ready (pod watch) and until all are listed; writes, the operator's
   CPU and RSS, the ConfigMap's `hostfile` and `discover_hosts.sh` sizes;
2. scale-in to half: until the removed hosts leave the script, until their pods are gone; writes;
3. scale-out back: until every worker is listed again; writes;
4. `--big-kills` workers killed at once (exit 137): until every replacement is listed.

Writes are the operator's own (`rest_client_requests_total`), its Event writes counted apart.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from opbench_jobs import elastic_mpijob
from opbench_processes import (
    JOBS,
    NS,
    PODS,
    Api,
    Cluster,
    cluster,
    indices,
    poll,
    requests,
    watch,
)
from scale import event_writes

NAME = "big"
CONFIG = f"/api/v1/namespaces/{NS}/configmaps/{NAME}-config"


class Pods:
    """The job's worker pods from one watch: Ready ones by name, live ones by name, and when the
    last of them turned Ready."""

    def __init__(self) -> None:
        self.ready: set[str] = set()
        self.live: set[str] = set()
        self.last_ready = 0.0
        self.changed = asyncio.Event()

    async def follow(self, api: Api, rv: str) -> None:
        async for event in watch(api, PODS, rv, f"mpi_job_name={NAME},mpi_role_type=worker"):
            self._apply(event)

    def _apply(self, event: dict[str, Any]) -> None:
        pod = event["object"]
        name = pod.get("metadata", {}).get("name", "")
        gone = event["type"] == "DELETED" or (pod.get("status") or {}).get("phase") in (
            "Succeeded",
            "Failed",
        )
        ready = not gone and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (pod.get("status") or {}).get("conditions") or []
        )
        (self.live.discard if event["type"] == "DELETED" else self.live.add)(name)
        if ready and name not in self.ready:
            self.last_ready = time.monotonic()
        (self.ready.add if ready else self.ready.discard)(name)
        self.changed.set()

    async def until(self, check: Any, within: float) -> float:
        async with asyncio.timeout(within):
            while not check():
                self.changed.clear()
                await self.changed.wait()
        return time.monotonic()


async def _launcher(api: Api, within: float, interval: float) -> str:
    """The launcher pod's name, once its Job controller has created it (after the workers)."""
    found: list[str] = []

    async def created() -> bool:
        pods = await api.pods(f"mpi_job_name={NAME},mpi_role_type=launcher")
        found[:] = [p["metadata"]["name"] for p in pods]
        return bool(found)

    await poll(created, within, interval)
    return found[0]


async def _listed(api: Api, launcher: str) -> set[str]:
    """Host names (first label) in the launcher's mounted script."""
    return await api.hosts(launcher) or set()


async def _sizes(api: Api) -> dict[str, int]:
    """Bytes of the ConfigMap's two keys, and of the whole object as JSON."""
    config_map = await api.call("GET", CONFIG)
    data = config_map.get("data") or {}
    return {
        "hostfile_bytes": len(data.get("hostfile", "").encode()),
        "discover_hosts_bytes": len(data.get("discover_hosts.sh", "").encode()),
        "config_map_bytes": len(json.dumps(config_map, separators=(",", ":")).encode()),
    }


async def _writes(c: Cluster, before: dict[str, float], events0: int) -> dict[str, float]:
    after = await c.op.scrape(c.api.session)
    _, events = await event_writes(c.api)
    total = requests(after, before)["writes"]
    return {"writes": total - (events - events0), "event_writes": float(events - events0)}


async def run(c: Cluster, args: argparse.Namespace) -> dict[str, Any]:
    n, api, op = args.big_workers, c.api, c.op
    half, poll_s, within = n // 2, args.poll_seconds * 2, args.timeout
    out: dict[str, Any] = {"workers": n, "min_replicas": n // 4}
    pods = Pods()
    rv = (await api.call("GET", PODS))["metadata"]["resourceVersion"]
    watcher = asyncio.create_task(pods.follow(api, rv))
    try:
        # 1. Create.
        usage0, scrape0, ev0 = (
            op.usage(),
            await op.scrape(api.session),
            (await event_writes(api))[1],
        )
        job = elastic_mpijob(
            NAME, workers=n, min_replicas=n // 4, max_replicas=n, settle=1, grace=1
        )
        # Every killed worker is replaced (the default allows 10 over the job's life).
        job["spec"]["elasticPolicy"]["maxReplacements"] = args.big_kills
        started = time.monotonic()
        await api.call("POST", JOBS, job)
        await pods.until(lambda: len(pods.ready) >= n, within)
        all_ready = pods.last_ready
        launcher = await _launcher(api, within, poll_s)
        listed = await poll(lambda: _all_listed(api, launcher, set(range(n))), within, poll_s)
        usage1 = op.usage()
        out["create"] = {
            "all_ready_s": all_ready - started,
            "all_listed_s": listed - started,
            "listed_after_ready_s": listed - all_ready,
            "operator_cpu_s": usage1["cpu_s"] - usage0["cpu_s"],
            "operator_rss_mib": usage1["rss_mib"],
            "operator_peak_rss_mib": op.peak_rss,
            **await _writes(c, scrape0, ev0),
            **await _sizes(api),
        }
        out["create"]["writes_per_pod"] = out["create"]["writes"] / n
        _progress(out, "create")
        # 2. Scale-in to half.
        out["scale_in"] = await _scale(c, pods, launcher, n, half, args)
        _progress(out, "scale_in")
        # 3. Scale-out back.
        out["scale_out"] = await _scale(c, pods, launcher, half, n, args)
        _progress(out, "scale_out")
        # 4. Kill workers at once.
        out["kill"] = await _kill(c, pods, launcher, n, args)
        _progress(out, "kill")
    finally:
        watcher.cancel()
    return out


def _progress(out: dict[str, Any], step: str) -> None:
    """Each step's figures as they come, so a run that times out later still shows them."""
    print(f"bench/bigjob.py: {step} {json.dumps(out[step])}", file=sys.stderr, flush=True)


async def _all_listed(api: Api, launcher: str, wanted: set[int]) -> bool:
    return indices(await _listed(api, launcher)) == wanted


async def _scale(
    c: Cluster, pods: Pods, launcher: str, before: int, after: int, args: argparse.Namespace
) -> dict[str, Any]:
    api, op = c.api, c.op
    poll_s, within = args.poll_seconds * 2, args.timeout
    usage0, scrape0, ev0 = op.usage(), await op.scrape(api.session), (await event_writes(api))[1]
    started = time.monotonic()
    await api.call("PATCH", f"{JOBS}/{NAME}/scale", {"spec": {"replicas": after}}, merge=True)
    listed = await poll(lambda: _all_listed(api, launcher, set(range(after))), within, poll_s)
    out: dict[str, Any] = {"from": before, "to": after, "listed_s": listed - started}
    if after < before:
        gone = await pods.until(lambda: len(pods.live) <= after, within)
        out["pods_gone_s"] = gone - started
    else:
        ready = await pods.until(lambda: len(pods.ready) >= after, within)
        out["all_ready_s"] = ready - started
        out["listed_after_ready_s"] = listed - ready
    usage1 = op.usage()
    out |= await _writes(c, scrape0, ev0)
    out["changed_pods"] = abs(after - before)
    out["writes_per_changed_pod"] = out["writes"] / out["changed_pods"]
    out["operator_cpu_s"] = usage1["cpu_s"] - usage0["cpu_s"]
    return out


async def _kill(
    c: Cluster, pods: Pods, launcher: str, n: int, args: argparse.Namespace
) -> dict[str, Any]:
    api, op = c.api, c.op
    kills = min(args.big_kills, n)
    step = max(n // kills, 1)
    victims = list(range(0, n, step))[:kills]
    scrape0, ev0 = await op.scrape(api.session), (await event_writes(api))[1]
    old = await _listed(api, launcher)
    victim_hosts = {h for h in old if indices({h}) & set(victims)}
    started = time.monotonic()
    await asyncio.gather(
        *(
            api.call(
                "POST",
                f"/kubesim/v1/namespaces/{NS}/pods/{NAME}-worker-{i}/kill",
                {"exitCode": 137},
            )
            for i in victims
        )
    )

    async def replaced() -> bool:
        hosts = await _listed(api, launcher)
        return not hosts & victim_hosts and indices(hosts) == set(range(n))

    listed = await poll(replaced, args.timeout, args.poll_seconds * 2)
    out: dict[str, Any] = {"killed": kills, "replacements_listed_s": listed - started}
    out |= await _writes(c, scrape0, ev0)
    out["writes_per_changed_pod"] = out["writes"] / kills
    return out


async def _alone(args: argparse.Namespace) -> dict[str, Any]:
    async with cluster(args) as c:
        return await run(c, args)


def main(argv: list[str] | None = None) -> int:
    """`python bench/bigjob.py [--big-workers N] [--big-kills K]`: this scenario alone, as JSON."""
    import report  # its flags and defaults; it imports this module

    print(json.dumps(asyncio.run(_alone(report.parse_args(argv))), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
