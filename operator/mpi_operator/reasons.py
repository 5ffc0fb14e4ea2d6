"""Event and condition reasons and their message formats, word for word as upstream's controller
writes them (and the few of this operator's own that belong to the same sync, marked as such).

Users and tools match on these strings (`kubectl get events --field-selector reason=...`,
dashboards, the upstream tests), so they are constants here and nowhere else. Messages go through
`truncate_message`, upstream's 1024-byte cap for event messages (the last three bytes become `...`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

EventType = Literal["Normal", "Warning"]
NORMAL: Final = "Normal"
WARNING: Final = "Warning"


@dataclass(frozen=True)
class Event:
    """An event to record on the MPIJob (source component `mpi-job-controller`)."""

    type: EventType
    reason: str
    message: str


# Condition and event reasons (upstream mpi_job_controller_status.go / mpi_job_controller.go).
MPIJOB_CREATED: Final = "MPIJobCreated"
MPIJOB_RUNNING: Final = "MPIJobRunning"
MPIJOB_SUCCEEDED: Final = "MPIJobSucceeded"
MPIJOB_FAILED: Final = "MPIJobFailed"
MPIJOB_SUSPENDED: Final = "MPIJobSuspended"
MPIJOB_RESUMED: Final = "MPIJobResumed"
MPIJOB_EVICTED: Final = "MPIJobEvicted"
VALIDATION_ERROR: Final = "ValidationError"
ERR_RESOURCE_EXISTS: Final = "ErrResourceExists"
SET_POD_TEMPLATE_RESTART_POLICY: Final = "SetPodTemplateRestartPolicy"
# This operator's own (upstream never probes workers, so it has nothing to warn about).
SSH_PORT_UNKNOWN: Final = "SSHPortUnknown"
# This operator's own: workers the scheduler cannot place (the WorkersPending condition's reason).
WORKERS_PENDING: Final = "WorkersPending"
UNSCHEDULABLE: Final = "Unschedulable"
"""kube-scheduler's `PodScheduled=False` reason for a pod that fits on no node."""

JOB_REASON_BACKOFF_LIMIT_EXCEEDED: Final = "BackoffLimitExceeded"
"""The batch/v1 Job's Failed reason after which upstream appends the last failed launcher pod's
reason."""

EVICTED_POD_REASON: Final = "Evicted"
"""`pod.status.reason` of a pod the kubelet evicted."""

MESSAGE_LIMIT: Final = 1024
_ELLIPSIS: Final = "..."


def truncate_message(message: str, limit: int = MESSAGE_LIMIT) -> str:
    """Upstream `truncateMessage`: at most 1024 bytes of UTF-8 (Go's `len`), cut to 1021 plus `...`
    when longer; never in the middle of a character, which upstream's byte slice can do."""
    encoded = message.encode()
    if len(encoded) <= limit:
        return message
    return encoded[: limit - len(_ELLIPSIS)].decode(errors="ignore") + _ELLIPSIS


def created_message(namespace: str, name: str) -> str:
    return f"MPIJob {namespace}/{name} is created."


def running_message(namespace: str, name: str) -> str:
    """The Running=True condition's message (with a period)."""
    return f"MPIJob {namespace}/{name} is running."


def running_event_message(namespace: str, name: str) -> str:
    """The MPIJobRunning event's message: upstream writes it without the period."""
    return f"MPIJob {namespace}/{name} is running"


def running_never_set_message(namespace: str, name: str) -> str:
    """Running=False on a job that finished before any sync saw it running (upstream #787)."""
    return f"MPIJob {namespace}/{name} is finished but Running condition was never set."


def suspended_running_message(namespace: str, name: str) -> str:
    """The Running=False condition's message while the job is suspended."""
    return f"MPIJob {namespace}/{name} is suspended."


SUSPENDED_MESSAGE: Final = "MPIJob suspended"
"""The Suspended=True condition's and the MPIJobSuspended event's message."""
RESUMED_MESSAGE: Final = "MPIJob resumed"
"""The Suspended=False condition's and the MPIJobResumed event's message."""


def succeeded_message(namespace: str, name: str) -> str:
    return f"MPIJob {namespace}/{name} successfully completed."


def failed_message(namespace: str, name: str) -> str:
    """The Failed message when the launcher Job's Failed condition carries none."""
    return f"MPIJob {namespace}/{name} has failed"


def evicted_message(evicted: int, workers: int) -> str:
    return f"{evicted}/{workers} workers are evicted"


def workers_pending_message(pending: int, workers: int, pod: str, scheduler: str) -> str:
    """The WorkersPending condition's and event's message: the count and one worker's
    `PodScheduled` message, in the scheduler's own words."""
    return truncate_message(f"{pending}/{workers} workers are Pending; {pod}: {scheduler}")


def validation_error_message(errors: str) -> str:
    return truncate_message(f"Found validation errors: {errors}")


def resource_exists_message(name: str, kind: str) -> str:
    """Upstream `MessageResourceExists`, Go's `%q` quoting included (we always know the kind)."""
    return (
        f"Resource {_go_quote(name)} of Kind {_go_quote(kind)} already exists and is not "
        "managed by MPIJob"
    )


def worker_create_failed_message(error: str) -> str:
    return truncate_message(f"worker pod created failed: {error}")


def launcher_create_failed_message(error: str) -> str:
    return truncate_message(f"launcher pod created failed: {error}")


RESTART_POLICY_OVERRIDDEN_MESSAGE: Final = (
    "Restart policy in pod template overridden by restart policy in replica spec"
)

SSH_PORT_UNKNOWN_MESSAGE: Final = (
    "the Worker's containers[0] has no readinessProbe, no container port named ssh, and no sshd "
    "port in its "
    "command (-p, -o Port): it gets no readiness probe, so Ready does not mean that sshd answers, "
    "and the "
    "launcher relies on ssh's connection retries. Declare the port sshd listens on, e.g. "
    "ports: [{name: ssh, containerPort: 2222}], or set a readinessProbe"
)


def _go_quote(value: str) -> str:
    # Kubernetes names hold no characters Go's %q would escape beyond these two.
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
