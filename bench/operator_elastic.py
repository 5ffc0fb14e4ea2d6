"""Benchmark of the operator on elastic MPIJobs: fan-in, scale reaction as the launcher sees it, steady-state
writes and worker replacement. Not a test: run it, read bench/out/operator.md (and operator.json).

`mpi-operator sim` and `mpi-operator run` each run in their own process, so the operator's RSS and CPU
time (read with psutil) are its own, and the load this client generates does not count against it.
Scale and replacement times are measured up to the moment the launcher pod's *mounted*
/etc/mpi/discover_hosts.sh (kubesim's file endpoint) lists the new hosts, i.e. what Horovod would read.
kubesim's request record is in-process only, so the operator's requests come from its own
`rest_client_requests_total` and the writes in a window are named from its JSON log.

    .venv/bin/python bench/operator_elastic.py [--jobs 50] [--scale-jobs 10] [--replace-jobs 10] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import re
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import aiohttp
import psutil  # type: ignore[import-untyped]  # psutil ships no stubs; types-psutil is not a dependency
import yaml
from prometheus_client.parser import text_string_to_metric_families

from mpi_discovery.hostfile import parse_discover_hosts
from mpi_operator.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
NS = "default"
JOBS = f"/apis/kubeflow.org/v2beta1/namespaces/{NS}/mpijobs"
PODS = f"/api/v1/namespaces/{NS}/pods"
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
CONVERGENCE = "mpi_operator_elastic_convergence_seconds"
_INDEX = re.compile(r"-worker-(\d+)(?:-r\d+)?$")
FULL = {"jobs": 50, "scale_jobs": 10, "replace_jobs": 10, "steady_seconds": 30.0, "settle_seconds": 5}
FULL |= {"grace_seconds": 10, "pod_seconds": 1.0, "timeout": 600.0}
QUICK = {"jobs": 4, "scale_jobs": 2, "replace_jobs": 2, "steady_seconds": 5.0, "settle_seconds": 1}
QUICK |= {"grace_seconds": 1, "pod_seconds": 0.3, "timeout": 60.0}
Snapshot = dict[str, float]


def pct(values: Iterable[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); NaN for no values."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50": pct(values, 50), "p95": pct(values, 95), "max": pct(values, 100)}


def mpijob(name: str, args: argparse.Namespace) -> dict[str, Any]:
    def template(role: str, command: list[str]) -> dict[str, Any]:
        return {
            "spec": {"containers": [{"name": role, "image": "horovod/horovod:0.28.1", "command": command}]}
        }

    launcher = ["horovodrun", "-np", "2", "--min-np", "1", "--max-np", "4"]
    launcher += ["--host-discovery-script", "/etc/mpi/discover_hosts.sh", "python", "train.py"]
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "slotsPerWorker": 1,
            "elasticPolicy": {
                "minReplicas": 1,
                "maxReplicas": 4,
                "settleSeconds": args.settle_seconds,
                "scaleInGracePeriodSeconds": args.grace_seconds,
            },
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template("launcher", launcher)},
                "Worker": {"replicas": 2, "template": template("worker", ["/usr/sbin/sshd", "-De"])},
            },
        },
    }


class Api:
    """A bare aiohttp client of kubesim (no rate limit, no cache: the operator is the one measured)."""

    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session, self.url = session, url

    async def call(self, method: str, path: str, body: Any = None, *, merge: bool = False) -> Any:
        headers = {"Content-Type": "application/merge-patch+json" if merge else "application/json"}
        data = None if body is None else json.dumps(body)
        async with self.session.request(method, self.url + path, data=data, headers=headers) as resp:
            if resp.status >= 300:
                raise RuntimeError(f"{method} {path}: {resp.status} {await resp.text()}")
            return await resp.json()

    async def hosts(self, pod: str) -> set[str] | None:
        """Host names (first DNS label) the pod's mounted discover_hosts.sh lists; None if not mounted."""
        path = f"/kubesim/v1/namespaces/{NS}/pods/{pod}/files/etc/mpi/discover_hosts.sh"
        async with self.session.get(self.url + path) as resp:
            if resp.status != 200:
                return None
            return {host.split(".", 1)[0] for host, _ in parse_discover_hosts(await resp.text())}

    async def pods(self, selector: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = (await self.call("GET", f"{PODS}?labelSelector={selector}"))["items"]
        return items


def indices(hosts: set[str]) -> set[int]:
    return {int(m.group(1)) for h in hosts if (m := _INDEX.search(h))}


async def poll(check: Callable[[], Awaitable[bool]], within: float, interval: float) -> float:
    """Monotonic time at which `check()` first held, polling every `interval` seconds."""
    async with asyncio.timeout(within):
        while True:
            if await check():
                return time.monotonic()
            await asyncio.sleep(interval)


class Operator:
    """The `mpi-operator run` process: its metrics endpoint, its JSON log and its own RSS/CPU."""

    def __init__(self, proc: asyncio.subprocess.Process, metrics_url: str) -> None:
        self.proc, self.metrics_url = proc, metrics_url
        self.ps = psutil.Process(proc.pid)
        self.logs: list[tuple[float, dict[str, Any]]] = []
        self.peak_rss = 0.0
        self._tasks = [asyncio.create_task(self._drain()), asyncio.create_task(self._sample())]

    def usage(self) -> dict[str, float]:
        cpu = self.ps.cpu_times()
        rss = self.ps.memory_info().rss / 2**20
        self.peak_rss = max(self.peak_rss, rss)
        return {"rss_mib": rss, "cpu_s": cpu.user + cpu.system}

    async def _sample(self) -> None:
        while True:
            self.usage()
            await asyncio.sleep(0.25)

    async def _drain(self) -> None:
        assert self.proc.stderr is not None
        async for raw in self.proc.stderr:
            with contextlib.suppress(ValueError):
                self.logs.append((time.monotonic(), json.loads(raw)))

    async def scrape(self, session: aiohttp.ClientSession) -> Snapshot:
        async with session.get(self.metrics_url + "/metrics") as resp:
            text = await resp.text()
        snap: Snapshot = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
                snap[f"{s.name}{{{labels}}}"] = s.value
        return snap

    def writes_between(self, start: float, end: float) -> Counter[str]:
        """Operator log lines naming a write (`create Pod ...`, `patch ConfigMap ...`) in [start, end)."""
        verbs = ("create ", "update ", "patch ", "delete ", "stop ")
        return Counter(
            " ".join(str(e["msg"]).split()[:2])
            for t, e in self.logs
            if start <= t < end and str(e.get("msg", "")).startswith(verbs)
        )

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await _stop(self.proc)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()


def delta(after: Snapshot, before: Snapshot, name: str, **labels: str) -> float:
    """Sum over samples of `name` whose labels include `labels`, after minus before."""

    def total(snap: Snapshot) -> float:
        return sum(
            v
            for k, v in snap.items()
            if k.split("{", 1)[0] == name and all(f"{lk}={lv}" in k for lk, lv in labels.items())
        )

    return total(after) - total(before)


def requests(after: Snapshot, before: Snapshot) -> dict[str, float]:
    name = "rest_client_requests_total"
    out = {m.lower(): delta(after, before, name, method=m) for m in ("GET", *WRITE_METHODS)}
    out["writes"] = sum(out[m.lower()] for m in WRITE_METHODS)
    out["total"] = delta(after, before, name)
    out["non_2xx"] = out["total"] - sum(
        delta(after, before, name, code=code)
        for code in {k.split("code=", 1)[1][:3] for k in after if "code=2" in k}
    )
    return out


def histogram(after: Snapshot, before: Snapshot, name: str = CONVERGENCE) -> dict[str, float]:
    """Count, mean and bucket-interpolated p50/p95 (as PromQL's histogram_quantile) of the observations
    made between two scrapes."""
    buckets = sorted(
        (float(k.split("le=", 1)[1].rstrip("}")), v - before.get(k, 0.0))
        for k, v in after.items()
        if k.startswith(f"{name}_bucket{{")
    )
    count = delta(after, before, f"{name}_count")
    out = {"n": count, "mean": delta(after, before, f"{name}_sum") / count if count else math.nan}
    for q in (50, 95):
        rank, lower, below, value = q / 100 * count, 0.0, 0.0, math.nan
        for le, cumulative in buckets:
            if count and cumulative >= rank:
                upper = le if math.isfinite(le) else lower
                value = lower + (upper - lower) * (rank - below) / max(cumulative - below, 1e-9)
                break
            lower, below = le, cumulative
        out[f"p{q}"] = value
    return out


async def start_sim(args: argparse.Namespace, kubeconfig: Path) -> tuple[asyncio.subprocess.Process, str]:
    sec = str(args.pod_seconds)
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "mpi_operator", "sim", "--port", "0"),
        *("--kubeconfig-out", str(kubeconfig), "--start-seconds", sec, "--ready-seconds", sec),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    url = ""
    async with asyncio.timeout(30):
        while not (line := (await proc.stdout.readline()).decode()).startswith("export KUBECONFIG="):
            if not line:
                raise RuntimeError("mpi-operator sim exited before serving")
            if "serving the Kubernetes API on " in line:
                url = line.rsplit(" ", 1)[-1].strip()
    return proc, url


async def start_operator(args: argparse.Namespace, kubeconfig: Path, api: Api) -> Operator:
    flags = ["--kubeconfig", str(kubeconfig), "--no-leader-elect", "--metrics-address", "127.0.0.1:0"]
    flags += ["--log-format", "json", "--workers", str(args.operator_workers)]
    flags += ["--qps", str(args.operator_qps), "--burst", str(args.operator_burst)]
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "mpi_operator", "run", *flags),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    msg = ""
    async with asyncio.timeout(30):
        while "serving /healthz" not in msg:
            raw = await proc.stderr.readline()
            if not raw:
                raise RuntimeError(f"mpi-operator run exited with {await proc.wait()}")
            with contextlib.suppress(ValueError):
                msg = str(json.loads(raw).get("msg", ""))
    op = Operator(proc, msg.rsplit(" ", 1)[-1])

    async def ready() -> bool:
        async with api.session.get(op.metrics_url + "/readyz") as resp:
            return resp.status == 200

    await poll(ready, 30, 0.1)
    return op


async def install_crd(api: Api) -> None:
    crd = yaml.safe_load((ROOT / "crds" / "kubeflow.org_mpijobs.yaml").read_text())
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    await api.call("POST", path, crd)

    async def established() -> bool:
        conditions = (await api.call("GET", f"{path}/{crd['metadata']['name']}")).get("status", {})
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions["conditions"])

    await poll(established, 30, 0.1)


def _running(job: dict[str, Any]) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Running" and c.get("status") == "True" for c in conditions)


async def watch_running(api: Api, rv: str, names: set[str]) -> dict[str, float]:
    """Monotonic time each named MPIJob first reported Running=True, from a watch stream."""
    seen: dict[str, float] = {}
    params = {"watch": "true", "resourceVersion": rv}
    timeout = aiohttp.ClientTimeout(total=None)
    while len(seen) < len(names):
        async with api.session.get(api.url + JOBS, params=params, timeout=timeout) as resp:
            async for line in resp.content:
                event = json.loads(line)
                obj = event["object"]
                name = obj.get("metadata", {}).get("name", "")
                if event["type"] in ("ADDED", "MODIFIED") and name in names and _running(obj):
                    seen.setdefault(name, time.monotonic())
                if rv_new := obj.get("metadata", {}).get("resourceVersion"):
                    params["resourceVersion"] = rv_new
                if len(seen) == len(names):
                    break
    return seen


async def first_listed(
    api: Api, names: list[str], args: argparse.Namespace
) -> tuple[dict[str, str], dict[str, float]]:
    """Each job's launcher pod (its name has a generated suffix) and the monotonic time its mounted
    script first listed both workers. One poller for all jobs, sparser for many, to spare kubesim's CPU."""
    launchers: dict[str, str] = {}
    listed: dict[str, float] = {}

    async def check() -> bool:
        if len(launchers) < len(names):
            for pod in await api.pods("mpi_role_type=launcher"):
                if (pod.get("status") or {}).get("phase") == "Running":
                    launchers.setdefault(pod["metadata"]["labels"]["mpi_job_name"], pod["metadata"]["name"])
        pending = [n for n in launchers if n not in listed]
        found = await asyncio.gather(*(api.hosts(launchers[n]) for n in pending))
        now = time.monotonic()
        listed.update(
            (n, now) for n, hosts in zip(pending, found, strict=True) if hosts and indices(hosts) == {0, 1}
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


async def fan_in(api: Api, op: Operator, names: list[str], args: argparse.Namespace) -> dict[str, Any]:
    rv = (await api.call("GET", JOBS))["metadata"]["resourceVersion"]
    before, usage0 = await op.scrape(api.session), op.usage()
    watcher = asyncio.create_task(watch_running(api, rv, set(names)))
    gate, sent = asyncio.Semaphore(16), {}

    async def create(name: str) -> None:
        async with gate:
            sent[name] = time.monotonic()
            await api.call("POST", JOBS, mpijob(name, args))

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
        await api.call("PATCH", f"{JOBS}/{name}/scale", {"spec": {"replicas": replicas}}, merge=True)

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
        return len(pods) == 2 * jobs and not any(p["metadata"].get("deletionTimestamp") for p in pods)

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
        await api.call("POST", f"/kubesim/v1/namespaces/{NS}/pods/{name}-worker-1/kill", {"exitCode": 137})

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
        "replacements_metric": delta(after, before, "mpi_operator_elastic_worker_replacements_total"),
        "requests_per_job": {k: v / len(names) for k, v in requests(after, before).items()},
        "operator_cpu_s": usage1["cpu_s"] - usage0["cpu_s"],
    }


def machine() -> dict[str, Any]:
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "arch": platform.machine(),
        "python": platform.python_version(),
        "loadavg_start": os.getloadavg(),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": machine(), "args": vars(args).copy()}
    kubeconfig = Path(tempfile.mkdtemp(prefix="operator-bench-")) / "kubeconfig"
    sim, url = await start_sim(args, kubeconfig)
    op: Operator | None = None
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as session:
            api = Api(session, url)
            await install_crd(api)
            op = await start_operator(args, kubeconfig, api)
            results["operator_idle"] = op.usage()
            names = [f"bench-{i:03d}" for i in range(args.jobs)]
            fan = await fan_in(api, op, names, args)
            launchers = fan.pop("launchers")
            results["fan_in"] = fan
            results["scale"] = await scale(api, op, launchers, args)
            results["steady"] = await steady(api, op, args.jobs, args)
            results["replace"] = await replace(api, op, launchers, args)
            results["operator_total"] = {**op.usage(), "peak_rss_mib": op.peak_rss}
            results["kubesim_total_cpu_s"] = sum(psutil.Process(sim.pid).cpu_times()[:2])
    finally:
        if op is not None:
            await op.stop()
        await _stop(sim)
    results["machine"]["loadavg_end"] = os.getloadavg()
    return results


def _f(value: float, digits: int = 2) -> str:
    return "n/a" if math.isnan(value) else f"{value:.{digits}f}"


def _row(label: str, s: dict[str, float]) -> str:
    return f"| {label} | {int(s['n'])} | {_f(s['p50'])} | {_f(s['p95'])} | {_f(s['max'])} |"


def _reqs(r: dict[str, float]) -> str:
    parts = f"{_f(r['get'], 1)} GET, {_f(r['writes'], 1)} writes, {_f(r['non_2xx'], 1)} not 2xx"
    return f"{_f(r['total'], 1)} ({parts})"


def report(r: dict[str, Any]) -> str:
    m, a, fan, sc, st, rp = r["machine"], r["args"], r["fan_in"], r["scale"], r["steady"], r["replace"]
    total = r["operator_total"]

    def floor(per_job: dict[str, float], jobs: int) -> str:
        """Seconds the operator's token bucket (--qps, --burst) needs to let these requests through."""
        if not a["operator_qps"]:
            return "0"
        return _f(max(0.0, (per_job["total"] * jobs - a["operator_burst"]) / a["operator_qps"]))

    fan_floor = floor(fan["requests_per_job"], a["jobs"])
    out_floor = floor(sc["out_2_to_4"]["requests_per_job"], sc["jobs"])
    in_floor = floor(sc["in_4_to_2"]["requests_per_job"], sc["jobs"])
    flags = f"--jobs {a['jobs']} --scale-jobs {a['scale_jobs']} --replace-jobs {a['replace_jobs']}"
    lines = [
        "# Operator benchmark: elastic MPIJobs",
        "",
        f"Measured {m['date']} on {m['arch']}, {m['cpus']} CPUs (shared), Python {m['python']}; load average "
        f"at start {' '.join(f'{x:.2f}' for x in m['loadavg_start'])}, at end "
        f"{' '.join(f'{x:.2f}' for x in m['loadavg_end'])}.",
        f"`python bench/operator_elastic.py {flags} --steady-seconds {a['steady_seconds']:g}"
        f"{' --quick' if a['quick'] else ''}`; operator `--qps {a['operator_qps']:g} --burst "
        f"{a['operator_burst']} --workers {a['operator_workers']}`; jobs: 2 workers, elasticPolicy 1..4, "
        f"settleSeconds {a['settle_seconds']}, scaleInGracePeriodSeconds {a['grace_seconds']}; kubesim pod "
        f"start and ready {a['pod_seconds']:g} s each. Mounted files polled every {a['poll_seconds']:g} s.",
        "",
        "## Fan-in",
        "",
        f"{a['jobs']} MPIJobs created at once (16 concurrent creates); all Running after "
        f"{_f(fan['all_running_s'])} s. Times per job from its create request, in seconds.",
        "",
        "| to | jobs | p50 | p95 | max |",
        "|---|---|---|---|---|",
        _row("Running condition", fan["running_s"]),
        _row("both workers in the mounted discover_hosts.sh", fan["listed_s"]),
        "",
        "| operator | value |",
        "|---|---|",
        f"| API requests per job until all Running and listed | {_reqs(fan['requests_per_job'])} |",
        f"| discovery updates (metric) | {fan['discovery_updates']:.0f} |",
        f"| client rate-limit floor for these requests, (requests - burst) / qps | {fan_floor} s |",
        "| writes per job the operator logged | "
        + ", ".join(f"{k} {v:.1f}" for k, v in fan["logged_writes_per_job"].items())
        + " |",
        f"| CPU time | {_f(fan['operator_cpu_s'])} s |",
        f"| RSS after fan-in (idle before: {_f(r['operator_idle']['rss_mib'], 1)} MiB) "
        f"| {_f(fan['operator_rss_mib'], 1)} MiB |",
        "",
        "## Scale reaction",
        "",
        f"{sc['jobs']} jobs patched at once through the scale subresource; time from the PATCH until the "
        "launcher's mounted discover_hosts.sh first changes and until it lists exactly the new set (the "
        "gap is the operator's one-change-per-settleSeconds pacing), and the operator's own "
        f"`{CONVERGENCE}` observations in the same interval (bucket-interpolated), in seconds.",
        "",
        "| step | jobs | p50 | p95 | max |",
        "|---|---|---|---|---|",
        _row("2 -> 4, first new host mounted", sc["out_2_to_4"]["first_change_mounted_s"]),
        _row("2 -> 4, all 4 mounted", sc["out_2_to_4"]["mounted_s"]),
        _row("4 -> 2, first host gone from the mounted script", sc["in_4_to_2"]["first_change_mounted_s"]),
        _row("4 -> 2, only 2 mounted", sc["in_4_to_2"]["mounted_s"]),
        "",
        "| operator histogram | observations | mean | p50 | p95 |",
        "|---|---|---|---|---|",
    ]
    for label, key in (("2 -> 4", "out_2_to_4"), ("4 -> 2", "in_4_to_2"), ("replacement", "")):
        h = sc[key]["operator_histogram_s"] if key else rp["operator_histogram_s"]
        cells = [_f(h["mean"]), _f(h["p50"]), _f(h["p95"])] if h["n"] else ["none recorded", "", ""]
        lines.append(f"| {label} | {h['n']:.0f} | {' | '.join(cells)} |")
    lines += [
        "",
        f"API requests per scaled job: 2 -> 4 {_reqs(sc['out_2_to_4']['requests_per_job'])}; "
        f"4 -> 2 {_reqs(sc['in_4_to_2']['requests_per_job'])}. Operator CPU "
        f"{_f(sc['out_2_to_4']['operator_cpu_s'])} s and {_f(sc['in_4_to_2']['operator_cpu_s'])} s. "
        f"Client rate-limit floor for the step's requests: {out_floor} s and {in_floor} s.",
        "",
        "## Steady state",
        "",
        f"After every job converged (waited {_f(st['convergence_wait_s'], 1)} s for drained pods), over "
        f"{_f(st['seconds'], 1)} s: **{st['requests']['writes']:.0f} writes**, {st['requests']['total']:.0f} "
        f"requests in all, {st['reconciles']:.0f} reconciles, {_f(st['operator_cpu_s'])} s operator CPU.",
    ]
    if st["logged_writes"]:
        lines.append(
            "Writes the operator logged: " + ", ".join(f"{k} x{v}" for k, v in st["logged_writes"].items())
        )
    lines += [
        "",
        "## Replacement",
        "",
        f"Worker 1 of {rp['jobs']} jobs killed (exit 137) at once; time until its host left the mounted "
        "script and until the replacement (a new host name) is listed, in seconds.",
        "",
        "| to | jobs | p50 | p95 | max |",
        "|---|---|---|---|---|",
        _row("old host removed", rp["removed_s"]),
        _row("replacement listed", rp["replacement_listed_s"]),
        "",
        f"Replacements counted by the operator: {rp['replacements_metric']:.0f}; API requests per job "
        f"{_reqs(rp['requests_per_job'])}; operator CPU {_f(rp['operator_cpu_s'])} s; client rate-limit "
        f"floor for these requests {floor(rp['requests_per_job'], rp['jobs'])} s.",
        "",
        "## Operator process",
        "",
        f"RSS {_f(total['rss_mib'], 1)} MiB at the end, peak {_f(total['peak_rss_mib'], 1)} MiB "
        f"(sampled every 0.25 s); CPU time {_f(total['cpu_s'])} s in all "
        f"(kubesim: {_f(r['kubesim_total_cpu_s'])} s).",
        "",
    ]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small numbers, runs in under a minute")
    parser.add_argument("--jobs", type=int, help="N: MPIJobs created at once (default 50; quick 4)")
    parser.add_argument("--scale-jobs", type=int, help="K: jobs scaled 2->4->2 (default 10; quick 2)")
    parser.add_argument("--replace-jobs", type=int, help="M: jobs losing a worker (default 10; quick 2)")
    parser.add_argument("--steady-seconds", type=float, help="steady-state window (default 30; quick 5)")
    parser.add_argument("--settle-seconds", type=int, help="elasticPolicy.settleSeconds (default 5; quick 1)")
    parser.add_argument("--grace-seconds", type=int, help="scaleInGracePeriodSeconds (default 10; quick 1)")
    parser.add_argument("--pod-seconds", type=float, help="kubesim pod start and ready delays (default 1)")
    parser.add_argument("--timeout", type=float, help="per wait, seconds (default 600; quick 60)")
    parser.add_argument("--poll-seconds", type=float, default=0.1, help="mounted-file polling interval")
    parser.add_argument(
        "--operator-qps", type=float, default=Settings.qps, help="`run --qps` (the operator default)"
    )
    parser.add_argument(
        "--operator-burst", type=int, default=Settings.burst, help="`run --burst` (the operator default)"
    )
    parser.add_argument("--operator-workers", type=int, default=2, help="`run --workers` (the default)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out", help="report directory")
    args = parser.parse_args(argv)
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.scale_jobs, args.replace_jobs = min(args.scale_jobs, args.jobs), min(args.replace_jobs, args.jobs)
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
