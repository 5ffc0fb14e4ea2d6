"""Benchmark of kubesim itself: creates/s over HTTP, watch events/s fanned out to N watchers, memory
per 10k objects, and the in-process create rate without HTTP. Not a test: run it, read
bench/out/kubesim.md.

kubesim runs as `mpi-operator sim` in its own process (controllers on, as users run it), so the
client load generated here does not count against its CPU or memory.

    .venv/bin/python bench/kubesim_throughput.py [--objects 10000] [--watchers 10] \
        [--concurrency 32]
    .venv/bin/python bench/kubesim_throughput.py fanin [--jobs 1000] [--workers 8] \
        [--profile FILE] [--nodes 100 --node-allocatable cpu=256,memory=1Ti,nvidia.com/gpu=8]

`fanin` plays the operator's writes for N MPIJobs x W workers (bench/kubesim_fanin.py) and reports
kubesim's CPU time, RSS and the time until every pod is Running (bench/out/kubesim-fanin.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from opbench_processes import tree_env

OUT = Path(__file__).parent / "out" / "kubesim.md"
FANIN_OUT = Path(__file__).parent / "out" / "kubesim-fanin.md"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _configmap(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": "bench", "shard": name[-1]}},
        "data": {"hostfile": "worker-0 slots=1\nworker-1 slots=1\n", "index": name},
    }


async def _create_many(
    session: aiohttp.ClientSession, url: str, names: list[str], concurrency: int
) -> float:
    queue: asyncio.Queue[str] = asyncio.Queue()
    for name in names:
        queue.put_nowait(name)

    async def worker() -> None:
        while not queue.empty():
            name = queue.get_nowait()
            async with session.post(url + CONFIGMAPS, json=_configmap(name)) as resp:
                if resp.status != 201:
                    raise RuntimeError(f"create {name}: {resp.status} {await resp.text()}")

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


async def _watch_until(
    session: aiohttp.ClientSession, url: str, rv: str, expected: int, ready: asyncio.Event
) -> int:
    seen = 0
    params = {"watch": "true", "resourceVersion": rv, "labelSelector": "app=bench"}
    async with session.get(
        url + CONFIGMAPS, params=params, timeout=aiohttp.ClientTimeout(total=None)
    ) as resp:
        ready.set()
        async for line in resp.content:
            if json.loads(line)["type"] == "ADDED":
                seen += 1
                if seen == expected:
                    break
    return seen


async def start_sim(args: argparse.Namespace) -> tuple[asyncio.subprocess.Process, str]:
    """`mpi-operator sim` in its own process (under cProfile with `--profile`); its URL once
    serving."""
    port = _free_port()
    kubeconfig = Path(tempfile.mkdtemp(prefix="kubesim-bench-")) / "kubeconfig"
    profile = ["-m", "cProfile", "-o", str(args.profile)] if args.profile else []
    sec = str(args.pod_seconds)
    shape = []
    if getattr(args, "nodes", None):
        shape += ["--nodes", str(args.nodes)]
    if getattr(args, "node_allocatable", None):
        shape += ["--node-allocatable", args.node_allocatable]
    # `sim_tree`: kubesim from another checkout (an older commit), the same interpreter and client.
    env = tree_env(getattr(args, "sim_tree", None))
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, *profile, "-m", "mpi_operator", "sim", "--port", str(port)),
        *("--kubeconfig-out", str(kubeconfig), "--start-seconds", sec, "--ready-seconds", sec),
        *shape,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdout is not None
    async with asyncio.timeout(60):
        while not (line := await proc.stdout.readline()).startswith(b"export KUBECONFIG="):
            if not line:
                raise RuntimeError("mpi-operator sim exited before serving")
    return proc, f"http://127.0.0.1:{port}"


async def stop_sim(proc: asyncio.subprocess.Process) -> None:
    proc.send_signal(signal.SIGTERM)
    await proc.wait()


async def run(args: argparse.Namespace) -> dict[str, float]:
    proc, url = await start_sim(args)
    results: dict[str, float] = {}
    try:
        connector = aiohttp.TCPConnector(limit=args.concurrency + args.watchers + 4)
        async with aiohttp.ClientSession(connector=connector) as session:
            baseline = _rss_mib(proc.pid)
            elapsed = await _create_many(
                session, url, [f"cm-{i}" for i in range(args.objects)], args.concurrency
            )
            results["creates_per_s"] = args.objects / elapsed
            results["rss_baseline_mib"] = baseline
            results["rss_per_10k_objects_mib"] = (
                (_rss_mib(proc.pid) - baseline) * 10_000 / args.objects
            )

            async with session.get(url + CONFIGMAPS, params={"limit": "1"}) as resp:
                rv = (await resp.json())["metadata"]["resourceVersion"]
            burst = args.objects // 5
            readies = [asyncio.Event() for _ in range(args.watchers)]
            watchers = [
                asyncio.create_task(_watch_until(session, url, rv, burst, ready))
                for ready in readies
            ]
            await asyncio.gather(*(r.wait() for r in readies))
            started = time.perf_counter()
            await _create_many(session, url, [f"w-{i}" for i in range(burst)], args.concurrency)
            delivered = sum(await asyncio.gather(*watchers))
            results["watch_events_per_s"] = delivered / (time.perf_counter() - started)
            results["watchers"] = args.watchers
            results["watch_burst"] = burst
    finally:
        await stop_sim(proc)

    # In process, no HTTP: what the verbs themselves cost.
    from kubesim import builtins
    from kubesim.cluster import Cluster

    cluster = Cluster()
    started = time.perf_counter()
    for i in range(args.objects):
        cluster.create(builtins.CONFIGMAPS, "default", _configmap(f"cm-{i}"))
    results["inprocess_creates_per_s"] = args.objects / (time.perf_counter() - started)
    results["objects"] = args.objects
    return results


def report(r: dict[str, float], args: argparse.Namespace) -> str:
    return "\n".join(
        [
            "# kubesim throughput",
            "",
            f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on "
            f"{platform.machine()}, "
            f"{os.cpu_count()} CPUs (shared), Python {platform.python_version()}; "
            "`python bench/kubesim_throughput.py "
            f"--objects {args.objects} --watchers {args.watchers} --concurrency "
            f"{args.concurrency}`.",
            "kubesim ran as `mpi-operator sim` (controllers on) in its own process; the client is "
            "aiohttp.",
            "",
            "| metric | value |",
            "|---|---|",
            f"| ConfigMap creates/s over HTTP ({args.concurrency} concurrent clients) "
            f"| {r['creates_per_s']:.0f} |",
            f"| ConfigMap creates/s in process (Cluster.create, no HTTP) "
            f"| {r['inprocess_creates_per_s']:.0f} |",
            f"| watch events/s delivered ({int(r['watchers'])} watchers x {int(r['watch_burst'])} "
            "creates, "
            f"label-filtered) | {r['watch_events_per_s']:.0f} |",
            f"| RSS growth per 10k ConfigMaps (incl. history) | {r['rss_per_10k_objects_mib']:.1f} "
            "MiB |",
            f"| RSS of an idle kubesim | {r['rss_baseline_mib']:.1f} MiB |",
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "scenario", nargs="?", choices=("throughput", "fanin"), default="throughput"
    )
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--watchers", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--jobs", type=int, default=1_000, help="fanin: MPIJobs")
    parser.add_argument("--workers", type=int, default=8, help="fanin: workers per MPIJob")
    parser.add_argument(
        "--pod-seconds", type=float, default=1.0, help="kubesim's pod start and ready delays"
    )
    parser.add_argument(
        "--timeout", type=float, default=900.0, help="fanin: give up after this long"
    )
    parser.add_argument(
        "--nodes", type=int, help="the cluster's nodes (`mpi-operator sim --nodes`); default one"
    )
    parser.add_argument(
        "--node-allocatable",
        help="each node's allocatable, e.g. cpu=256,memory=1Ti,nvidia.com/gpu=8,pods=110",
    )
    parser.add_argument(
        "--profile", type=Path, help="run kubesim under cProfile, stats to this file"
    )
    parser.add_argument(
        "--flame", type=Path, help="fanin: py-spy flame graph (SVG) of kubesim to this file"
    )
    parser.add_argument(
        "--out", type=Path, help=f"the report (default {OUT}, or {FANIN_OUT} for fanin)"
    )
    args = parser.parse_args()
    if args.scenario == "fanin":
        import kubesim_fanin  # the sibling script, on sys.path

        command = "python bench/kubesim_throughput.py " + " ".join(sys.argv[1:])
        text = "\n".join(
            [
                "# kubesim fan-in",
                "",
                *_machine(),
                "",
                *kubesim_fanin.report(asyncio.run(kubesim_fanin.run(args)), command),
            ]
        )
        out = args.out or FANIN_OUT
    else:
        text = report(asyncio.run(run(args)), args)
        out = args.out or OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    return 0


def _machine() -> list[str]:
    return [
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs (shared, load average {os.getloadavg()[0]:.1f}), "
        f"Python {platform.python_version()}; kubesim ran as `mpi-operator sim` (controllers on) "
        "in its "
        "own process.",
    ]


if __name__ == "__main__":
    raise SystemExit(main())
