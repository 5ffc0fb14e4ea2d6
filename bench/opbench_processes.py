"""The processes and HTTP plumbing of the operator benchmarks (bench/operator_elastic.py,
bench/scale.py): `mpi-operator sim` and `mpi-operator run` started as their own processes with their
RSS and CPU sampled, a small API client, a watch of the MPIJobs' Running condition, and the
operator's metrics read as snapshots."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import aiohttp
import psutil  # type: ignore[import-untyped]  # psutil ships no stubs; types-psutil is not a dependency
import yaml
from prometheus_client.parser import text_string_to_metric_families

from mpi_discovery.hostfile import parse_discover_hosts

ROOT = Path(__file__).resolve().parent.parent
NS = "default"
JOBS = f"/apis/kubeflow.org/v2beta1/namespaces/{NS}/mpijobs"
PODS = f"/api/v1/namespaces/{NS}/pods"
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "stop"})
"""The first word of the operator's log line for each write it sends (`Action.describe()`)."""
CONVERGENCE = "mpi_operator_elastic_convergence_seconds"
_INDEX = re.compile(r"-worker-(\d+)(?:-r\d+)?$")
Snapshot = dict[str, float]


class Api:
    """A bare aiohttp client of kubesim (no rate limit, no cache: the operator is the one
    measured)."""

    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session, self.url = session, url

    async def call(self, method: str, path: str, body: Any = None, *, merge: bool = False) -> Any:
        headers = {"Content-Type": "application/merge-patch+json" if merge else "application/json"}
        data = None if body is None else json.dumps(body)
        async with self.session.request(
            method, self.url + path, data=data, headers=headers
        ) as resp:
            if resp.status >= 300:
                raise RuntimeError(f"{method} {path}: {resp.status} {await resp.text()}")
            return await resp.json()

    async def hosts(self, pod: str) -> set[str] | None:
        """Host names (first DNS label) the pod's mounted discover_hosts.sh lists; None if not
        mounted."""
        path = f"/kubesim/v1/namespaces/{NS}/pods/{pod}/files/etc/mpi/discover_hosts.sh"
        async with self.session.get(self.url + path) as resp:
            if resp.status != 200:
                return None
            return {host.split(".", 1)[0] for host, _ in parse_discover_hosts(await resp.text())}

    async def pods(self, selector: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = (await self.call("GET", f"{PODS}?labelSelector={selector}"))[
            "items"
        ]
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


def _running(job: dict[str, Any]) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Running" and c.get("status") == "True" for c in conditions)


async def watch(api: Api, path: str, rv: str, selector: str = "") -> AsyncIterator[dict[str, Any]]:
    """Every watch event of `path` from `rv` on, for as long as the caller reads; a stream the
    server ends is reopened from the last resourceVersion seen."""
    params = {"watch": "true", "resourceVersion": rv}
    if selector:
        params["labelSelector"] = selector
    timeout = aiohttp.ClientTimeout(total=None)
    while True:
        async with api.session.get(api.url + path, params=params, timeout=timeout) as resp:
            async for line in resp.content:
                event: dict[str, Any] = json.loads(line)
                if rv_new := event["object"].get("metadata", {}).get("resourceVersion"):
                    params["resourceVersion"] = rv_new
                yield event


async def watch_running(
    api: Api, rv: str, names: set[str], seen: dict[str, float] | None = None
) -> dict[str, float]:
    """Monotonic time each named MPIJob first reported Running=True, from a watch stream. `seen`
    (filled as they come) lets a caller follow the progress."""
    seen = {} if seen is None else seen
    if len(seen) == len(names):
        return seen
    async for event in watch(api, JOBS, rv):
        obj = event["object"]
        name = obj.get("metadata", {}).get("name", "")
        if event["type"] in ("ADDED", "MODIFIED") and name in names and _running(obj):
            seen.setdefault(name, time.monotonic())
        if len(seen) == len(names):
            break
    return seen


class Meter:
    """RSS and CPU time of one process, sampled every 0.25 s for the peak RSS."""

    def __init__(self, pid: int) -> None:
        self.ps = psutil.Process(pid)
        self.peak_rss = 0.0
        self._sampler = asyncio.create_task(self._sample())

    def usage(self) -> dict[str, float]:
        cpu = self.ps.cpu_times()
        rss = self.ps.memory_info().rss / 2**20
        self.peak_rss = max(self.peak_rss, rss)
        return {"rss_mib": rss, "cpu_s": cpu.user + cpu.system}

    async def _sample(self) -> None:
        with contextlib.suppress(psutil.Error):
            while True:
                self.usage()
                await asyncio.sleep(0.25)

    def close(self) -> None:
        self._sampler.cancel()


class LogReader:
    """The operator's JSON log lines, read from its stderr pipe by a thread of their own, each with
    the monotonic time it was read. A reader on the benchmark's event loop falls behind while that
    loop is busy (a thousand creates, watches); the pipe then fills, and the operator blocks in its
    log writes, which the benchmark would measure as the operator's slowness."""

    def __init__(self, fd: int) -> None:
        self.entries: list[tuple[float, dict[str, Any]]] = []
        self.serving: str | None = None
        """The metrics address, once the operator logged `serving /healthz ... on URL`."""
        self._thread = threading.Thread(
            target=self._read, args=(fd,), name="operator-log", daemon=True
        )
        self._thread.start()

    def _read(self, fd: int) -> None:
        with open(fd, "rb") as pipe:  # EOF when the operator exits
            for raw in pipe:
                with contextlib.suppress(ValueError):
                    entry = json.loads(raw)
                    self.entries.append((time.monotonic(), entry))
                    msg = str(entry.get("msg", ""))
                    if self.serving is None and "serving /healthz" in msg:
                        self.serving = msg.rsplit(" ", 1)[-1]


class Operator(Meter):
    """The `mpi-operator run` process: its metrics endpoint, its JSON log and its own RSS/CPU.
    `ready_s`: seconds from its spawn until `/readyz` first answered 200."""

    def __init__(self, proc: asyncio.subprocess.Process, log: LogReader, metrics_url: str) -> None:
        super().__init__(proc.pid)
        self.proc, self.metrics_url = proc, metrics_url
        self.logs = log.entries
        self.ready_s = math.nan

    async def scrape(self, session: aiohttp.ClientSession) -> Snapshot:
        async with session.get(self.metrics_url + "/metrics") as resp:
            text = await resp.text()
        snap: Snapshot = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
                snap[f"{s.name}{{{labels}}}"] = s.value
        return snap

    def logged_writes(
        self, start: float = 0.0, end: float = math.inf
    ) -> list[tuple[float, str, str, str]]:
        """(time read, verb, kind, `namespace/name`) of each write the operator logged in [start,
        end), from its log lines naming one (`create Pod default/x-worker-0`, `patch ConfigMap
        ...`)."""
        out = []
        for t, entry in self.logs:
            words = str(entry.get("msg", "")).split()
            if start <= t < end and len(words) >= 2 and words[0] in WRITE_VERBS:
                out.append((t, words[0], words[1], words[2].rstrip(":") if len(words) > 2 else ""))
        return out

    def writes_between(self, start: float, end: float) -> Counter[str]:
        """Logged writes in [start, end) by verb and kind (`create Pod`)."""
        return Counter(f"{verb} {kind}" for _, verb, kind, _ in self.logged_writes(start, end))

    async def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        self.close()
        await stop_process(self.proc, sig)


async def stop_process(
    proc: asyncio.subprocess.Process, sig: signal.Signals = signal.SIGTERM
) -> None:
    if proc.returncode is None:
        proc.send_signal(sig)
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
    """Count, mean and bucket-interpolated p50/p95 (as PromQL's histogram_quantile) of the
    observations made between two scrapes."""
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


def checkout(commit: str, into: Path) -> Path:
    """`commit`'s tree under `into` (git archive: no clone, no second .git)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def tree_env(tree: Path | None) -> dict[str, str] | None:
    """The environment that runs `mpi-operator` from another checkout's `tree` (an older commit)
    with this interpreter and its packages; None: this checkout."""
    if tree is None:
        return None
    paths = [str(tree / d) for d in ("operator", "discovery", "sim")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


async def start_sim(
    kubeconfig: Path,
    pod_seconds: float,
    volume_sync_seconds: float | None = None,
    sim_flags: Sequence[str] = (),
    tree: Path | None = None,
) -> tuple[asyncio.subprocess.Process, str]:
    """`mpi-operator sim` with pods starting and turning Ready `pod_seconds` each, and `sim_flags`
    (a cluster's shape: `--nodes`, `--node-allocatable`), from `tree` (`tree_env`); its URL."""
    sec = str(pod_seconds)
    sync = (
        ("--volume-sync-seconds", str(volume_sync_seconds))
        if volume_sync_seconds is not None
        else ()
    )
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "mpi_operator", "sim", "--port", "0"),
        *(
            "--kubeconfig-out",
            str(kubeconfig),
            "--start-seconds",
            sec,
            "--ready-seconds",
            sec,
            *sync,
            *sim_flags,
        ),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=tree_env(tree),
    )
    assert proc.stdout is not None
    url = ""
    async with asyncio.timeout(30):
        while not (line := (await proc.stdout.readline()).decode()).startswith(
            "export KUBECONFIG="
        ):
            if not line:
                raise RuntimeError("mpi-operator sim exited before serving")
            if "serving the Kubernetes API on " in line:
                url = line.rsplit(" ", 1)[-1].strip()
    return proc, url


OPERATOR: Final = ("-m", "mpi_operator")
"""How `python` runs the operator's command line; bench/heapsnap.py stands in for it under
tracemalloc."""


async def start_operator(
    args: argparse.Namespace,
    kubeconfig: Path,
    api: Api,
    command: Sequence[str] = OPERATOR,
    tree: Path | None = None,
) -> Operator:
    """`mpi-operator run` against `kubeconfig`, from `tree` (`tree_env`), once it serves."""
    flags = [
        "--kubeconfig",
        str(kubeconfig),
        "--no-leader-elect",
        "--metrics-address",
        "127.0.0.1:0",
    ]
    flags += ["--log-format", "json", "--workers", str(args.operator_workers)]
    if args.operator_qps is not None:
        flags += ["--qps", str(args.operator_qps)]
    if args.operator_burst is not None:
        flags += ["--burst", str(args.operator_burst)]
    spawned = time.monotonic()
    read_end, write_end = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            *(sys.executable, *command, "run", *flags),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=write_end,
            env=tree_env(tree),
        )
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    log = LogReader(read_end)

    async def serving() -> bool:
        if log.serving is None and proc.returncode is not None:
            raise RuntimeError(f"mpi-operator run exited with {proc.returncode}")
        return log.serving is not None

    await poll(serving, args.timeout, 0.05)
    assert log.serving is not None
    op = Operator(proc, log, log.serving)

    async def ready() -> bool:
        async with api.session.get(op.metrics_url + "/readyz") as resp:
            return resp.status == 200

    op.ready_s = await poll(ready, args.timeout, 0.05) - spawned
    return op


async def install_crd(api: Api) -> None:
    crd = yaml.safe_load((ROOT / "crds" / "kubeflow.org_mpijobs.yaml").read_text())
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    await api.call("POST", path, crd)

    async def established() -> bool:
        conditions = (await api.call("GET", f"{path}/{crd['metadata']['name']}")).get("status", {})
        return any(
            c["type"] == "Established" and c["status"] == "True" for c in conditions["conditions"]
        )

    await poll(established, 30, 0.1)


@dataclass
class Cluster:
    """One benchmark cluster: kubesim's process (its URL behind `api`) and the operator's."""

    api: Api
    sim: Meter
    op: Operator
    kubeconfig: Path
    args: argparse.Namespace
    command: Sequence[str] = OPERATOR
    tree: Path | None = None
    """The checkout both processes run from (`tree_env`); None: this one."""

    async def restart_operator(self, sig: signal.Signals = signal.SIGKILL) -> Operator:
        """Ends the operator (killed by default: a crash, no graceful drain) and starts a new
        one."""
        await self.op.stop(sig)
        self.op = await start_operator(
            self.args, self.kubeconfig, self.api, self.command, self.tree
        )
        return self.op


@contextlib.asynccontextmanager
async def cluster(
    args: argparse.Namespace,
    volume_sync_seconds: float | None = None,
    command: Sequence[str] = OPERATOR,
    sim_flags: Sequence[str] = (),
    tree: Path | None = None,
) -> AsyncIterator[Cluster]:
    """kubesim (`args.pod_seconds`, `sim_flags`) with the MPIJob CRD, and `mpi-operator run`
    against it, both from `tree` (`tree_env`); both stopped on exit."""
    kubeconfig = Path(tempfile.mkdtemp(prefix="operator-bench-")) / "kubeconfig"
    sim, url = await start_sim(kubeconfig, args.pod_seconds, volume_sync_seconds, sim_flags, tree)
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as session:
            api = Api(session, url)
            await install_crd(api)
            meter = Meter(sim.pid)
            op = await start_operator(args, kubeconfig, api, command, tree)
            running = Cluster(api, meter, op, kubeconfig, args, command, tree)
            try:
                yield running
            finally:
                meter.close()
                await running.op.stop()
    finally:
        await stop_process(sim)
