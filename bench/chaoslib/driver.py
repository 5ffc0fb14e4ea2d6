"""The driver of `bench/chaos.py`: applies the schedule to a kubesim it hosts and to the operator
replicas, and feeds every change of the cluster to the invariant checker as it is committed.

Who deleted a pod is read from kubesim's request record at the moment of the change: the listener
runs inside the DELETE's handler, so the request being answered (no status yet) is the one that
deletes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from chaoslib.invariants import JOB_LABEL, ROLE_LABEL, Checker, converged, visible_at
from chaoslib.jobs import JobPlan
from chaoslib.plan import RESTART_SECONDS, Step, next_step
from chaoslib.replicas import Replica
from chaoslib.steps import FAULT_STATUSES, NS, retry_transient, scale, suspend
from kubesim.app import KubeSim
from kubesim.cluster import EventType
from kubesim.control import FaultRule
from kubesim.controllers import resource_type
from kubesim.registry import ResourceType
from mpi_operator.kube import errors, resources
from mpi_operator.kube.client import DEFAULT_USER_AGENT, Kube

OPERATOR_AGENT = DEFAULT_USER_AGENT
CHILD_KINDS = frozenset({"Pod", "ConfigMap", "Service", "Secret", "Job", "PodGroup"})
LEASE = "mpi-operator"
LEADER_WAIT_SECONDS = 30.0
RETRY_SECONDS = 0.5
"""How long one LIST/WATCH retry may take to fail (an injected answer comes at once): a wait logged
this soon after the previous one ended continues the informer's blindness."""
RECORDS_SCANNED = 400
"""How far back in kubesim's request record the deleter of a pod is looked for (it is the newest
request still open, so a few entries suffice even with many clients)."""


class Driver:
    def __init__(
        self,
        sim: KubeSim,
        kube: Kube,
        checker: Checker,
        replicas: list[Replica],
        jobs: list[JobPlan],
        rng: random.Random,
        *,
        log: bool = False,
    ) -> None:
        self.sim, self.kube, self.checker, self.replicas, self.jobs, self.rng = (
            sim,
            kube,
            checker,
            replicas,
            jobs,
            rng,
        )
        self.print_log = log
        self.started = time.monotonic()
        self.done: Counter[str] = Counter()
        self.rules: list[FaultRule] = []
        self.leader = ""
        self.leader_slot = ""
        self.leader_changes = 0
        self.failovers = 0
        self.unasked_exits = 0
        self._asked: set[int] = set()
        """Pids of processes the driver stopped (an exit of any other is a crash or a lost
        lease)."""
        self._pending: set[asyncio.Task[Any]] = set()
        self.pods: ResourceType = resource_type(sim.cluster, "v1", "Pod")
        checker.known_at = self.known_at

    # --- bookkeeping ------------------------------------------------------------------------------
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def note(self, what: str) -> None:
        if self.print_log:
            print(f"+{self.elapsed():7.2f}s {what}", flush=True)

    def on_change(
        self, event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        meta = obj.get("metadata") or {}
        if meta.get("namespace") != NS:
            return
        if rt.kind == "Lease" and meta.get("name") == LEASE:
            self._lease(obj)
            return
        if rt.kind != "MPIJob" and rt.kind not in CHILD_KINDS:
            return
        by_operator = False
        starts_terminating = event == "DELETED" or meta.get("deletionTimestamp")
        if (
            rt.kind == "Pod"
            and starts_terminating
            and not (old and old["metadata"].get("deletionTimestamp"))
        ):
            by_operator = OPERATOR_AGENT in self._deleter(str(meta["name"]))
        name = str(meta.get("name"))
        self.checker.observe(
            event,
            rt.kind,
            obj,
            self.elapsed(),
            deleted_by_operator=by_operator,
            writer=lambda: self._writer(rt.plural, name),
        )

    def _deleter(self, name: str) -> str:
        for i, record in enumerate(reversed(self.sim.control.requests)):
            if i > RECORDS_SCANNED:
                break
            if (
                record.verb == "delete"
                and record.resource == "pods"
                and record.name == name
                and record.status is None
            ):
                return str(record.user_agent)
        return ""

    def _writer(self, resource: str, name: str) -> str:
        """The request being answered that changes this object (its verb, subresource and
        client)."""
        for i, r in enumerate(reversed(self.sim.control.requests)):
            if i > RECORDS_SCANNED:
                break
            if (
                r.resource == resource
                and r.name == name
                and r.status is None
                and r.verb not in ("get", "watch")
            ):
                return f"{r.verb} {r.subresource or ''} from {r.user_agent!r}"
        return "kubesim itself (no request in flight)"

    def _lease(self, lease: dict[str, Any]) -> None:
        holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        if not holder or holder == self.leader:
            return
        slot = next((r.slot for r in self.replicas if r.identity == holder), "?")
        if self.leader:
            self.leader_changes += 1
            self.failovers += slot != self.leader_slot
        self.note(f"leader: replica {slot} ({holder})")
        self.leader, self.leader_slot = holder, slot

    def known_at(self, deleted: float) -> float:
        """When the leader (now) could have seen a deletion at `deleted` (run time): the end of the
        retry waits of its MPIJob informer that cover that moment, chained."""
        windows = [w for r in self.replicas for w in r.blind.get(self.leader, [])]
        return visible_at(deleted + self.started, windows, RETRY_SECONDS) - self.started

    def finished(self) -> int:
        rt = resource_type(self.sim.cluster, "kubeflow.org/v2beta1", "MPIJob")
        items = self.sim.cluster.list(rt, NS)["items"]
        return sum(
            any(
                c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True"
                for c in (j.get("status") or {}).get("conditions") or []
            )
            for j in items
        )

    def faults(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for rule in self.rules:
            out[f"faults injected: {rule.status}"] += rule.hits
        return dict(out)

    # --- cluster reads (in-process: one consistent moment) ----------------------------------------
    def _pods_of(self, job: str, role: str) -> list[dict[str, Any]]:
        selector = f"{JOB_LABEL}={job},{ROLE_LABEL}={role}"
        return list(self.sim.cluster.list(self.pods, NS, label_selector=selector)["items"])

    def convergence(self) -> dict[str, str | None]:
        rt = resource_type(self.sim.cluster, "kubeflow.org/v2beta1", "MPIJob")
        found = {j["metadata"]["name"]: j for j in self.sim.cluster.list(rt, NS)["items"]}
        out: dict[str, str | None] = {}
        for plan in self.jobs:
            job = found.get(plan.name)
            if job is None:
                out[plan.name] = "missing"
                continue
            uid = job["metadata"]["uid"]
            workers = [
                p
                for p in self._pods_of(plan.name, "worker")
                if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])
            ]
            out[plan.name] = converged(job, workers, self._pods_of(plan.name, "launcher"))
        return out

    def describe_pods(self, job: str) -> str:
        """The pods named after `job`, for the message of a job that did not converge."""
        rt = resource_type(self.sim.cluster, "kubeflow.org/v2beta1", "MPIJob")
        found = [j for j in self.sim.cluster.list(rt, NS)["items"] if j["metadata"]["name"] == job]
        uid = found[0]["metadata"]["uid"] if found else ""
        parts = []
        for pod in self._pods_of(job, "worker") + self._pods_of(job, "launcher"):
            meta = pod["metadata"]
            owners = {r.get("kind"): r.get("uid") for r in meta.get("ownerReferences") or []}
            whose = "this job's" if uid in owners.values() else f"owners {owners}"
            terminating = " terminating" if meta.get("deletionTimestamp") else ""
            parts.append(
                f"{meta['name']} ({whose}, {(pod.get('status') or {}).get('phase')}{terminating})"
            )
        conditions = {
            c.get("type"): c.get("status")
            for c in ((found[0].get("status") or {}) if found else {}).get("conditions") or []
        }
        return f"conditions {conditions}; pods: {', '.join(parts) or 'none'}"

    async def check_orphans(self, within: float) -> None:
        """Children whose MPIJob is gone, once the garbage collector had `within` seconds."""
        deadline = time.monotonic() + within
        while True:
            rt = resource_type(self.sim.cluster, "kubeflow.org/v2beta1", "MPIJob")
            existing = {j["metadata"]["uid"] for j in self.sim.cluster.list(rt, NS)["items"]}
            children = list(self._children())
            orphans = [(k, o) for k, o in children if self._orphaned(o, existing)]
            if not orphans or time.monotonic() > deadline:
                self.checker.orphans(orphans, existing, self.elapsed())
                return
            await asyncio.sleep(0.5)

    @staticmethod
    def _orphaned(obj: dict[str, Any], existing: set[str]) -> bool:
        refs = [
            r for r in obj["metadata"].get("ownerReferences") or [] if r.get("kind") == "MPIJob"
        ]
        return (
            bool(refs)
            and not any(r.get("uid") in existing for r in refs)
            and not obj["metadata"].get("deletionTimestamp")
        )

    def _children(self) -> Iterable[tuple[str, dict[str, Any]]]:
        for api_version, kind in (
            ("v1", "Pod"),
            ("v1", "ConfigMap"),
            ("v1", "Service"),
            ("v1", "Secret"),
            ("batch/v1", "Job"),
        ):
            rt = resource_type(self.sim.cluster, api_version, kind)
            for obj in self.sim.cluster.list(rt, NS)["items"]:
                yield kind, obj

    # --- the run ----------------------------------------------------------------------------------
    async def create_all(self) -> None:
        for plan in self.jobs:
            await retry_transient(
                lambda plan=plan: self.kube.create(resources.MPIJOB, plan.manifest())
            )  # type: ignore[misc]

    async def chaos(
        self, seconds: float, events: Iterable[tuple[float, str]], write_fault_rate: float
    ) -> None:
        if write_fault_rate > 0:
            for status in FAULT_STATUSES:
                self.rules.append(
                    self.sim.control.inject_error(
                        status,
                        method="WRITE",
                        path=r"^/apis?/",
                        count=None,
                        user_agent=OPERATOR_AGENT,
                        probability=write_fault_rate / len(FAULT_STATUSES),
                    )
                )
        watchdog = asyncio.create_task(self._restart_crashed(), name="replica-watchdog")
        operator = asyncio.create_task(
            self._operator_events(seconds, events), name="operator-events"
        )
        end = time.monotonic() + seconds
        try:
            while time.monotonic() < end:
                step, pause = next_step(self.rng, self.jobs)
                try:
                    await self.apply(step)
                except (
                    errors.ApiError
                ) as exc:  # the driver's write lost to a fault or a race: noted, not fatal
                    self.done["driver writes refused"] += 1
                    self.note(f"{step.describe()}: {exc}")
                await asyncio.sleep(pause)
            await operator
            if self._pending:
                await asyncio.gather(*self._pending)
        finally:
            operator.cancel()
            self.sim.control.clear_faults()
            watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watchdog
        for replica in self.replicas:
            if not replica.running:
                await replica.start()

    async def apply(self, step: Step) -> None:
        self.note(step.describe())
        control = self.sim.control
        self.done[step.kind] += 1
        if step.kind == "scale":
            await retry_transient(lambda: scale(self.kube, step.job, step.value, step.via))
        elif step.kind == "suspend":
            if await retry_transient(lambda: suspend(self.kube, step.job, True)):
                self._later(self._resume(step))
        elif step.kind == "recreate":
            self._later(self._recreate(step))
        elif step.kind == "watch_fault":
            rule = control.inject_error(
                step.value,
                method="GET",
                path=step.path,
                count=step.count,
                user_agent=OPERATOR_AGENT,
            )
            self.rules.append(rule)
        elif step.kind == "drop_watches":
            control.drop_watches()
        elif step.kind == "compact":
            control.compact()
        else:
            self._hit_worker(step)

    def _later(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _resume(self, step: Step) -> None:
        await asyncio.sleep(step.seconds)
        self.note(f"resume {step.job}")
        await retry_transient(lambda: suspend(self.kube, step.job, False))

    async def _recreate(self, step: Step) -> None:
        plan = next(p for p in self.jobs if p.name == step.job)
        if not await retry_transient(
            lambda: self.kube.delete(resources.MPIJOB, step.job, namespace=NS)
        ):
            return  # already being re-created by an earlier step
        await asyncio.sleep(step.seconds)
        for _ in range(50):
            try:
                await retry_transient(lambda: self.kube.create(resources.MPIJOB, plan.manifest()))
                self.note(f"re-created {step.job}")
                return
            except errors.Conflict:  # the old one is still there (AlreadyExists)
                await asyncio.sleep(0.2)
        self.done["re-creates that never landed"] += 1

    def _hit_worker(self, step: Step) -> None:
        alive = sorted(
            p["metadata"]["name"]
            for p in self._pods_of(step.job, "worker")
            if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
        )
        if not alive:
            self.done[f"{step.kind}: no running worker"] += 1
            return
        pod = alive[int(step.pick * len(alive))]
        kubelet = self.sim.controllers.kubelet
        assert kubelet is not None
        if step.kind == "kill":
            kubelet.kill(NS, pod, exit_code=137)
        else:
            kubelet.evict(NS, pod)

    # --- the operator replicas --------------------------------------------------------------------
    async def _operator_events(self, seconds: float, events: Iterable[tuple[float, str]]) -> None:
        start = time.monotonic()
        for fraction, what in events:
            await asyncio.sleep(max(0.0, start + fraction * seconds - time.monotonic()))
            pool = await self._targets(what)
            if not pool:
                self.done[f"{what}: nobody to hit"] += 1
                continue
            target = self.rng.choice(pool)
            self.note(f"{what}: replica {target.slot}")
            self.done[f"operator {what}"] += 1
            assert target.proc is not None
            self._asked.add(target.proc.pid)
            await (target.kill() if what.startswith("kill") else target.stop())
            await asyncio.sleep(self.rng.uniform(*RESTART_SECONDS))
            await target.start()

    async def _targets(self, what: str) -> list[Replica]:
        """The replicas `what` may hit. A leader is waited for (up to `LEADER_WAIT_SECONDS`): after
        a SIGKILL the lease takes its duration to run out, and a failover needs a leader to fail."""
        deadline = time.monotonic() + LEADER_WAIT_SECONDS
        while True:
            running = [r for r in self.replicas if r.running]
            leader = [r for r in running if r.identity == self.leader]
            if what.endswith("-leader"):
                pool = leader
            elif what.endswith("-standby"):
                pool = [r for r in running if r.identity != self.leader]
            else:
                pool = running
            if pool or time.monotonic() > deadline:
                return pool
            await asyncio.sleep(0.2)

    async def _restart_crashed(self) -> None:
        """A replica that exits unasked (a crash, a lost lease: exit 1) is restarted, as by its
        Deployment."""
        while True:
            await asyncio.sleep(0.5)
            for replica in self.replicas:
                proc = replica.proc
                if proc is not None and proc.returncode is not None and proc.pid not in self._asked:
                    self._asked.add(proc.pid)
                    self.unasked_exits += 1
                    self.note(f"replica {replica.slot} exited with {proc.returncode}; restarting")
                    await asyncio.sleep(self.rng.uniform(*RESTART_SECONDS))
                    await replica.start()
