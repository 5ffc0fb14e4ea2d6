"""The scale scenario of bench/report.py: N static MPIJobs x W workers created at once against
`mpi-operator sim`, with `mpi-operator run` in its own process at its default client settings.

It measures the time until all N are Running, the operator's and kubesim's CPU seconds and RSS, the
operator's writes per job (its own `rest_client_requests_total`, less the writes of the Events it
recorded, which are counted apart from the Events in the cluster), a steady-state window, and a
restart at scale (the operator killed and started again: seconds until /readyz, writes after it).

The memory growth (`ramp`) runs on a cluster of its own: the same N jobs created in waves, each wave
Running and the operator quiet before both processes' RSS is read, so RSS is set against a known
number of jobs (in the fan-in every job turns Running within the last seconds, which makes no
curve).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import signal
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]  # psutil ships no stubs; types-psutil is not a dependency
from opbench_jobs import static_mpijob
from opbench_processes import (
    JOBS,
    NS,
    Api,
    Cluster,
    Operator,
    Snapshot,
    checkout,
    cluster,
    delta,
    poll,
    requests,
    watch_running,
)
from opbench_report import busy_pct, summary
from profiling import Profile

from mpi_operator.kube.events import COMPONENT

LIMIT_LIFTED = "the API server has API Priority and Fairness: no client-side rate limit"


async def create_all(api: Api, jobs: list[dict[str, Any]], in_flight: int = 16) -> dict[str, float]:
    """POSTs every MPIJob, `in_flight` at a time; the monotonic time each create was sent."""
    gate, sent = asyncio.Semaphore(in_flight), {}

    async def create(job: dict[str, Any]) -> None:
        async with gate:
            sent[job["metadata"]["name"]] = time.monotonic()
            await api.call("POST", JOBS, job)

    await asyncio.gather(*(create(j) for j in jobs))
    return sent


async def event_writes(api: Api) -> tuple[int, int]:
    """(Events, writes of them) the operator recorded: one create each plus one patch per repeat
    (`count`)."""
    items = (await api.call("GET", f"/api/v1/namespaces/{NS}/events"))["items"]
    ours = [e for e in items if (e.get("source") or {}).get("component") == COMPONENT]
    return len(ours), sum(int(e.get("count") or 1) for e in ours)


def _writes(after: Snapshot, before: Snapshot) -> float:
    return requests(after, before)["writes"]


async def _quiet(api: Api, op: Operator, quiet_s: float, within: float) -> float:
    """Monotonic time at which the operator's write counter had not moved for `quiet_s` seconds."""
    last, since = _writes(await op.scrape(api.session), {}), time.monotonic()
    async with asyncio.timeout(within):
        while time.monotonic() - since < quiet_s:
            await asyncio.sleep(0.25)
            now = _writes(await op.scrape(api.session), {})
            if now != last:
                last, since = now, time.monotonic()
    return since


def _cpu(after: dict[str, float], before: dict[str, float]) -> float:
    return after["cpu_s"] - before["cpu_s"]


def syncs(after: Snapshot, before: Snapshot, jobs: int) -> dict[str, float]:
    """Reconciles per job, those that sent no write, and those of these that found only the echoes
    of the operator's own writes (the operator's own counters)."""
    total = delta(after, before, "mpi_operator_reconcile_total")
    idle = delta(after, before, "mpi_operator_reconcile_without_writes_total")
    echoes = delta(after, before, "mpi_operator_reconcile_echoes_total")
    return {
        "per_job": total / max(jobs, 1),
        "without_writes_per_job": idle / max(jobs, 1),
        "echoes_per_job": echoes / max(jobs, 1),
    }


async def fan_in(c: Cluster, args: argparse.Namespace, profile_dir: Path | None) -> dict[str, Any]:
    api, op, me = c.api, c.op, psutil.Process()
    names = [f"scale-{i:04d}" for i in range(args.jobs)]
    rv = (await api.call("GET", JOBS))["metadata"]["resourceVersion"]
    profiles = {}
    if profile_dir is not None:
        profiles = {"operator": Profile(op.proc.pid, profile_dir / "operator.pyspy.txt")}
        profiles["kubesim"] = Profile(c.sim.ps.pid, profile_dir / "kubesim.pyspy.txt")
        for p in profiles.values():
            await p.start()
    before, op0, sim0, me0 = await op.scrape(api.session), op.usage(), c.sim.usage(), me.cpu_times()
    machine0 = psutil.cpu_times()
    running: dict[str, float] = {}
    watcher = asyncio.create_task(watch_running(api, rv, set(names), running))
    start = time.monotonic()
    sent = await create_all(api, [static_mpijob(n, args.workers) for n in names])
    created_s = time.monotonic() - start
    await asyncio.wait_for(watcher, args.timeout)
    at_running, op1, sim1, me1 = (
        await op.scrape(api.session),
        op.usage(),
        c.sim.usage(),
        me.cpu_times(),
    )
    machine_busy = busy_pct(machine0, start)
    events_running = await event_writes(api)
    all_running = max(running.values()) - start
    profiled = {name: await p.stop() for name, p in profiles.items()}
    quiet = await _quiet(api, op, args.quiet_seconds, args.timeout)
    at_quiet, op2, sim2 = await op.scrape(api.session), op.usage(), c.sim.usage()
    events_quiet = await event_writes(api)
    n = len(names)
    writes_running, writes_quiet = _writes(at_running, before), _writes(at_quiet, before)
    return {
        "jobs": n,
        "workers": args.workers,
        "pod_seconds": args.pod_seconds,
        "all_running_s": all_running,
        "creates_sent_s": created_s,
        "running_s": summary([running[k] - sent[k] for k in names]),
        "running_latencies_s": sorted(running[k] - sent[k] for k in names),
        "timeline_s": _timeline(op, start, running),
        "client_limit_lifted": any(LIMIT_LIFTED in str(e.get("msg", "")) for _, e in op.logs),
        "requests_per_job": {k: v / n for k, v in requests(at_running, before).items()},
        "writes_per_job_running": (writes_running - events_running[1]) / n,
        "event_writes_per_job_running": events_running[1] / n,
        "writes_per_job_quiet": (writes_quiet - events_quiet[1]) / n,
        "event_writes_per_job_quiet": events_quiet[1] / n,
        "events_per_job": events_quiet[0] / n,
        "quiet_after_s": quiet - start,
        "logged_writes_per_job": {
            k: v / n for k, v in op.writes_between(start, quiet).most_common()
        },
        "operator_cpu_s": _cpu(op1, op0),
        "operator_cpu_s_quiet": _cpu(op2, op0),
        "operator_cpu_ms_per_job": 1000 * _cpu(op1, op0) / n,
        "syncs_running": syncs(at_running, before, n),
        "syncs_quiet": syncs(at_quiet, before, n),
        "operator_cpu_ms_per_write": 1000 * _cpu(op2, op0) / max(writes_quiet - events_quiet[1], 1),
        "operator_cpu_ms_per_write_all": 1000 * _cpu(op2, op0) / max(writes_quiet, 1),
        "kubesim_cpu_s": _cpu(sim1, sim0),
        "kubesim_cpu_s_quiet": _cpu(sim2, sim0),
        "machine_busy_pct": machine_busy,
        "bench_client_cpu_s": (me1.user + me1.system) - (me0.user + me0.system),
        "operator_rss_mib": op1["rss_mib"],
        "operator_peak_rss_mib": op.peak_rss,
        "kubesim_rss_mib": sim1["rss_mib"],
        "kubesim_peak_rss_mib": c.sim.peak_rss,
        "profiles": profiled,
    }


def _timeline(op: Operator, start: float, running: dict[str, float]) -> dict[str, list[float]]:
    """Seconds from the first create at which the operator logged each worker pod's and each
    launcher Job's create, and at which each job turned Running: where the pipeline waits."""
    creates = [
        (t, kind, name) for t, verb, kind, name in op.logged_writes(start) if verb == "create"
    ]
    return {
        "workers_created": [
            t - start for t, kind, name in creates if kind == "Pod" and "-worker-" in name
        ],
        "launchers_created": [t - start for t, kind, _ in creates if kind == "Job"],
        "running": sorted(t - start for t in running.values()),
    }


async def steady(c: Cluster, seconds: float) -> dict[str, Any]:
    api, op = c.api, c.op
    before, op0, sim0, t0 = (
        await op.scrape(api.session),
        op.usage(),
        c.sim.usage(),
        time.monotonic(),
    )
    await asyncio.sleep(seconds)
    after, op1, sim1, t1 = await op.scrape(api.session), op.usage(), c.sim.usage(), time.monotonic()
    return {
        "seconds": t1 - t0,
        "requests": requests(after, before),
        "operator_cpu_pct": 100 * _cpu(op1, op0) / (t1 - t0),
        "kubesim_cpu_pct": 100 * _cpu(sim1, sim0) / (t1 - t0),
        "operator_rss_mib": op1["rss_mib"],
    }


async def restart(c: Cluster, seconds: float) -> dict[str, Any]:
    """Kills the operator, starts it again, and counts what the new one does in its first
    `seconds`."""
    sim0 = c.sim.usage()
    op = await c.restart_operator()
    ready, until_ready, sim1 = await op.scrape(c.api.session), op.usage(), c.sim.usage()
    await asyncio.sleep(seconds)
    after = await op.scrape(c.api.session)
    return {
        "ready_s": op.ready_s,
        "window_s": seconds,
        "requests_until_ready": requests(ready, {}),
        "operator_cpu_s_until_ready": until_ready["cpu_s"],
        "kubesim_cpu_s_until_ready": _cpu(sim1, sim0),
        "requests": requests(after, {}),
        "writes": requests(after, {})["writes"],
        "operator_rss_mib": op.usage()["rss_mib"],
        "operator_cpu_s": op.usage()["cpu_s"],
    }


async def run(args: argparse.Namespace, profile_dir: Path | None) -> dict[str, Any]:
    async with cluster(args) as c:
        await asyncio.sleep(
            args.idle_seconds
        )  # the start's garbage collected, the caches synced and quiet
        idle: dict[str, Any] = {
            "operator": c.op.usage(),
            "kubesim": c.sim.usage(),
            "operator_ready_s": c.op.ready_s,
        }
        fan = await fan_in(c, args, profile_dir)
        st = await steady(c, args.steady_seconds)
        rs = await restart(c, args.restart_seconds)
        total = {"operator_cpu_s": c.op.usage()["cpu_s"], "kubesim_cpu_s": c.sim.usage()["cpu_s"]}
        total["kubesim_peak_rss_mib"] = c.sim.peak_rss
    pods = args.jobs * (args.workers + 1)
    growth = (fan["operator_rss_mib"] - idle["operator"]["rss_mib"]) / max(args.jobs, 1)
    return {
        "idle": idle,
        "fan_in": fan,
        "steady": st,
        "restart": rs,
        "totals": total,
        "operator_rss_growth_kib_per_job": 1024 * growth,
        "operator_rss_growth_kib_per_pod": 1024 * growth * args.jobs / max(pods, 1),
        "pods": pods,
    }


async def ramp(args: argparse.Namespace) -> dict[str, Any]:
    """RSS of both processes after each of `args.ramp_steps` waves of N / steps jobs."""
    per_wave = max(1, args.jobs // args.ramp_steps)
    async with cluster(args) as c:
        await asyncio.sleep(args.idle_seconds)
        points = [
            {
                "jobs": 0,
                "operator_rss_mib": c.op.usage()["rss_mib"],
                "kubesim_rss_mib": c.sim.usage()["rss_mib"],
            }
        ]
        for wave in range(args.ramp_steps):
            names = [f"ramp-{wave:02d}-{i:04d}" for i in range(per_wave)]
            rv = (await c.api.call("GET", JOBS))["metadata"]["resourceVersion"]
            watcher = asyncio.create_task(watch_running(c.api, rv, set(names)))
            await create_all(c.api, [static_mpijob(n, args.workers) for n in names])
            await asyncio.wait_for(watcher, args.timeout)
            await _quiet(c.api, c.op, args.quiet_seconds, args.timeout)
            points.append(
                {
                    "jobs": per_wave * (wave + 1),
                    "operator_rss_mib": c.op.usage()["rss_mib"],
                    "kubesim_rss_mib": c.sim.usage()["rss_mib"],
                }
            )
    return {
        "workers": args.workers,
        "points": points,
        "operator_kib_per_job": 1024
        * _slope([(p["jobs"], p["operator_rss_mib"]) for p in points[1:]]),
        "kubesim_kib_per_job": 1024
        * _slope([(p["jobs"], p["kubesim_rss_mib"]) for p in points[1:]]),
    }


def _slope(xy: list[tuple[float, float]]) -> float:
    """Least-squares slope; NaN for fewer than two distinct x."""
    n = len(xy)
    mx, my = sum(x for x, _ in xy) / max(n, 1), sum(y for _, y in xy) / max(n, 1)
    var = sum((x - mx) ** 2 for x, _ in xy)
    return sum((x - mx) * (y - my) for x, y in xy) / var if var else math.nan


async def heap(args: argparse.Namespace) -> dict[str, Any]:
    """Where the operator's live Python memory was allocated once `args.heap_jobs` jobs are Running:
    a tracemalloc snapshot taken by bench/heapsnap.py, on a cluster of its own (tracing slows the
    operator and inflates its RSS, so nothing else is measured on it)."""
    out = Path(tempfile.mkdtemp(prefix="heapsnap-")) / "heap.json"
    command = (str(Path(__file__).with_name("heapsnap.py")), str(out))
    async with cluster(args, command=command) as c:
        names = [f"heap-{i:04d}" for i in range(args.heap_jobs)]
        rv = (await c.api.call("GET", JOBS))["metadata"]["resourceVersion"]
        watcher = asyncio.create_task(watch_running(c.api, rv, set(names)))
        await create_all(c.api, [static_mpijob(n, args.workers) for n in names])
        await asyncio.wait_for(watcher, args.timeout)
        await _quiet(c.api, c.op, args.quiet_seconds, args.timeout)
        c.op.proc.send_signal(signal.SIGUSR1)

        async def written() -> bool:
            return out.exists()

        await poll(written, args.timeout, 0.2)
        snapshot: dict[str, Any] = json.loads(out.read_text())
        await c.op.stop(signal.SIGKILL)  # nothing left to measure: no graceful drain to wait for
    return {"jobs": args.heap_jobs, "workers": args.workers, **snapshot}


def unsaturated(args: argparse.Namespace) -> argparse.Namespace:
    """`args` for the fan-in with time to spare: `--light-jobs` jobs whose pods start in
    `--light-pod-seconds`."""
    return argparse.Namespace(
        **{**vars(args), "jobs": args.light_jobs, "pod_seconds": args.light_pod_seconds}
    )


def turns(arms: Sequence[str], rounds: int) -> list[list[str]]:
    """The order the arms run in, per round: reversed every other round, so that a machine growing
    faster or slower over the runs weighs on every arm alike."""
    return [list(arms) if r % 2 == 0 else list(reversed(arms)) for r in range(rounds)]


async def alternate(
    fans: Mapping[str, argparse.Namespace], trees: Mapping[str, Path | None], rounds: int
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """`rounds` runs of each fan-in (`fan_in`'s results) from each tree (None: this checkout), each
    on a cluster of its own, the trees taking `turns`; by fan-in, then tree."""
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        fan: {arm: [] for arm in trees} for fan in fans
    }
    for order in turns(list(trees), rounds):
        for fan, fan_args in fans.items():
            for arm in order:
                runs[fan][arm].append(await _light_once(fan_args, trees[arm]))
    return runs


async def light(args: argparse.Namespace) -> dict[str, Any]:
    """The fan-in with time to spare, on a cluster of its own: `args.light_jobs` jobs of W workers
    whose pods start in `args.light_pod_seconds`, so the operator syncs as events come instead of
    once per batch; what a job costs it then, against the saturated fan-in of `run`.

    Then `args.light_rounds` alternating rounds of both fan-ins, each on a cluster of its own, at
    `args.cost_baseline_commit` (both processes from that commit's tree) and now: the cost per job
    of the day's machine for a code whose cost is known from an earlier report, apart from what the
    code changed since."""
    light_args = unsaturated(args)
    result = await _light_once(light_args)
    if args.light_rounds < 1:
        return result
    fans = {"unsaturated": light_args, "saturated": args}
    with tempfile.TemporaryDirectory(prefix="bench-cost-baseline-") as tmp:
        trees = {"before": checkout(args.cost_baseline_commit, Path(tmp)), "now": None}
        runs = await alternate(fans, trees, args.light_rounds)
    costs = {
        name: {arm: [r["operator_cpu_ms_per_job"] for r in results] for arm, results in by.items()}
        for name, by in runs.items()
    }
    result["baseline"] = {
        "commit": args.cost_baseline_commit,
        "reported_saturated_ms_per_job": args.cost_baseline_ms,
        **{
            name: {
                "ms_per_job": arms["before"],
                "now_ms_per_job": arms["now"],
                "median_ms_per_job": statistics.median(arms["before"]),
                "now_median_ms_per_job": statistics.median(arms["now"]),
            }
            for name, arms in costs.items()
        },
    }
    return result


async def _light_once(args: argparse.Namespace, tree: Path | None = None) -> dict[str, Any]:
    async with cluster(args, tree=tree) as c:
        await asyncio.sleep(args.idle_seconds)
        return await fan_in(c, args, None)
