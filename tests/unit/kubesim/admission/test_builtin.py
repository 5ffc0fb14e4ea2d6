"""Admission of built-in kinds: decoding against Kubernetes' schemas, defaults, validation, update
rules."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from kubesim.admission import AdmissionError, AdmissionResult, admit
from kubesim.admission.schema import builtin_schema, schema_version

from ..kubesim_admission_objects import (
    JOB_UID,
    headless_service,
    launcher_job,
    owner_ref,
    script_config_map,
    ssh_secret,
    worker_pod,
)

DNS_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case "
    "alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation "
    "is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def _admit(
    obj: dict[str, Any],
    *,
    old: dict[str, Any] | None = None,
    field_validation: Any = "Warn",
    subresource: str | None = None,
) -> AdmissionResult:
    before = copy.deepcopy(obj)
    result = admit(
        operation="UPDATE" if old is not None else "CREATE",
        api_version=obj["apiVersion"],
        kind=obj["kind"],
        obj=obj,
        old=old,
        schema=None,
        field_validation=field_validation,
        subresource=subresource,
    )
    assert obj == before, "admit must not mutate its input"
    return result


def _refused(obj: dict[str, Any], **kwargs: Any) -> AdmissionError:
    with pytest.raises(AdmissionError) as err:
        _admit(obj, **kwargs)
    return err.value


def test_schemas_come_from_a_bundled_release_at_least_1_32() -> None:
    major_minor = schema_version().split(".")
    assert major_minor[0] == "v1"
    assert int(major_minor[1]) >= 32


@pytest.mark.parametrize(
    "build",
    [worker_pod, launcher_job, headless_service, script_config_map, ssh_secret],
    ids=["worker-pod", "launcher-job", "headless-service", "script-configmap", "ssh-secret"],
)
def test_operator_objects_are_admitted_without_warnings(
    build: Callable[[], dict[str, Any]],
) -> None:
    result = _admit(build())
    assert result.warnings == []
    assert result.obj["metadata"]["name"] == build()["metadata"]["name"]


def test_pod_defaults() -> None:
    pod = _admit(worker_pod()).obj
    spec = pod["spec"]
    assert (spec["dnsPolicy"], spec["schedulerName"], spec["terminationGracePeriodSeconds"]) == (
        "ClusterFirst",
        "default-scheduler",
        30,
    )
    assert spec["restartPolicy"] == "Never", "an explicit value is kept"
    assert spec["securityContext"] == {}
    assert spec["enableServiceLinks"] is True
    assert (spec["serviceAccountName"], spec["serviceAccount"]) == ("default", "default")
    assert spec["priority"] == 0
    assert {t["key"] for t in spec["tolerations"]} == {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    }
    worker = spec["containers"][0]
    assert worker["terminationMessagePath"] == "/dev/termination-log"
    assert worker["terminationMessagePolicy"] == "File"
    assert worker["imagePullPolicy"] == "Always", ":latest pulls always"
    assert worker["ports"][0]["protocol"] == "TCP"
    assert worker["env"][1]["valueFrom"]["fieldRef"]["apiVersion"] == "v1"
    assert worker["readinessProbe"] == {
        "tcpSocket": {"port": 22},
        "periodSeconds": 2,
        "timeoutSeconds": 1,
        "successThreshold": 1,
        "failureThreshold": 3,
    }
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["ssh-auth"]["secret"]["defaultMode"] == 0o600
    assert volumes["mpi-job-config"]["configMap"]["defaultMode"] == 420


def test_pod_requests_default_to_limits_and_quantities_are_canonical() -> None:
    pod = worker_pod()
    pod["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": 2, "cpu": "1000m", "memory": "1.5Gi"}
    }
    resources = _admit(pod).obj["spec"]["containers"][0]["resources"]
    assert resources["limits"] == {"nvidia.com/gpu": "2", "cpu": "1", "memory": "1536Mi"}
    assert resources["requests"] == resources["limits"]


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("horovod/horovod", "Always"),
        ("horovod/horovod:0.28.1", "IfNotPresent"),
        ("reg:5000/h@sha256:ab", "IfNotPresent"),
        ("reg:5000/h", "Always"),
    ],
    ids=["untagged", "tagged", "digest", "registry-port-untagged"],
)
def test_image_pull_policy_default(image: str, policy: str) -> None:
    pod = worker_pod()
    pod["spec"]["containers"][0]["image"] = image
    assert _admit(pod).obj["spec"]["containers"][0]["imagePullPolicy"] == policy


def test_pod_status_gets_qos_class() -> None:
    pod = worker_pod()
    pod["status"] = {"phase": "Pending"}
    assert _admit(pod).obj["status"]["qosClass"] == "Guaranteed"
    pod["spec"]["containers"][0]["resources"] = {}
    assert _admit(pod).obj["status"]["qosClass"] == "BestEffort"
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    assert _admit(pod).obj["status"]["qosClass"] == "Burstable"


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(obj: dict[str, Any]) -> None:
        keys = path.split(".")
        cur: Any = obj
        for k in keys[:-1]:
            cur = cur[int(k)] if isinstance(cur, list) else cur.setdefault(k, {})
        if value is _DELETE:
            del cur[keys[-1]]
        elif isinstance(cur, list):
            cur[int(keys[-1])] = value
        else:
            cur[keys[-1]] = value

    return apply


_DELETE = object()

POD_INVALID: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    (
        "hostname",
        _set("spec.hostname", "A_b"),
        f'Pod "pi-worker-0" is invalid: spec.hostname: Invalid value: "A_b": {DNS_LABEL_MSG}',
    ),
    (
        "subdomain",
        _set("spec.subdomain", "pi.x"),
        'spec.subdomain: Invalid value: "pi.x": a lowercase RFC 1123 label',
    ),
    ("no-containers", _set("spec.containers", []), "spec.containers: Required value"),
    (
        "no-image",
        _set("spec.containers.0.image", _DELETE),
        "spec.containers[0].image: Required value",
    ),
    (
        "no-container-name",
        _set("spec.containers.0.name", _DELETE),
        "spec.containers[0].name: Required value",
    ),
    (
        "container-name",
        _set("spec.containers.0.name", "Worker"),
        'spec.containers[0].name: Invalid value: "Worker"',
    ),
    (
        "duplicate-container",
        lambda p: p["spec"]["containers"].append({"name": "worker", "image": "x"}),
        'spec.containers[1].name: Duplicate value: "worker"',
    ),
    (
        "restart-policy",
        _set("spec.restartPolicy", "Sometimes"),
        'spec.restartPolicy: Unsupported value: "Sometimes": '
        'supported values: "Always", "OnFailure", "Never"',
    ),
    (
        "mount-unknown-volume",
        _set("spec.containers.0.volumeMounts.0.name", "nope"),
        'spec.containers[0].volumeMounts[0].name: Not found: "nope"',
    ),
    (
        "duplicate-mount-path",
        _set("spec.containers.0.volumeMounts.1.mountPath", "/root/.ssh"),
        'spec.containers[0].volumeMounts[1].mountPath: Invalid value: "/root/.ssh": must be unique',
    ),
    (
        "duplicate-volume",
        _set("spec.volumes.1.name", "ssh-auth"),
        'spec.volumes[1].name: Duplicate value: "ssh-auth"',
    ),
    (
        "volume-name",
        _set("spec.volumes.0.name", "SSH"),
        'spec.volumes[0].name: Invalid value: "SSH"',
    ),
    (
        "volume-two-sources",
        _set("spec.volumes.0.emptyDir", {}),
        "spec.volumes[0].secret: Forbidden: may not specify more than 1 volume type",
    ),
    (
        "container-port-range",
        _set("spec.containers.0.ports.0.containerPort", 70000),
        "spec.containers[0].ports[0].containerPort: Invalid value: "
        "70000: must be between 1 and 65535, inclusive",
    ),
    (
        "port-name",
        _set("spec.containers.0.ports.0.name", "SSH_PORT"),
        'spec.containers[0].ports[0].name: Invalid value: "SSH_PORT": '
        "must contain only alpha-numeric characters",
    ),
    (
        "protocol",
        _set("spec.containers.0.ports.0.protocol", "ICMP"),
        "spec.containers[0].ports[0].protocol: Unsupported value: "
        '"ICMP": supported values: "SCTP", "TCP", "UDP"',
    ),
    (
        "env-value-and-value-from",
        _set("spec.containers.0.env.1.value", "x"),
        "spec.containers[0].env[1].valueFrom: Invalid value: "
        '"": may not be specified when `value` is not empty',
    ),
    (
        "field-ref-path",
        _set("spec.containers.0.env.1.valueFrom.fieldRef.fieldPath", "spec.hostname"),
        "spec.containers[0].env[1].valueFrom.fieldRef.fieldPath: "
        'Unsupported value: "spec.hostname"',
    ),
    (
        "gpu-request-without-limit",
        _set("spec.containers.0.resources", {"requests": {"nvidia.com/gpu": 1}}),
        "spec.containers[0].resources.limits: Required value: "
        "Limit must be set for non overcommitable resources",
    ),
    (
        "gpu-request-differs-from-limit",
        _set(
            "spec.containers.0.resources",
            {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}},
        ),
        "spec.containers[0].resources.requests: Invalid value: "
        '"1": must be equal to nvidia.com/gpu limit of 2',
    ),
    (
        "fractional-gpu",
        _set("spec.containers.0.resources", {"limits": {"nvidia.com/gpu": "500m"}}),
        'spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "500m": must be an '
        "integer",
    ),
    (
        "request-above-limit",
        _set("spec.containers.0.resources", {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
        "spec.containers[0].resources.requests: Invalid value: "
        '"2": must be less than or equal to cpu limit of 1',
    ),
    (
        "non-standard-resource",
        _set("spec.containers.0.resources", {"limits": {"gpu": "1"}}),
        "spec.containers[0].resources.limits[gpu]: Invalid value: "
        '"gpu": must be a standard resource for containers',
    ),
    (
        "name",
        _set("metadata.name", "Pi_Worker"),
        'metadata.name: Invalid value: "Pi_Worker": a lowercase RFC 1123 subdomain',
    ),
    (
        "no-name",
        _set("metadata.name", _DELETE),
        "metadata.name: Required value: name or generateName is required",
    ),
    (
        "label-syntax",
        _set("metadata.labels", {"bad key": "v"}),
        'metadata.labels: Invalid value: "bad key": name part must consist of alphanumeric '
        "characters",
    ),
    (
        "owner-uid",
        _set("metadata.ownerReferences", [{**owner_ref(), "uid": ""}]),
        'metadata.ownerReferences.uid: Invalid value: "": must not be empty',
    ),
    (
        "finalizer",
        _set("metadata.finalizers", ["cleanup"]),
        'metadata.finalizers: Invalid value: "cleanup": name is neither '
        "a standard finalizer name nor is it fully qualified",
    ),
    (
        "annotation-size",
        _set("metadata.annotations", {"a": "x" * (256 * 1024)}),
        "metadata.annotations: Too long: may not be more than 262144 bytes",
    ),
    (
        "deadline",
        _set("spec.activeDeadlineSeconds", 0),
        "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive",
    ),
    (
        "toleration-exists-with-value",
        _set("spec.tolerations", [{"key": "a", "operator": "Exists", "value": "x"}]),
        'spec.tolerations[0].operator: Invalid value: "x": value must be empty when `operator` '
        "is 'Exists'",
    ),
    (
        "pull-policy",
        _set("spec.containers.0.imagePullPolicy", "Sometimes"),
        'spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes"',
    ),
]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [c[1:] for c in POD_INVALID if c[2]],
    ids=[c[0] for c in POD_INVALID if c[2]],
)
def test_invalid_pods_are_refused_with_apiserver_messages(
    mutate: Callable[[dict[str, Any]], None], message: str
) -> None:
    pod = worker_pod()
    mutate(pod)
    err = _refused(pod)
    assert err.code == 422
    assert err.reason == "Invalid"
    assert message in err.message, err.message
    assert err.message.startswith('Pod "')


def test_several_causes_are_listed_in_brackets() -> None:
    pod = worker_pod()
    pod["spec"]["hostname"] = "A"
    pod["spec"]["restartPolicy"] = "x"
    err = _refused(pod)
    assert err.message.startswith(
        'Pod "pi-worker-0" is invalid: [spec.restartPolicy: Unsupported value'
    )
    assert ', spec.hostname: Invalid value: "A": a lowercase RFC 1123 label' in err.message
    assert err.message.endswith("')]")
    assert {c.field for c in err.causes} == {"spec.hostname", "spec.restartPolicy"}
    assert {c.reason for c in err.causes} == {"FieldValueInvalid", "FieldValueNotSupported"}


DECODE_ERRORS: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    (
        "containers-not-a-list",
        _set("spec.containers", "worker"),
        'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string into Go '
        "struct field "
        "PodSpec.spec.containers of type []v1.Container",
    ),
    (
        "port-as-string",
        _set("spec.containers.0.ports.0.containerPort", "22"),
        "json: cannot unmarshal string into Go struct field "
        "ContainerPort.spec.containers.ports.containerPort of type int32",
    ),
    (
        "bool-as-string",
        _set("spec.enableServiceLinks", "yes"),
        "cannot unmarshal string into Go struct field PodSpec.spec.enableServiceLinks of type bool",
    ),
    (
        "int32-overflow",
        _set("spec.containers.0.ports.0.containerPort", 2**31),
        "cannot unmarshal number 2147483648 into Go struct field "
        "ContainerPort.spec.containers.ports.containerPort",
    ),
    (
        "bad-quantity",
        _set("spec.containers.0.resources.limits.cpu", "abc"),
        "quantities must match the regular expression "
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    ),
    (
        "label-value-not-a-string",
        _set("metadata.labels", {"training.kubeflow.org/replica-index": 0}),
        "json: cannot unmarshal number 0 into Go struct field ObjectMeta.metadata.labels of type "
        "string",
    ),
    (
        "target-port-float",
        _set("spec.containers.0.readinessProbe.tcpSocket.port", 1.5),
        "into Go value of type intstr.IntOrString",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "message"), [c[1:] for c in DECODE_ERRORS], ids=[c[0] for c in DECODE_ERRORS]
)
def test_wrong_types_are_decode_errors(
    mutate: Callable[[dict[str, Any]], None], message: str
) -> None:
    pod = worker_pod()
    mutate(pod)
    err = _refused(pod)
    assert (err.code, err.reason) == (400, "BadRequest")
    assert message in err.message, err.message


@pytest.mark.parametrize("value", [1, 0.5, "500m", "1Gi", "1e3", "2Ki"], ids=str)
def test_quantities_accept_numbers_and_suffixed_strings(value: Any) -> None:
    pod = worker_pod()
    pod["spec"]["containers"][0]["resources"] = {"requests": {"memory": value}}
    assert _admit(pod).obj["spec"]["containers"][0]["resources"]["requests"]["memory"]


def test_int_or_string_fields_take_both() -> None:
    pod = worker_pod()
    pod["spec"]["containers"][0]["readinessProbe"]["tcpSocket"]["port"] = "ssh"
    assert _admit(pod).obj["spec"]["containers"][0]["readinessProbe"]["tcpSocket"]["port"] == "ssh"


def _typo_pod() -> dict[str, Any]:
    pod = worker_pod()
    pod["spec"]["containers"][0]["resources"] = {"request": {"cpu": "1"}}
    pod["spec"]["nodeSelectr"] = {"a": "b"}
    return pod


def test_unknown_fields_are_dropped_with_apiserver_warnings() -> None:
    result = _admit(_typo_pod())
    assert result.warnings == [
        'unknown field "spec.containers[0].resources.request"',
        'unknown field "spec.nodeSelectr"',
    ]
    assert result.obj["spec"]["containers"][0]["resources"] == {}
    assert "nodeSelectr" not in result.obj["spec"]


def test_unknown_fields_ignored_silently() -> None:
    result = _admit(_typo_pod(), field_validation="Ignore")
    assert result.warnings == []
    assert "nodeSelectr" not in result.obj["spec"]


def test_unknown_fields_refused_when_strict() -> None:
    err = _refused(_typo_pod(), field_validation="Strict")
    assert (err.code, err.reason) == (400, "BadRequest")
    assert err.message == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
        'unknown field "spec.containers[0].resources.request", unknown field "spec.nodeSelectr"'
    )


def test_free_form_fields_keep_unknown_content() -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "things", "kind": "Thing"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": {"type": "object", "default": {"a": 1}}},
                        }
                    },
                }
            ],
        },
    }
    result = _admit(crd)
    assert result.warnings == []
    schema = result.obj["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert schema["properties"]["spec"]["default"] == {"a": 1}
    assert result.obj["spec"]["names"]["singular"] == "thing"
    assert result.obj["spec"]["names"]["listKind"] == "ThingList"
    assert result.obj["spec"]["conversion"] == {"strategy": "None"}


def test_crd_with_non_structural_schema_is_refused() -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "things", "kind": "Thing"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"properties": {"spec": {}}}},
                }
            ],
        },
    }
    err = _refused(crd)
    assert err.message.startswith(
        'CustomResourceDefinition.apiextensions.k8s.io "things.example.com" is invalid: ['
    )
    assert (
        "spec.versions[0].schema.openAPIV3Schema.type: Required value: must not be empty at the "
        "root" in err.message
    )
    assert (
        "openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified "
        "object fields" in err.message
    )


def test_service_defaults_allocate_a_cluster_ip() -> None:
    svc = headless_service()
    svc["metadata"]["name"] = "pi-api"
    svc["spec"].pop("clusterIP")
    svc["spec"]["ports"] = [{"name": "ssh", "port": 22}]
    spec = _admit(svc).obj["spec"]
    assert spec["clusterIP"].startswith("10.96.")
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert spec["ports"] == [{"name": "ssh", "port": 22, "protocol": "TCP", "targetPort": 22}]
    assert (spec["type"], spec["sessionAffinity"]) == ("ClusterIP", "None")
    again = _admit(svc).obj["spec"]["clusterIP"]
    assert again != spec["clusterIP"], "each service gets its own address"


def test_headless_service_stays_headless_without_ports() -> None:
    spec = _admit(headless_service()).obj["spec"]
    assert (spec["clusterIP"], spec["clusterIPs"]) == ("None", ["None"])
    assert "ports" not in spec


SERVICE_INVALID: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    (
        "name-dns1035",
        _set("metadata.name", "1pi"),
        'metadata.name: Invalid value: "1pi": a DNS-1035 label must consist of',
    ),
    ("ports-required", _set("spec.clusterIP", _DELETE), "spec.ports: Required value"),
    (
        "port-name-required-when-several",
        _set("spec.ports", [{"port": 22}, {"port": 80}]),
        "spec.ports[0].name: Required value",
    ),
    (
        "port-range",
        _set("spec.ports", [{"port": 0}]),
        "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
    ),
    ("type", _set("spec.type", "Headless"), 'spec.type: Unsupported value: "Headless"'),
    (
        "cluster-ip",
        _set("spec.clusterIP", "10.96.0.999"),
        'spec.clusterIPs[0]: Invalid value: "10.96.0.999": must be a valid IP address',
    ),
]


@pytest.mark.parametrize(
    ("mutate", "message"), [c[1:] for c in SERVICE_INVALID], ids=[c[0] for c in SERVICE_INVALID]
)
def test_invalid_services(mutate: Callable[[dict[str, Any]], None], message: str) -> None:
    svc = headless_service()
    mutate(svc)
    assert message in _refused(svc).message


def test_job_defaults_and_generated_selector() -> None:
    job = _admit(launcher_job()).obj
    spec = job["spec"]
    assert (spec["parallelism"], spec["completions"], spec["backoffLimit"]) == (1, 1, 6)
    assert (spec["completionMode"], spec["suspend"], spec["podReplacementPolicy"]) == (
        "NonIndexed",
        False,
        "TerminatingOrFailed",
    )
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": JOB_UID}}
    labels = spec["template"]["metadata"]["labels"]
    assert labels["batch.kubernetes.io/controller-uid"] == labels["controller-uid"] == JOB_UID
    assert labels["batch.kubernetes.io/job-name"] == labels["job-name"] == "pi-launcher"
    assert spec["template"]["spec"]["dnsPolicy"] == "ClusterFirst"
    assert "manualSelector" not in spec
    assert "tolerations" not in spec["template"]["spec"], (
        "admission plugins default pods, not templates"
    )


def test_job_parallelism_only_leaves_completions_unset() -> None:
    job = launcher_job()
    job["spec"]["parallelism"] = 3
    assert "completions" not in _admit(job).obj["spec"]


JOB_INVALID: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    (
        "restart-policy-default-always",
        _set("spec.template.spec.restartPolicy", _DELETE),
        'Job.batch "pi-launcher" is invalid: spec.template.spec.restartPolicy: Unsupported value: '
        '"Always": '
        'supported values: "OnFailure", "Never"',
    ),
    (
        "negative-backoff",
        _set("spec.backoffLimit", -1),
        "spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0",
    ),
    (
        "selector-mismatch",
        _set("spec.selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": "other"}}),
        "`selector` does not match template `labels`",
    ),
    ("missing-uid", _set("metadata.uid", _DELETE), "metadata.uid: Required value"),
    (
        "long-name-breaks-label",
        _set("metadata.name", "x" * 64),
        'spec.template.labels: Invalid value: "'
        + "x" * 64
        + '": must be no more than 63 characters',
    ),
    (
        "manual-selector-required",
        _set("spec.manualSelector", True),
        "spec.selector: Required value",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "message"), [c[1:] for c in JOB_INVALID], ids=[c[0] for c in JOB_INVALID]
)
def test_invalid_jobs(mutate: Callable[[dict[str, Any]], None], message: str) -> None:
    job = launcher_job()
    mutate(job)
    assert message in _refused(job).message


CONFIG_INVALID: list[tuple[str, Callable[[], dict[str, Any]], str, int]] = [
    (
        "configmap-key",
        lambda: {**script_config_map(), "data": {"discover hosts.sh": "x"}},
        'data[discover hosts.sh]: Invalid value: "discover hosts.sh": '
        "a valid config key must consist of alphanumeric",
        422,
    ),
    (
        "configmap-key-dotdot",
        lambda: {**script_config_map(), "data": {"..x": "y"}},
        "must not start with '..'",
        422,
    ),
    (
        "configmap-binary-duplicate",
        lambda: {**script_config_map(), "binaryData": {"hostfile": "eA=="}},
        'binaryData[hostfile]: Invalid value: "hostfile": duplicate of key present in data',
        422,
    ),
    (
        "secret-base64",
        lambda: {**ssh_secret(), "data": {"ssh-privatekey": "not base64!"}},
        "illegal base64 data at input byte 3",
        400,
    ),
    (
        "ssh-auth-needs-private-key",
        lambda: {**ssh_secret(), "data": {"ssh-publickey": "eA=="}},
        "data[ssh-privatekey]: Required value",
        422,
    ),
]


@pytest.mark.parametrize(
    ("build", "message", "code"),
    [c[1:] for c in CONFIG_INVALID],
    ids=[c[0] for c in CONFIG_INVALID],
)
def test_invalid_configmaps_and_secrets(
    build: Callable[[], dict[str, Any]], message: str, code: int
) -> None:
    err = _refused(build())
    assert message in err.message, err.message
    assert err.code == code


def test_secret_string_data_is_merged_into_data() -> None:
    secret = ssh_secret()
    secret["stringData"] = {"ssh-privatekey": "KEY", "extra": "e"}
    obj = _admit(secret).obj
    assert "stringData" not in obj
    assert obj["data"]["ssh-privatekey"] == "S0VZ"
    assert obj["data"]["extra"] == "ZQ=="
    assert (
        _admit({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}).obj["type"]
        == "Opaque"
    )


def _stored(obj: dict[str, Any]) -> dict[str, Any]:
    return _admit(obj).obj


POD_UPDATES: list[tuple[str, Callable[[dict[str, Any]], None], bool]] = [
    ("image", _set("spec.containers.0.image", "horovod:0.28"), True),
    (
        "labels-annotations",
        lambda p: p["metadata"]["annotations"].update({"kubesim/touch": "1"}),
        True,
    ),
    ("deadline-added", _set("spec.activeDeadlineSeconds", 100), True),
    (
        "toleration-added",
        lambda p: p["spec"]["tolerations"].append({"key": "gpu", "operator": "Exists"}),
        True,
    ),
    ("toleration-removed", lambda p: p["spec"]["tolerations"].pop(), False),
    ("env-changed", _set("spec.containers.0.env.0.value", "launcher"), False),
    ("resources-changed", _set("spec.containers.0.resources.limits.cpu", "2"), False),
    ("grace-changed", _set("spec.terminationGracePeriodSeconds", 5), False),
    (
        "volume-added",
        lambda p: p["spec"]["volumes"].append({"name": "scratch", "emptyDir": {}}),
        False,
    ),
]


@pytest.mark.parametrize(
    ("mutate", "allowed"), [c[1:] for c in POD_UPDATES], ids=[c[0] for c in POD_UPDATES]
)
def test_pod_update_rules(mutate: Callable[[dict[str, Any]], None], allowed: bool) -> None:
    old = _stored(worker_pod())
    new = copy.deepcopy(old)
    mutate(new)
    if allowed:
        _admit(new, old=old)
        return
    err = _refused(new, old=old)
    assert err.message.startswith(
        'Pod "pi-worker-0" is invalid: spec: Forbidden: pod updates may not change fields other '
        "than "
        "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
        "`spec.tolerations` (only additions to existing "
        "tolerations),`spec.terminationGracePeriodSeconds` "
        "(allow it to be set to 1 if it was previously negative)\n"
    )


def test_pod_deadline_may_not_grow() -> None:
    pod = worker_pod()
    pod["spec"]["activeDeadlineSeconds"] = 100
    old = _stored(pod)
    new = copy.deepcopy(old)
    new["spec"]["activeDeadlineSeconds"] = 200
    assert "must be less than or equal to previous value" in _refused(new, old=old).message


def test_pod_status_subresource_checks_only_shape() -> None:
    old = _stored(worker_pod())
    new = copy.deepcopy(old)
    new["spec"]["containers"][0][
        "env"
    ] = []  # the store restores spec for /status; shape is all we check
    new["status"] = {
        "phase": "Running",
        "podIP": "10.244.0.7",
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    assert _admit(new, old=old, subresource="status").obj["status"]["phase"] == "Running"
    new["status"]["conditions"] = "Ready"
    assert _refused(new, old=old, subresource="status").code == 400


JOB_UPDATES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("parallelism", _set("spec.parallelism", 3), ""),
    (
        "completions",
        _set("spec.completions", 3),
        "spec.completions: Invalid value: 3: field is immutable",
    ),
    (
        "selector",
        _set("spec.selector", {"matchLabels": {"a": "b"}}),
        "spec.selector: Invalid value:",
    ),
    (
        "template",
        _set("spec.template.spec.containers.0.image", "x:1"),
        'spec.template: Invalid value: {"metadata":{"labels":{',
    ),
    ("suspend", _set("spec.suspend", True), ""),
]


@pytest.mark.parametrize(
    ("mutate", "message"), [c[1:] for c in JOB_UPDATES], ids=[c[0] for c in JOB_UPDATES]
)
def test_job_update_rules(mutate: Callable[[dict[str, Any]], None], message: str) -> None:
    old = _stored(launcher_job())
    new = copy.deepcopy(old)
    mutate(new)
    if not message:
        _admit(new, old=old)
    else:
        assert message in _refused(new, old=old).message


def test_suspended_job_that_never_ran_may_change_scheduling_directives() -> None:
    job = launcher_job()
    job["spec"]["suspend"] = True
    old = _stored(job)
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["nodeSelector"] = {"gpu": "a100"}
    _admit(new, old=old)
    old["status"] = {"startTime": "2026-01-01T00:00:00Z"}
    assert "field is immutable" in _refused(new, old=old).message


@pytest.mark.parametrize("build", [script_config_map, ssh_secret], ids=["configmap", "secret"])
def test_immutable_data(build: Callable[[], dict[str, Any]]) -> None:
    obj = build()
    obj["immutable"] = True
    old = _stored(obj)
    new = copy.deepcopy(old)
    new["data"]["hostfile"] = "eA=="
    assert (
        "data: Forbidden: field is immutable when `immutable` is set"
        in _refused(new, old=old).message
    )
    mutable = copy.deepcopy(old)
    mutable.pop("immutable")
    old.pop("immutable")
    _admit({**mutable, "data": {**mutable["data"], "hostfile": "eA=="}}, old=old)


def test_service_cluster_ip_is_kept_and_immutable() -> None:
    svc = headless_service()
    svc["metadata"]["name"] = "api"
    svc["spec"] = {"ports": [{"port": 80}], "selector": {"a": "b"}}
    old = _stored(svc)
    ip = old["spec"]["clusterIP"]
    put = copy.deepcopy(svc)  # a PUT that omits the allocated address keeps it
    assert _admit(put, old=old).obj["spec"]["clusterIP"] == ip
    changed = copy.deepcopy(old)
    changed["spec"]["clusterIP"] = changed["spec"]["clusterIPs"][0] = "10.96.200.200"
    assert (
        'spec.clusterIPs[0]: Invalid value: ["10.96.200.200"]: may not change once set'
        in _refused(changed, old=old).message
    )


RBAC: list[tuple[str, dict[str, Any], str]] = [
    (
        "role-ok",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "pi-launcher"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
        },
        "",
    ),
    (
        "role-no-verbs",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "r"},
            "rules": [{"apiGroups": [""], "resources": ["pods"]}],
        },
        "rules[0].verbs: Required value: verbs must contain at least one value",
    ),
    (
        "role-non-resource",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "r"},
            "rules": [{"nonResourceURLs": ["/x"], "verbs": ["get"]}],
        },
        "namespaced rules cannot apply to non-resource URLs",
    ),
    (
        "binding-ok",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "pi-launcher"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "pi-launcher",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "pi-launcher"}],
        },
        "",
    ),
    (
        "binding-bad-kind",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "b"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Pod", "name": "x"},
        },
        'RoleBinding.rbac.authorization.k8s.io "b" is invalid: roleRef.kind: '
        'Unsupported value: "Pod": supported values: "Role", "ClusterRole"',
    ),
    (
        "lease-duration",
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "mpi-operator"},
            "spec": {"leaseDurationSeconds": 0},
        },
        "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
    ),
    (
        "event-namespace-mismatch",
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "pi.1", "namespace": "team-a"},
            "involvedObject": {"kind": "MPIJob", "name": "pi", "namespace": "team-b"},
        },
        'involvedObject.namespace: Invalid value: "team-b": does not match event.namespace',
    ),
    (
        "events-k8s-io-required",
        {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": "pi.2", "namespace": "team-a"},
            "regarding": {"kind": "MPIJob", "name": "pi", "namespace": "team-a"},
            "type": "Normal",
        },
        "eventTime: Required value",
    ),
    (
        "namespace-name",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Team.A"}},
        'metadata.name: Invalid value: "Team.A": a lowercase RFC 1123 label',
    ),
    (
        "service-account-ok",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "pi-launcher"}},
        "",
    ),
]


@pytest.mark.parametrize(("obj", "message"), [c[1:] for c in RBAC], ids=[c[0] for c in RBAC])
def test_other_kinds(obj: dict[str, Any], message: str) -> None:
    if not message:
        _admit(obj)
    else:
        assert message in _refused(obj).message


def test_role_binding_role_ref_is_immutable() -> None:
    binding = RBAC[3][1]
    old = _stored(binding)
    new = copy.deepcopy(old)
    new["roleRef"]["name"] = "other"
    assert (
        'roleRef: Invalid value: {"APIGroup":"rbac.authorization.k8s.io",'
        '"Kind":"Role","Name":"other"}: cannot change roleRef' in _refused(new, old=old).message
    )


def test_a_kinds_schema_is_compiled_once_and_admission_repeats_exactly() -> None:
    # What keeps admitting many pods cheap: the schema is compiled on first use and then reused, and
    # admission does nothing per call that could make two admissions of one object differ.
    pod = worker_pod()
    first = _admit(pod)
    compiled = builtin_schema("v1", "Pod")
    assert compiled is not None
    for _ in range(3):
        again = _admit(pod)
        assert (again.obj, again.warnings) == (first.obj, first.warnings)
        assert builtin_schema("v1", "Pod") is compiled


def _pdb(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "b", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, **spec},
    }


PERCENT_MSG = (
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or "
    "'93%', "
    "regex used for validation is '[0-9]+%')"
)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"minAvailable": 2}, ""),
        ({"maxUnavailable": "25%"}, ""),
        (
            {"minAvailable": 1, "maxUnavailable": 1},
            "minAvailable and maxUnavailable cannot be both set",
        ),
        (
            {"minAvailable": -1},
            "spec.minAvailable: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            {"maxUnavailable": "120%"},
            'spec.maxUnavailable: Invalid value: "120%": must not be greater than 100%',
        ),
        ({"minAvailable": "half"}, f'spec.minAvailable: Invalid value: "half": {PERCENT_MSG}'),
        (
            {"minAvailable": 1, "unhealthyPodEvictionPolicy": "Sometimes"},
            'spec.unhealthyPodEvictionPolicy: Unsupported value: "Sometimes"',
        ),
        (
            {"minAvailable": 1, "selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
            "spec.selector.matchExpressions[0].values: Required value",
        ),
    ],
)
def test_pod_disruption_budget_validation(spec: dict[str, Any], message: str) -> None:
    if not message:
        _admit(_pdb(**spec))
    else:
        assert message in _refused(_pdb(**spec)).message


def _priority_class(name: str, value: int, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **fields,
    }


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (_priority_class("high", 1000000000), ""),
        (
            _priority_class("high", 1000000001),
            "value: Forbidden: maximum allowed value of a user defined priority is 1000000000",
        ),
        (_priority_class("system-node-critical", 2000001000), ""),
        (
            _priority_class("system-node-critical", 5),
            "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for "
            "system "
            "use only. error: value of system-node-critical PriorityClass must be 2000001000",
        ),
        (
            _priority_class("system-mine", 5),
            "error: system-mine is not a known system priority class",
        ),
    ],
)
def test_priority_class_validation(obj: dict[str, Any], message: str) -> None:
    if not message:
        assert _admit(obj).obj["preemptionPolicy"] == "PreemptLowerPriority"
    else:
        assert message in _refused(obj).message


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"value": 2}, "value: Forbidden: may not be changed in an update."),
        (
            {"preemptionPolicy": "Never"},
            'preemptionPolicy: Invalid value: "Never": field is immutable',
        ),
        ({"description": "now described"}, ""),
    ],
)
def test_priority_class_value_and_policy_are_immutable(
    change: dict[str, Any], message: str
) -> None:
    old = _stored(_priority_class("high", 1))
    new = {**copy.deepcopy(old), **change}
    if not message:
        _admit(new, old=old)
    else:
        assert message in _refused(new, old=old).message
