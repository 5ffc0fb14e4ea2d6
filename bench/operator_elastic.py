"""Benchmark of the operator on elastic MPIJobs: fan-in, scale reaction as the launcher sees it,
steady-state writes and worker replacement. Not a test: run it, read bench/out/operator.md (and
operator.json).

`mpi-operator sim` and `mpi-operator run` each run in their own process, so the operator's RSS and
CPU time (read with psutil) are its own, and the load this client generates does not count against
it. Scale and replacement times are measured up to the moment the launcher pod's *mounted*
/etc/mpi/discover_hosts.sh (kubesim's file endpoint) lists the new hosts, i.e. what Horovod would
read. kubesim's request record is in-process only, so the operator's requests come from its own
`rest_client_requests_total` and the writes in a window are named from its JSON log.

    .venv/bin/python bench/operator_elastic.py [--jobs 50] [--scale-jobs 10] \
        [--replace-jobs 10] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opbench_jobs import elastic_mpijob
from opbench_processes import (  # bench/ is the script's directory, so on sys.path
    JOBS,
    NS,
    Api,
    Operator,
    cluster,
    delta,
    histogram,
    indices,
    poll,
    requests,
    watch_running,
)
from opbench_report import machine, report, summary

from mpi_operator.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
FULL = {
    "jobs": 50,
    "scale_jobs": 10,
    "replace_jobs": 10,
    "steady_seconds": 30.0,
    "settle_seconds": 5,
}
FULL |= {"grace_seconds": 10, "pod_seconds": 1.0, "timeout": 600.0}
QUICK = {"jobs": 4, "scale_jobs": 2, "replace_jobs": 2, "steady_seconds": 5.0, "settle_seconds": 1}
QUICK |= {"grace_seconds": 1, "pod_seconds": 0.3, "timeout": 60.0}


async def first_listed(
    api: Api, names: list[str], args: argparse.Namespace
) -> tuple[dict[str, str], dict[str, float]]:
    """Each job's launcher pod (its name has a generated suffix) and the monotonic time its mounted
    script first listed both workers. One poller for all jobs, sparser for many, to spare kubesim's
    CPU."""
    launchers: dict[str, str] = {}
    listed: dict[str, float] = {}

    async def check() -> bool:
        if len(launchers) < len(names):
            for pod in await api.pods("mpi_role_type=launcher"):
                if (pod.get("status") or {}).get("phase") == "Running":
                    launchers.setdefault(
                        pod["metadata"]["labels"]["mpi_job_name"], pod["metadata"]["name"]
                    )
        pending = [n for n in launchers if n not in listed]
        found = await asyncio.gather(*(api.hosts(launchers[n]) for n in pending))
        now = time.monotonic()
        listed.update(
            (n, now)
            for n, hosts in zip(pending, found, strict=True)
            if hosts and indices(hosts) == {0, 1}
        )
        return len(listed) == len(names)

    await poll(check, args.timeout, max(args.poll_seconds, len(names) / 50))
    return launchers, listed


async def until_listed(
    api: Api, pod: str, want: Callable[[set[str]], bool], args: argparse.Namespace
) -> float:
    async def check() -> bool:
        hosts = await api.hosts(pod)
        return hosts is not None and want(hosts)

    return await poll(check, args.timeout, args.poll_seconds)


async def fan_in(
    api: Api, op: Operator, names: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    rv = (await api.call("GET", JOBS))["metadata"]["resourceVersion"]
    before, usage0 = await op.scrape(api.session), op.usage()
    watcher = asyncio.create_task(watch_running(api, rv, set(names)))
    gate, sent = asyncio.Semaphore(16), {}

    async def create(name: str) -> None:
        async with gate:
            sent[name] = time.monotonic()
            await api.call(
                "POST",
                JOBS,
                elastic_mpijob(name, settle=args.settle_seconds, grace=args.grace_seconds),
            )

    start = time.monotonic()
    lister = asyncio.create_task(first_listed(api, names, args))
    await asyncio.gather(*(create(n) for n in names))
    running = await asyncio.wait_for(watcher, args.timeout)
    launchers, listed = await lister
    after, usage1 = await op.scrape(api.session), op.usage()
    return {
        "launchers": launchers,
        "running_s": summary([running[n] - sent[n] for n in names]),
        "all_running_s": max(running.values()) - start,
        "listed_s": summary([listed[n] - sent[n] for n in names]),
        "requests_per_job": {k: v / len(names) for k, v in requests(after, before).items()},
        "discovery_updates": delta(after, before, "mpi_operator_elastic_discovery_updates_total"),
        "logged_writes_per_job": {
            k: v / len(names) for k, v in op.writes_between(start, time.monotonic()).most_common()
        },
        "operator_cpu_s": usage1["cpu_s"] - usage0["cpu_s"],
        "operator_rss_mib": usage1["rss_mib"],
    }


async def scale(
    api: Api, op: Operator, launchers: dict[str, str], args: argparse.Namespace
) -> dict[str, Any]:
    async def one(name: str, replicas: int) -> tuple[float, float]:
        """Seconds until the mounted set first changed, and until it is exactly the new set."""
        pod, first = launchers[name], math.nan
        was = indices(await api.hosts(pod) or set())
        started = time.monotonic()
        await api.call(
            "PATCH", f"{JOBS}/{name}/scale", {"spec": {"replicas": replicas}}, merge=True
        )

        def want(hosts: set[str]) -> bool:
            nonlocal first
            if indices(hosts) != was and math.isnan(first):
                first = time.monotonic() - started
            return indices(hosts) == set(range(replicas))

        done = await until_listed(api, pod, want, args) - started
        return first, done

    names = sorted(launchers)[: args.scale_jobs]
    out: dict[str, Any] = {"jobs": len(names)}
    for label, replicas in (("out_2_to_4", 4), ("in_4_to_2", 2)):
        if replicas == 2:
            # Let settleSeconds pass, or the pacing (not the reaction) is what gets measured.
            await asyncio.sleep(args.settle_seconds + 1)
        before, usage0 = await op.scrape(api.session), op.usage()
        times = await asyncio.gather(*(one(n, replicas) for n in names))
        after, usage1 = await op.scrape(api.session), op.usage()
        out[label] = {
            "first_change_mounted_s": summary([f for f, _ in times]),
            "mounted_s": summary([t for _, t in times]),
            "operator_histogram_s": histogram(after, before),
            "requests_per_job": {k: v / len(names) for k, v in requests(after, before).items()},
            "operator_cpu_s": usage1["cpu_s"] - usage0["cpu_s"],
        }
    return out


async def steady(api: Api, op: Operator, jobs: int, args: argparse.Namespace) -> dict[str, Any]:
    async def converged() -> bool:
        pods = await api.pods("mpi_role_type=worker")
        return len(pods) == 2 * jobs and not any(
            p["metadata"].get("deletionTimestamp") for p in pods
        )

    waited = time.monotonic()
    await poll(converged, args.timeout, 0.5)
    await asyncio.sleep(max(2.0, args.settle_seconds + 1.0))
    start, before, usage0 = time.monotonic(), await op.scrape(api.session), op.usage()
    await asyncio.sleep(args.steady_seconds)
    end, after, usage1 = time.monotonic(), await op.scrape(api.session), op.usage()
    return {
        "seconds": end - start,
        "convergence_wait_s": start - waited,
        "requests": requests(after, before),
        "reconciles": delta(after, before, "mpi_operator_reconcile_total"),
        "logged_writes": dict(op.writes_between(start, end)),
        "operator_cpu_s": usage1["cpu_s"] - usage0["cpu_s"],
        "operator_rss_mib": usage1["rss_mib"],
    }


async def replace(
    api: Api, op: Operator, launchers: dict[str, str], args: argparse.Namespace
) -> dict[str, Any]:
    async def one(name: str) -> tuple[float, float]:
        pod, removed = launchers[name], math.nan
        old = next(h for h in (await api.hosts(pod) or set()) if indices({h}) == {1})
        started = time.monotonic()
        await api.call(
            "POST", f"/kubesim/v1/namespaces/{NS}/pods/{name}-worker-1/kill", {"exitCode": 137}
        )

        def want(hosts: set[str]) -> bool:
            nonlocal removed
            if old not in hosts and math.isnan(removed):
                removed = time.monotonic() - started
            return old not in hosts and 1 in indices(hosts)

        listed = await until_listed(api, pod, want, args) - started
        return removed, listed

    names = sorted(launchers)[-args.replace_jobs :]
    before, usage0 = await op.scrape(api.session), op.usage()
    times = await asyncio.gather(*(one(n) for n in names))
    after, usage1 = await op.scrape(api.session), op.usage()
    return {
        "jobs": len(names),
        "removed_s": summary([r for r, _ in times]),
        "replacement_listed_s": summary([t for _, t in times]),
        "operator_histogram_s": histogram(after, before),
        "replacements_metric": delta(
            after, before, "mpi_operator_elastic_worker_replacements_total"
        ),
        "requests_per_job": {k: v / len(names) for k, v in requests(after, before).items()},
        "operator_cpu_s": usage1["cpu_s"] - usage0["cpu_s"],
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": machine(), "args": vars(args).copy()}
    async with cluster(args) as c:
        api, op = c.api, c.op
        results["operator_idle"] = op.usage()
        names = [f"bench-{i:03d}" for i in range(args.jobs)]
        fan = await fan_in(api, op, names, args)
        launchers = fan.pop("launchers")
        results["fan_in"] = fan
        results["scale"] = await scale(api, op, launchers, args)
        results["steady"] = await steady(api, op, args.jobs, args)
        results["replace"] = await replace(api, op, launchers, args)
        results["operator_total"] = {**op.usage(), "peak_rss_mib": op.peak_rss}
        results["kubesim_total_cpu_s"] = c.sim.usage()["cpu_s"]
    results["machine"]["loadavg_end"] = os.getloadavg()
    return results


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="small numbers, runs in under a minute"
    )
    parser.add_argument("--jobs", type=int, help="N: MPIJobs created at once (default 50; quick 4)")
    parser.add_argument(
        "--scale-jobs", type=int, help="K: jobs scaled 2->4->2 (default 10; quick 2)"
    )
    parser.add_argument(
        "--replace-jobs", type=int, help="M: jobs losing a worker (default 10; quick 2)"
    )
    parser.add_argument(
        "--steady-seconds", type=float, help="steady-state window (default 30; quick 5)"
    )
    parser.add_argument(
        "--settle-seconds", type=int, help="elasticPolicy.settleSeconds (default 5; quick 1)"
    )
    parser.add_argument(
        "--grace-seconds", type=int, help="scaleInGracePeriodSeconds (default 10; quick 1)"
    )
    parser.add_argument(
        "--pod-seconds", type=float, help="kubesim pod start and ready delays (default 1)"
    )
    parser.add_argument("--timeout", type=float, help="per wait, seconds (default 600; quick 60)")
    parser.add_argument(
        "--poll-seconds", type=float, default=0.1, help="mounted-file polling interval"
    )
    parser.add_argument(
        "--operator-qps",
        type=float,
        default=Settings.qps,
        help="`run --qps` (default: unset)",
    )
    parser.add_argument(
        "--operator-burst",
        type=int,
        default=Settings.burst,
        help="`run --burst` (default: unset)",
    )
    parser.add_argument(
        "--operator-workers", type=int, default=2, help="`run --workers` (the default)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out", help="report directory")
    args = parser.parse_args(argv)
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.scale_jobs, args.replace_jobs = (
        min(args.scale_jobs, args.jobs),
        min(args.replace_jobs, args.jobs),
    )
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = asyncio.run(run(args))
    args.out.mkdir(parents=True, exist_ok=True)
    results["args"]["out"] = str(args.out)
    (args.out / "operator.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    (args.out / "operator.md").write_text(report(results))
    print((args.out / "operator.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
