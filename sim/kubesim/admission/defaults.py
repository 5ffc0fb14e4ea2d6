"""Defaulting of built-in kinds: what `SetDefaults_*`, the create strategies and the default
admission plugins (ServiceAccount, DefaultTolerationSeconds, Priority) add to an object an operator
then reads back.

Functions work in place on the freshly decoded copy `admit` owns. Not modelled: the service-account
token volume (`kube-api-access-*`), node ports, dual-stack families.
"""

from __future__ import annotations

import base64
import ipaddress
import itertools
from typing import Any

from kubesim.admission.quantity import parse_quantity

_LEGACY_JOB_NAME = "job-name"
_LEGACY_CONTROLLER_UID = "controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"

_DEFAULT_MODE = 0o644
_cluster_ips = itertools.count(10)  # 10.96.0.10 onwards; .1 is the kubernetes service upstream


def allocate_cluster_ip() -> str:
    n = next(_cluster_ips)
    return str(ipaddress.IPv4Address("10.96.0.0") + n)


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key in ("initContainers", "containers", "ephemeralContainers"):
        out.extend(c for c in spec.get(key) or [] if isinstance(c, dict))
    return out


def _pull_policy(image: str) -> str:
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _probe(probe: Any) -> None:
    if not isinstance(probe, dict):
        return
    for key, value in (
        ("timeoutSeconds", 1),
        ("periodSeconds", 10),
        ("successThreshold", 1),
        ("failureThreshold", 3),
    ):
        probe.setdefault(key, value)
    http = probe.get("httpGet")
    if isinstance(http, dict):
        http.setdefault("path", "/")
        http.setdefault("scheme", "HTTP")


def default_container(c: dict[str, Any]) -> None:
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    if isinstance(c.get("image"), str) and c["image"]:
        c.setdefault("imagePullPolicy", _pull_policy(c["image"]))
    c.setdefault("resources", {})
    for port in c.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
    for env in c.get("env") or []:
        field_ref = (env.get("valueFrom") or {}).get("fieldRef") if isinstance(env, dict) else None
        if isinstance(field_ref, dict):
            field_ref.setdefault("apiVersion", "v1")
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        _probe(c.get(key))


_VOLUME_SOURCES_WITH_MODE = ("configMap", "secret", "downwardAPI", "projected")


def default_pod_spec(spec: dict[str, Any]) -> None:
    """SetDefaults_PodSpec and everything below it; applies to pods and pod templates alike."""
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    if spec.get("serviceAccountName"):
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
    elif spec.get("serviceAccount"):
        spec["serviceAccountName"] = spec["serviceAccount"]
    for c in _containers(spec):
        default_container(c)
    for volume in spec.get("volumes") or []:
        if not isinstance(volume, dict):
            continue
        if set(volume) <= {"name"}:
            volume["emptyDir"] = {}
        for source in _VOLUME_SOURCES_WITH_MODE:
            if isinstance(volume.get(source), dict):
                volume[source].setdefault("defaultMode", _DEFAULT_MODE)
        host_path = volume.get("hostPath")
        if isinstance(host_path, dict):
            host_path.setdefault("type", "")


_NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
DEFAULT_TOLERATION_SECONDS = 300


def default_tolerations(tolerations: list[Any]) -> None:
    """The DefaultTolerationSeconds plugin, in place: a NoExecute toleration of 300 s for the
    not-ready and unreachable taints, each added unless one already tolerates that key with effect
    NoExecute (an empty key or effect counts;
    `plugin/pkg/admission/defaulttolerationseconds/admission.go`)."""
    for key in _NOT_READY_TAINTS:
        if not any(
            isinstance(t, dict)
            and t.get("key") in (key, "", None)
            and t.get("effect") in ("NoExecute", "", None)
            for t in tolerations
        ):
            tolerations.append(
                {
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
                }
            )


def default_pod(pod: dict[str, Any], *, create: bool) -> None:
    spec = pod.setdefault("spec", {})
    default_pod_spec(spec)
    spec.setdefault("enableServiceLinks", True)
    for c in _containers(spec):
        resources = c.get("resources") or {}
        limits = resources.get("limits")
        if isinstance(limits, dict) and limits:
            requests = resources.setdefault("requests", {})
            for name, value in limits.items():
                requests.setdefault(name, value)
    if not create:
        return
    # The ServiceAccount and DefaultTolerationSeconds admission plugins; Priority (which needs the
    # cluster's PriorityClasses) has run before (`kubesim.admission.priority`), or falls back here.
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    default_tolerations(spec.setdefault("tolerations", []))
    status = pod.get("status")
    if isinstance(status, dict):
        status.setdefault("qosClass", qos_class(spec))


def qos_class(spec: dict[str, Any]) -> str:
    """GetPodQOS: Guaranteed when every container's cpu and memory limits equal its requests."""
    requests: dict[str, list[Any]] = {}
    limits: dict[str, list[Any]] = {}
    guaranteed = True
    containers = [c for key in ("initContainers", "containers") for c in spec.get(key) or []]
    for c in containers:
        res = c.get("resources") or {}
        req = {k: v for k, v in (res.get("requests") or {}).items() if k in ("cpu", "memory")}
        lim = {k: v for k, v in (res.get("limits") or {}).items() if k in ("cpu", "memory")}
        for k, v in req.items():
            if parse_quantity(v).value != 0:
                requests.setdefault(k, []).append(v)
        for k, v in lim.items():
            if parse_quantity(v).value != 0:
                limits.setdefault(k, []).append(v)
        if set(lim) != {"cpu", "memory"}:
            guaranteed = False
        for k, v in req.items():
            if k not in lim or parse_quantity(v).value != parse_quantity(lim[k]).value:
                guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def default_service(svc: dict[str, Any], old: dict[str, Any] | None) -> None:
    spec = svc.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            if port.get("targetPort") in (None, 0, "") and isinstance(port.get("port"), int):
                port["targetPort"] = port["port"]
    if spec["type"] == "ExternalName":
        return
    old_spec = (old or {}).get("spec") or {}
    if not spec.get("clusterIP") and not spec.get("clusterIPs"):
        if old_spec.get("clusterIP"):  # an update that omits allocated values keeps them
            spec["clusterIP"] = old_spec["clusterIP"]
            spec["clusterIPs"] = list(old_spec.get("clusterIPs") or [old_spec["clusterIP"]])
        else:
            spec["clusterIP"] = allocate_cluster_ip()
    if spec.get("clusterIP") and not spec.get("clusterIPs"):
        spec["clusterIPs"] = [spec["clusterIP"]]
    elif spec.get("clusterIPs") and not spec.get("clusterIP"):
        spec["clusterIP"] = spec["clusterIPs"][0]
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    status = svc.get("status")
    if isinstance(status, dict):
        status.setdefault("loadBalancer", {})


def default_job(job: dict[str, Any], *, create: bool) -> None:
    spec = job.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault(
        "backoffLimit", 2**31 - 1 if spec.get("backoffLimitPerIndex") is not None else 6
    )
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault(
        "podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
    )
    template = spec.setdefault("template", {})
    meta = job.setdefault("metadata", {})
    template_labels = (template.get("metadata") or {}).get("labels")
    if template_labels and not meta.get("labels"):
        meta["labels"] = dict(template_labels)
    if isinstance(template.get("spec"), dict):
        default_pod_spec(template["spec"])
    if create and not spec.get("manualSelector"):
        _generate_job_selector(job)


def _generate_job_selector(job: dict[str, Any]) -> None:
    """The Job strategy's generateSelector: labels that tie the job's pods to its uid."""
    meta = job["metadata"]
    name, uid = str(meta.get("name") or ""), str(meta.get("uid") or "")
    template = job["spec"]["template"]
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    for key in (_LEGACY_JOB_NAME, JOB_NAME_LABEL):
        labels.setdefault(key, name)
    for key in (_LEGACY_CONTROLLER_UID, CONTROLLER_UID_LABEL):
        labels.setdefault(key, uid)
    selector = job["spec"].get("selector")
    if not isinstance(selector, dict):
        selector = job["spec"]["selector"] = {}
    selector.setdefault("matchLabels", {}).setdefault(CONTROLLER_UID_LABEL, uid)


def default_secret(secret: dict[str, Any]) -> None:
    secret.setdefault("type", "Opaque")
    string_data = secret.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = secret.setdefault("data", {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()


def default_role_binding(binding: dict[str, Any]) -> None:
    for subject in binding.get("subjects") or []:
        if (
            isinstance(subject, dict)
            and not subject.get("apiGroup")
            and subject.get("kind") in ("User", "Group")
        ):
            subject["apiGroup"] = "rbac.authorization.k8s.io"


def default_crd(crd: dict[str, Any]) -> None:
    spec = crd.setdefault("spec", {})
    names = spec.setdefault("names", {})
    if names.get("kind"):
        names.setdefault("singular", str(names["kind"]).lower())
        names.setdefault("listKind", f"{names['kind']}List")
    spec.setdefault("conversion", {"strategy": "None"})


def apply_defaults(
    kind: str, obj: dict[str, Any], old: dict[str, Any] | None, *, create: bool
) -> None:
    if kind == "Pod":
        default_pod(obj, create=create)
    elif kind == "Service":
        default_service(obj, old)
    elif kind == "Job":
        default_job(obj, create=create)
    elif kind == "Secret":
        default_secret(obj)
    elif kind in ("RoleBinding", "ClusterRoleBinding"):
        default_role_binding(obj)
    elif kind == "CustomResourceDefinition":
        default_crd(obj)
    elif kind == "PriorityClass":
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
