"""Checks shared by the install tests (a helper module, not a test module): rendered manifests ->
objects, RBAC evaluation for the operator's ServiceAccount, kubesim admission of every object,
applying them with the real kubectl, and running the operator against kubesim to record the requests
it really sends.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

import operator_testing
from kubesim.admission import admit
from kubesim.admission.schema import builtin_schema
from kubesim.app import KubeSim
from kubesim.control import RecordedRequest
from kubesim.testing import Kubectl, eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime import manager
from mpi_operator.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = ROOT / "crds" / "kubeflow.org_mpijobs.yaml"
WILDCARD = "*"
Obj = dict[str, Any]


REQUIRED: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    # (apiGroup, resource[/subresource], verbs): what the code sends (see
    # deploy/base/clusterrole.yaml), including the paths a short run does not reach (get + label
    # patch after a 409 on create).
    ("kubeflow.org", "mpijobs", ("list", "watch")),
    ("kubeflow.org", "mpijobs/status", ("patch",)),
    ("kubeflow.org", "mpijobs/finalizers", ("update",)),
    ("", "pods", ("get", "list", "watch", "create", "patch", "delete")),
    ("", "services", ("get", "list", "watch", "create", "update", "patch")),
    ("", "configmaps", ("get", "list", "watch", "create", "update", "patch")),
    ("", "secrets", ("get", "list", "watch", "create", "update", "patch")),
    ("batch", "jobs", ("get", "list", "watch", "create", "update", "patch")),
    ("batch", "jobs/status", ("update",)),
    ("", "events", ("create", "patch")),
)
REQUIRED_GANG: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "scheduling.volcano.sh",
        "podgroups",
        ("get", "list", "watch", "create", "update", "patch", "delete"),
    ),
    (
        "scheduling.x-k8s.io",
        "podgroups",
        ("get", "list", "watch", "create", "update", "patch", "delete"),
    ),
    ("scheduling.k8s.io", "priorityclasses", ("list", "watch")),
)
REQUIRED_LEASE: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("coordination.k8s.io", "leases", ("get", "create", "update")),
)


def load_all(text: str) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def find(objs: Iterable[Obj], kind: str, name: str | None = None) -> list[Obj]:
    return [
        o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]


def one(objs: Iterable[Obj], kind: str, name: str | None = None) -> Obj:
    found = find(objs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def wildcards(objs: Iterable[Obj]) -> list[str]:
    """Every `*` in a Role or ClusterRole rule, as `kind/name: field`."""
    found: list[str] = []
    for o in objs:
        if o["kind"] not in ("Role", "ClusterRole"):
            continue
        for rule in o.get("rules") or ():
            for key in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                if any(WILDCARD in str(v) for v in rule.get(key) or ()):
                    found.append(f"{o['kind']}/{o['metadata']['name']}: {key}={rule[key]}")
    return found


def rule_allows(rule: Mapping[str, Any], group: str, resource: str, verb: str, name: str) -> bool:
    names = rule.get("resourceNames") or ()
    return (
        group in (rule.get("apiGroups") or ())
        and resource in (rule.get("resources") or ())
        and verb in (rule.get("verbs") or ())
        and (not names or name in names)
    )


@dataclass
class Grants:
    """What the rendered RBAC grants one ServiceAccount: cluster-wide rules and rules per
    namespace."""

    cluster: list[Mapping[str, Any]] = field(default_factory=list)
    namespaced: dict[str, list[Mapping[str, Any]]] = field(default_factory=dict)

    @classmethod
    def of(cls, objs: list[Obj], sa_namespace: str, sa_name: str) -> Grants:
        def bound(binding: Obj) -> bool:
            return any(
                s.get("kind") == "ServiceAccount"
                and s.get("name") == sa_name
                and s.get("namespace") == sa_namespace
                for s in binding.get("subjects") or ()
            )

        def rules(kind: str, name: str, namespace: str | None) -> list[Mapping[str, Any]]:
            roles = [
                o
                for o in find(objs, kind, name)
                if kind == "ClusterRole" or o["metadata"].get("namespace") == namespace
            ]
            assert len(roles) == 1, (
                f"binding refers to {kind} {name}, found {len(roles)} in the manifests"
            )
            return list(roles[0].get("rules") or ())

        grants = cls()
        for crb in find(objs, "ClusterRoleBinding"):
            if bound(crb):
                grants.cluster += rules("ClusterRole", crb["roleRef"]["name"], None)
        for rb in find(objs, "RoleBinding"):
            if bound(rb):
                ns = rb["metadata"]["namespace"]
                grants.namespaced.setdefault(ns, []).extend(
                    rules(rb["roleRef"]["kind"], rb["roleRef"]["name"], ns)
                )
        return grants

    def allows(
        self, group: str, resource: str, verb: str, namespace: str | None, name: str = ""
    ) -> bool:
        """Like the RBAC authorizer: a request across all namespaces needs a cluster-wide grant."""
        scoped = self.namespaced.get(namespace, []) if namespace else []
        return any(rule_allows(r, group, resource, verb, name) for r in [*self.cluster, *scoped])

    def denied(self, sent: Iterable[RecordedRequest]) -> list[str]:
        """The recorded requests these grants would refuse, readably, sorted (empty when all
        allowed)."""
        return sorted(
            {
                f"{r.verb} "
                f"{r.resource}{'/' + r.subresource if r.subresource else ''}.{r.group or 'core'} "
                f"in {r.namespace or 'all namespaces'} ({r.name})"
                for r in sent
                if not self.allows(
                    r.group,
                    f"{r.resource}/{r.subresource}" if r.subresource else r.resource,
                    r.verb,
                    r.namespace or None,
                    r.name,
                )
            }
        )

    def missing(
        self,
        required: Iterable[tuple[str, str, tuple[str, ...]]],
        namespace: str | None,
        name: str = "",
    ) -> list[str]:
        return [
            f"{verb} {resource}.{group or 'core'} in {namespace or 'all namespaces'}"
            for group, resource, verbs in required
            for verb in verbs
            if not self.allows(group, resource, verb, namespace, name)
        ]


# --- admission and apply --------------------------------------------------------------------------


def admit_strictly(obj: Obj) -> list[str]:
    """kubesim admission of a CREATE with fieldValidation=Strict; returns its warnings.

    Fails when kubesim has no schema for the kind: admission would then check nothing."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    assert builtin_schema(api_version, kind) is not None, (
        f"kubesim has no schema for {api_version} {kind}"
    )
    return admit(
        operation="CREATE",
        api_version=api_version,
        kind=kind,
        obj=obj,
        old=None,
        schema=None,
        field_validation="Strict",
    ).warnings


def not_kept(rendered: Any, live: Any, path: str = "") -> list[str]:
    """Paths of `rendered` whose values `live` does not hold (pruned or changed by the server)."""
    if isinstance(rendered, dict):
        if not isinstance(live, dict):
            return [path or "."]
        return [p for k, v in rendered.items() for p in not_kept(v, live.get(k), f"{path}.{k}")]
    if isinstance(rendered, list):
        if not isinstance(live, list) or len(live) != len(rendered):
            return [path]
        return [
            p
            for i, (a, b) in enumerate(zip(rendered, live, strict=True))
            for p in not_kept(a, b, f"{path}[{i}]")
        ]
    return [] if rendered == live else [f"{path}: {rendered!r} -> {live!r}"]


async def create_namespaces(kubectl: Kubectl, namespaces: Iterable[str]) -> None:
    for ns in namespaces:
        rc, _, err = await kubectl("create", "namespace", ns)
        assert rc == 0, err


async def read_back(kubectl: Kubectl, objs: list[Obj]) -> list[Obj]:
    """The live objects of `objs`, in the same order (`kubectl get -f - -o json`)."""
    rc, out, err = await kubectl("get", "-f", "-", "-o", "json", stdin=yaml.safe_dump_all(objs))
    assert rc == 0, err
    got = yaml.safe_load(out)
    items: list[Obj] = got["items"] if got.get("kind") == "List" else [got]
    assert [(o["kind"], o["metadata"]["name"]) for o in items] == [
        (o["kind"], o["metadata"]["name"]) for o in objs
    ]
    return items


async def apply_and_read_back(
    kubectl: Kubectl,
    objs: list[Obj],
    namespaces: Iterable[str] = (),
    *,
    kustomization: Path | None = None,
) -> list[Obj]:
    """`kubectl apply -f -` of `objs` (or `kubectl apply -k kustomization`, which must render them),
    creating `namespaces` first as an admin would; then the live objects in the same order."""
    await create_namespaces(kubectl, namespaces)
    text = yaml.safe_dump_all(objs)
    if kustomization is None:
        rc, out, err = await kubectl("apply", "-f", "-", stdin=text)
    else:
        rc, out, err = await kubectl("apply", "-k", str(kustomization))
    assert rc == 0, f"kubectl apply failed:\n{err}\n{out}"
    assert "Warning" not in err, err
    return await read_back(kubectl, objs)


# --- the operator's real requests -----------------------------------------------------------------


@contextlib.asynccontextmanager
async def running_operator(settings: Settings) -> AsyncIterator[manager.Manager]:
    # Installs render a full Deployment's flags (leader election on): starting takes longer, within
    # the default ceiling.
    async with operator_testing.running_operator(settings) as mgr:
        yield mgr


def settings_from_args(kubesim: KubeSim, args: list[str], lease_namespace: str) -> Settings:
    """The Settings the rendered Deployment's args give (through the real CLI parser)."""
    from mpi_operator import cli

    parsed = cli._build_parser().parse_args(["run", *args, f"--lease-namespace={lease_namespace}"])
    base = cli.run_settings(parsed)
    # The lease timings stay the operator's defaults: a fresh cluster has no Lease, so the first
    # acquisition is immediate, and short renew deadlines would lose leadership on a busy machine.
    return dataclasses.replace(
        base,
        kubeconfig=str(kubesim.kubeconfig_path),
        qps=0,
        metrics_address="127.0.0.1:0",
        backoff_base_seconds=0.05,
        backoff_max_seconds=1.0,
    )


def _mpijob(namespace: str) -> Obj:
    fast = {"kubesim/start-seconds": "0.1", "kubesim/ready-seconds": "0.1"}
    template = {
        "metadata": {"annotations": fast},
        "spec": {"containers": [{"name": "main", "image": "mpioperator/mpi-pi:openmpi"}]},
    }
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": namespace},
        "spec": {
            "launcherCreationPolicy": "WaitForWorkersReady",
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template},
                "Worker": {"replicas": 2, "template": template},
            },
        },
    }


async def operator_requests(
    kubesim: KubeSim, settings: Settings, namespace: str
) -> list[RecordedRequest]:
    """Runs the operator through an MPIJob's life (create, workers Ready, launcher, scale in,
    suspend, resume) in `namespace` and returns every request it sent (the CRD must be
    installed)."""
    kubesim.control.clear_requests()
    async with (
        await Kube.from_kubeconfig(
            str(kubesim.kubeconfig_path), qps=0, burst=1, user_agent="install-test"
        ) as kube,
        running_operator(settings),
    ):
        await kube.create(resources.MPIJOB, _mpijob(namespace))

        async def launcher() -> bool:
            jobs, _ = await kube.list(resources.JOB, namespace)
            return bool(jobs)

        await eventually(
            launcher, sim=kubesim, within=30, what="the launcher Job (after two Ready workers)"
        )
        await kube.patch(
            resources.MPIJOB,
            "pi",
            {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 1}}}},
            namespace=namespace,
        )
        await eventually(
            lambda: bool(
                kubesim.control.recorded(verb="delete", resource="pods", user_agent="mpi-operator/")
            ),
            sim=kubesim,
            within=30,
            what="the operator to delete the excess worker",
        )
        for suspend in (True, False):
            await kube.patch(
                resources.MPIJOB,
                "pi",
                {"spec": {"runPolicy": {"suspend": suspend}}},
                namespace=namespace,
            )

            async def launcher_suspended(value: bool = suspend) -> bool:
                job = await kube.get(resources.JOB, "pi-launcher", namespace)
                return bool(job["spec"].get("suspend")) == value

            await eventually(
                launcher_suspended,
                sim=kubesim,
                within=30,
                what=f"the launcher Job to have suspend={suspend}",
            )
    return kubesim.control.recorded(user_agent="mpi-operator/")
