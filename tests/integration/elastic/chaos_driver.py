"""Seeded chaos for the elastic path (a helper module, not a test module): the plan, its driver, the
watcher.

`plan_jobs` / `plan_schedule` turn one `random.Random(seed)` into elastic MPIJobs and a list of
`Step`s: scales (merge patch, JSON patch, scale subresource; also flipped to a value and back),
worker kills (exit 137), evictions and deletions, kubesim faults (injected 500/503/429 answers on
the operator's writes and its informers' LIST/WATCH, dropped watches, compaction) and pauses.
`Chaos.run` applies them; a pod to hit is picked at run time from the live workers (`Step.pick`), so
the replay log (`Watcher.context`) names the pod actually hit.

`Watcher` checks the invariants while the chaos runs, and collects violations instead of raising
(one of its checks runs inside kubesim's commit, where an exception would only be logged):

- `consume` polls the launcher's *mounted* `discover_hosts.sh` through kubesim's file endpoint every
  `POLL_SECONDS`, runs each distinct script with `sh`, and checks the answer against the pods as
  kubesim holds them right after the read: well-formed `host:slots` lines, no duplicate, at most
  maxReplicas, and every host a worker pod that exists, is Ready, not terminating and not finished.
  A host whose pod stopped being usable may stay listed for `PROPAGATION_SECONDS` (the operator's
  watch -> reconcile -> ConfigMap -> launcher touch -> kubelet refresh path), counted from the end
  of any stall a disturbance may have caused meanwhile (`FAULT_STALL_SECONDS` after an injected
  answer, `watch_stall_seconds` after a failed LIST/WATCH, a dropped watch or a compaction); a host
  listed before its pod was ever usable is a violation at once.
- `on_change` (a kubesim cluster listener) sees each worker pod the moment it starts terminating;
  when the last DELETE request for it came from the operator, the launcher's mounted script at that
  very moment must not list it: the operator deletes only what it took out of discovery first
  (docs/architecture.md#the-write-path).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from chaoslib.invariants import is_ready
from chaoslib.steps import (
    FAULT_METHODS,
    FAULT_PATHS,
    FAULT_STATUSES,
    SCALE_PATHS,
    WATCH_PATHS,
    retry_transient,
    scale,
)

from integration.reconcile.harness import NS, OPERATOR_AGENT
from kubesim.app import KubeSim
from kubesim.cluster import EventType
from kubesim.control import FaultRule
from kubesim.controllers import resource_type
from kubesim.registry import ResourceType
from mpi_discovery import hostfile
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube

from .harness import elastic_job, run_script

POLL_SECONDS = 0.2
PROPAGATION_SECONDS = 1.0
"""How long a host may stay in the mounted script after its pod stopped being usable, no fault in
the way. Measured over ~75 seeds on this machine (2 cores, a CI run beside): 0.002-0.46 s, nearly
all under 0.1 s (the pod event, one reconcile, the ConfigMap write and the launcher touch, which
kubesim's volume manager picks up at once). 1 s leaves room for a busy event loop and still catches
a missed or late touch, which shows as tens of seconds (kubesim's periodic volume sync is 60 s)."""
FAULT_STALL_SECONDS = 1.0
"""How long one injected answer to a request may stall the operator: a 429's Retry-After (1 s), the
client's backoff after a 5xx (at most 0.8 s plus jitter) or the work queue's requeue backoff (at
most 1 s in these tests). The propagation window of a host that became unusable before the stall
ends counts from its end."""
REFLECTOR_BACKOFF = (0.8, 2.0, 30.0, 0.5)
"""The operator's reflector backoff (`cache/reflector.py` `Backoff`): initial, factor, cap, jitter.
It forgets failures only after 120 s without one, i.e. never within a seed."""


def watch_stall_seconds(failures: int) -> float:
    """How long an informer may stay blind after its `failures`-th failed LIST/WATCH (a dropped or
    compacted watch counts, as an upper bound: only one that ends within 1 s without an event does):
    the reflector waits 0.8 s, 1.6 s, 3.2 s, 6.4 s ... plus up to 50 % jitter. Measured: a fourth
    failure in a seed made the pods informer wait 9.46 s, and hosts stayed listed up to ~10 s after
    their pod died."""
    initial, factor, cap, jitter = REFLECTOR_BACKOFF
    return min(initial * factor ** max(failures - 1, 0), cap) * (1 + jitter)


SCRIPT = "/etc/mpi/discover_hosts.sh"
JOB_LABEL = "training.kubeflow.org/job-name"
ROLE_LABEL = "training.kubeflow.org/job-role"
INDEX_LABEL = "training.kubeflow.org/replica-index"
RECENT_STEPS = 20
"""How much of the replay log an assertion message carries."""

KINDS = ("scale", "flip", "kill", "evict", "delete", "fault", "drop_watches", "compact", "pause")
WEIGHTS = (4, 2, 2, 2, 2, 3, 1, 1, 2)
"""How often each kind is drawn. A flip scales to a value and back soon after (A -> B -> A host
sets, what a launcher touch that compared revisions against a stale cache would get wrong)."""


@dataclass(frozen=True)
class JobPlan:
    name: str
    min_replicas: int
    max_replicas: int
    workers: int

    def manifest(self) -> dict[str, Any]:
        body = elastic_job(
            self.name,
            workers=self.workers,
            min_replicas=self.min_replicas,
            max_replicas=self.max_replicas,
            grace=1,
            settle=0,
        )
        # Every kill and eviction is replaced; the budget is not what this test is about.
        body["spec"]["elasticPolicy"]["maxReplacements"] = 100
        return body


@dataclass(frozen=True)
class Step:
    kind: str
    job: str
    value: int = 0
    via: str = ""
    pick: float = 0.0
    method: str = ""
    path: str = ""
    count: int = 0
    seconds: float = 0.0
    gap: float = 0.0
    """The pause after the step, so the operator acts on some states before the next change."""

    def describe(self) -> str:
        if self.kind == "scale":
            return f"scale {self.job} to {self.value} via {self.via}"
        if self.kind == "flip":
            return (
                f"flip {self.job} to {self.value} and back after {self.seconds:.2f}s via {self.via}"
            )
        if self.kind == "fault":
            return f"inject {self.value} x{self.count} on {self.method} {self.path}"
        if self.kind == "pause":
            return f"pause {self.seconds:.2f}s"
        if self.kind in ("drop_watches", "compact"):
            return self.kind
        return f"{self.kind} a worker of {self.job} (pick {self.pick:.3f})"


def plan_jobs(rng: random.Random) -> list[JobPlan]:
    plans = []
    for name in ("ca", "cb")[: rng.randint(1, 2)]:
        low, high = rng.randint(1, 2), rng.randint(4, 5)
        plans.append(JobPlan(name, low, high, rng.randint(low, high)))
    return plans


def plan_schedule(rng: random.Random, jobs: list[JobPlan], steps: int) -> list[Step]:
    out = []
    for _ in range(steps):
        kind = rng.choices(KINDS, WEIGHTS)[0]
        job = rng.choice(jobs)
        if kind in ("scale", "flip"):
            value = rng.randint(job.min_replicas, job.max_replicas)
            back = rng.uniform(0.05, 0.6) if kind == "flip" else 0.0
            out.append(Step(kind, job.name, value=value, via=rng.choice(SCALE_PATHS), seconds=back))
        elif kind == "fault":
            status, method = rng.choice(FAULT_STATUSES), rng.choice(FAULT_METHODS)
            path = rng.choice(FAULT_PATHS + WATCH_PATHS)
            out.append(
                Step(
                    kind, job.name, value=status, method=method, path=path, count=rng.randint(1, 3)
                )
            )
        elif kind == "pause":
            out.append(Step(kind, job.name, seconds=rng.uniform(0.1, 0.6)))
        else:
            out.append(Step(kind, job.name, pick=rng.random()))
    return [dataclasses.replace(step, gap=rng.uniform(0.05, 0.4)) for step in out]


def usable(pod: dict[str, Any]) -> bool:
    """What `discover_hosts.sh` may list: Ready, not terminating, not finished."""
    phase = (pod.get("status") or {}).get("phase")
    return (
        is_ready(pod)
        and not pod["metadata"].get("deletionTimestamp")
        and phase not in ("Failed", "Succeeded")
    )


@dataclass(repr=False)
class Watcher:
    """The invariants' bookkeeping for one seed; `violations` is what the test asserts empty."""

    sim: KubeSim
    seed: int
    jobs: list[JobPlan]
    started: float = field(default_factory=time.monotonic)
    log: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    unusable_since: dict[str, float] = field(default_factory=dict)
    """Host name -> when its pod stopped being usable (cleared when a pod with that name is
    usable)."""
    ever_usable: set[str] = field(default_factory=set)
    terminating: set[str] = field(default_factory=set)
    """Uids of pods already seen terminating (a DELETED after that is the kubelet finishing the
    job)."""
    lags: list[float] = field(default_factory=list)
    """Every observed age of a listed-but-unusable host, no injected fault stalling the operator
    meanwhile."""
    fault_lags: list[float] = field(default_factory=list)
    """The same when an injected fault's pause overlapped (the window then counts from the pause's
    end)."""
    rules: dict[int, tuple[FaultRule, bool, int]] = field(default_factory=dict)
    """Injected rules: id -> (rule, whether it fails informers' LIST/WATCH, its hits seen so
    far)."""
    resumes_at: float = 0.0
    watch_failures: int = 0
    """When the operator is back on its feet after the last disturbance it saw (see `stall`)."""
    operator_deletes: int = 0
    """Worker pods the operator deleted (each checked against the mounted script at that moment)."""
    polls: int = 0
    host_sets: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)
    _outputs: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.pods: ResourceType = resource_type(self.sim.cluster, "v1", "Pod")

    # --- replay log -------------------------------------------------------------------------------
    def note(self, what: str) -> None:
        self.log.append(f"+{time.monotonic() - self.started:6.2f}s {what}")

    def context(self) -> str:
        jobs = ", ".join(
            f"{j.name} min={j.min_replicas} max={j.max_replicas} start={j.workers}"
            for j in self.jobs
        )
        recent = "\n  ".join(self.log[-RECENT_STEPS:])
        return (
            f"seed {self.seed} (replay: CHAOS_SEEDS={self.seed}); jobs: {jobs}; recent "
            f"schedule:\n  {recent}"
        )

    def stall(self, seconds: float, at: float | None = None) -> None:
        """A disturbance may keep the operator from acting until `seconds` after `at` (default:
        now); the propagation window of a host that became unusable before then counts from then."""
        self.resumes_at = max(self.resumes_at, (time.monotonic() if at is None else at) + seconds)

    def watch_failed(self, times: int = 1, at: float | None = None) -> None:
        self.watch_failures += times
        self.stall(watch_stall_seconds(self.watch_failures), at)

    def violate(self, what: str) -> None:
        self.violations.append(f"+{time.monotonic() - self.started:6.2f}s {what}\n{self.context()}")

    # --- kubesim state, read in-process (no await: one consistent moment) -------------------------
    def worker_pods(self, job: str) -> list[dict[str, Any]]:
        selector = f"{JOB_LABEL}={job},{ROLE_LABEL}=worker"
        return list(self.sim.cluster.list(self.pods, NS, label_selector=selector)["items"])

    def launcher(self, job: str) -> str | None:
        selector = f"{JOB_LABEL}={job},{ROLE_LABEL}=launcher"
        for pod in self.sim.cluster.list(self.pods, NS, label_selector=selector)["items"]:
            if not pod["metadata"].get("deletionTimestamp"):
                return str(pod["metadata"]["name"])
        return None

    def mounted_now(self, job: str) -> list[str] | None:
        """The hosts the launcher's mounted script lists at this instant (kubesim's volume view)."""
        volumes, name = self.sim.controllers.volumes, self.launcher(job)
        found = volumes.read_file(NS, name, SCRIPT) if volumes is not None and name else None
        return [h for h, _ in hostfile.parse_discover_hosts(found.data.decode())] if found else None

    # --- the cluster listener ---------------------------------------------------------------------
    def on_change(
        self, event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        if rt != self.pods or labels.get(ROLE_LABEL) != "worker":
            return
        host, now = str((obj.get("spec") or {}).get("hostname", "")), time.monotonic()
        if event != "DELETED" and usable(obj):
            self.ever_usable.add(host)
            self.unusable_since.pop(host, None)
        else:
            self.unusable_since.setdefault(host, now)
        uid = str(meta.get("uid"))
        if uid in self.terminating or not (event == "DELETED" or meta.get("deletionTimestamp")):
            return
        self.terminating.add(uid)
        if OPERATOR_AGENT not in (self._last_delete_agent(str(meta["name"])) or ""):
            return
        self.operator_deletes += 1
        listed = self.mounted_now(str(labels.get(JOB_LABEL)))
        if listed is not None and host in {fqdn.split(".", 1)[0] for fqdn in listed}:
            was = "usable" if old is not None and usable(old) else "not usable"
            self.violate(
                f"the operator deleted {meta['name']} ({was}) while the mounted script lists "
                f"{listed}"
            )

    def _last_delete_agent(self, name: str) -> str | None:
        for record in reversed(self.sim.control.requests):
            if record.verb == "delete" and record.resource == "pods" and record.name == name:
                return record.user_agent
        return None

    # --- the polling consumer ---------------------------------------------------------------------
    async def consume(self, job: JobPlan, http: aiohttp.ClientSession, tmp: Path) -> None:
        """Polls until cancelled, as Horovod's discovery thread does (only faster)."""
        while True:
            name = self.launcher(job.name)
            if name is not None:
                url = f"{self.sim.url}/kubesim/v1/namespaces/{NS}/pods/{name}/files{SCRIPT}"
                async with http.get(url) as response:
                    script = await response.text() if response.status == 200 else None
                if script is not None:
                    self._check(job, script, self.worker_pods(job.name), time.monotonic())
                    await self._check_output(job, script, tmp)
            await asyncio.sleep(POLL_SECONDS)

    def _check(self, job: JobPlan, script: str, pods: list[dict[str, Any]], now: float) -> None:
        self.polls += 1
        for key, (rule, watch, hits) in list(self.rules.items()):
            if (
                rule.hits != hits
            ):  # seen at the first poll after the answer: the stall only ends later
                self.rules[key] = (rule, watch, rule.hits)
                if watch:
                    self.watch_failed(rule.hits - hits, now)
                else:
                    self.stall(FAULT_STALL_SECONDS, now)
        try:
            hosts = [h for h, _ in hostfile.parse_discover_hosts(script)]
        except ValueError as exc:
            self.violate(f"{job.name}: malformed discover_hosts.sh ({exc}): {script!r}")
            return
        seen = self.host_sets.setdefault(job.name, [])
        if not seen or seen[-1] != tuple(hosts):
            seen.append(tuple(hosts))
        if len(hosts) != len(set(hosts)) or len(hosts) > job.max_replicas:
            self.violate(
                f"{job.name}: {len(hosts)} hosts (max {job.max_replicas}) or a duplicate: {hosts}"
            )
        by_host = {str(p["spec"].get("hostname", "")): p for p in pods}
        live = [p["metadata"]["labels"].get(INDEX_LABEL) for p in pods if usable(p)]
        if len(live) != len(set(live)):
            self.violate(
                f"{job.name}: two usable worker pods share an index: {sorted(map(str, live))}"
            )
        for fqdn in hosts:
            short = fqdn.split(".", 1)[0]
            pod = by_host.get(short)
            if pod is not None and usable(pod):
                continue
            if short not in self.ever_usable:
                self.violate(f"{job.name}: {fqdn} listed before its pod was ever usable")
                continue
            since = self.unusable_since.get(short, now)
            (self.fault_lags if self.resumes_at > since else self.lags).append(now - since)
            if now - max(since, self.resumes_at) > PROPAGATION_SECONDS:
                state = (
                    "missing" if pod is None else f"phase {(pod.get('status') or {}).get('phase')}"
                )
                stalled = (
                    f" (the last stall ended {now - self.resumes_at:.2f}s ago)"
                    if self.resumes_at
                    else ""
                )
                self.violate(
                    f"{job.name}: {fqdn} still listed {now - since:.2f}s after its pod ({state}) "
                    "became "
                    f"unusable{stalled}"
                )

    async def _check_output(self, job: JobPlan, script: str, tmp: Path) -> None:
        """Runs each distinct script once with `sh` (its output depends on its text only)."""
        if script not in self._outputs:
            code, out, err = await run_script(script, tmp)
            if code != 0:
                self.violate(f"{job.name}: discover_hosts.sh exited {code}: {err}")
            self._outputs[script] = out
            stdout = self._outputs[script]
            if any(not line for line in stdout.splitlines()):
                self.violate(f"{job.name}: an empty line in {stdout!r}")
            try:
                printed = hostfile.parse_discovery_output(stdout)
            except ValueError as exc:
                self.violate(f"{job.name}: malformed output ({exc}): {stdout!r}")
                return
            lines = [line.partition(":")[0] for line in stdout.splitlines()]
            if list(printed) != lines or lines != [
                h for h, _ in hostfile.parse_discover_hosts(script)
            ]:
                self.violate(f"{job.name}: sh printed {stdout!r}, not what the script lists")


class Chaos:
    """Applies a schedule with the test's own client (its writes ride out injected faults by
    retrying)."""

    def __init__(self, kube: Kube, watcher: Watcher) -> None:
        self.kube = kube
        self.watcher = watcher
        self.sim = watcher.sim

    async def run(self, steps: list[Step], stop: Callable[[], bool]) -> None:
        for step in steps:
            if stop():
                return
            await self.apply(step)
            await asyncio.sleep(step.gap)

    async def apply(self, step: Step) -> None:
        note = self.watcher.note
        control = self.sim.control
        if step.kind == "scale":
            note(step.describe())
            await retry_transient(lambda: scale(self.kube, step.job, step.value, step.via))
        elif step.kind == "flip":
            job = await self.kube.get(resources.MPIJOB, step.job, NS)
            back = int(job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"])
            note(f"{step.describe()} (to {back})")
            await retry_transient(lambda: scale(self.kube, step.job, step.value, step.via))
            await asyncio.sleep(step.seconds)
            await retry_transient(lambda: scale(self.kube, step.job, back, step.via))
        elif step.kind == "fault":
            note(step.describe())
            rule = control.inject_error(
                step.value, method=step.method, path=step.path, count=step.count
            )
            self.watcher.rules[id(rule)] = (rule, step.path in WATCH_PATHS, 0)
        elif step.kind == "drop_watches":
            note(f"drop_watches ({control.drop_watches()} streams)")
            self.watcher.watch_failed()
        elif step.kind == "compact":
            note(f"compact at rv {control.resource_version} ({control.compact()} events)")
            self.watcher.watch_failed()
        elif step.kind == "pause":
            note(step.describe())
            await asyncio.sleep(step.seconds)
        else:
            await self._hit_worker(step)

    async def _hit_worker(self, step: Step) -> None:
        alive = sorted(
            p["metadata"]["name"]
            for p in self.watcher.worker_pods(step.job)
            if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
        )
        if not alive:
            self.watcher.note(f"{step.kind} {step.job}: no running worker to hit")
            return
        pod = alive[int(step.pick * len(alive))]
        self.watcher.note(f"{step.kind} {pod}")
        kubelet = self.sim.controllers.kubelet
        assert kubelet is not None
        if step.kind == "kill":
            kubelet.kill(NS, pod, exit_code=137)
        elif step.kind == "evict":
            kubelet.evict(NS, pod)
        else:
            await retry_transient(lambda: self.kube.delete(resources.POD, pod, namespace=NS))
