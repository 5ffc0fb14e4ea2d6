"""`mpi-operator sim`: serve a simulated cluster until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import signal
import sys
import tempfile
from pathlib import Path

from kubesim import nodes
from kubesim.app import KubeSim
from kubesim.control import log_requests_from_env
from kubesim.images import ImageCatalog
from kubesim.procrt import missing_requirements
from kubesim.settings import SimSettings


def settings_from_args(args: argparse.Namespace) -> SimSettings:
    """SimSettings from the `sim` flags; a flag that is absent or None keeps the default."""
    defaults = SimSettings()

    def flag(name: str, default: float) -> float:
        value = getattr(args, name, None)
        return default if value is None else float(value)

    return dataclasses.replace(
        defaults,
        nodes=nodes_from_args(args),
        start_seconds=flag("start_seconds", defaults.start_seconds),
        ready_seconds=flag("ready_seconds", defaults.ready_seconds),
        volume_sync_seconds=flag("volume_sync_seconds", defaults.volume_sync_seconds),
        fault_rate=flag("fault_rate", defaults.fault_rate),
        node_monitor_grace_seconds=flag(
            "node_monitor_grace_seconds", defaults.node_monitor_grace_seconds
        ),
        runtime=getattr(args, "runtime", None) or defaults.runtime,
        images=ImageCatalog.load(args.images) if getattr(args, "images", None) else defaults.images,
    )


def nodes_from_args(args: argparse.Namespace) -> tuple[nodes.NodeShape, ...]:
    """`--cluster FILE`, or `--nodes N --node-allocatable ... --gpu-replicas R`; neither: the
    default cluster (empty)."""
    count = getattr(args, "nodes", None)
    allocatable = getattr(args, "node_allocatable", None)
    replicas = getattr(args, "gpu_replicas", None)
    cluster_file = getattr(args, "cluster", None)
    if cluster_file:
        if count is not None or allocatable or replicas is not None:
            why = (
                "--cluster describes every node: it takes no --nodes, --node-allocatable or "
                "--gpu-replicas (use gpuReplicas in the file)"
            )
            raise nodes.ShapeError(why)
        return nodes.load_cluster_file(cluster_file)
    if count is None and not allocatable:
        if replicas is not None:
            raise nodes.ShapeError("--gpu-replicas: needs --nodes or --node-allocatable")
        return ()
    each = nodes.parse_allocatable(allocatable) if allocatable else nodes.default_allocatable()
    return nodes.uniform(
        1 if count is None else int(count), each, gpu_replicas=1 if replicas is None else replicas
    )


async def serve(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    if settings.runtime == "process":
        problem = missing_requirements()
        if problem is not None:
            print(f"kubesim: --runtime process: {problem}", file=sys.stderr)
            return 1
    sim = KubeSim(settings)
    await sim.start(int(getattr(args, "port", 0) or 0))
    # Start-up's schemas and libraries live as long as the process, and JSON trees are freed by
    # reference counting: see "Fewer garbage collections" in docs/architecture.md#decisions-and-why.
    gc.freeze()
    gc.set_threshold(50_000, 20, 10)
    # A test session auditing the requests this process answers (tests/request_audit.py).
    stop_logging = log_requests_from_env()
    try:
        out = getattr(args, "kubeconfig_out", None)
        path = Path(out) if out else Path(tempfile.mkdtemp(prefix="kubesim-")) / "kubeconfig"
        path = sim.write_kubeconfig(path.resolve())
        print(f"kubesim: serving the Kubernetes API on {sim.url}", flush=True)
        print(f"kubesim: kubeconfig written to {path}", flush=True)
        print(f"export KUBECONFIG={path}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
        print("kubesim: stopping", file=sys.stderr, flush=True)
    finally:
        await sim.stop()
        if stop_logging is not None:
            stop_logging()
    return 0


def main(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(serve(args))
    except (OSError, ValueError) as exc:
        # One line: a message can quote a multi-line YAML error (an --images file that is not YAML).
        print(
            f"kubesim: {'; '.join(line.strip() for line in str(exc).splitlines() if line.strip())}",
            file=sys.stderr,
        )
        return 1
