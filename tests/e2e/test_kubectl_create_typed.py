"""kubectl's typed generators against kubesim: `kubectl create namespace|configmap|secret|...` send
protobuf, which kubesim decodes (`kubesim.protobuf`); what lands must be exactly what the same
command writes as JSON (`--dry-run=client -o json`), so a wrong field number cannot pass
unnoticed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubesim.app import KubeSim
from kubesim.testing import Kubectl

BINARY = bytes(range(256))

# (what, kubectl create args, resource for `kubectl get`)
CASES: list[tuple[str, list[str], str]] = [
    ("namespace", ["namespace", "team-a"], "namespace/team-a"),
    (
        "configmap",
        [
            "configmap",
            "settings",
            "--from-literal=a=1",
            "--from-literal=b=two words",
            "--from-file=blob",
        ],
        "configmap/settings",
    ),
    (
        "secret",
        ["secret", "generic", "token", "--from-literal=token=s3cr3t", "--type=Opaque"],
        "secret/token",
    ),
    (
        "docker-registry",
        [
            "secret",
            "docker-registry",
            "pull",
            "--docker-server=r.io",
            "--docker-username=u",
            "--docker-password=p",
        ],
        "secret/pull",
    ),
    ("serviceaccount", ["serviceaccount", "trainer"], "serviceaccount/trainer"),
    (
        "role",
        ["role", "pod-reader", "--verb=get,list", "--resource=pods", "--resource-name=a"],
        "role/pod-reader",
    ),
    (
        "rolebinding",
        [
            "rolebinding",
            "read",
            "--role=pod-reader",
            "--serviceaccount=default:trainer",
            "--user=alice",
        ],
        "rolebinding/read",
    ),
    (
        "clusterrole",
        [
            "clusterrole",
            "mpijob-viewer",
            "--verb=get",
            "--resource=pods,services",
            "--non-resource-url=/x",
        ],
        "clusterrole/mpijob-viewer",
    ),
    (
        "clusterrolebinding",
        ["clusterrolebinding", "view", "--clusterrole=mpijob-viewer", "--group=ml"],
        "clusterrolebinding/view",
    ),
    (
        "priorityclass",
        [
            "priorityclass",
            "training",
            "--value=1000",
            "--description=MPI jobs",
            "--preemption-policy=Never",
        ],
        "priorityclass/training",
    ),
    ("priorityclass-zero", ["priorityclass", "zero", "--value=0"], "priorityclass/zero"),
]

SERVER_OWNED = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")


def _comparable(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without what the server adds (its metadata fields, defaults, status)."""
    meta = {k: v for k, v in obj["metadata"].items() if k not in SERVER_OWNED}
    meta.pop("namespace", None)
    rest = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
    if obj["kind"] == "Namespace":
        rest.pop("spec", None)  # the server adds spec.finalizers: [kubernetes]
        meta["labels"] = {
            k: v for k, v in meta.get("labels", {}).items() if k != "kubernetes.io/metadata.name"
        }
        if not meta["labels"]:
            del meta["labels"]
    return {"metadata": meta, **rest}


@pytest.mark.parametrize(("what", "args", "ref"), CASES, ids=[c[0] for c in CASES])
async def test_kubectl_create_lands_exactly_what_it_meant(
    kubesim: KubeSim, kubectl: Kubectl, tmp_path: Path, what: str, args: list[str], ref: str
) -> None:
    (tmp_path / "blob").write_bytes(BINARY)
    args = [f"--from-file=blob={tmp_path / 'blob'}" if a == "--from-file=blob" else a for a in args]
    if what == "rolebinding":
        rc, _, err = await kubectl("create", "role", "pod-reader", "--verb=get", "--resource=pods")
        assert rc == 0, err
    rc, intended, err = await kubectl("create", *args, "--dry-run=client", "-o", "json")
    assert rc == 0, err
    rc, out, err = await kubectl("create", *args)
    assert rc == 0, f"kubectl create {what}: {err}"
    assert "created" in out, out
    rc, stored, err = await kubectl("get", ref, "-o", "json")
    assert rc == 0, err
    assert _comparable(json.loads(stored)) == _comparable(json.loads(intended))


async def test_a_kind_kubesim_cannot_read_as_protobuf_is_refused_with_a_way_out(
    kubectl: Kubectl,
) -> None:
    rc, _, err = await kubectl("create", "deployment", "web", "--image=nginx")
    assert rc != 0
    assert "not apps/v1 Deployment" in err, err
    assert "kubectl apply -f" in err, err
    rc, out, _ = await kubectl("get", "deployments", "-o", "name")
    assert rc == 0
    assert out == "", "nothing half-made is left behind"
