"""The canonical `kubeflow.org/v2beta1` MPIJob as frozen pydantic models (types.go + elasticPolicy).

These models are the single source of the CRD's OpenAPI schema (`api/crd.py` renders
`MPIJob.model_json_schema(by_alias=True)`), so every field carries a description, enums are
`Literal`s, bounds are `Field(ge=...)` and static defaults are real defaults. Defaults that depend
on other fields (slots from GPUs) live in `defaults.py`; rules that span fields live in
`validation.py`.

Pod templates stay plain dicts: the operator never models core/v1, and builders must
`copy.deepcopy()` a template before extending it, because `frozen=True` does not freeze nested
dicts.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from mpi_operator.api import constants as c


def _collapse_nullable(schema: dict[str, Any]) -> None:
    """Turn pydantic's `anyOf: [X, {type: null}]` + `default: null` into plain X.

    A structural CRD schema cannot hold `type: null`; "absent" is how Kubernetes says "unset".
    """
    branches = schema.get("anyOf")
    if isinstance(branches, list) and len(branches) == 2 and {"type": "null"} in branches:
        other = next(b for b in branches if b != {"type": "null"})
        del schema["anyOf"]
        for key, value in other.items():
            schema.setdefault(key, value)
    if "default" in schema and schema["default"] is None:
        del schema["default"]


def optional_field(
    description: str,
    *,
    free_form: bool = False,
    embedded: bool = False,
    maximum: int | None = None,
    **kwargs: Any,
) -> Any:
    """An optional field without a default: absent in the manifest, absent in the schema's defaults.

    `free_form` marks an object whose content the API server keeps as is (`embedded`: a whole object
    with apiVersion/kind/metadata, such as a pod template). `maximum` bounds an integer in the CRD
    only (validation reports it with the limit in force).
    """
    preserve = _free_form(embedded) if free_form else None

    def update(schema: dict[str, Any]) -> None:
        _collapse_nullable(schema)
        if preserve is not None:
            preserve(schema)
        if maximum is not None:
            schema["maximum"] = maximum

    return Field(None, description=description, json_schema_extra=update, **kwargs)


def _free_form(embedded: bool) -> Any:
    extra: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if embedded:
        extra["x-kubernetes-embedded-resource"] = True

    def update(schema: dict[str, Any]) -> None:
        # `additionalProperties: true` and preserve-unknown-fields say the same; CRDs only accept
        # the latter.
        schema.pop("additionalProperties", None)
        schema.update(extra)

    return update


def _object_only(schema: dict[str, Any]) -> None:
    schema.pop("additionalProperties", None)  # the API server owns metadata's schema


# The pattern controller-gen emits for resource.Quantity.
_QUANTITY = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def _quantity(value: Any) -> int | float | str:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise PydanticCustomError(
            "quantity_type", "must be an integer or a quantity string like '500m' or '4Gi'"
        )
    if isinstance(value, str) and not _QUANTITY.match(value):
        raise PydanticCustomError("quantity_format", "must be a quantity like '500m', '4Gi' or '2'")
    return value


Quantity = Annotated[
    int | float | str,
    PlainValidator(_quantity),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": _QUANTITY.pattern,
            "x-kubernetes-int-or-string": True,
        }
    ),
]
"""A Kubernetes resource quantity (`resource.Quantity`): an integer or a string such as `4Gi`."""

# RFC 3339 times (metav1.Time). Lax so that both strings and YAML-parsed datetimes are accepted.
Time = Annotated[datetime, Field(strict=False)]


class ApiModel(BaseModel):
    """Base of every MPIJob API model: camelCase aliases, frozen, strict types, unknown fields
    ignored."""

    # strict: `replicas: "2"` is a type error on a real API server, so it is one here too.
    # extra="ignore": the API server prunes unknown fields; normalize() reports them as warnings.
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        strict=True,
        extra="ignore",
    )


class SchedulingPolicy(ApiModel):
    """Gang-scheduling knobs (used with --gang-scheduling) and the job's PriorityClass."""

    min_available: int | None = optional_field(
        "Minimum number of pods the gang scheduler must place together (PodGroup minMember); "
        "default: the workers (elastic: minReplicas), + 1 when launcherCreationPolicy is "
        "AtStartup; with WaitForWorkersReady at most the workers (the launcher comes later); "
        f"at most {c.MAX_GANG_MEMBERS}.",
        ge=0,
        maximum=c.MAX_GANG_MEMBERS,
    )
    queue: str | None = optional_field("Volcano queue to submit the PodGroup to (volcano only).")
    min_resources: dict[str, Quantity] | None = optional_field(
        "Minimum resources (name -> quantity) the PodGroup needs; default: the sum over all "
        "replicas."
    )
    priority_class: str | None = optional_field(
        "PriorityClass of the launcher and worker pods whose template names none, and of the "
        "Volcano PodGroup (default there: the launcher's, else the workers')."
    )
    schedule_timeout_seconds: int | None = optional_field(
        "Seconds the scheduler-plugins coscheduler waits for the whole gang (scheduler-plugins "
        "only); "
        "default 0.",
        ge=0,
        le=c.INT32_MAX,
    )


class RunPolicy(ApiModel):
    """Run-time policies of the job: cleanup, deadlines, retries, suspension and ownership."""

    clean_pod_policy: c.CleanPodPolicy = Field(
        c.DEFAULT_CLEAN_POD_POLICY,
        description="Which pods to delete when the job finishes: All, Running or None (default "
        "None).",
    )
    ttl_seconds_after_finished: int | None = optional_field(
        "Seconds after the job finishes before it is deleted (copied to the launcher Job); unset "
        "keeps it.",
        ge=0,
        le=c.INT32_MAX,
    )
    active_deadline_seconds: int | None = optional_field(
        "Seconds the launcher Job may run before it is terminated and the job fails; unset means "
        "no limit.",
        ge=0,
        le=c.INT64_MAX,
    )
    backoff_limit: int | None = optional_field(
        "Launcher retries before the job is marked failed (copied to the launcher Job, which "
        "defaults to 6).",
        ge=0,
        le=c.INT32_MAX,
    )
    scheduling_policy: SchedulingPolicy | None = optional_field(
        "Gang-scheduling settings (PodGroup); used only with --gang-scheduling."
    )
    suspend: bool = Field(
        False,
        description="Suspends the job: workers are deleted and the launcher Job suspended (default "
        "false).",
    )
    managed_by: c.ManagedBy | None = optional_field(
        "Controller that reconciles this job: kubeflow.org/mpi-operator (this operator; the "
        "default when "
        "unset) or kueue.x-k8s.io/multikueue (this operator then leaves it alone).",
    )


_TEMPLATE_DESCRIPTION = (
    "Pod template (core/v1 PodTemplateSpec) of this replica type; "
    "containers[0] is the MPI container."
)


class ReplicaSpec(ApiModel):
    """Replica count, pod template and restart policy of one replica type."""

    replicas: int = Field(description="Number of pods of this replica type.")
    template: dict[str, Any] = Field(
        default_factory=dict,
        description=_TEMPLATE_DESCRIPTION,
        json_schema_extra=_free_form(embedded=True),
    )
    restart_policy: c.RestartPolicy = Field(
        description="Restart policy of the pods: Never or OnFailure."
    )


class LauncherReplicaSpec(ReplicaSpec):
    """The launcher: exactly one pod, run by a batch/v1 Job, that starts mpirun / horovodrun."""

    # The bounds are for the CRD only: validation says "must be 1" (upstream's words) for any other
    # value.
    replicas: int = Field(
        c.DEFAULT_LAUNCHER_REPLICAS,
        description="Number of launcher pods; must be 1 (default 1).",
        json_schema_extra={"minimum": 1, "maximum": 1},
    )
    restart_policy: c.RestartPolicy = Field(
        c.DEFAULT_LAUNCHER_RESTART_POLICY,
        description="Restart policy of the launcher pod: Never or OnFailure (default OnFailure).",
    )


def _not_negative_workers(value: int) -> int:
    # 0 passes here (the pure core builds launcher-only jobs) and fails the ">= 1" rule in
    # validation; a negative count gets that same message, as the CRD's minimum 1 would give.
    if value < 0:
        raise PydanticCustomError("greater_than_equal", "must be >= 1", {"ge": 1})
    return value


class WorkerReplicaSpec(ReplicaSpec):
    """The workers: plain pods `<job>-worker-<i>` running an SSH server the launcher reaches."""

    # The CRD's minimum is 1, so admission gives one error for `replicas: -1`. The upper bound is
    # for the CRD only, like the launcher's: validation reports it with the limit in force (the
    # operator's --max-workers-per-job may be lower) and whose limit it is, and api/elastic.py
    # builds ElasticPolicy from horovodrun's flags, whatever numbers they hold.
    replicas: Annotated[int, AfterValidator(_not_negative_workers)] = Field(
        c.DEFAULT_WORKER_REPLICAS,
        description="Number of worker pods; must be >= 1, and within elasticPolicy bounds when "
        "set; at most "
        f"{c.MAX_WORKER_REPLICAS} (the operator's --max-workers-per-job may lower that). "
        "Scaled through the scale subresource.",
        json_schema_extra={"minimum": 1, "maximum": c.MAX_WORKER_REPLICAS},
    )
    restart_policy: c.RestartPolicy = Field(
        c.DEFAULT_WORKER_RESTART_POLICY,
        description="Restart policy of the worker pods: Never or OnFailure (default Never).",
    )


class MPIReplicaSpecs(ApiModel):
    """The launcher and worker replica specs, keyed by replica type."""

    launcher: LauncherReplicaSpec = Field(
        alias=c.REPLICA_LAUNCHER, description="The launcher replica spec (required)."
    )
    worker: WorkerReplicaSpec | None = optional_field(
        "The worker replica spec; omit it only for a launcher-only job.", alias=c.REPLICA_WORKER
    )


class ElasticPolicy(ApiModel):
    """Elastic Horovod bounds and pacing: workers are scaled within [minReplicas, maxReplicas]."""

    # Upper bounds for the CRD only, as Worker.replicas's.
    min_replicas: int = Field(
        c.DEFAULT_ELASTIC_MIN_REPLICAS,
        ge=1,
        description="Fewest workers the job runs with (horovodrun --min-np / slots); default 1.",
        json_schema_extra={"maximum": c.MAX_WORKER_REPLICAS},
    )
    max_replicas: int = Field(
        ge=1,
        description="Most workers the job may be scaled to (horovodrun --max-np / slots); "
        "required; at most "
        f"{c.MAX_WORKER_REPLICAS}.",
        json_schema_extra={"maximum": c.MAX_WORKER_REPLICAS},
    )
    scale_in_grace_period_seconds: int = Field(
        c.DEFAULT_SCALE_IN_GRACE_PERIOD_SECONDS,
        ge=0,
        description="Seconds a worker removed from host discovery keeps running before its pod is "
        "deleted, "
        "so Horovod can re-form at its next commit (default 30).",
    )
    settle_seconds: int = Field(
        c.DEFAULT_SETTLE_SECONDS,
        ge=0,
        description="Seconds to wait between two changes of the discovered host set (default 5).",
    )
    max_replacements: int = Field(
        c.DEFAULT_MAX_REPLACEMENTS,
        ge=0,
        description="How many workers whose program failed may be replaced over the job's life "
        "(default 10); workers lost to preemption, eviction or node loss do not count.",
    )
    below_min_timeout_seconds: int = Field(
        c.DEFAULT_BELOW_MIN_TIMEOUT_SECONDS,
        ge=0,
        description="Seconds the number of ready workers may stay below minReplicas before the job "
        "fails "
        "(default 300).",
    )


class MPIJobSpec(ApiModel):
    """Desired state of an MPIJob (upstream v2beta1 MPIJobSpec plus elasticPolicy)."""

    slots_per_worker: int | None = optional_field(
        "MPI slots (processes) per worker in the hostfile and discover_hosts.sh; default: the GPUs "
        "each "
        "worker requests, else 1.",
        ge=0,
        le=c.INT32_MAX,
    )
    run_launcher_as_worker: bool = Field(
        False,
        description="Also runs MPI processes on the launcher, listing it in the hostfile (default "
        "false).",
    )
    run_policy: RunPolicy = Field(
        default_factory=RunPolicy,
        description="Cleanup, deadline, retry, suspend and scheduling policies.",
        json_schema_extra={"default": {}},
    )
    mpi_replica_specs: MPIReplicaSpecs = Field(
        description="The Launcher (required) and Worker replica specs."
    )
    ssh_auth_mount_path: str = Field(
        c.DEFAULT_SSH_AUTH_MOUNT_PATH,
        min_length=1,
        description="Directory where the SSH keys are mounted in every pod (default /root/.ssh).",
    )
    launcher_creation_policy: c.LauncherCreationPolicy = Field(
        c.DEFAULT_LAUNCHER_CREATION_POLICY,
        description="When the launcher is created: AtStartup, or WaitForWorkersReady (default; for "
        "elastic "
        "jobs, once minReplicas workers are Ready).",
    )
    mpi_implementation: c.MPIImplementation = Field(
        c.DEFAULT_MPI_IMPLEMENTATION,
        description="MPI implementation in the image: OpenMPI (default), Intel or MPICH.",
    )
    elastic_policy: ElasticPolicy | None = optional_field(
        "Makes the job elastic (Horovod host discovery): worker bounds, scale-in grace and failure "
        "budget."
    )
    disruption_budget_policy: c.DisruptionBudgetPolicy | None = optional_field(
        "Whether the workers get a policy/v1 PodDisruptionBudget `<job>-workers`, so voluntary "
        "evictions (kubectl drain, cluster autoscalers) stop at a floor: Auto (when unset; "
        "elastic jobs only, minAvailable: minReplicas), Always (static jobs too, minAvailable: "
        "every worker) or Never."
    )


class JobCondition(ApiModel):
    """One observed condition of the job."""

    type: str = Field(
        description="Condition type: Created, Running, Restarting, Succeeded, Suspended or Failed; "
        "this operator's own: WorkersPending (workers the scheduler cannot place) and Invalid."
    )
    status: c.ConditionStatus = Field(description="Condition status: True, False or Unknown.")
    reason: str | None = optional_field("Machine-readable CamelCase reason of the last transition.")
    message: str | None = optional_field("Human-readable details of the last transition.")
    last_update_time: Time | None = optional_field(
        "Last time the condition was updated (RFC 3339)."
    )
    last_transition_time: Time | None = optional_field(
        "Last time the condition's status changed (RFC 3339)."
    )


class ReplicaStatus(ApiModel):
    """Pod counts of one replica type."""

    active: int = Field(0, ge=0, description="Number of running pods.")
    succeeded: int = Field(0, ge=0, description="Number of pods that reached phase Succeeded.")
    failed: int = Field(0, ge=0, description="Number of pods that reached phase Failed.")
    ready: int = Field(0, ge=0, description="Number of running pods that are Ready (sshd answers).")
    label_selector: dict[str, Any] | None = optional_field(
        "Deprecated: label selector (metav1.LabelSelector) of the pods; use selector.",
        free_form=True,
    )
    selector: str | None = optional_field(
        "Label selector of the pods, serialized (e.g. for the scale subresource and HPA)."
    )


class ReplicaStatuses(ApiModel):
    """Pod counts keyed by replica type; Launcher appears once the launcher Job exists."""

    launcher: ReplicaStatus | None = optional_field(
        "Launcher pod counts.", alias=c.REPLICA_LAUNCHER
    )
    worker: ReplicaStatus | None = optional_field("Worker pod counts.", alias=c.REPLICA_WORKER)


class ElasticLoss(ApiModel):
    """One worker lost: its program failed, or the cluster took it (a disruption)."""

    pod: str = Field(description="The worker pod's name.")
    host: str = Field(description="The host name it had, now retired.")
    kind: str = Field(
        description="Failure (its program failed; counted against maxReplacements) or Disruption "
        "(preempted, evicted, its node lost, deleted; not counted)."
    )
    reason: str = Field(
        description="The container's or pod's reason, or the DisruptionTarget condition's reason "
        "(PreemptionByScheduler, DeletionByTaintManager, EvictionByEvictionAPI, "
        "TerminationByKubelet, DeletionByPodGC), Deleted without one."
    )
    exit_code: int | None = optional_field("The container's exit code, for a failure.")
    time: Time | None = optional_field("When the operator saw the loss (RFC 3339).")


class ElasticStatus(ApiModel):
    """Where an elastic job stands: desired, ready, discovered and draining workers; its bounds."""

    desired: int = Field(
        0, ge=0, description="Workers the operator runs (Worker.replicas within bounds)."
    )
    ready: int = Field(0, ge=0, description="Desired workers that are Ready and not terminating.")
    discovered: int = Field(0, ge=0, description="Workers discover_hosts.sh lists now.")
    draining: int = Field(
        0, ge=0, description="Workers out of discovery waiting for their scale-in grace."
    )
    replacements: int = Field(
        0,
        ge=0,
        description="Workers whose program failed, replaced so far (counted against "
        "maxReplacements).",
    )
    disruptions: int = Field(
        0,
        ge=0,
        description="Workers the cluster took (preemption, eviction, node loss, deletion), "
        "replaced so far; not counted against maxReplacements.",
    )
    losses: list[ElasticLoss] | None = optional_field(
        "The most recent lost workers (at most 10), oldest first, and which kind of loss each was."
    )
    min_replicas: int = Field(0, ge=0, description="Effective elasticPolicy.minReplicas.")
    max_replicas: int = Field(0, ge=0, description="Effective elasticPolicy.maxReplicas.")


class MPIJobStatus(ApiModel):
    """Observed state of an MPIJob, written by the operator through the status subresource."""

    conditions: list[JobCondition] = Field(
        default_factory=list,
        description="Current conditions of the job, at most one per type.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    replica_statuses: ReplicaStatuses = Field(
        default_factory=ReplicaStatuses, description="Pod counts per replica type."
    )
    start_time: Time | None = optional_field("When the operator acknowledged the job (RFC 3339).")
    completion_time: Time | None = optional_field("When the job finished (RFC 3339).")
    last_reconcile_time: Time | None = optional_field(
        "When the job was last reconciled (RFC 3339)."
    )
    observed_generation: int | None = optional_field(
        "metadata.generation of the spec this status was computed from.", ge=0
    )
    elastic: ElasticStatus | None = optional_field(
        "Elastic jobs only: desired / ready / discovered / draining workers and the effective "
        "bounds."
    )


class MPIJob(ApiModel):
    """An MPI (e.g. Horovod) training job: one launcher and N SSH-reachable workers."""

    api_version: str = Field(c.API_VERSION, description="kubeflow.org/v2beta1.")
    kind: str = Field(c.KIND, description="MPIJob.")
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="Standard object metadata.",
        json_schema_extra=_object_only,
    )
    spec: MPIJobSpec = Field(description="Desired state of the job.")
    status: MPIJobStatus | None = optional_field(
        "Observed state of the job, written by the operator."
    )

    @property
    def name(self) -> str:
        name = self.metadata.get("name")
        return name if isinstance(name, str) else ""

    @property
    def namespace(self) -> str:
        namespace = self.metadata.get("namespace")
        return namespace if isinstance(namespace, str) else ""

    @property
    def uid(self) -> str:
        uid = self.metadata.get("uid")
        return uid if isinstance(uid, str) else ""

    @property
    def generation(self) -> int:
        generation = self.metadata.get("generation")
        return generation if isinstance(generation, int) and not isinstance(generation, bool) else 0

    @property
    def launcher(self) -> LauncherReplicaSpec:
        return self.spec.mpi_replica_specs.launcher

    @property
    def worker(self) -> WorkerReplicaSpec | None:
        return self.spec.mpi_replica_specs.worker
