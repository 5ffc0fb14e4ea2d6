"""The kustomize install (deploy/): every overlay rendered by the real `kubectl kustomize` (default
load restrictor), checked for the objects, least-privilege RBAC without wildcards, the pod's
security settings and flags; every rendered object admitted by kubesim (fieldValidation=Strict) and
applied with kubectl without being refused or pruned; and the RBAC checked against the requests the
operator really sends when it runs with the Deployment's own flags."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kubesim.app import KubeSim
from kubesim.testing import Kubectl

from .install_checks import (
    REQUIRED,
    REQUIRED_GANG,
    REQUIRED_LEASE,
    ROOT,
    Grants,
    Obj,
    admit_strictly,
    apply_and_read_back,
    load_all,
    not_kept,
    one,
    operator_requests,
    settings_from_args,
    wildcards,
)

DEPLOY = ROOT / "deploy"
OPERATOR_NS = "mpi-operator"
WATCHED_NS = "mpi-jobs"  # deploy/overlays/namespaced
# a user overlay as deploy/README.md shows: cluster-wide + gang scheduling + pinned image
GANG = "gang"
PINNED_IMAGE = "registry.example.com/ml/mpi-operator:0.1.0"

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs the kubectl binary")


@functools.cache
def render(overlay: str) -> tuple[Obj, ...]:
    """`kubectl kustomize` of an overlay (or of a user's overlay adding the gang-scheduling
    component)."""
    if overlay == GANG:
        target = Path(os.environ.get("TMPDIR", "/tmp")) / f"mpi-operator-kustomize-{os.getpid()}"
        target.mkdir(exist_ok=True)
        rel = os.path.relpath(DEPLOY, target)
        (target / "kustomization.yaml").write_text(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
            f"resources: [{rel}/overlays/cluster-wide]\ncomponents: "
            f"[{rel}/components/gang-scheduling]\n"
            f"images: [{{name: mpi-operator, newName: {PINNED_IMAGE.partition(':')[0]}, newTag: "
            "0.1.0}]\n"
        )
    else:
        target = DEPLOY / overlay
    try:
        done = subprocess.run(
            ["kubectl", "kustomize", str(target)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        if overlay == GANG:
            shutil.rmtree(target)
    assert done.returncode == 0, done.stderr
    return tuple(load_all(done.stdout))


OVERLAYS = ["overlays/cluster-wide", "overlays/namespaced", GANG]
KINDS = {
    "overlays/cluster-wide": {
        "Namespace": 1,
        "CustomResourceDefinition": 1,
        "ServiceAccount": 1,
        "ClusterRole": 1,
        "ClusterRoleBinding": 1,
        "Role": 1,
        "RoleBinding": 1,
        "Service": 1,
        "Deployment": 1,
    },
    "overlays/namespaced": {
        "Namespace": 1,
        "CustomResourceDefinition": 1,
        "ServiceAccount": 1,
        "Role": 2,
        "RoleBinding": 2,
        "Service": 1,
        "Deployment": 1,
    },
    GANG: {
        "Namespace": 1,
        "CustomResourceDefinition": 1,
        "ServiceAccount": 1,
        "ClusterRole": 2,
        "ClusterRoleBinding": 2,
        "Role": 1,
        "RoleBinding": 1,
        "Service": 1,
        "Deployment": 1,
    },
}


def args_of(objs: tuple[Obj, ...]) -> list[str]:
    args: list[str] = one(objs, "Deployment", "mpi-operator")["spec"]["template"]["spec"][
        "containers"
    ][0]["args"]
    return args


@pytest.mark.parametrize("overlay", OVERLAYS, ids=OVERLAYS)
def test_overlay_renders_the_expected_objects(overlay: str) -> None:
    objs = render(overlay)
    counts: dict[str, int] = {}
    for o in objs:
        counts[o["kind"]] = counts.get(o["kind"], 0) + 1
    assert counts == KINDS[overlay]
    for o in objs:
        if o["kind"] in (
            "Namespace",
            "CustomResourceDefinition",
            "ClusterRole",
            "ClusterRoleBinding",
        ):
            assert "namespace" not in o["metadata"], o["metadata"]
        elif o["metadata"]["name"] != "mpi-operator" or o["kind"] not in ("Role", "RoleBinding"):
            assert o["metadata"]["namespace"] == OPERATOR_NS, (o["kind"], o["metadata"])


def test_crd_is_the_generated_one() -> None:
    """The base references crds/ (no copy): the rendered CRD is the generated file plus our
    labels."""
    import yaml

    generated = yaml.safe_load((ROOT / "crds" / "kubeflow.org_mpijobs.yaml").read_text())
    rendered = dict(one(render("overlays/cluster-wide"), "CustomResourceDefinition"))
    rendered["metadata"] = {k: v for k, v in rendered["metadata"].items() if k != "labels"}
    generated["metadata"] = {k: v for k, v in generated["metadata"].items() if k != "labels"}
    assert rendered == generated


@pytest.mark.parametrize("overlay", OVERLAYS, ids=OVERLAYS)
def test_rbac_has_no_wildcards_and_covers_what_the_code_sends(overlay: str) -> None:
    objs = list(render(overlay))
    assert wildcards(objs) == []
    grants = Grants.of(objs, OPERATOR_NS, "mpi-operator")
    lease = grants.missing(REQUIRED_LEASE, OPERATOR_NS, name="mpi-operator")
    assert lease == []
    assert not grants.allows(
        "coordination.k8s.io", "leases", "get", OPERATOR_NS, name="someone-elses"
    )
    if overlay == "overlays/namespaced":
        assert grants.cluster == []
        assert grants.missing(REQUIRED, WATCHED_NS) == []
        assert not grants.allows("", "pods", "list", "default")
        assert not grants.allows("", "pods", "list", None)
        assert f"--namespace={WATCHED_NS}" in args_of(render(overlay))
    else:
        assert grants.missing(REQUIRED, None) == []
        assert not any(a.startswith("--namespace") for a in args_of(render(overlay)))
    gang = grants.missing(REQUIRED_GANG, None)
    assert (gang == []) == (overlay == GANG)
    assert ("--gang-scheduling=volcano" in args_of(render(overlay))) == (overlay == GANG)


def test_namespaced_role_has_the_cluster_role_rules() -> None:
    """The namespaced overlay's Role repeats base/clusterrole.yaml's rules: they must not drift
    apart."""
    cluster = one(render("overlays/cluster-wide"), "ClusterRole", "mpi-operator")
    role = one(render("overlays/namespaced"), "Role", "mpi-operator")
    assert role["metadata"]["namespace"] == WATCHED_NS
    assert role["rules"] == cluster["rules"]


@pytest.mark.parametrize("overlay", OVERLAYS, ids=OVERLAYS)
def test_deployment_is_hardened_and_probed(overlay: str) -> None:
    deployment = one(render(overlay), "Deployment", "mpi-operator")
    spec = deployment["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {
        "type": "Recreate"
    }  # /readyz is 503 on a standby: see deployment.yaml
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == "mpi-operator"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    assert container["image"] == (PINNED_IMAGE if overlay == GANG else "mpi-operator:0.1.0")
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["ports"] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}]
    assert set(container["resources"]) == {"requests", "limits"}
    assert container["env"] == [
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
    ]
    args = container["args"]
    assert args[:3] == ["--leader-elect", "--metrics-address=0.0.0.0:8080", "--log-format=json"]
    service = one(render(overlay), "Service", "mpi-operator-metrics")
    assert service["spec"]["selector"].items() <= pod_labels(deployment).items()
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"


def pod_labels(deployment: Obj) -> dict[str, str]:
    labels: dict[str, str] = deployment["spec"]["template"]["metadata"]["labels"]
    return labels


@pytest.mark.parametrize("overlay", OVERLAYS, ids=OVERLAYS)
def test_every_object_passes_strict_admission(overlay: str) -> None:
    for obj in render(overlay):
        assert admit_strictly(obj) == [], (obj["kind"], obj["metadata"]["name"])


@pytest.mark.kubectl
@pytest.mark.parametrize("overlay", OVERLAYS, ids=OVERLAYS)
async def test_kubectl_apply_keeps_every_field(
    overlay: str, kubesim: KubeSim, kubectl: Kubectl
) -> None:
    objs = list(render(overlay))
    extra = [WATCHED_NS] if overlay == "overlays/namespaced" else []
    # The documented command (`kubectl apply -k <overlay>`); the gang overlay lives only in the
    # test.
    directory = None if overlay == GANG else DEPLOY / overlay
    live = await apply_and_read_back(kubectl, objs, extra, kustomization=directory)
    for rendered, got in zip(objs, live, strict=True):
        assert not_kept(rendered, got) == [], (rendered["kind"], rendered["metadata"]["name"])


@pytest.mark.parametrize("overlay", ["overlays/cluster-wide", "overlays/namespaced"])
async def test_rbac_covers_every_request_of_a_running_operator(
    overlay: str, kubesim: KubeSim, kubectl: Kubectl
) -> None:
    """Installs the overlay on kubesim, runs the operator with the Deployment's own args and lease
    namespace through a job's life, and checks each request it sent against the rendered RBAC."""
    objs = list(render(overlay))
    namespaced = overlay == "overlays/namespaced"
    await apply_and_read_back(kubectl, objs, [WATCHED_NS] if namespaced else [])
    settings = settings_from_args(kubesim, args_of(render(overlay)), OPERATOR_NS)
    assert settings.leader_elect
    job_ns = WATCHED_NS if namespaced else "default"
    sent = await operator_requests(kubesim, settings, job_ns)
    grants = Grants.of(objs, OPERATOR_NS, "mpi-operator")
    seen = {(r.verb, r.group, r.resource, r.subresource) for r in sent}
    # The run reached every kind of write, so the check below is not vacuous.
    assert {
        ("update", "coordination.k8s.io", "leases", ""),
        ("create", "", "pods", ""),
        ("delete", "", "pods", ""),
        ("patch", "kubeflow.org", "mpijobs", "status"),
        ("update", "batch", "jobs", ""),
        ("create", "", "events", ""),
    } <= seen
    assert grants.denied(sent) == []
