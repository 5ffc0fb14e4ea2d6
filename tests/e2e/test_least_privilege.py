"""Least privilege and secrets, proven on one MPIJob's life, quickly and on its own (issue 13, item
6).

The whole suite's requests are audited by tests/request_audit.py at the end of a session; this
module proves the same property when only part of the suite runs, and checks what the session audit
cannot:
- one elastic MPIJob's life (leader election, create, workers Ready, scale out and in with a drain,
  suspend and resume, a broken Service and Secret repaired, events, status) sends only requests
  every install of deploy/ and the chart grants, and every granted rule it does not use is explained
  in deploy/README.md's rule table;
- no private key material in that run's logs, Events, statuses, other objects or /metrics;
- the rendered Deployments run non-root on a read-only root filesystem, and the operator really runs
  as uid 65532 with an unwritable HOME and working directory, writing no file at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from chaoslib.steps import scale

import operator_testing
import rbac_audit
import request_audit
import secret_scan
from integration.elastic.harness import elastic_job, worker_pods
from integration.reconcile.harness import get_job, mpijob, wait_condition
from kubesim.app import KubeSim
from kubesim.control import RecordedRequest
from kubesim.settings import SimSettings
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube

LEASE_NS = "mpi-operator"
JOB = "pi"
GRACE = 1
"""scaleInGracePeriodSeconds. Real time: the operator's clock also times its Lease, so jumping it
past a long grace would (rightly) lose leadership."""


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return SimSettings(
        start_seconds=0.1, ready_seconds=0.1, job_backoff_seconds=0.1, bookmark_seconds=0.5
    )


def requests_of(
    sent: list[RecordedRequest], named: set[tuple[str, str]]
) -> dict[rbac_audit.Request, str]:
    return {request_audit.as_request(vars(r), named): "this test" for r in sent}


def all_installs() -> list[rbac_audit.Install]:
    installs = rbac_audit.kustomize_installs()
    pytest.importorskip(
        "helm_python", reason="helm-python-sdk (a dev dependency) renders the chart"
    )
    return installs + rbac_audit.chart_installs()


@contextlib.asynccontextmanager
async def leading_operator(
    kubesim: KubeSim, clock: operator_testing.SteppedClock
) -> AsyncIterator[Any]:
    settings = operator_testing.quick_settings(kubesim, leader_elect=True, lease_namespace=LEASE_NS)
    async with operator_testing.running_operator(settings, clock=clock, now=clock.utc_now) as mgr:
        yield mgr


async def one_job_life(kube: Kube, kubesim: KubeSim, clock: operator_testing.SteppedClock) -> None:
    await kube.create(resources.MPIJOB, elastic_job(JOB, workers=2, max_replicas=3, grace=GRACE))
    await wait_condition(kube, JOB, "Running")
    await scale(kube, JOB, 3, "merge")

    async def three_running() -> bool:
        pods = await worker_pods(kube, JOB)
        return sum(1 for p in pods.values() if p.get("status", {}).get("phase") == "Running") == 3

    await eventually(three_running, sim=kubesim, within=30, what="three running workers")
    await scale(kube, JOB, 1, "merge")
    # The scale-in drains (an annotation patch), then deletes after the grace on the operator's
    # clock.

    async def one_worker_left() -> bool:
        pods = await worker_pods(kube, JOB)
        return sum(1 for p in pods.values() if not p["metadata"].get("deletionTimestamp")) == 1

    await eventually(
        one_worker_left,
        sim=kubesim,
        within=30,
        what="the scaled-in workers deleted after the grace",
    )
    for suspend in (True, False):
        await kube.patch(
            resources.MPIJOB,
            JOB,
            {"spec": {"runPolicy": {"suspend": suspend}}},
            namespace="default",
        )

        async def launcher_suspended(value: bool = suspend) -> bool:
            job = await kube.get(resources.JOB, f"{JOB}-launcher", "default")
            return bool(job["spec"].get("suspend")) == value

        await eventually(
            launcher_suspended,
            sim=kubesim,
            within=30,
            what=f"the launcher Job with suspend={suspend}",
        )
    await repairs(kube, kubesim)
    await eventually(
        lambda: bool(
            kubesim.control.recorded(verb="update", resource="jobs", subresource="status")
        ),
        sim=kubesim,
        within=30,
        what="the launcher Job's startTime cleared on resume",
    )


async def repairs(kube: Kube, kubesim: KubeSim) -> None:
    """A user breaks the job's Service (its selector) and Secret (a key removed): the operator
    writes them back (PUT), the rarer writes of a job's life."""
    service = await kube.get(resources.SERVICE, JOB, "default")
    service["spec"]["selector"] = {"broken": "true"}
    await kube.replace(resources.SERVICE, service)
    secret = await kube.get(resources.SECRET, f"{JOB}-ssh", "default")
    secret["data"].pop("ssh-publickey")
    await kube.replace(resources.SECRET, secret)
    for resource in ("services", "secrets"):
        await eventually(
            lambda resource=resource: bool(  # type: ignore[misc]
                kubesim.control.recorded(
                    verb="update", resource=resource, user_agent=rbac_audit.OPERATOR_AGENT
                )
            ),
            sim=kubesim,
            within=30,
            what=f"the operator to repair the job's {resource}",
        )

    async def repaired() -> bool:
        service = await kube.get(resources.SERVICE, JOB, "default")
        secret = await kube.get(resources.SECRET, f"{JOB}-ssh", "default")
        return "broken" not in service["spec"]["selector"] and "ssh-publickey" in secret["data"]

    await eventually(repaired, sim=kubesim, within=30, what="the Service and the Secret repaired")


async def test_one_job_life_is_granted_and_every_unused_grant_is_explained(
    kube: Kube, kubesim: KubeSim, caplog: pytest.LogCaptureFixture
) -> None:
    installs = all_installs()
    await kube.create(
        resources.NAMESPACE,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LEASE_NS}},
    )
    clock = operator_testing.SteppedClock()
    caplog.set_level(logging.DEBUG)
    async with leading_operator(kubesim, clock) as mgr, aiohttp.ClientSession() as http:
        await one_job_life(kube, kubesim, clock)
        async with http.get(mgr.server.url + "/metrics") as response:
            assert response.status == 200
            metrics = await response.text()
    sent = kubesim.control.recorded(user_agent=rbac_audit.OPERATOR_AGENT)
    requests = requests_of(sent, {n for i in installs for n in i.named_resources()})
    seen = {(r.verb, r.full_resource, r.leader_election) for r in requests}
    # The run reached every kind of request the audit is about, so its verdict is not vacuous.
    assert {
        ("create", "leases", True),
        ("update", "leases", True),
        ("list", "mpijobs", False),
        ("watch", "mpijobs", False),
        ("patch", "mpijobs/status", False),
        ("create", "pods", False),
        ("patch", "pods", False),
        ("delete", "pods", False),
        ("update", "configmaps", False),
        ("update", "jobs", False),
        ("update", "jobs/status", False),
        ("create", "events", False),
    } <= seen, sorted(seen)
    readme = rbac_audit.readme_rules(rbac_audit.README.read_text())
    report = rbac_audit.audit(requests, installs, readme, check_unused=True)
    assert report.ok, "\n".join(report.lines())

    # Secrets: the job's key exists (so the needles are real), and is nowhere else.
    secret = await kube.get(resources.SECRET, f"{JOB}-ssh", "default")
    needles = secret_scan.key_needles(secret)
    assert needles
    assert secret_scan.object_leaks(kubesim.control.stored_objects(), needles) == []
    assert secret_scan.leaks(metrics, needles) == []
    assert "mpi_operator" in metrics
    assert caplog.records, "the operator's logs were captured"
    assert secret_scan.leaks(caplog.text, needles) == []
    assert (await get_job(kube, JOB))["status"]["conditions"]


def volcano_pod_group_crd() -> dict[str, Any]:
    """A stand-in for Volcano's PodGroup CRD (free-form spec: the operator only writes
    PodGroups)."""
    r = resources.VOLCANO_POD_GROUP
    free = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    version = {
        "name": r.version,
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {"type": "object", "properties": {"spec": free, "status": free}}
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{r.plural}.{r.group}"},
        "spec": {
            "group": r.group,
            "scope": "Namespaced",
            "names": {"plural": r.plural, "singular": "podgroup", "kind": "PodGroup"},
            "versions": [version],
        },
    }


async def test_a_gang_scheduled_job_life_is_granted_including_the_pod_group_clean_up(
    kube: Kube, kubesim: KubeSim
) -> None:
    """With `--gang-scheduling=volcano`: the PodGroup informer, its create and, when the job is
    suspended, its delete (which the rest of the suite never reached: the PodGroup lacked the watch
    label its informer filters on, so the operator never saw it to delete it) are granted."""
    installs = all_installs()
    await kube.create(operator_testing.CRD, volcano_pod_group_crd())

    async def served() -> bool:
        await kube.list(resources.VOLCANO_POD_GROUP, "default")
        return True

    await eventually(served, sim=kubesim, within=30, what="the PodGroup CRD served")
    settings = operator_testing.quick_settings(kubesim, gang_scheduling="volcano")
    async with operator_testing.running_operator(settings):
        await kube.create(resources.MPIJOB, mpijob(JOB))

        async def pod_groups() -> int:
            groups, _ = await kube.list(resources.VOLCANO_POD_GROUP, "default")
            return len(groups)

        await eventually(pod_groups, sim=kubesim, within=30, what="the PodGroup")
        await kube.patch(
            resources.MPIJOB, JOB, {"spec": {"runPolicy": {"suspend": True}}}, namespace="default"
        )

        async def pod_group_gone() -> bool:
            return await pod_groups() == 0

        await eventually(
            pod_group_gone, sim=kubesim, within=30, what="the suspended job's PodGroup deleted"
        )
    sent = kubesim.control.recorded(user_agent=rbac_audit.OPERATOR_AGENT)
    requests = requests_of(sent, {n for i in installs for n in i.named_resources()})
    seen = {(r.verb, r.group, r.resource) for r in requests}
    assert {
        ("watch", "scheduling.volcano.sh", "podgroups"),
        ("create", "scheduling.volcano.sh", "podgroups"),
        ("delete", "scheduling.volcano.sh", "podgroups"),
        ("list", "scheduling.k8s.io", "priorityclasses"),
    } <= seen, sorted(seen)
    # The PodGroup carries the watch label: its informer sees it at once, so no second create, 409,
    # get and label patch.
    assert [
        r.verb for r in sent if r.resource == "podgroups" and r.verb not in ("list", "watch")
    ] == [
        "create",
        "delete",
    ]
    readme = rbac_audit.readme_rules(rbac_audit.README.read_text())
    report = rbac_audit.audit(requests, installs, readme, check_unused=False)
    assert report.ok, "\n".join(report.lines())


# --- non-root, read-only root filesystem ----------------------------------------------------------


def rendered_deployments() -> Iterator[tuple[str, dict[str, Any]]]:
    from .test_install_kustomize import OVERLAYS
    from .test_install_kustomize import render as kustomize

    if shutil.which("kubectl") is not None:
        for overlay in OVERLAYS:
            yield overlay, rbac_audit_one(kustomize(overlay), "Deployment")
    helm = pytest.importorskip(
        "helm_python", reason="helm-python-sdk (a dev dependency) renders the chart"
    )
    del helm
    from .test_install_helm import IDS
    from .test_install_helm import render as chart

    for case in IDS:
        yield f"chart {case}", rbac_audit_one(chart(case), "Deployment")


def rbac_audit_one(objs: tuple[dict[str, Any], ...], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objs if o["kind"] == kind]
    return found


def test_every_rendered_deployment_runs_non_root_on_a_read_only_root() -> None:
    checked = 0
    for where, deployment in rendered_deployments():
        pod = deployment["spec"]["template"]["spec"]
        security = pod.get("securityContext") or {}
        assert security.get("runAsNonRoot") is True, where
        assert isinstance(security.get("runAsUser"), int), where
        assert security["runAsUser"] != 0, where
        assert security.get("seccompProfile") == {"type": "RuntimeDefault"}, where
        for c in pod["containers"]:
            sc = c.get("securityContext") or {}
            assert sc.get("readOnlyRootFilesystem") is True, (where, c["name"])
            assert sc.get("allowPrivilegeEscalation") is False, (where, c["name"])
            assert sc.get("capabilities", {}).get("drop") == ["ALL"], (where, c["name"])
            assert sc.get("runAsUser", security["runAsUser"]) != 0, (where, c["name"])
            # The only writable path is an emptyDir at /tmp, for Python's tempfile.
            mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts") or ()}
            volumes = {v["name"]: v for v in pod.get("volumes") or ()}
            assert all("emptyDir" in volumes[name] for name in mounts.values()), where
        checked += 1
    assert checked >= 2


WRITE_WATCH = r"""
import os, sys
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_WRITES = {"os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.symlink", "os.link", "os.truncate",
           "os.chmod", "os.chown", "shutil.copyfile", "shutil.move", "tempfile.mkstemp",
           "tempfile.mkdtemp"}
def _hook(event, args):
    if event == "open" and args[0] is not None and not isinstance(args[0], int):
        mode, flags = args[1], args[2]
        if (mode and any(ch in str(mode) for ch in "wax+")) or (flags & _WRITE_FLAGS):
            sys.stderr.write(f"WRITE-ATTEMPT open {args[0]!r} {mode!r}\n")
    elif event in _WRITES:
        sys.stderr.write(f"WRITE-ATTEMPT {event} {args[:2]!r}\n")
sys.addaudithook(_hook)
from mpi_operator import cli
sys.exit(cli.main(sys.argv[1:]))
"""


JAIL = r"""
set -e
view=$1; shift
n=0
while [ "$1" != "--" ]; do
    # A directory closed to others (/root, a checkout under mktemp -d): in its place a tmpfs that
    # others may traverse, holding read-only binds of its entries (their own modes still apply).
    closed=$1; shift; n=$((n + 1))
    mkdir -p "$view/$n"
    mount --bind "$closed" "$view/$n"
    mount -t tmpfs -o mode=0711,size=1m tmpfs "$closed"
    for entry in "$view/$n"/* "$view/$n"/.[!.]*; do
        target="$closed/${entry##*/}"
        if [ -L "$entry" ]; then
            ln -s "$(readlink "$entry")" "$target"
            continue
        fi
        [ -e "$entry" ] || continue
        if [ -d "$entry" ]; then mkdir "$target"; else touch "$target"; fi
        mount --bind "$entry" "$target"
        mount -o remount,bind,ro "$target"
    done
    mount -o remount,ro "$closed"
done
shift
mount -o remount,bind,ro /
exec setpriv --reuid=65532 --regid=65532 --clear-groups \
    --inh-caps=-all --bounding-set=-all --no-new-privs "$@"
"""
"""Runs what follows `--` as the image would: in a private mount namespace whose root filesystem is
read-only (every path, /tmp too: stricter than the Deployment's emptyDir), as uid and gid 65532 with
no capabilities and no way to gain privileges. The arguments before `--` are directories closed to
others on the way to the interpreter or the checkout, which uid 65532 must be able to traverse."""


def readable_copy(kubeconfig: Path, shared: Path) -> Path:
    """The kubeconfig where uid 65532 can read it (pytest's tmp_path is root's only)."""
    shared.chmod(0o755)
    copy = shared / "kubeconfig"
    shutil.copyfile(kubeconfig, copy)
    copy.chmod(0o644)
    return copy


CHECKOUT = operator_testing.ROOT
INTERPRETER = Path(os.path.realpath(sys.executable))


def closed_directories(*paths: Path) -> list[str]:
    """The directories on the way to `paths` that others may not traverse, outermost first."""
    closed = {
        str(p)
        for path in paths
        for p in (path, *path.parents)
        if p.is_dir() and not p.stat().st_mode & 0o001
    }
    return sorted(closed, key=lambda p: (p.count("/"), p))


@pytest.mark.skipif(
    os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("setpriv")),
    reason="a read-only root and uid 65532 need root, unshare and setpriv",
)
async def test_the_operator_runs_non_root_on_a_read_only_root_and_writes_no_file(
    kube: Kube, kubesim: KubeSim
) -> None:
    """`mpi-operator run` as the image runs it: uid/gid 65532, read-only root filesystem,
    PYTHONDONTWRITEBYTECODE (the Dockerfile's), HOME and the working directory unwritable; it
    reconciles a job. An audit hook reports every file it opens for writing or creates: there must
    be none (the bytecode cache, tempfiles, a kubeconfig cache would all show up here before
    failing)."""
    assert kubesim.kubeconfig_path is not None
    shared = Path(tempfile.mkdtemp(prefix="least-privilege-"))
    try:
        kubeconfig = readable_copy(kubesim.kubeconfig_path, shared)
        env = {
            k: v
            for k, v in operator_testing.source_env().items()
            if not k.startswith(("PYTEST", "KUBESIM_REQUEST_LOG", "COV_"))
        }
        env.update(
            {"HOME": "/nonexistent", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}
        )
        proc = await asyncio.create_subprocess_exec(
            "unshare", "--mount", "--propagation", "private", "sh", "-c", JAIL, "jail", str(shared),
            *closed_directories(INTERPRETER, CHECKOUT), "--",
            sys.executable, "-c", WRITE_WATCH, "run", "--kubeconfig", str(kubeconfig),
            "--no-leader-elect", "--metrics-address", "127.0.0.1:0", "--log-format", "json",
            cwd="/", env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            await kube.create(resources.MPIJOB, elastic_job(JOB, workers=1, max_replicas=2))
            await wait_condition(kube, JOB, "Running", within=60)
        finally:
            await operator_testing.stop_process(proc)
        assert proc.stderr is not None
        err = (await proc.stderr.read()).decode()
        assert proc.returncode == 0, err[-3000:]
        assert "WRITE-ATTEMPT" not in err, [
            line for line in err.splitlines() if "WRITE-ATTEMPT" in line
        ]
        secret = await kube.get(resources.SECRET, f"{JOB}-ssh", "default")
        assert secret_scan.leaks(err, secret_scan.key_needles(secret)) == []
        first = json.loads(err.splitlines()[0])  # the log is JSON lines, as the Deployment asks
        assert first
    finally:
        shutil.rmtree(shared)
