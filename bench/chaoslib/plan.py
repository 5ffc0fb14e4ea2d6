"""The seeded schedule of a chaos run: what happens to the jobs and the cluster, and when the
operator replicas are disrupted.

`next_step` draws one cluster step at a time from the run's `random.Random` (the run is bounded by
time, not by a step count); a pod to hit is picked at run time among the live ones (`Step.pick`), so
the log names the pod actually hit. `OPERATOR_EVENTS` are placed at fixed fractions of the run, so
every run has its SIGKILLs and its leader failovers however the draws fall.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from chaoslib.jobs import JobPlan
from chaoslib.steps import FAULT_STATUSES, SCALE_PATHS, WATCH_PATHS

KINDS = ("scale", "suspend", "recreate", "kill", "evict", "watch_fault", "drop_watches", "compact")
WEIGHTS = (6, 2, 2, 3, 2, 2, 1, 1)
"""How often each kind is drawn (watch_fault: 500/503/429 answers to the informers' LIST/WATCH)."""
OPERATOR_EVENTS = {
    "full": (
        (0.12, "kill-standby"),
        (0.25, "kill-leader"),
        (0.5, "term-leader"),
        (0.7, "kill-any"),
    ),
    "ci": ((0.1, "kill-leader"), (0.6, "term-leader")),
}
"""(fraction of the chaos phase, what): kill-* is SIGKILL (the lease runs out, 15 s, before a
standby takes over), term-* a graceful stop (the lease is released, a standby takes over at once);
every stopped replica is restarted after `RESTART_SECONDS`, as its Deployment would."""
RESTART_SECONDS = (1.0, 3.0)


@dataclass(frozen=True)
class Step:
    kind: str
    job: str = ""
    value: int = 0
    via: str = ""
    pick: float = 0.0
    path: str = ""
    count: int = 0
    seconds: float = 0.0
    """How long a suspended job stays suspended, or a deleted job stays away before its
    re-create."""

    def describe(self) -> str:
        if self.kind == "scale":
            return f"scale {self.job} to {self.value} via {self.via}"
        if self.kind == "suspend":
            return f"suspend {self.job} for {self.seconds:.1f}s"
        if self.kind == "recreate":
            return f"delete {self.job}, re-create it after {self.seconds:.1f}s"
        if self.kind == "watch_fault":
            return f"inject {self.value} x{self.count} on the operator's GET {self.path}"
        if self.kind in ("drop_watches", "compact"):
            return self.kind
        return f"{self.kind} a worker of {self.job} (pick {self.pick:.3f})"


def next_step(rng: random.Random, jobs: list[JobPlan]) -> tuple[Step, float]:
    """One step and the pause after it (seconds)."""
    kind = rng.choices(KINDS, WEIGHTS)[0]
    job = rng.choice(jobs)
    if kind == "scale":
        step = Step(
            kind,
            job.name,
            value=rng.randint(job.min_replicas, job.max_replicas),
            via=rng.choice(SCALE_PATHS),
        )
    elif kind == "suspend":
        step = Step(kind, job.name, seconds=rng.uniform(1.0, 8.0))
    elif kind == "recreate":
        step = Step(kind, job.name, seconds=rng.uniform(0.0, 3.0))
    elif kind == "watch_fault":
        step = Step(
            kind,
            value=rng.choice(FAULT_STATUSES),
            path=rng.choice(WATCH_PATHS),
            count=rng.randint(1, 3),
        )
    else:
        step = Step(kind, job.name, pick=rng.random())
    return step, rng.uniform(0.05, 0.5)
