"""A long seeded chaos run: two operator replicas with leader election against kubesim, many
MPIJobs, and a random schedule of everything that goes wrong in a cluster, with the invariants
counted as it runs.

This process hosts kubesim (so it holds its `Control`: faults, dropped watches, compaction, the
request record) and starts two `mpi-operator run --leader-elect` processes. For `--seconds` it
scales jobs (merge patch, JSON patch, scale subresource), suspends and resumes them, deletes and
re-creates them, kills and evicts workers, fails `--write-fault-rate` of the operator's writes (500,
503, 429 with Retry-After; the operator is told apart by its user agent), fails its informers'
LIST/WATCH, drops watches, compacts the history (410 on a watch's resume), and SIGKILLs and
gracefully stops operator replicas (each restarted as a Deployment would), leader included, so
leadership fails over. Then the faults stop, both replicas run, and every job must reach the state
its spec asks for within `--converge-seconds`.

The invariants (`chaoslib.invariants`) are counted from a kubesim cluster listener while all this
runs; the report is one table of counters, then what was done. Exit status 1 when any violation was
counted.

    .venv/bin/python bench/chaos.py [--jobs 50] [--seconds 180] [--seed 1]
    .venv/bin/python bench/chaos.py --ci   # 4 jobs, 25 s of chaos: tests/e2e/test_chaos_smoke.py
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import aiohttp
from chaoslib.driver import Driver
from chaoslib.invariants import VIOLATIONS, Checker
from chaoslib.jobs import plan_jobs
from chaoslib.plan import OPERATOR_EVENTS
from chaoslib.replicas import Replica
from chaoslib.steps import NS
from opbench_processes import Api, install_crd

from kubesim.app import KubeSim
from kubesim.control import Control
from kubesim.settings import SimSettings
from mpi_operator.kube.client import Kube

FULL = {"jobs": 50, "seconds": 180.0, "converge_seconds": 120.0}
CI = {"jobs": 4, "seconds": 25.0, "converge_seconds": 75.0}
DRIVER_AGENT = "mpi-chaos-driver"
GRACE_SECONDS = 3.0
"""How far behind the API a leader's cache may be without it counting. A standby that had just taken
the lease was seen syncing from an MPIJob store 1.2 s behind, its watch healthy, with kubesim, two
replicas and the driver sharing 2 loaded cores."""
ORPHAN_WAIT_SECONDS = 20.0
"""How long the garbage collector gets, after convergence, before a child whose owner is gone
counts."""


class SimErrors(logging.Handler):
    """kubesim's own tracebacks (an internal error answered 500, a failed listener) in this
    process."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(f"{record.name}: {record.getMessage()}")


async def wait_converged(driver: Driver, within: float) -> dict[str, str]:
    """Polls until every job is in its desired state; returns the jobs that are not, with why."""
    deadline = time.monotonic() + within
    while True:
        why = {name: reason for name, reason in driver.convergence().items() if reason is not None}
        if not why or time.monotonic() > deadline:
            return why
        await asyncio.sleep(0.5)


async def run(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    sim = KubeSim(SimSettings(start_seconds=0.2, ready_seconds=0.2))
    sim.control = Control(sim.cluster.store, seed=args.seed)  # before start: the seeded fault draws
    sim_errors = SimErrors()
    logging.getLogger().addHandler(sim_errors)
    await sim.start()
    workdir = Path(tempfile.mkdtemp(prefix="mpi-chaos-"))
    kubeconfig = sim.write_kubeconfig(workdir / "kubeconfig")
    checker = Checker(grace=args.grace)
    replicas = [Replica(slot, kubeconfig, NS, workdir) for slot in ("a", "b")]
    kube = await Kube.from_kubeconfig(
        str(kubeconfig), qps=0, user_agent=DRIVER_AGENT, field_manager=None
    )
    jobs = plan_jobs(rng, args.jobs, finish_range=(args.seconds * 0.3, args.seconds * 1.5))
    driver = Driver(sim, kube, checker, replicas, jobs, rng, log=args.log)
    started = time.monotonic()
    try:
        async with aiohttp.ClientSession() as session:
            await install_crd(Api(session, sim.url))
        sim.cluster.add_listener(driver.on_change)
        for replica in replicas:
            await replica.start()
        await driver.create_all()
        driver.note(f"created {len(jobs)} jobs ({sum(j.elastic for j in jobs)} elastic)")
        events = OPERATOR_EVENTS["ci" if args.ci else "full"]
        await driver.chaos(args.seconds, events, args.write_fault_rate)
        driver.note("chaos over: faults cleared, every replica running")
        stuck = await wait_converged(driver, args.converge_seconds)
        for name, why in sorted(stuck.items()):
            checker.count(
                "jobs_not_converged",
                f"{name}: {why}; {driver.describe_pods(name)}",
                driver.elapsed(),
            )
        driver.note(f"converged: {len(jobs) - len(stuck)}/{len(jobs)}")
        await driver.check_orphans(ORPHAN_WAIT_SECONDS)
    finally:
        with contextlib.suppress(ValueError):  # not added when the start failed
            sim.cluster.remove_listener(driver.on_change)
        for replica in replicas:
            await replica.stop()
        await kube.close()
        await sim.stop()
        logging.getLogger().removeHandler(sim_errors)
    for replica in replicas:
        for trace in replica.tracebacks:
            checker.count(
                "tracebacks", f"replica {replica.slot}: {trace[-1500:]}", driver.elapsed()
            )
    for record in sim_errors.records:
        checker.count("tracebacks", f"kubesim (this process): {record}", driver.elapsed())
    print(report(args, checker, driver, replicas, time.monotonic() - started))
    print(f"operator logs: {workdir}/replica-*.log")
    return 1 if checker.violations else 0


def report(
    args: argparse.Namespace,
    checker: Checker,
    driver: Driver,
    replicas: list[Replica],
    seconds: float,
) -> str:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [
        f"chaos run: seed {args.seed}, {args.jobs} jobs, {args.seconds:.0f}s of chaos, "
        f"{seconds:.0f}s in all, loadavg {load} on {os.cpu_count()} CPUs",
        "",
        f"{'invariant':<28} {'violations':>10}",
    ]
    lines += [f"{name:<28} {checker.counts[name]:>10}" for name in VIOLATIONS]
    lines += [f"{'TOTAL':<28} {checker.violations:>10}", ""]
    converged_jobs = args.jobs - checker.counts["jobs_not_converged"]
    done: Counter[str] = Counter(driver.done)
    done["operator restarts"] = sum(r.starts for r in replicas) - len(replicas)
    done["operator exits unasked"] = driver.unasked_exits
    done["leader changes"] = driver.leader_changes
    done["leader failovers between replicas"] = driver.failovers
    done["jobs converged"] = converged_jobs
    done["jobs finished (Succeeded/Failed)"] = driver.finished()
    done["children created within the grace"] = checker.counts["children_in_grace"]
    done["children late, MPIJob watch failing"] = checker.counts["children_late_while_blind"]
    done["worker deletes racing a spec change"] = checker.counts["worker_deletes_racing_a_change"]
    done |= driver.faults()
    if checker.late:
        late = sorted(checker.late)
        lines_late = (
            f"late children (s after visible): median {late[len(late) // 2]:.2f}, max "
            f"{late[-1]:.2f}"
        )
    else:
        lines_late = ""
    lines.append(f"{'what happened':<40} {'count':>8}")
    lines += [f"{key:<40} {value:>8}" for key, value in sorted(done.items())]
    if lines_late:
        lines += ["", lines_late]
    if checker.violations:
        for replica in replicas:
            lines += ["", f"replica {replica.slot} stderr tail:", *replica.tail]
    # Beside the verdict, so whoever reads only the tail (the smoke test's message) sees why.
    if checker.details:
        lines += ["", "first violations:", *checker.details]
    lines += ["", "RESULT: " + ("PASS (no violation)" if not checker.violations else "FAIL")]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--ci", "--quick", action="store_true", help="the suite's size: 4 jobs, 25 s of chaos"
    )
    parser.add_argument("--jobs", type=int, help="MPIJobs (default 50; --ci 4)")
    parser.add_argument(
        "--seconds", type=float, help="length of the chaos phase (default 180; --ci 25)"
    )
    parser.add_argument(
        "--seed", type=int, default=1, help="seeds the jobs, the schedule and the fault draws"
    )
    parser.add_argument(
        "--converge-seconds",
        type=float,
        help="bound for every job to converge after the chaos (default 120)",
    )
    parser.add_argument(
        "--write-fault-rate",
        type=float,
        default=0.05,
        help="share of the operator's writes failed (0.05)",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=GRACE_SECONDS,
        help=f"seconds a create in flight may land after its job's deletion ({GRACE_SECONDS:g})",
    )
    parser.add_argument("--log", action="store_true", help="print each step as it is applied")
    args = parser.parse_args(argv)
    for key, value in (CI if args.ci else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.jobs < 1 or args.seconds <= 0 or not 0 <= args.write_fault_rate < 1:
        parser.error("--jobs must be >= 1, --seconds > 0 and --write-fault-rate in [0, 1)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(run(args))
    return 130


if __name__ == "__main__":
    sys.exit(main())
