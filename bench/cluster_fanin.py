"""The scheduling scenario of bench/report.py: kubesim's fan-in (bench/kubesim_fanin.py, a bare
client playing the operator's writes) three ways. On the default cluster (one node that limits
nothing) now and at `--baseline-commit`, a commit before kubesim had a scheduler, in alternating
rounds so that both see the same machine: what scheduling costs a cluster that never says no. Then
once on a cluster of `--cluster-nodes` nodes with capacity, where the scheduler places every pod:
its CPU per pod.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import kubesim_fanin
from opbench_processes import checkout

BASELINE_COMMIT = "73b79ee"
"""The last commit before kubesim's nodes, scheduler and the controllers that came with them."""
CLUSTER_ALLOCATABLE = "cpu=256,memory=1Ti,nvidia.com/gpu=8,pods=110"
CPU = "sim_cpu_s"
RUNNING = "all_running_s"


def fanin_args(args: argparse.Namespace, **shape: Any) -> argparse.Namespace:
    """What kubesim_fanin.run reads, from the report's arguments and one cluster's shape."""
    fan: dict[str, Any] = {
        "jobs": args.jobs,
        "workers": args.workers,
        "pod_seconds": args.pod_seconds,
        "timeout": args.timeout,
        "concurrency": 32,
        "profile": None,
        "flame": None,
        "nodes": None,
        "node_allocatable": None,
        "sim_tree": None,
    }
    return argparse.Namespace(**(fan | shape))


def _median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    now: list[dict[str, float]] = []
    before: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-baseline-") as tmp:
        tree = checkout(args.baseline_commit, Path(tmp))
        for round_ in range(args.cluster_rounds):
            print(f"  scheduling round {round_ + 1}", file=sys.stderr, flush=True)
            before.append(await kubesim_fanin.run(fanin_args(args, sim_tree=tree)))
            now.append(await kubesim_fanin.run(fanin_args(args)))
    shaped = await kubesim_fanin.run(
        fanin_args(args, nodes=args.cluster_nodes, node_allocatable=CLUSTER_ALLOCATABLE)
    )
    pods = args.jobs * (args.workers + 1)
    return {
        "baseline_commit": args.baseline_commit,
        "rounds": args.cluster_rounds,
        "default": {"runs": now, "cpu_s": _median(now, CPU), "running_s": _median(now, RUNNING)},
        "baseline": {
            "runs": before,
            "cpu_s": _median(before, CPU),
            "running_s": _median(before, RUNNING),
        },
        "shaped": shaped | {"allocatable": CLUSTER_ALLOCATABLE, "pods": pods},
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--baseline-commit",
        default=BASELINE_COMMIT,
        help=f"kubesim before its scheduler: the overhead's baseline (default {BASELINE_COMMIT})",
    )
    parser.add_argument(
        "--cluster-rounds", type=int, help="alternating baseline/now fan-ins (default 3; quick 1)"
    )
    parser.add_argument(
        "--cluster-nodes", type=int, help="nodes of the shaped cluster (default 100; quick 3)"
    )
