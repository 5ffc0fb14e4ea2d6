"""The fan-in scenario of `bench/kubesim_throughput.py`: the operator's write pattern for N MPIJobs
x W workers, played by a bare client, so that what is measured is kubesim alone.

Per job the client does what `mpi-operator run` does for a static job: it creates the MPIJob, then
its Service, ConfigMap, Secret, launcher Job and W worker Pods (built by the operator's own
`mpi_operator.desired.build`, owner references included), writes the `Created` status, and, once
every worker is Ready, updates the ConfigMap's `discover_hosts.sh` and writes the `Running` status.
Six watches stay open throughout, with the operator's informers' selectors. kubesim's Job controller
creates the launcher pods and its timer kubelet starts every pod.

kubesim's CPU time and RSS are read from /proc (psutil); with `--profile FILE` kubesim runs under
cProfile and writes its stats to FILE when stopped; with `--flame FILE.svg`, py-spy samples it into
a flame graph (cProfile's overhead distorts less-Pythonic costs such as syscalls; sampling does
not).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import aiohttp
import psutil  # type: ignore[import-untyped]  # psutil ships no stubs

from mpi_operator import desired
from mpi_operator.api.normalize import normalize
from mpi_operator.desired.secret import generate_ssh_keys
from mpi_operator.runtime.handlers import OWNED_SELECTOR
from mpi_operator.settings import Settings

NS = "default"
MPIJOBS = f"/apis/kubeflow.org/v2beta1/namespaces/{NS}/mpijobs"
WATCHED = {
    # The operator's informers (mpi_operator.runtime.handlers.watches): path, label selector.
    "mpijobs": (MPIJOBS, ""),
    "pods": (f"/api/v1/namespaces/{NS}/pods", OWNED_SELECTOR),
    "jobs": (f"/apis/batch/v1/namespaces/{NS}/jobs", ""),
    "services": (f"/api/v1/namespaces/{NS}/services", ""),
    "configmaps": (f"/api/v1/namespaces/{NS}/configmaps", ""),
    "secrets": (f"/api/v1/namespaces/{NS}/secrets", ""),
}
_PLURAL = {"Service": "services", "ConfigMap": "configmaps", "Secret": "secrets", "Pod": "pods"}


def mpijob(name: str, workers: int) -> dict[str, Any]:
    def template(role: str, command: list[str]) -> dict[str, Any]:
        return {
            "spec": {
                "containers": [{"name": role, "image": "mpioperator/mpi-pi", "command": command}]
            }
        }

    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "template": template("launcher", ["mpirun", "/home/mpiuser/pi"]),
                },
                "Worker": {
                    "replicas": workers,
                    "template": template("worker", ["/usr/sbin/sshd", "-De"]),
                },
            },
        },
    }


class Client:
    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session, self.url = session, url
        self.writes = 0

    async def call(self, method: str, path: str, body: Any = None, *, merge: bool = False) -> Any:
        headers = {"Content-Type": "application/merge-patch+json" if merge else "application/json"}
        data = None if body is None else json.dumps(body)
        async with self.session.request(
            method, self.url + path, data=data, headers=headers
        ) as resp:
            if resp.status >= 300:
                raise RuntimeError(f"{method} {path}: {resp.status} {await resp.text()}")
            if method != "GET":
                self.writes += 1
            return await resp.json()

    async def controller_stats(self) -> dict[str, Any]:
        """Each controller's syncs and CPU; empty from a kubesim older than the endpoint (the
        scheduling scenario's baseline commit)."""
        async with self.session.get(self.url + "/kubesim/v1/controllers") as resp:
            if resp.status == 404:
                return {}
            resp.raise_for_status()
            stats: dict[str, Any] = (await resp.json())["controllers"]
            return stats


def _condition(kind: str, now: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": f"MPIJob{kind}", "lastTransitionTime": now}


class FanIn:
    """One run: the jobs' progress as the watches report it."""

    def __init__(self, client: Client, args: argparse.Namespace) -> None:
        self.client, self.args = client, args
        self.keys = generate_ssh_keys()
        self.settings = Settings()
        self.ready_workers: dict[str, set[str]] = defaultdict(set)
        self.running_pods: set[str] = set()
        self.events = 0
        self.all_running = asyncio.Event()
        self.all_reported = asyncio.Event()
        self.reported: set[str] = set()
        self.followups: list[asyncio.Task[None]] = []

    async def create_job(self, name: str) -> None:
        job = await self.client.call("POST", MPIJOBS, mpijob(name, self.args.workers))
        state = desired.build(normalize(job).job, settings=self.settings, ssh_keys=self.keys)
        children = [state.service, state.config_map, state.secret]
        for child in [*children, *state.workers.values()]:
            assert child is not None
            plural = _PLURAL[child["kind"]]
            await self.client.call("POST", f"/api/v1/namespaces/{NS}/{plural}", child)
        await self.client.call("POST", f"/apis/batch/v1/namespaces/{NS}/jobs", state.launcher_job)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {"status": {"conditions": [_condition("Created", now)], "startTime": now}}
        await self.client.call("PATCH", f"{MPIJOBS}/{name}/status", status, merge=True)

    async def job_running(self, name: str) -> None:
        cm = f"/api/v1/namespaces/{NS}/configmaps/{name}-config"
        hosts = "".join(
            f"echo {name}-worker-{i}.{name}.{NS}.svc:1\n" for i in range(self.args.workers)
        )
        await self.client.call(
            "PATCH", cm, {"data": {"discover_hosts.sh": "#!/bin/sh\n" + hosts}}, merge=True
        )
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {
            "status": {"conditions": [_condition("Created", now), _condition("Running", now)]}
        }
        await self.client.call("PATCH", f"{MPIJOBS}/{name}/status", status, merge=True)
        self.reported.add(name)
        if len(self.reported) == self.args.jobs:
            self.all_reported.set()

    def on_pod(self, pod: dict[str, Any]) -> None:
        meta, status = pod["metadata"], pod.get("status") or {}
        labels = meta.get("labels") or {}
        job = labels.get("training.kubeflow.org/job-name", "")
        if status.get("phase") == "Running":
            self.running_pods.add(meta["name"])
            if len(self.running_pods) == self.args.jobs * (self.args.workers + 1):
                self.all_running.set()
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        if ready and labels.get("training.kubeflow.org/job-role") == "worker" and job:
            workers = self.ready_workers[job]
            before = len(workers)
            workers.add(meta["name"])
            if before < self.args.workers == len(workers):
                self.followups.append(asyncio.create_task(self.job_running(job)))

    async def watch(self, what: str, rv: str, started: asyncio.Event) -> None:
        path, selector = WATCHED[what]
        params = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true"}
        if selector:
            params["labelSelector"] = selector
        timeout = aiohttp.ClientTimeout(total=None)
        async with self.client.session.get(
            self.client.url + path, params=params, timeout=timeout
        ) as resp:
            started.set()
            async for line in resp.content:
                event = json.loads(line)
                if event["type"] == "BOOKMARK":
                    continue
                self.events += 1
                if what == "pods" and event["type"] != "DELETED":
                    self.on_pod(event["object"])


async def _bounded(coros: list[Awaitable[None]], concurrency: int) -> None:
    queue: asyncio.Queue[Awaitable[None]] = asyncio.Queue()
    for coro in coros:
        queue.put_nowait(coro)

    async def worker() -> None:
        while not queue.empty():
            await queue.get_nowait()

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def run(args: argparse.Namespace) -> dict[str, float]:
    # The sibling scripts, on sys.path.
    from kubesim_throughput import start_sim, stop_sim
    from opbench_processes import install_crd

    proc, url = await start_sim(args)
    sim = psutil.Process(proc.pid)
    flame = None
    if args.flame:
        # py-spy samples the running process; stopped with SIGINT, it writes the profile.
        fmt = (
            "raw" if args.flame.suffix == ".txt" else "flamegraph"
        )  # raw: collapsed stacks, for tools
        spy = [
            str(Path(sys.executable).parent / "py-spy"),
            "record",
            "--pid",
            str(proc.pid),
            "--rate",
            "200",
        ]
        spy += ["--format", fmt, "--output", str(args.flame)]
        flame = await asyncio.create_subprocess_exec(
            *spy, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
    results: dict[str, float] = {"jobs": args.jobs, "workers": args.workers}
    try:
        connector = aiohttp.TCPConnector(limit=args.concurrency + len(WATCHED) + 4)
        async with aiohttp.ClientSession(connector=connector) as session:
            client = Client(session, url)
            await install_crd(client)  # type: ignore[arg-type]  # the same `call` as its Api
            fan = FanIn(client, args)
            rv = (await client.call("GET", "/api/v1/namespaces")).get("metadata", {})[
                "resourceVersion"
            ]
            starts = [asyncio.Event() for _ in WATCHED]
            watches = [
                asyncio.create_task(fan.watch(w, rv, s))
                for w, s in zip(WATCHED, starts, strict=True)
            ]
            await asyncio.gather(*(s.wait() for s in starts))
            results["rss_before_mib"] = sim.memory_info().rss / 2**20
            cpu = sim.cpu_times()
            cpu_before = cpu.user + cpu.system
            started = time.perf_counter()
            await _bounded([fan.create_job(f"job-{i}") for i in range(args.jobs)], args.concurrency)
            results["create_phase_s"] = time.perf_counter() - started
            results["creates_per_s"] = args.jobs * (args.workers + 5) / results["create_phase_s"]
            async with asyncio.timeout(args.timeout):
                await fan.all_running.wait()
                results["all_running_s"] = time.perf_counter() - started
                await fan.all_reported.wait()
                await asyncio.gather(*fan.followups)
            elapsed = time.perf_counter() - started
            stats = await client.controller_stats()
            scheduler = stats.get("scheduler") or {}
            results["scheduler_syncs"] = scheduler.get("syncs", 0)
            results["scheduler_cpu_s"] = scheduler.get("cpuSeconds", 0.0)
            results["nodes"] = args.nodes or 1
            cpu = sim.cpu_times()
            results["sim_cpu_s"] = cpu.user + cpu.system - cpu_before
            results["rss_after_mib"] = sim.memory_info().rss / 2**20
            results["client_writes"] = client.writes
            results["watch_events"] = fan.events
            results["watch_events_per_s"] = fan.events / elapsed
            for task in watches:
                task.cancel()
            await asyncio.gather(*watches, return_exceptions=True)
    finally:
        if flame is not None:
            flame.send_signal(signal.SIGINT)
            await flame.wait()
        await stop_sim(proc)
    return results


def report(r: dict[str, float], command: str) -> list[str]:
    pods = int(r["jobs"] * (r["workers"] + 1))
    syncs = int(r.get("scheduler_syncs", 0))
    per_pod = r.get("scheduler_cpu_s", 0.0) / pods * 1e6 if pods else 0.0
    return [
        f"## Fan-in: {int(r['jobs'])} MPIJobs x {int(r['workers'])} workers",
        "",
        f"`{command}`. A bare client plays the operator's writes (see `bench/kubesim_fanin.py`); "
        "six",
        "watches are open. Timings on a shared machine are noisy.",
        "",
        "| metric | value |",
        "|---|---|",
        f"| kubesim CPU time, first create until every status written | {r['sim_cpu_s']:.1f} s |",
        f"| wall time until every pod is Running | {r['all_running_s']:.1f} s |",
        f"| creates/s during the create phase ({r['create_phase_s']:.1f} s) | "
        f"{r['creates_per_s']:.0f} |",
        f"| writes by the client | {int(r['client_writes'])} |",
        f"| watch events delivered (6 watches) | {int(r['watch_events'])}, "
        f"{r['watch_events_per_s']:.0f}/s |",
        f"| kubesim RSS before / after | {r['rss_before_mib']:.0f} / "
        f"{r['rss_after_mib']:.0f} MiB |",
        f"| nodes | {int(r.get('nodes', 1))} |",
        f"| scheduler CPU per pod ({syncs} scheduling attempts for {pods} pods; "
        "filters, score, binding write) | "
        f"{per_pod:.0f} µs |",
        "",
        "The default cluster (one unlimited node) binds pods at creation: its scheduler CPU is the",
        "few pods that fail a filter there, usually none.",
        "",
    ]


if __name__ == "__main__":
    sys.exit("run it as: bench/kubesim_throughput.py fanin")
