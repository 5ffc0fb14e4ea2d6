"""`mpi-operator demo`: kubesim and the operator in one process, an elastic job scaled out and in.

Every step talks to the simulated API server over HTTP exactly as on a cluster, including what a
person would see inside the launcher pod (`/etc/mpi/discover_hosts.sh` as its kubelet has mounted
it, through kubesim's file endpoint). kubesim keeps the kubelet's 60 s volume sync, so each step
finishing within seconds shows the operator's launcher-pod touch at work. Scale-in shows both
halves: the hosts leave discovery at once while their pods drain, and the pods are deleted after the
(shortened) grace period. Each step waits with a deadline and the demo fails loudly, naming the step
and what it saw, when something does not happen. Every line fits a 100-column terminal.
"""

from __future__ import annotations

import asyncio
import copy
import sys
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources as package_files
from pathlib import Path
from typing import Any, Protocol, TextIO

import aiohttp
import yaml

from kubesim.app import KubeSim
from kubesim.settings import SimSettings
from mpi_operator.api import constants as c
from mpi_operator.api import crd
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.kube.errors import KubeError, NotFound
from mpi_operator.objects import is_pod_ready
from mpi_operator.reconcile.reconciler import WATCH_SELECTORS, mpijob_reconciler_factory
from mpi_operator.runtime.manager import Manager
from mpi_operator.runtime.types import FatalError
from mpi_operator.settings import Settings

EXAMPLE = package_files.files("mpi_operator") / "data" / "tensorflow2-mnist-elastic.yaml"
"""Package data, so the demo runs from an installed wheel: a copy of examples/elastic/ (kept equal
by tests/unit/test_package_data.py)."""
NAMESPACE = "default"
CRDS = resources.Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", False, "CustomResourceDefinition"
)
STEP_TIMEOUT = 20.0
DEMO_GRACE_SECONDS = 3
"""The demo's copy of the example drains scaled-in workers for 3 s instead of 30 s."""
DEMO_SETTLE_SECONDS = 2
DRAINING_ANNOTATION = "mpi-operator.kubeflow.org/draining-since"
POD_TIMING = {"kubesim/start-seconds": "0.3", "kubesim/ready-seconds": "0.5"}
"""kubesim's pod timing annotations: Running in 0.3 s and Ready 0.5 s later, as no image pulls."""
STEP_WIDTH, WORKERS_WIDTH = 32, 22
WIDTH = 100
"""The terminal width every line of the demo fits in."""


class DemoFailed(Exception):
    """A step did not happen in time; the message says which and what was seen instead."""


@dataclass
class Timeline:
    out: TextIO
    started: float

    def header(self) -> None:
        step, workers = "step", "workers"
        self.out.write(f"{'time':>7}  {step:<{STEP_WIDTH}} {workers:<{WORKERS_WIDTH}} hosts\n")

    def row(self, step: str, workers: str, hosts: str) -> None:
        elapsed = time.monotonic() - self.started
        line = f"{elapsed:6.1f}s  {step:<{STEP_WIDTH}} {workers:<{WORKERS_WIDTH}} {hosts}"
        self.out.write(line.rstrip() + "\n")
        self.out.flush()

    def step(self, text: str) -> None:
        """A step on a line of its own, for a scene that shows more than a row holds."""
        self.out.write(f"{time.monotonic() - self.started:6.1f}s  {text}\n")
        self.out.flush()

    def detail(self, label: str, text: str) -> None:
        """A line under a step, labelled, wrapped to WIDTH under its own indentation."""
        lead = f"{'':9}{label:<7} "
        indent = " " * len(lead)
        lines = textwrap.wrap(
            text, WIDTH, initial_indent=lead, subsequent_indent=indent, break_on_hyphens=False
        )
        self.out.write("".join(f"{line}\n" for line in lines))
        self.out.flush()

    def progress(self, goal: str, now: str) -> None:
        text = f'… until "{goal}": now {now}'
        lines = textwrap.wrap(text, WIDTH, initial_indent=" " * 9, subsequent_indent=" " * 11)
        self.out.write("".join(f"{line}\n" for line in lines))
        self.out.flush()


def _demo_job() -> dict[str, Any]:
    """The elastic example, with kubesim's pod timing so workers become Ready in about a second, and
    a short scale-in grace and settle interval so the whole demo takes well under half a minute."""
    job: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    job = copy.deepcopy(job)
    job["spec"]["elasticPolicy"]["scaleInGracePeriodSeconds"] = DEMO_GRACE_SECONDS
    job["spec"]["elasticPolicy"]["settleSeconds"] = DEMO_SETTLE_SECONDS
    for role in ("Launcher", "Worker"):
        annotate_pods(job, role, POD_TIMING)
    return job


def annotate_pods(job: dict[str, Any], role: str, annotations: dict[str, str]) -> None:
    """Adds `annotations` to the pod template of `role` (Launcher or Worker) of `job`."""
    template = job["spec"]["mpiReplicaSpecs"][role].setdefault("template", {})
    template.setdefault("metadata", {}).setdefault("annotations", {}).update(annotations)


async def wait(
    what: str,
    check: Callable[[], Awaitable[str | None]],
    timeline: Timeline,
    within: float = STEP_TIMEOUT,
) -> None:
    """Polls `check` (None when done, else what it sees) until done or `within` seconds."""
    deadline = time.monotonic() + within
    last_seen = ""
    last_report = 0.0
    while True:
        seen = await check()
        if seen is None:
            return
        now = time.monotonic()
        if now > deadline:
            raise DemoFailed(f"{what}: not done after {within:.0f}s; last seen: {seen}")
        if seen != last_seen or now - last_report > 2.0:
            timeline.progress(what, seen)
            last_seen, last_report = seen, now
        await asyncio.sleep(0.1)


class Stage:
    """What a scene works with: the simulated cluster (its URL for kubesim's own endpoints), the
    API client, a plain HTTP session for those endpoints, and the timeline it writes."""

    def __init__(
        self, sim: KubeSim, kube: Kube, http: aiohttp.ClientSession, timeline: Timeline
    ) -> None:
        self.sim = sim
        self.kube = kube
        self.http = http
        self.timeline = timeline


class Demo(Stage):
    def __init__(
        self, sim: KubeSim, kube: Kube, http: aiohttp.ClientSession, timeline: Timeline
    ) -> None:
        super().__init__(sim, kube, http, timeline)
        self.name = _demo_job()["metadata"]["name"]

    async def worker_pods(self) -> list[dict[str, Any]]:
        selector = f"{c.LABEL_JOB_NAME}={self.name},{c.LABEL_JOB_ROLE}={c.ROLE_WORKER}"
        pods, _ = await self.kube.list(resources.POD, NAMESPACE, label_selector=selector)
        return sorted(pods, key=lambda p: p["metadata"]["name"])

    async def pods_summary(self) -> str:
        pods = await self.worker_pods()
        ready = [p for p in pods if is_pod_ready(p)]
        draining = [
            p for p in pods if DRAINING_ANNOTATION in (p["metadata"].get("annotations") or {})
        ]
        summary = f"{len(ready)}/{len(pods)} ready"
        return f"{summary}, {len(draining)} draining" if draining else summary

    async def configmap_hosts(self) -> list[str]:
        try:
            cm = await self.kube.get(resources.CONFIG_MAP, f"{self.name}-config", NAMESPACE)
        except NotFound:
            return []
        return _hosts(cm.get("data", {}).get("discover_hosts.sh", ""))

    async def launcher_hosts(self) -> list[str] | None:
        return await launcher_hosts(self.sim, self.kube, self.http, self.name)

    def short(self, host: str) -> str:
        """`<job>-worker-0.<job>.<ns>.svc:1` as `worker-0:1` (the legend gives the whole name)."""
        name, _, slots = host.partition(":")
        worker = name.split(".", 1)[0].removeprefix(f"{self.name}-")
        return f"{worker}:{slots}" if slots else worker

    def legend(self, out: TextIO) -> None:
        example = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))["spec"]["elasticPolicy"]
        grace = example.get("scaleInGracePeriodSeconds", c.DEFAULT_SCALE_IN_GRACE_PERIOD_SECONDS)
        settle = example.get("settleSeconds", c.DEFAULT_SETTLE_SECONDS)
        service = f"{self.name}.{NAMESPACE}.svc"
        out.write(
            f"The elastic example {self.name}, scaled out and in. To finish in seconds, "
            f"scaled-in\nworkers drain for {DEMO_GRACE_SECONDS}s (the example says {grace}s) and "
            f"discovery settles for {DEMO_SETTLE_SECONDS}s (the example: {settle}s).\n"
            "hosts: what discover_hosts.sh prints in the launcher pod (host:slots); worker-0:1 "
            f"stands for\n{self.name}-worker-0.{service}:1.\n"
            '"… until": the step being waited for, then what the cluster shows now.\n\n'
        )
        self.timeline.header()

    async def row(self, step: str) -> None:
        hosts = await self.launcher_hosts()
        shown = (
            "(launcher not running yet)"
            if hosts is None
            else " ".join(self.short(h) for h in hosts) or "(none)"
        )
        self.timeline.row(step, await self.pods_summary(), shown)

    async def expect_hosts(self, count: int, step: str, *, pods: int | None = None) -> None:
        """Waits until `count` workers are Ready and listed by the launcher's *mounted*
        discover_hosts.sh (and `pods` worker pods exist, default `count`: more while scaled-in pods
        drain)."""
        want_pods = count if pods is None else pods

        async def check() -> str | None:
            workers = await self.worker_pods()
            ready = [p for p in workers if is_pod_ready(p)]
            hosts = await self.launcher_hosts()
            mounted = len(hosts) if hosts is not None else 0
            if len(workers) == want_pods and len(ready) >= count and mounted == count:
                return None
            listed = len(await self.configmap_hosts())
            return (
                f"{len(ready)}/{len(workers)} ready; hosts: {mounted} launcher, {listed} ConfigMap"
            )

        await wait(step, check, self.timeline)
        await self.row(step)

    async def run(self) -> None:
        await self.kube.create(resources.MPIJOB, _demo_job(), NAMESPACE)
        self.timeline.row("submitted MPIJob (2 workers)", "", "")
        await self.expect_hosts(2, "2 workers ready and discovered")

        patch = {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 3}}}}
        await self.kube.patch(resources.MPIJOB, self.name, patch, namespace=NAMESPACE)
        self.timeline.row("kubectl patch: Worker.replicas=3", "", "")
        await self.expect_hosts(3, "scaled out to 3")

        scale = {"spec": {"replicas": 1}}
        await self.kube.patch(
            resources.MPIJOB, self.name, scale, namespace=NAMESPACE, subresource="scale"
        )
        self.timeline.row("kubectl scale --replicas=1", "", "")
        await self.expect_hosts(1, "scaled in to 1, 2 pods draining", pods=3)
        await self.expect_hosts(1, f"drained pods deleted after {DEMO_GRACE_SECONDS}s")


async def install_crd(kube: Kube, timeline: Timeline) -> None:
    """Creates the MPIJob CRD (rendered from the models) and waits until it is Established: before
    the operator starts, whose preflight refuses to run without it, as on a cluster."""
    body = crd.custom_resource_definition()
    await kube.create(CRDS, body)

    async def established() -> str | None:
        got = await kube.get(CRDS, body["metadata"]["name"])
        conditions = (got.get("status") or {}).get("conditions") or []
        if any(cond["type"] == "Established" and cond["status"] == "True" for cond in conditions):
            return None
        return f"conditions {[cond['type'] for cond in conditions]}"

    await wait("the MPIJob CRD established", established, timeline)


async def launcher_hosts(
    sim: KubeSim, kube: Kube, http: aiohttp.ClientSession, job: str
) -> list[str] | None:
    """What `discover_hosts.sh` prints inside the launcher pod of `job` now (None before it runs).

    Read through kubesim's file endpoint: the script as the launcher's kubelet has mounted it.
    """
    selector = f"{c.LABEL_JOB_NAME}={job},{c.LABEL_JOB_ROLE}={c.ROLE_LAUNCHER}"
    pods, _ = await kube.list(resources.POD, NAMESPACE, label_selector=selector)
    for pod in pods:
        url = f"{sim.url}/kubesim/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}"
        async with http.get(f"{url}/files/etc/mpi/discover_hosts.sh") as response:
            if response.status == 200:
                return _hosts(await response.text())
    return None


def _hosts(script: str) -> list[str]:
    """`host:slots` of every `echo` line of a discover_hosts.sh script."""
    return [line.split(" ", 1)[1] for line in script.splitlines() if line.startswith("echo ")]


class Scene(Protocol):
    """One story told on a fresh kubesim with the operator running: its legend, then its steps."""

    def legend(self, out: TextIO) -> None: ...

    async def run(self) -> None: ...


SceneFactory = Callable[[KubeSim, Kube, aiohttp.ClientSession, Timeline], Scene]


async def run_scene(out: TextIO, sim_settings: SimSettings, make: SceneFactory) -> int:
    """kubesim with `sim_settings`, the MPIJob CRD and the operator, then the scene `make` builds;
    0 when every step happened in time, 1 (saying what was seen) when one did not."""
    timeline = Timeline(out, time.monotonic())
    with tempfile.TemporaryDirectory(prefix="mpi-operator-demo-") as tmp:
        async with KubeSim(sim_settings) as sim:
            kubeconfig = sim.write_kubeconfig(Path(tmp) / "kubeconfig")
            out.write(f"kubesim serving the Kubernetes API on {sim.url}\n")
            kube = await Kube.from_kubeconfig(str(kubeconfig))
            async with kube, aiohttp.ClientSession() as http:
                try:
                    await install_crd(kube, timeline)
                except (DemoFailed, KubeError) as exc:
                    out.write(f"\nDEMO FAILED: installing the MPIJob CRD: {exc}\n")
                    return 1
                scene = make(sim, kube, http, timeline)
                scene.legend(out)
                failure = await _run_with_operator(scene, str(kubeconfig))
    if failure is not None:
        out.write(f"\nDEMO FAILED: {failure}\n")
        return 1
    out.write(f"\ndemo finished in {time.monotonic() - timeline.started:.1f}s\n")
    return 0


async def _run_with_operator(scene: Scene, kubeconfig: str) -> str | None:
    """Runs the demo's steps with the operator running in this process; what went wrong, or None.

    The operator's own failure is reported as such (it explains a step that then timed out), never
    as a traceback out of the shutdown.
    """
    settings = Settings(kubeconfig=kubeconfig, leader_elect=False, metrics_address="127.0.0.1:0")
    manager = Manager(settings, mpijob_reconciler_factory, selectors=WATCH_SELECTORS)
    operator = asyncio.create_task(manager.run(), name="operator")
    failure: str | None = None
    try:
        await scene.run()
    except (DemoFailed, KubeError) as exc:
        failure = str(exc)
    finally:
        manager.request_stop()
        try:
            async with asyncio.timeout(10):
                await operator
        except FatalError as exc:
            failure = f"the operator stopped: {exc}" + (f" ({failure})" if failure else "")
        except TimeoutError:
            failure = failure or "the operator did not stop within 10s"
    return failure


def main() -> int:
    settings = SimSettings(start_seconds=0.3, ready_seconds=0.5)
    return asyncio.run(run_scene(sys.stdout, settings, Demo))
