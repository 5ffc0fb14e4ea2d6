"""The invariants of a chaos run, counted continuously from the cluster's change stream (pure: no
I/O).

`Checker.observe` is fed every change of an MPIJob or of an object an MPIJob owns, in commit order
(the driver registers a kubesim cluster listener, so nothing is missed between a watch's
reconnects), and counts violations as they happen:

- `duplicate_worker_indices`: two live worker pods (not terminating, not finished) of one job (one
  UID) carry the same replica index.
- `running_workers_deleted`: the operator deleted a live worker whose index is below
  `Worker.replicas` while the job was Running, not suspended and not deleted (the caller says who
  deleted, from kubesim's request record): a scale-in deletes only indices at or above the new
  count, and a failed or finished worker is not live.
- `terminal_reverted`: a job's Succeeded condition, or its Failed condition with a completionTime,
  was True and later is not. A Failed=True without completionTime (an evicted worker of a static
  job) is not final, by design and as upstream: the launcher's outcome still wins
  (tests/unit/test_status_conditions.py::test_evicted_workers).
- `children_after_deletion`: an object owned by an MPIJob was created more than `grace` seconds
  after that job (that UID) was deleted, or after the leader could have seen it when its MPIJob
  informer was waiting to retry a failed LIST/WATCH at that moment (`known_at`). Creates already in
  flight may land within the grace; they are counted apart (`children_in_grace`, and
  `children_late_while_blind` for the ones the informer's wait excuses; neither is a violation), and
  the garbage collector removes them.
- `children_without_owner`: an object carrying the operator's job-name label created with no owner
  reference; at the end, `orphans` adds the ones whose owner no longer exists after the garbage
  collector had its chance.

`tracebacks` and `jobs_not_converged` are counted by the driver (`count`), from the operator's
stderr and from `converged` at the end.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

JOB_LABEL = "training.kubeflow.org/job-name"
ROLE_LABEL = "training.kubeflow.org/job-role"
INDEX_LABEL = "training.kubeflow.org/replica-index"
TERMINAL = ("Succeeded", "Failed")
VIOLATIONS = (
    "jobs_not_converged",
    "duplicate_worker_indices",
    "running_workers_deleted",
    "terminal_reverted",
    "children_after_deletion",
    "children_without_owner",
    "tracebacks",
)
"""Every counter that fails a run, in the order the report prints them."""
DETAILS_KEPT = 6
"""How many violation messages a run keeps per counter (the counters count them all)."""

Obj = Mapping[str, Any]


def condition_true(job: Obj, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def is_ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def live(pod: Obj) -> bool:
    """A pod that holds its index: not terminating and not finished."""
    phase = (pod.get("status") or {}).get("phase")
    return not pod["metadata"].get("deletionTimestamp") and phase not in ("Succeeded", "Failed")


def desired_workers(job: Obj) -> int:
    worker = ((job.get("spec") or {}).get("mpiReplicaSpecs") or {}).get("Worker") or {}
    return int(worker.get("replicas", 1))


def suspended(job: Obj) -> bool:
    return bool(((job.get("spec") or {}).get("runPolicy") or {}).get("suspend"))


def mpijob_owner(obj: Obj) -> str | None:
    """The UID of the MPIJob that owns `obj`, if one does."""
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == "MPIJob":
            return str(ref.get("uid"))
    return None


@dataclass(frozen=True)
class _Allowed:
    """Which live workers the operator may delete in one state of a job: all when it is suspended or
    not Running, else the indices at or above Worker.replicas (a scale-in)."""

    suspended: bool
    desired: int
    running: bool

    @property
    def key(self) -> tuple[bool, int, bool]:
        return (self.suspended, self.desired, self.running)

    def __call__(self, index: int) -> bool:
        return self.suspended or not self.running or index >= self.desired


@dataclass
class _Pod:
    job: str
    index: int
    live: bool


@dataclass
class Checker:
    grace: float = 1.0
    """Seconds after a job's deletion within which a child's create may still land."""
    known_at: Callable[[float], float] = lambda deleted: deleted
    """When the operator could have seen a deletion made at this time: later than it when the
    leader's MPIJob informer was waiting to retry a failed LIST/WATCH (it cannot know what it cannot
    see)."""
    counts: Counter[str] = field(default_factory=Counter)
    details: list[str] = field(default_factory=list)
    late: list[float] = field(default_factory=list)
    """Seconds after visibility of every child counted in `children_after_deletion`."""
    jobs: dict[str, Obj] = field(default_factory=dict)
    """UID -> the job as last seen (kept after its deletion, for late children)."""
    deleted_at: dict[str, float] = field(default_factory=dict)
    finished: dict[str, set[str]] = field(default_factory=dict)
    """UID -> the terminal conditions it has had True."""
    _pods: dict[str, _Pod] = field(default_factory=dict)
    _history: dict[str, list[tuple[float, _Allowed]]] = field(default_factory=dict)
    """Job UID -> (since when, which indices the operator may delete a live worker of) per change of
    the job's suspend, Worker.replicas or Running condition."""
    _holders: dict[tuple[str, int], set[str]] = field(default_factory=dict)
    """(job UID, index) -> UIDs of the live worker pods holding it."""

    def __post_init__(self) -> None:
        for name in VIOLATIONS:
            self.counts.setdefault(name, 0)

    def count(self, name: str, what: str, at: float) -> None:
        self.counts[name] += 1
        if name in VIOLATIONS and sum(f" {name}: " in d for d in self.details) < DETAILS_KEPT:
            self.details.append(f"{at:8.2f}s {name}: {what}")

    @property
    def violations(self) -> int:
        return sum(self.counts[name] for name in VIOLATIONS)

    def observe(
        self,
        event: str,
        kind: str,
        obj: Obj,
        now: float,
        *,
        deleted_by_operator: bool = False,
        writer: Callable[[], str] = lambda: "",
    ) -> None:
        """One committed change: `event` ADDED, MODIFIED or DELETED; `kind` the object's kind;
        `deleted_by_operator` whether the last DELETE of this object came from the operator (only
        read for a pod that starts terminating); `writer` names the request that made the change,
        for the message of a violation."""
        if kind == "MPIJob":
            self._job(event, obj, now, writer)
            return
        meta = obj["metadata"]
        owner = mpijob_owner(obj)
        if event == "ADDED":
            self._created(kind, obj, owner, now)
        labels = meta.get("labels") or {}
        if (
            kind == "Pod"
            and owner is not None
            and labels.get(ROLE_LABEL) == "worker"
            and INDEX_LABEL in labels
        ):
            self._worker(event, obj, owner, int(labels[INDEX_LABEL]), now, deleted_by_operator)

    def _job(self, event: str, job: Obj, now: float, writer: Callable[[], str]) -> None:
        meta = job["metadata"]
        uid = str(meta["uid"])
        self.jobs[uid] = job
        key = (suspended(job), desired_workers(job), condition_true(job, "Running"))
        history = self._history.setdefault(uid, [])
        if not history or history[-1][1].key != key:
            history.append((now, _Allowed(*key)))
        if event == "DELETED" or meta.get("deletionTimestamp"):
            self.deleted_at.setdefault(uid, now)
        had = self.finished.setdefault(uid, set())
        final = (job.get("status") or {}).get("completionTime") is not None
        for kind in TERMINAL:
            if condition_true(job, kind) and (final or kind == "Succeeded"):
                had.add(kind)
            elif kind in had and event != "DELETED":
                now_conditions = {
                    c.get("type"): c.get("status")
                    for c in (job.get("status") or {}).get("conditions") or []
                }
                self.count(
                    "terminal_reverted",
                    f"{meta['name']} ({uid}) {kind} was True, now {now_conditions}, by {writer()}",
                    now,
                )
                had.discard(kind)

    def _created(self, kind: str, obj: Obj, owner: str | None, now: float) -> None:
        meta = obj["metadata"]
        name = f"{kind} {meta['name']}"
        if owner is None:
            if JOB_LABEL in (meta.get("labels") or {}) and not meta.get("ownerReferences"):
                self.count("children_without_owner", f"{name} created with no owner reference", now)
            return
        deleted = self.deleted_at.get(owner)
        if deleted is None:
            return
        late, seen = now - deleted, now - self.known_at(deleted)
        if seen > self.grace:
            self.late.append(seen)
            self.count(
                "children_after_deletion",
                f"{name} created {late:.2f}s after its job {owner} was deleted, {seen:.2f}s after "
                "it was "
                "visible",
                now,
            )
        elif late > self.grace:
            self.counts["children_late_while_blind"] += 1
        else:
            self.counts["children_in_grace"] += 1

    def _worker(
        self, event: str, pod: Obj, job: str, index: int, now: float, by_operator: bool
    ) -> None:
        uid = str(pod["metadata"]["uid"])
        before = self._pods.get(uid)
        alive = event != "DELETED" and live(pod)
        self._pods[uid] = _Pod(job, index, alive)
        holders = self._holders.setdefault((job, index), set())
        if alive:
            if uid not in holders and holders:
                others = ", ".join(sorted(holders))
                self.count(
                    "duplicate_worker_indices",
                    f"{pod['metadata']['name']} index {index} beside {others}",
                    now,
                )
            holders.add(uid)
            return
        holders.discard(uid)
        if event == "DELETED":
            self._pods.pop(uid, None)
        if before is None or not before.live or not by_operator:
            return
        owner = self.jobs.get(job)
        if owner is None or job in self.deleted_at:
            return
        since = self._wrong_since(job, index)
        if since is None:
            return
        if now - self.known_at(since) <= self.grace:
            self.counts["worker_deletes_racing_a_change"] += 1
            return
        self.count(
            "running_workers_deleted",
            f"the operator deleted live {pod['metadata']['name']} (index {index}) of Running "
            f"{owner['metadata']['name']} with Worker.replicas {desired_workers(owner)}, "
            f"{now - since:.2f}s after the job last allowed it",
            now,
        )

    def _wrong_since(self, job: str, index: int) -> float | None:
        """Since when deleting a live worker of this index is wrong (the job Running, not suspended,
        the index below Worker.replicas, without a break); None while it is allowed."""
        since = None
        for at, allowed in reversed(self._history.get(job, [])):
            if allowed(index):
                return since
            since = at
        return since

    def orphans(self, children: Iterable[tuple[str, Obj]], existing: set[str], now: float) -> None:
        """Counts the children (kind, object) whose MPIJob owner is not among the `existing` UIDs
        (call it after the garbage collector had its chance)."""
        for kind, obj in children:
            owner = mpijob_owner(obj)
            if (
                owner is not None
                and owner not in existing
                and not obj["metadata"].get("deletionTimestamp")
            ):
                self.count(
                    "children_without_owner",
                    f"{kind} {obj['metadata']['name']} outlived {owner}",
                    now,
                )


def visible_at(changed: float, waits: Iterable[tuple[float, float]], retry: float) -> float:
    """When an informer could see a change made at `changed`: the end of its retry waits (start,
    end) covering that moment, chained (a wait that starts within `retry` of the previous one's end
    is that retry failing: no event got through in between)."""
    seen = changed
    for start, end in sorted(waits):
        if start <= seen + retry and end > seen:
            seen = end
    return seen


def converged(job: Obj, workers: Iterable[Obj], launchers: Iterable[Obj]) -> str | None:
    """Why `job` is not (yet) in the state its spec asks for, None when it is. A finished job is
    done; a suspended one runs no pod; a running one has exactly one Ready live worker per index
    below `Worker.replicas`, a live launcher, a current `observedGeneration` and, when elastic, a
    `status.elastic` that agrees."""
    if any(condition_true(job, kind) for kind in TERMINAL):
        return None
    status = job.get("status") or {}
    live_workers = [p for p in workers if live(p)]
    live_launchers = [p for p in launchers if live(p)]
    if suspended(job):
        if not condition_true(job, "Suspended"):
            return "suspended but no Suspended=True condition"
        if live_workers or live_launchers:
            return (
                f"suspended but {len(live_workers)} workers and {len(live_launchers)} "
                "launchers live"
            )
        return None
    if not condition_true(job, "Running"):
        return "not Running"
    generation = job["metadata"].get("generation")
    if status.get("observedGeneration") not in (None, generation):
        return f"observedGeneration {status.get('observedGeneration')} != generation {generation}"
    want = desired_workers(job)
    indices = sorted(int(p["metadata"]["labels"][INDEX_LABEL]) for p in live_workers)
    if indices != list(range(want)):
        return f"live worker indices {indices}, want 0..{want - 1}"
    if not all(is_ready(p) for p in live_workers):
        return "a worker is not Ready"
    if not live_launchers:
        return "no live launcher"
    if (job.get("spec") or {}).get("elasticPolicy") is not None:
        elastic = status.get("elastic") or {}
        seen = {k: elastic.get(k) for k in ("desired", "ready", "discovered", "draining")}
        if seen != {"desired": want, "ready": want, "discovered": want, "draining": 0}:
            return f"status.elastic {seen}, want {want} desired, ready and discovered"
    return None
