"""Pure parts of the batch/v1 Job controller (Kubernetes 1.32 semantics): pod classification,
failure accounting, conditions and how many pods a Job wants. No I/O, no clock.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"

JOB_CONTROLLER = "kubernetes.io/job-controller"
DEFAULT_BACKOFF_LIMIT = 6
MAX_BACKOFF_SECONDS = 600.0

BACKOFF_LIMIT_EXCEEDED = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
DEADLINE_EXCEEDED = ("DeadlineExceeded", "Job was active longer than specified deadline")
COMPLETIONS_REACHED = ("CompletionsReached", "Reached expected number of succeeded pods")

Finished = Literal["Complete", "Failed"]


@dataclass(frozen=True)
class JobSpec:
    """The fields of `spec` the controller acts on, with the apiserver's defaults applied."""

    parallelism: int
    completions: int | None
    backoff_limit: int
    active_deadline_seconds: float | None
    suspend: bool
    ttl_seconds_after_finished: float | None
    only_replace_failed: bool
    restart_policy: str
    managed_here: bool = True
    """False when `spec.managedBy` hands the Job to another controller (1.32: then this one skips
    it)."""

    @classmethod
    def of(cls, job: Mapping[str, Any]) -> JobSpec:
        spec = job.get("spec") or {}
        parallelism = spec.get("parallelism")
        completions = spec.get("completions")
        if parallelism is None and completions is None:
            completions = 1
        policy = spec.get("podReplacementPolicy")
        if policy is None:
            policy = "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
        ads, ttl = spec.get("activeDeadlineSeconds"), spec.get("ttlSecondsAfterFinished")
        return cls(
            parallelism=int(1 if parallelism is None else parallelism),
            completions=None if completions is None else int(completions),
            backoff_limit=int(spec.get("backoffLimit", DEFAULT_BACKOFF_LIMIT)),
            active_deadline_seconds=None if ads is None else float(ads),
            suspend=bool(spec.get("suspend", False)),
            ttl_seconds_after_finished=None if ttl is None else float(ttl),
            only_replace_failed=policy == "Failed",
            restart_policy=str(
                ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy", "Never")
            ),
            managed_here=spec.get("managedBy") in (None, JOB_CONTROLLER),
        )


def phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase", "Pending"))


def is_terminal(pod: Mapping[str, Any]) -> bool:
    return phase(pod) in ("Succeeded", "Failed")


def is_deleting(pod: Mapping[str, Any]) -> bool:
    return (pod.get("metadata") or {}).get("deletionTimestamp") is not None


def is_active(pod: Mapping[str, Any]) -> bool:
    return not is_terminal(pod) and not is_deleting(pod)


def is_terminating(pod: Mapping[str, Any]) -> bool:
    return is_deleting(pod) and not is_terminal(pod)


def is_ready(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def has_tracking_finalizer(pod: Mapping[str, Any]) -> bool:
    return TRACKING_FINALIZER in ((pod.get("metadata") or {}).get("finalizers") or [])


def is_pod_failed(pod: Mapping[str, Any], spec: JobSpec) -> bool:
    """isPodFailed: a deleted pod counts as failed unless only fully failed pods are replaced."""
    if phase(pod) == "Failed":
        return True
    if spec.only_replace_failed:
        return False
    return is_deleting(pod) and phase(pod) != "Succeeded"


def can_remove_finalizer(pod: Mapping[str, Any], consider_failed: bool, finishing: bool) -> bool:
    return is_deleting(pod) or finishing or phase(pod) == "Succeeded" or consider_failed


def restarts_exceed_backoff(spec: JobSpec, pods: Iterable[Mapping[str, Any]]) -> bool:
    """pastBackoffLimitOnFailure: with OnFailure, container restarts of live pods count as
    failures."""
    if spec.restart_policy != "OnFailure":
        return False
    restarts = 0
    for pod in pods:
        if phase(pod) in ("Running", "Pending"):
            status = pod.get("status") or {}
            for cs in [
                *(status.get("initContainerStatuses") or []),
                *(status.get("containerStatuses") or []),
            ]:
                restarts += int(cs.get("restartCount", 0))
    if spec.backoff_limit == 0:
        return restarts > 0
    return restarts >= spec.backoff_limit


def wanted_active(spec: JobSpec, succeeded: int, active: int) -> int:
    if spec.completions is None:
        # Work-queue Jobs: once one pod succeeded, no new pods start.
        return active if succeeded > 0 else spec.parallelism
    return max(0, min(spec.parallelism, spec.completions - succeeded))


def success_criteria_met(spec: JobSpec, succeeded: int, active: int) -> bool:
    if spec.completions is None:
        return succeeded > 0 and active == 0
    return succeeded >= spec.completions


def backoff_seconds(base: float, failures_since_success: int) -> float:
    """The delay before a replacement pod after n consecutive failures (10 s, 20 s, ... 10 min)."""
    if failures_since_success <= 0:
        return 0.0
    return min(base * 2.0 ** (failures_since_success - 1), MAX_BACKOFF_SECONDS)


def condition(status: Mapping[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in status.get("conditions") or []:
        if c.get("type") == ctype and c.get("status") == "True":
            return dict(c)
    return None


def finished(status: Mapping[str, Any]) -> Finished | None:
    if condition(status, "Complete"):
        return "Complete"
    if condition(status, "Failed"):
        return "Failed"
    return None


def set_condition(
    conditions: Sequence[Mapping[str, Any]],
    ctype: str,
    value: bool,
    reason: str,
    message: str,
    now: str,
) -> list[dict[str, Any]]:
    """Upserts a condition; lastTransitionTime moves only when its status flips (like the
    controller)."""
    status = "True" if value else "False"
    out: list[dict[str, Any]] = []
    found = False
    for c in conditions:
        if c.get("type") != ctype:
            out.append(dict(c))
            continue
        found = True
        if c.get("status") == status and c.get("reason") == reason and c.get("message") == message:
            out.append(dict(c))
        else:
            transition = c.get("lastTransitionTime") if c.get("status") == status else now
            out.append(_condition(ctype, status, reason, message, now, transition))
    if not found:
        out.append(_condition(ctype, status, reason, message, now, now))
    return out


def _condition(
    ctype: str, status: str, reason: str, message: str, probe: str, transition: Any
) -> dict[str, Any]:
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": probe,
        "lastTransitionTime": transition,
    }


def pod_labels(job: Mapping[str, Any]) -> dict[str, str]:
    """Template labels plus the ones the apiserver defaults into a Job's template."""
    meta = job.get("metadata") or {}
    template = (job.get("spec") or {}).get("template") or {}
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    uid, name = str(meta.get("uid", "")), str(meta.get("name", ""))
    labels.setdefault(CONTROLLER_UID_LABEL, uid)
    labels.setdefault(JOB_NAME_LABEL, name)
    labels.setdefault(LEGACY_CONTROLLER_UID_LABEL, uid)
    labels.setdefault(LEGACY_JOB_NAME_LABEL, name)
    return labels


def new_pod(job: Mapping[str, Any]) -> dict[str, Any]:
    """The pod the controller creates from the Job's template (the apiserver completes
    generateName)."""
    meta = job.get("metadata") or {}
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    tmeta = template.get("metadata") or {}
    pod_meta: dict[str, Any] = {
        "generateName": f"{meta.get('name', '')}-",
        "namespace": meta.get("namespace"),
        "labels": pod_labels(job),
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": meta.get("name"),
                "uid": meta.get("uid"),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
        "finalizers": [TRACKING_FINALIZER],
    }
    if tmeta.get("annotations"):
        pod_meta["annotations"] = dict(tmeta["annotations"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod_meta,
        "spec": template.get("spec") or {},
    }


def controller_uid(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(job name, job uid) of the pod's controlling Job, if a Job controls it."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if (
            ref.get("controller")
            and ref.get("kind") == "Job"
            and ref.get("apiVersion") == "batch/v1"
        ):
            return str(ref.get("name", "")), str(ref.get("uid", ""))
    return None
