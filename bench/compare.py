"""The operator's CPU per job at two commits, in alternating runs of the report's fan-ins
(bench/scale.py), each run on a cluster of its own: what a change costs or saves, apart from the
machine's drift. One run moves by 10-15 % from run to run on a shared 2-core machine; the medians of
six or more rounds tell a few percent apart.

    .venv/bin/python bench/compare.py 655a4b8                  # that commit against this checkout
    .venv/bin/python bench/compare.py HEAD~3 HEAD --rounds 8 --fan both
    .venv/bin/python bench/compare.py HEAD HEAD              # two runs of one code: the noise
    .venv/bin/python bench/compare.py HEAD -- --light-jobs 100 # after --: bench/report.py's flags

Both processes of each run come from the arm's tree (`git archive` of the commit; this checkout's
working tree when no second commit is given), with this checkout's interpreter and packages.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import report
import scale
from opbench_processes import checkout

HERE = "this checkout"


def _median(runs: Sequence[Mapping[str, Any]], *path: str) -> float:
    values = []
    for run in runs:
        value: Any = run
        for key in path:
            value = value[key]
        values.append(float(value))
    return statistics.median(values)


def summary(
    fan: str, args: argparse.Namespace, by_arm: Mapping[str, Sequence[Mapping[str, Any]]]
) -> list[str]:
    """Lines for one fan-in: per arm the median CPU per job with every run, and the median syncs
    per job (those writing nothing); then the last arm's change against the first."""
    lines = [f"{fan}: {args.jobs:,} x {args.workers}, pods in {args.pod_seconds} s"]
    width = max(len(arm) for arm in by_arm)
    medians = {}
    for arm, runs in by_arm.items():
        medians[arm] = _median(runs, "operator_cpu_ms_per_job")
        costs = ", ".join(f"{run['operator_cpu_ms_per_job']:.2f}" for run in runs)
        syncs = _median(runs, "syncs_running", "per_job")
        idle = _median(runs, "syncs_running", "without_writes_per_job")
        lines.append(
            f"  {arm:<{width}}  {medians[arm]:.2f} ms per job (runs: {costs}); "
            f"{syncs:.2f} syncs per job, {idle:.2f} writing nothing"
        )
    first, *_, last = medians
    change = 100 * (medians[last] / medians[first] - 1)
    lines.append(f"  {last} against {first}: {change:+.1f} %")
    return lines


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, argparse.Namespace]:
    """This script's flags, and bench/report.py's (those after `--`: the fan-ins' sizes)."""
    argv = sys.argv[1:] if argv is None else argv
    ours, passed = argv, []
    if "--" in argv:
        cut = argv.index("--")
        ours, passed = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("base", help="the first arm's commit")
    parser.add_argument("other", nargs="?", help=f"the second arm's commit (default: {HERE})")
    parser.add_argument("--rounds", type=int, default=6, help="runs per arm and fan-in (6)")
    parser.add_argument(
        "--fan",
        choices=("unsaturated", "saturated", "both"),
        default="unsaturated",
        help="the report's 200 x 8 fan-in with pods in 0.5 s, its 1,000 x 8, or both",
    )
    parser.add_argument("--json", type=Path, help="also write every run's results here")
    args = parser.parse_args(ours)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return args, report.parse_args(passed)


def arms(base: str, other: str | None) -> list[str]:
    """The arms' names: the commits as given, this checkout for no second one, and a commit
    against itself (how much two runs of one code differ) told apart."""
    second = HERE if other is None else other
    return [base, f"{second} (again)" if second == base else second]


async def run(args: argparse.Namespace, fan_args: argparse.Namespace) -> dict[str, Any]:
    fans = {"unsaturated": scale.unsaturated(fan_args), "saturated": fan_args}
    if args.fan != "both":
        fans = {args.fan: fans[args.fan]}
    first, second = arms(args.base, args.other)
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        trees: dict[str, Path | None] = {
            first: checkout(args.base, Path(tmp) / "base"),
            second: None if args.other is None else checkout(args.other, Path(tmp) / "other"),
        }
        runs = await scale.alternate(fans, trees, args.rounds)
    for fan, by_arm in runs.items():
        print("\n".join(summary(fan, fans[fan], by_arm)), flush=True)
    return runs


def main(argv: list[str] | None = None) -> int:
    args, fan_args = parse_args(argv)
    runs = asyncio.run(run(args, fan_args))
    if args.json is not None:
        args.json.write_text(json.dumps(runs, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
