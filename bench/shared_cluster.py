"""The shared-cluster scenario of bench/report.py, on `--shared-nodes` kubesim nodes of
`--shared-gpus` GPUs, each time-sliced `--shared-gpu-replicas` ways (timer runtime), with
PriorityClasses `bench-low`, `bench-high`:

1. fill: `--shared-jobs` low-priority elastic jobs of 1..2 one-GPU workers, created at max: until
   each has both workers Ready and listed in its ConfigMap's `discover_hosts.sh`;
2. wave: `--shared-wave-jobs` high-priority static jobs of `--shared-wave-workers` one-GPU workers,
   for which the scheduler preempts elastic workers: until every wave job is Running;
3. the wave's launchers exit 0 (kubesim's `kill`): until every elastic job is back at its max.

Reported: each step's time, the preempted workers and their jobs, the operator's writes per
preemption, the elastic jobs' failures, disruptions and replacements, CPU of both sides, RSS."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import aiohttp
from opbench_jobs import elastic_mpijob, static_mpijob
from opbench_processes import JOBS, NS, Api, Cluster, cluster, requests
from scale import _quiet, create_all, event_writes

from mpi_discovery.hostfile import parse_discover_hosts

LOW, HIGH = "bench-low", "bench-high"
PRIORITIES = {LOW: 1000, HIGH: 1_000_000}
MIN, MAX = 1, 2
GPU = "nvidia.com/gpu"
JOB_LABEL = "training.kubeflow.org/job-name"
ROLE_LABEL = "training.kubeflow.org/job-role"
PREEMPTED = "PreemptionByScheduler"
PODS_ALL = f"/api/v1/namespaces/{NS}/pods"
CONFIGMAPS = f"/api/v1/namespaces/{NS}/configmaps"


def sim_flags(args: argparse.Namespace) -> list[str]:
    allocatable = f"cpu=64,memory=512Gi,{GPU}={args.shared_gpus},pods=110"
    shape = ["--nodes", str(args.shared_nodes), "--node-allocatable", allocatable]
    return [*shape, "--gpu-replicas", str(args.shared_gpu_replicas)]


def _gpu_worker(job: dict[str, Any], priority: str) -> dict[str, Any]:
    spec = job["spec"]
    spec.setdefault("runPolicy", {})["schedulingPolicy"] = {"priorityClass": priority}
    container = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {GPU: 1}, "limits": {GPU: 1}}
    return job


def elastic_job(name: str) -> dict[str, Any]:
    """Low priority, 1..2 workers of one GPU, asking for 2; the default budget (maxReplacements 10)
    must stay untouched, every loss here being a disruption."""
    job = elastic_mpijob(name, workers=MAX, min_replicas=MIN, max_replicas=MAX, settle=1, grace=1)
    return _gpu_worker(job, LOW)


def wave_job(name: str, workers: int) -> dict[str, Any]:
    """High priority, static; its workers go when its launcher has succeeded."""
    job = _gpu_worker(static_mpijob(name, workers), HIGH)
    job["spec"]["runPolicy"]["cleanPodPolicy"] = "Running"
    return job


def _condition(obj: dict[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _preempted(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "DisruptionTarget" and c.get("reason") == PREEMPTED
        for c in (pod.get("status") or {}).get("conditions") or []
    )


class Watched:
    """The cluster as three watches show it: each job's Ready worker hosts, the hosts its ConfigMap
    lists, the MPIJobs' latest status and writes, the preempted pods; and which elastic jobs are not
    at their maximum (Ready and listed hosts the same `MAX`)."""

    def __init__(self, elastic: list[str]) -> None:
        self.elastic = set(elastic)
        self.ready: dict[str, set[str]] = {name: set() for name in elastic}
        self.listed: dict[str, set[str]] = {name: set() for name in elastic}
        self.short = set(elastic)
        self.back_at: dict[str, float] = {}
        """Monotonic time each elastic job last reached its maximum."""
        self.last_ready: dict[str, float] = {}
        """Monotonic time each job last had a worker turn Ready."""
        self.pods: dict[str, tuple[str, str, str, bool]] = {}
        """pod name -> (job, role, host, Ready and not terminating)"""
        self.victims: dict[str, str] = {}
        """Preempted pod (uid) -> its job."""
        self.jobs: dict[str, dict[str, Any]] = {}
        self.job_writes: Counter[str] = Counter()
        """MPIJob writes (every MODIFIED is the operator's: nothing else writes them) per job."""
        self.changed = asyncio.Event()

    async def follow(
        self, api: Api, path: str, apply: Callable[[str, dict[str, Any]], None]
    ) -> None:
        rv = (await api.call("GET", path))["metadata"]["resourceVersion"]
        timeout = aiohttp.ClientTimeout(total=None)
        while True:
            params = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "false"}
            async with api.session.get(api.url + path, params=params, timeout=timeout) as resp:
                async for line in resp.content:
                    event = json.loads(line)
                    obj = event["object"]
                    if event["type"] == "ERROR":  # e.g. 410 Gone: the figures would be wrong
                        raise RuntimeError(f"watch of {path} ended: {obj.get('message')}")
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    apply(event["type"], obj)
                    self.changed.set()

    def pod(self, kind: str, pod: dict[str, Any]) -> None:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        labels = meta.get("labels") or {}
        job, role, name = labels.get(JOB_LABEL, ""), labels.get(ROLE_LABEL, ""), meta["name"]
        host = (pod.get("spec") or {}).get("hostname") or name
        ready = (
            kind != "DELETED"
            and not meta.get("deletionTimestamp")
            and status.get("phase") not in ("Succeeded", "Failed")
            and _condition(pod, "Ready")
        )
        if _preempted(pod):  # by uid: a replacement may have the victim's name
            self.victims.setdefault(meta.get("uid") or name, job)
        was = self.pods.get(name)
        self.pods[name] = (job, role, host, ready)
        if kind == "DELETED":
            del self.pods[name]
        if job in self.elastic and role == "worker":
            if ready and not (was and was[3]):
                self.last_ready[job] = time.monotonic()
            (self.ready[job].add if ready else self.ready[job].discard)(host)
            self._check(job)

    def config_map(self, kind: str, config_map: dict[str, Any]) -> None:
        job = config_map["metadata"]["name"].removesuffix("-config")
        if job not in self.elastic or kind == "DELETED":
            return
        script = (config_map.get("data") or {}).get("discover_hosts.sh", "")
        self.listed[job] = {host.split(".", 1)[0] for host, _ in parse_discover_hosts(script)}
        self._check(job)

    def mpijob(self, kind: str, job: dict[str, Any]) -> None:
        name = job["metadata"]["name"]
        self.jobs[name] = job
        if kind == "MODIFIED":
            self.job_writes[name] += 1

    def _check(self, job: str) -> None:
        if len(self.ready[job]) == MAX and self.listed[job] == self.ready[job]:
            if job in self.short:
                self.short.discard(job)
                self.back_at[job] = time.monotonic()
        else:
            self.short.add(job)

    def status(self, kind: str) -> list[str]:
        return [name for name, job in self.jobs.items() if _condition(job, kind)]

    async def until(self, check: Callable[[], bool], within: float) -> float:
        async with asyncio.timeout(within):
            while not check():
                self.changed.clear()
                await self.changed.wait()
        return time.monotonic()


def _owner(name: str, jobs: set[str]) -> str:
    """The job whose object `namespace/name` is (`el-007-worker-1`, `el-007-config`), or ""."""
    base = name.split("/", 1)[-1]
    for cut in range(len(base), 0, -1):
        if base[:cut] in jobs and (cut == len(base) or base[cut] == "-"):
            return base[:cut]
    return ""


async def _controllers(api: Api) -> dict[str, dict[str, float]]:
    """kubesim's controllers: syncs and CPU seconds of each, by name."""
    stats: dict[str, dict[str, float]] = (await api.call("GET", "/kubesim/v1/controllers"))[
        "controllers"
    ]
    return stats


async def _preemption_events(api: Api) -> float:
    """Preempted Events the scheduler recorded (their counts summed)."""
    items = (await api.call("GET", f"/api/v1/namespaces/{NS}/events"))["items"]
    return float(sum(int(e.get("count") or 1) for e in items if e.get("reason") == "Preempted"))


async def run(c: Cluster, args: argparse.Namespace) -> dict[str, Any]:
    api, op, within = c.api, c.op, args.timeout
    n, nodes, gpus = args.shared_jobs, args.shared_nodes, args.shared_gpus
    wave_n, wave_w = args.shared_wave_jobs, args.shared_wave_workers
    for name, value in PRIORITIES.items():
        body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "value": value}
        body["metadata"] = {"name": name}
        await api.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body)
    elastic = [f"el-{i:03d}" for i in range(n)]
    wave = [f"hi-{i:02d}" for i in range(wave_n)]
    w = Watched(elastic)
    watches = [
        asyncio.create_task(w.follow(api, PODS_ALL, w.pod)),
        asyncio.create_task(w.follow(api, CONFIGMAPS, w.config_map)),
        asyncio.create_task(w.follow(api, JOBS, w.mpijob)),
    ]
    out: dict[str, Any] = {
        "nodes": nodes,
        "gpus_per_node": gpus,
        "gpu_replicas": args.shared_gpu_replicas,
        "jobs": n,
        "min_replicas": MIN,
        "max_replicas": MAX,
        "wave_jobs": wave_n,
        "wave_workers": wave_w,
    }
    try:
        # 1. Fill the cluster.
        started = time.monotonic()
        await create_all(api, [elastic_job(name) for name in elastic])
        filled = await w.until(lambda: not w.short, within)
        out["fill_s"] = filled - started
        _progress(out, "fill_s")
        await _quiet(api, op, args.quiet_seconds, within)
        # 2. The wave.
        scrape0, usage0 = await op.scrape(api.session), op.usage()
        events0, sched0 = (await event_writes(api))[1], await _controllers(api)
        preempt0, sim0 = await _preemption_events(api), c.sim.usage()
        w.job_writes.clear()
        wave_start = time.monotonic()
        await create_all(api, [wave_job(name, wave_w) for name in wave])
        wave_running = await w.until(lambda: set(wave) <= set(w.status("Running")), within)
        out["wave_running_s"] = wave_running - wave_start
        out["jobs_short_while_wave_ran"] = len(w.short)
        _progress(out, "wave_running_s")
        # 3. The wave ends: its launchers exit 0.
        launchers = [
            p for p, (job, role, *_) in w.pods.items() if job in wave and role == "launcher"
        ]
        wave_end = time.monotonic()
        await asyncio.gather(
            *(
                api.call("POST", f"/kubesim/v1/namespaces/{NS}/pods/{p}/kill", {"exitCode": 0})
                for p in launchers
            )
        )
        back = await w.until(lambda: not w.short, within)
        out["back_at_max_s"] = back - wave_end
        last_ready = max((w.last_ready[j] for j in elastic if j in w.last_ready), default=back)
        out["last_replacement_ready_s"] = last_ready - wave_end
        out["listed_after_last_ready_s"] = back - last_ready
        _progress(out, "back_at_max_s")
        await w.until(lambda: set(wave) <= set(w.status("Succeeded")), within)
        quiet = await _quiet(api, op, args.quiet_seconds, within)
        out |= await _counts(c, w, wave_start, quiet, scrape0, usage0, events0)
        sched1, sim1 = await _controllers(api), c.sim.usage()
        out["scheduler_preemption_events"] = await _preemption_events(api) - preempt0
        zero = {"syncs": 0.0, "cpuSeconds": 0.0}
        spent = {
            name: {k: v - sched0.get(name, zero)[k] for k, v in one.items()}
            for name, one in sched1.items()
        }
        out["kubesim_controllers"] = spent
        out["scheduler_cpu_s"] = spent.get("scheduler", zero)["cpuSeconds"]
        out["scheduler_syncs"] = spent.get("scheduler", zero)["syncs"]
        out["kubesim_cpu_s"] = sim1["cpu_s"] - sim0["cpu_s"]
        out["wave_to_quiet_s"] = quiet - wave_start
    finally:
        for task in watches:
            task.cancel()
        for task in watches:
            with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
                await task
    return out


async def _counts(
    c: Cluster,
    w: Watched,
    start: float,
    end: float,
    scrape0: dict[str, float],
    usage0: dict[str, float],
    events0: int,
) -> dict[str, Any]:
    """Victims, the elastic jobs' status counts, and the operator's writes in [start, end]."""
    api, op = c.api, c.op
    elastic = w.elastic
    victims = {pod: job for pod, job in w.victims.items() if job in elastic}
    per_job = Counter(victims.values())
    statuses = [(w.jobs[j].get("status") or {}).get("elastic") or {} for j in sorted(elastic)]
    after, usage1 = await op.scrape(api.session), op.usage()
    events = (await event_writes(api))[1] - events0
    total = requests(after, scrape0)["writes"] - events
    kinds: Counter[str] = Counter()
    for _, verb, kind, name in op.logged_writes(start, end):
        if _owner(name, set(w.jobs)) in elastic:
            kinds[f"{verb} {kind}"] += 1
    kinds["MPIJob writes (status)"] = sum(v for j, v in w.job_writes.items() if j in elastic)
    elastic_writes = sum(kinds.values())
    return {
        "preempted_workers": len(victims),
        "preempted_other_pods": len(w.victims) - len(victims),
        "jobs_hit": len(per_job),
        "jobs_hit_twice": sum(1 for k in per_job.values() if k > 1),
        "failed_jobs": len([j for j in w.status("Failed") if j in elastic]),
        "disruptions": sum(int(s.get("disruptions") or 0) for s in statuses),
        "replacements": sum(int(s.get("replacements") or 0) for s in statuses),
        "writes": total,
        "event_writes": float(events),
        "elastic_writes": float(elastic_writes),
        "elastic_writes_by_kind": dict(kinds),
        "writes_per_preemption": elastic_writes / len(victims) if victims else math.nan,
        "operator_cpu_s": usage1["cpu_s"] - usage0["cpu_s"],
        "operator_rss_mib": usage1["rss_mib"],
        "operator_peak_rss_mib": op.peak_rss,
    }


def _progress(out: dict[str, Any], key: str) -> None:
    print(f"bench/shared_cluster.py: {key} {out[key]:.1f}", file=sys.stderr, flush=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("shared cluster (bench/shared_cluster.py)")
    group.add_argument("--shared-nodes", type=int, help="nodes (default 50; quick 3)")
    group.add_argument("--shared-gpus", type=int, help="GPUs per node (default 4; quick 1)")
    group.add_argument(
        "--shared-gpu-replicas",
        type=int,
        help="time-slicing: each GPU shared this many ways (default 2; quick 2)",
    )
    group.add_argument(
        "--shared-jobs",
        type=int,
        help="elastic jobs, 1..2 one-GPU workers (default 200; quick 3)",
    )
    group.add_argument(
        "--shared-wave-jobs", type=int, help="high-priority static jobs (default 25; quick 1)"
    )
    group.add_argument(
        "--shared-wave-workers", type=int, help="one-GPU workers per wave job (default 4; quick 2)"
    )


async def run_alone(args: argparse.Namespace) -> dict[str, Any]:
    async with cluster(args, sim_flags=sim_flags(args)) as c:
        return await run(c, args)


def main(argv: list[str] | None = None) -> int:
    """`python bench/shared_cluster.py [--quick] [--shared-jobs N] ...`: this scenario alone, as
    JSON."""
    import report  # its flags and defaults; it imports this module

    print(json.dumps(asyncio.run(run_alone(report.parse_args(argv))), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
