"""Patch application by Content-Type: merge, JSON, strategic merge and simplified server-side
apply."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.patch import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    PatchError,
    apply_patch,
)

from .kubesim_admission_objects import headless_service, owner_ref, worker_pod


def _patch(
    current: dict[str, Any],
    patch: Any,
    content_type: str,
    *,
    kind: str = "Pod",
    builtin: bool = True,
) -> Any:
    before = copy.deepcopy(current)
    body = patch if isinstance(patch, bytes) else json.dumps(patch).encode()
    result = apply_patch(current, body, content_type, kind=kind, builtin=builtin)
    assert current == before, "apply_patch must not mutate its input"
    return result


MPIJOB: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "metadata": {"name": "pi", "namespace": "team-a", "labels": {"a": "1", "b": "2"}},
    "spec": {
        "slotsPerWorker": 1,
        "mpiReplicaSpecs": {"Worker": {"replicas": 2}},
        "tags": ["x", "y"],
    },
}

MERGE_CASES: list[tuple[str, Any, dict[str, Any]]] = [
    ("scale", {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 5}}}}, {"replicas": 5}),
    ("null-deletes", {"metadata": {"labels": {"a": None}}}, {"labels": {"b": "2"}}),
    ("list-replaced", {"spec": {"tags": ["z"]}}, {"tags": ["z"]}),
    ("null-deletes-missing-is-noop", {"spec": {"nope": None}}, {"replicas": 2}),
    (
        "new-nested-object",
        {"status": {"conditions": [{"type": "Created"}]}},
        {"conditions": [{"type": "Created"}]},
    ),
]


@pytest.mark.parametrize(
    ("patch", "check"), [c[1:] for c in MERGE_CASES], ids=[c[0] for c in MERGE_CASES]
)
def test_merge_patch(patch: dict[str, Any], check: dict[str, Any]) -> None:
    out = _patch(MPIJOB, patch, MERGE_PATCH, kind="MPIJob", builtin=False)
    flat = {
        "replicas": out["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"],
        "labels": out["metadata"]["labels"],
        "tags": out["spec"]["tags"],
        "conditions": out.get("status", {}).get("conditions"),
    }
    for key, value in check.items():
        assert flat[key] == value


def test_merge_patch_content_type_parameters_are_ignored() -> None:
    out = _patch(
        MPIJOB,
        {"spec": {"slotsPerWorker": 4}},
        "application/merge-patch+json; charset=utf-8",
        builtin=False,
    )
    assert out["spec"]["slotsPerWorker"] == 4


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text("abc", max_size=2), inner, max_size=3)
    ),
    max_leaves=12,
)
_doc = st.dictionaries(st.text("abcd", max_size=2), _json, max_size=4)


def _diff(old: Any, new: Any) -> Any:
    """The merge patch that turns `old` into `new` (what client-go's CreateMergePatch computes)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch = {k: None for k in old if k not in new}
    for k, v in new.items():
        if k not in old:
            patch[k] = v
        elif old[k] != v:
            patch[k] = _diff(old[k], v)
    return patch


def _no_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    return value


@given(old=_doc, new=_doc)
def test_merge_patch_of_a_diff_round_trips(old: dict[str, Any], new: dict[str, Any]) -> None:
    old, new = _no_nulls(old), _no_nulls(new)  # merge patch cannot express a stored null in a map
    assert _patch(old, _diff(old, new), MERGE_PATCH, builtin=False) == new


MERGE_ERRORS = [
    ("invalid-json", b"{nope", 400, "error decoding patch"),
    ("null-body", b"null", 400, "Invalid JSON Patch"),
    ("array-body", b"[1]", 400, "cannot unmarshal array"),
]


@pytest.mark.parametrize(
    ("body", "code", "message"), [c[1:] for c in MERGE_ERRORS], ids=[c[0] for c in MERGE_ERRORS]
)
def test_merge_patch_errors(body: bytes, code: int, message: str) -> None:
    with pytest.raises(PatchError) as err:
        _patch(MPIJOB, body, MERGE_PATCH, builtin=False)
    assert err.value.code == code
    assert message in err.value.message


def test_json_patch_ops() -> None:
    ops = [
        {"op": "test", "path": "/spec/mpiReplicaSpecs/Worker/replicas", "value": 2},
        {"op": "replace", "path": "/spec/mpiReplicaSpecs/Worker/replicas", "value": 3},
        {"op": "add", "path": "/metadata/labels/c", "value": "3"},
        {"op": "remove", "path": "/spec/tags/0"},
        {"op": "add", "path": "/spec/tags/-", "value": "w"},
        {"op": "copy", "from": "/metadata/name", "path": "/metadata/labels/name"},
        {"op": "move", "from": "/spec/slotsPerWorker", "path": "/spec/slots"},
    ]
    out = _patch(MPIJOB, ops, JSON_PATCH, builtin=False)
    assert out["spec"] == {
        "mpiReplicaSpecs": {"Worker": {"replicas": 3}},
        "tags": ["y", "w"],
        "slots": 1,
    }
    assert out["metadata"]["labels"] == {"a": "1", "b": "2", "c": "3", "name": "pi"}


JSON_PATCH_ERRORS: list[tuple[str, Any, int, str]] = [
    (
        "object-body",
        {"op": "add"},
        400,
        "cannot unmarshal object into Go value of type jsonpatch.Patch",
    ),
    ("invalid-json", b"[{", 400, "error decoding patch"),
    ("failed-test", [{"op": "test", "path": "/spec/slotsPerWorker", "value": 9}], 422, "op 0"),
    (
        "missing-path",
        [
            {"op": "add", "path": "/metadata/labels/x", "value": "1"},
            {"op": "replace", "path": "/spec/nope/x", "value": 1},
        ],
        422,
        'op 1 {"op": "replace"',
    ),
    ("unknown-op", [{"op": "frobnicate", "path": "/spec"}], 422, "the server rejected our request"),
    ("not-an-op", [1], 422, "operation 0 is not an object"),
    ("remove-root-to-non-object", [{"op": "replace", "path": "", "value": 3}], 422, "non-object"),
]


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [c[1:] for c in JSON_PATCH_ERRORS],
    ids=[c[0] for c in JSON_PATCH_ERRORS],
)
def test_json_patch_errors(body: Any, code: int, message: str) -> None:
    with pytest.raises(PatchError) as err:
        _patch(MPIJOB, body, JSON_PATCH, builtin=False)
    assert err.value.code == code
    assert message in err.value.message


def test_strategic_merge_on_custom_resource_is_415() -> None:
    with pytest.raises(PatchError) as err:
        _patch(MPIJOB, {"spec": {}}, STRATEGIC_MERGE_PATCH, kind="MPIJob", builtin=False)
    assert err.value.code == 415
    assert err.value.message == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    )


def test_unknown_content_type_is_415_and_lists_strategic_for_builtins() -> None:
    with pytest.raises(PatchError) as err:
        _patch(worker_pod(), {}, "application/json", kind="Pod")
    assert err.value.code == 415
    assert err.value.message.endswith(
        "application/apply-patch+yaml, application/strategic-merge-patch+json"
    )


def _container(pod: dict[str, Any], name: str = "worker") -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in pod["spec"]["containers"] if c["name"] == name)
    return found


def test_strategic_merge_containers_by_name_env_by_name_mounts_by_path() -> None:
    patch = {
        "spec": {
            "containers": [
                {
                    "name": "worker",
                    "image": "horovod:0.28",
                    "env": [
                        {"name": "K_MPI_JOB_ROLE", "value": "w"},
                        {"name": "NEW", "value": "1"},
                    ],
                    "volumeMounts": [
                        {"name": "ssh-auth", "mountPath": "/root/.ssh", "readOnly": True}
                    ],
                },
                {"name": "sidecar", "image": "busybox"},
            ]
        }
    }
    out = _patch(worker_pod(), patch, STRATEGIC_MERGE_PATCH)
    worker = _container(out)
    assert worker["image"] == "horovod:0.28"
    assert worker["command"] == ["/usr/sbin/sshd", "-De"], "untouched fields survive"
    # upstream's normalizeElementOrder: patched items in patch order, server-only ones slotted by
    # old position
    assert [e["name"] for e in worker["env"]] == ["K_MPI_JOB_ROLE", "NEW", "POD_NAME"]
    assert worker["env"][0]["value"] == "w"
    assert worker["volumeMounts"][0] == {
        "name": "ssh-auth",
        "mountPath": "/root/.ssh",
        "readOnly": True,
    }
    assert len(worker["volumeMounts"]) == 2
    assert [c["name"] for c in out["spec"]["containers"]] == ["worker", "sidecar"]


SM_CASES: list[tuple[str, dict[str, Any], Any]] = [
    (
        "delete-directive-in-list",
        {"spec": {"volumes": [{"name": "ssh-auth", "$patch": "delete"}]}},
        lambda o: [v["name"] for v in o["spec"]["volumes"]] == ["mpi-job-config"],
    ),
    (
        "replace-directive-in-list",
        {"spec": {"volumes": [{"name": "scratch", "emptyDir": {}}, {"$patch": "replace"}]}},
        lambda o: o["spec"]["volumes"] == [{"name": "scratch", "emptyDir": {}}],
    ),
    (
        "replace-directive-on-map",
        {"metadata": {"labels": {"only": "this", "$patch": "replace"}}},
        lambda o: o["metadata"]["labels"] == {"only": "this"},
    ),
    (
        "delete-directive-on-map",
        {"metadata": {"annotations": {"$patch": "delete"}}},
        lambda o: "annotations" not in o["metadata"],
    ),
    (
        "null-deletes-in-map",
        {"metadata": {"labels": {"mpi_role_type": None}}},
        lambda o: "mpi_role_type" not in o["metadata"]["labels"],
    ),
    (
        "finalizers-merge-as-set",
        {"metadata": {"finalizers": ["b.example.com/x", "a.example.com/y"]}},
        lambda o: o["metadata"]["finalizers"] == ["b.example.com/x", "a.example.com/y"],
    ),
    (
        "delete-from-primitive-list",
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.example.com/y"]}},
        lambda o: o["metadata"]["finalizers"] == [],
    ),
    (
        "owner-references-by-uid",
        {
            "metadata": {
                "ownerReferences": [{"uid": owner_ref()["uid"], "blockOwnerDeletion": False}]
            }
        },
        lambda o: (
            len(o["metadata"]["ownerReferences"]) == 1
            and o["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] is False
        ),
    ),
    (
        "conditions-by-type",
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        lambda o: (
            o["status"]["conditions"]
            == [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]
        ),
    ),
    (
        "tolerations-replace",
        {"spec": {"tolerations": [{"key": "b", "operator": "Exists"}]}},
        lambda o: o["spec"]["tolerations"] == [{"key": "b", "operator": "Exists"}],
    ),
    (
        "command-list-replaced",
        {"spec": {"containers": [{"name": "worker", "command": ["sleep"]}]}},
        lambda o: o["spec"]["containers"][0]["command"] == ["sleep"],
    ),
    (
        "container-ports-by-container-port",
        {
            "spec": {
                "containers": [
                    {
                        "name": "worker",
                        "ports": [
                            {"containerPort": 22, "protocol": "TCP"},
                            {"containerPort": 8080},
                        ],
                    }
                ]
            }
        },
        lambda o: (
            o["spec"]["containers"][0]["ports"]
            == [{"name": "ssh", "containerPort": 22, "protocol": "TCP"}, {"containerPort": 8080}]
        ),
    ),
    (
        "set-element-order",
        {
            "spec": {
                "$setElementOrder/volumes": [{"name": "mpi-job-config"}, {"name": "ssh-auth"}],
                "volumes": [{"name": "ssh-auth", "secret": {"secretName": "other"}}],
            }
        },
        lambda o: (
            [v["name"] for v in o["spec"]["volumes"]] == ["mpi-job-config", "ssh-auth"]
            and o["spec"]["volumes"][1]["secret"]["secretName"] == "other"
        ),
    ),
    (
        "retain-keys",
        {
            "spec": {
                "volumes": [
                    {"name": "ssh-auth", "emptyDir": {}, "$retainKeys": ["name", "emptyDir"]}
                ]
            }
        },
        lambda o: o["spec"]["volumes"][0] == {"name": "ssh-auth", "emptyDir": {}},
    ),
    (
        "image-pull-secrets-by-name",
        {"spec": {"imagePullSecrets": [{"name": "regcred"}]}},
        lambda o: o["spec"]["imagePullSecrets"] == [{"name": "regcred"}],
    ),
]


@pytest.mark.parametrize(
    ("patch", "check"), [c[1:] for c in SM_CASES], ids=[c[0] for c in SM_CASES]
)
def test_strategic_merge_directives(patch: dict[str, Any], check: Any) -> None:
    pod = worker_pod()
    pod["metadata"]["finalizers"] = ["a.example.com/y"]
    pod["spec"]["tolerations"] = [{"key": "a", "operator": "Exists"}]
    pod["status"] = {
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "False"},
        ]
    }
    assert check(_patch(pod, patch, STRATEGIC_MERGE_PATCH))


def test_strategic_merge_keeps_server_only_items_in_place() -> None:
    pod = worker_pod()
    pod["metadata"]["finalizers"] = ["a.io/1", "b.io/2", "c.io/3"]
    out = _patch(pod, {"metadata": {"finalizers": ["c.io/3", "d.io/4"]}}, STRATEGIC_MERGE_PATCH)
    assert out["metadata"]["finalizers"] == ["a.io/1", "b.io/2", "c.io/3", "d.io/4"]
    order = {"$setElementOrder/finalizers": ["c.io/3", "a.io/1", "b.io/2"]}
    out = _patch(pod, {"metadata": order}, STRATEGIC_MERGE_PATCH)
    assert out["metadata"]["finalizers"] == ["c.io/3", "a.io/1", "b.io/2"]


def test_strategic_merge_service_ports_by_port() -> None:
    svc = headless_service()
    svc["spec"]["ports"] = [{"name": "ssh", "port": 22, "targetPort": 22}]
    out = _patch(
        svc,
        {"spec": {"ports": [{"port": 22, "name": "sshd"}, {"port": 80, "name": "http"}]}},
        STRATEGIC_MERGE_PATCH,
        kind="Service",
    )
    assert out["spec"]["ports"] == [
        {"name": "sshd", "port": 22, "targetPort": 22},
        {"port": 80, "name": "http"},
    ]


def test_strategic_merge_missing_merge_key_is_422() -> None:
    with pytest.raises(PatchError) as err:
        _patch(worker_pod(), {"spec": {"containers": [{"image": "x"}]}}, STRATEGIC_MERGE_PATCH)
    assert err.value.code == 422
    assert "does not contain declared merge key: name" in err.value.message


def test_apply_patch_creates_when_current_is_empty() -> None:
    body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: pi-config\n"
    body += b"data:\n  hostfile: |\n    a slots=1\n"
    out = _patch({}, body, APPLY_PATCH, kind="ConfigMap")
    assert out == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "pi-config"},
        "data": {"hostfile": "a slots=1\n"},
    }


def test_apply_patch_merges_maps_and_keyed_lists_of_builtins() -> None:
    body = b"""
apiVersion: v1
kind: Pod
metadata:
  name: pi-worker-0
  labels: {extra: "yes"}
spec:
  containers:
  - name: worker
    image: horovod:0.28
    ports:
    - containerPort: 22
      protocol: TCP
      hostPort: 2222
"""
    out = _patch(worker_pod(), body, APPLY_PATCH)
    assert out["metadata"]["labels"]["extra"] == "yes"
    assert out["metadata"]["labels"]["mpi_job_name"] == "pi"
    worker = _container(out)
    assert worker["image"] == "horovod:0.28"
    assert worker["env"][0]["name"] == "K_MPI_JOB_ROLE", "fields not in the apply body are kept"
    assert worker["ports"] == [
        {"name": "ssh", "containerPort": 22, "hostPort": 2222, "protocol": "TCP"}
    ]


def test_apply_patch_replaces_lists_of_custom_resources_and_accepts_json() -> None:
    out = _patch(
        MPIJOB,
        {"spec": {"tags": ["only"], "mpiReplicaSpecs": {"Worker": {"replicas": 7}}}},
        APPLY_PATCH,
        kind="MPIJob",
        builtin=False,
    )
    assert out["spec"]["tags"] == ["only"]
    assert out["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 7
    assert out["spec"]["slotsPerWorker"] == 1


@pytest.mark.parametrize(
    ("body", "message"),
    [(b"- a\n- b\n", "must be an object"), (b"a: [\n", "error decoding YAML")],
    ids=["list", "bad-yaml"],
)
def test_apply_patch_errors(body: bytes, message: str) -> None:
    with pytest.raises(PatchError) as err:
        _patch(MPIJOB, body, APPLY_PATCH, builtin=False)
    assert err.value.code == 400
    assert message in err.value.message
