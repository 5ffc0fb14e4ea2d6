"""Names and enum values of the `kubeflow.org` MPIJob API: group, versions, labels, conditions,
defaults.

Everything here is a plain constant (mirrors upstream `pkg/apis/kubeflow/v2beta1/constants.go`); the
pydantic models, the validator and the controllers import their vocabulary from this one place.
"""

from __future__ import annotations

from typing import Final, Literal

from mpi_discovery import hostfile

GROUP: Final = "kubeflow.org"
VERSION: Final = "v2beta1"
"""The canonical (storage) version; every other served version is normalized into it."""
LEGACY_VERSIONS: Final = ("v1", "v1alpha2", "v1alpha1")
SERVED_VERSIONS: Final = (VERSION, *LEGACY_VERSIONS)
API_VERSION: Final = f"{GROUP}/{VERSION}"
SERVED_API_VERSIONS: Final = tuple(f"{GROUP}/{v}" for v in SERVED_VERSIONS)

KIND: Final = "MPIJob"
LIST_KIND: Final = "MPIJobList"
PLURAL: Final = "mpijobs"
SINGULAR: Final = "mpijob"
SHORT_NAMES: Final = ("mpij", "mj")
CATEGORIES: Final = ("kubeflow",)
CRD_NAME: Final = f"{PLURAL}.{GROUP}"

OPERATOR_NAME: Final = "mpi-operator"

# Labels on every child object (upstream `defaultLabels`), plus the pre-v2 pair kept so that old
# `kubectl get pods -l mpi_job_name=X,mpi_role_type=launcher` recipes keep working.
LABEL_OPERATOR_NAME: Final = "training.kubeflow.org/operator-name"
LABEL_JOB_NAME: Final = "training.kubeflow.org/job-name"
LABEL_JOB_ROLE: Final = "training.kubeflow.org/job-role"
LABEL_REPLICA_INDEX: Final = "training.kubeflow.org/replica-index"
LABEL_REPLICA_TYPE: Final = "training.kubeflow.org/replica-type"
LEGACY_LABEL_JOB_NAME: Final = "mpi_job_name"
LEGACY_LABEL_ROLE_TYPE: Final = "mpi_role_type"
V1_LABEL_JOB_NAME: Final = "mpi-job-name"
"""The v1 controller's pod labels (kubeflow.org/v1 MPIJobs): what v1-era recipes select on."""
V1_LABEL_ROLE_TYPE: Final = "mpi-job-role"

ROLE_LAUNCHER: Final = "launcher"
ROLE_WORKER: Final = "worker"

# Replica types: the keys of spec.mpiReplicaSpecs and status.replicaStatuses.
REPLICA_LAUNCHER: Final = "Launcher"
REPLICA_WORKER: Final = "Worker"
ReplicaType = Literal["Launcher", "Worker"]
REPLICA_TYPES: Final = (REPLICA_LAUNCHER, REPLICA_WORKER)

# Condition types (status.conditions[].type). `Restarting` is defined but never set by upstream v2.
CONDITION_CREATED: Final = "Created"
CONDITION_RUNNING: Final = "Running"
CONDITION_RESTARTING: Final = "Restarting"
CONDITION_SUCCEEDED: Final = "Succeeded"
CONDITION_SUSPENDED: Final = "Suspended"
CONDITION_FAILED: Final = "Failed"
ConditionType = Literal["Created", "Running", "Restarting", "Succeeded", "Suspended", "Failed"]
CONDITION_TYPES: Final = (
    CONDITION_CREATED,
    CONDITION_RUNNING,
    CONDITION_RESTARTING,
    CONDITION_SUCCEEDED,
    CONDITION_SUSPENDED,
    CONDITION_FAILED,
)
CONDITION_WORKERS_PENDING: Final = "WorkersPending"
"""This operator's own: True while the scheduler cannot place some workers (their PodScheduled
condition says why); removed, like `Invalid`, once it can, so the State column moves on."""
ConditionStatus = Literal["True", "False", "Unknown"]
CONDITION_STATUSES: Final = ("True", "False", "Unknown")

# spec.runPolicy.cleanPodPolicy
CLEAN_POD_POLICY_ALL: Final = "All"
CLEAN_POD_POLICY_RUNNING: Final = "Running"
CLEAN_POD_POLICY_NONE: Final = "None"
CleanPodPolicy = Literal["All", "Running", "None"]
CLEAN_POD_POLICIES: Final = (CLEAN_POD_POLICY_ALL, CLEAN_POD_POLICY_RUNNING, CLEAN_POD_POLICY_NONE)

# spec.mpiReplicaSpecs.*.restartPolicy: upstream's types also list Always and ExitCode, but its
# validation only ever accepts these two, so the schema does too.
RESTART_POLICY_NEVER: Final = "Never"
RESTART_POLICY_ON_FAILURE: Final = "OnFailure"
RestartPolicy = Literal["Never", "OnFailure"]
RESTART_POLICIES: Final = (RESTART_POLICY_NEVER, RESTART_POLICY_ON_FAILURE)

# spec.mpiImplementation
MPI_IMPLEMENTATION_OPENMPI: Final = "OpenMPI"
MPI_IMPLEMENTATION_INTEL: Final = "Intel"
MPI_IMPLEMENTATION_MPICH: Final = "MPICH"
MPIImplementation = Literal["OpenMPI", "Intel", "MPICH"]
MPI_IMPLEMENTATIONS: Final = (
    MPI_IMPLEMENTATION_OPENMPI,
    MPI_IMPLEMENTATION_INTEL,
    MPI_IMPLEMENTATION_MPICH,
)

# spec.launcherCreationPolicy
LAUNCHER_CREATION_AT_STARTUP: Final = "AtStartup"
LAUNCHER_CREATION_WAIT_FOR_WORKERS_READY: Final = "WaitForWorkersReady"
LauncherCreationPolicy = Literal["AtStartup", "WaitForWorkersReady"]
LAUNCHER_CREATION_POLICIES: Final = (
    LAUNCHER_CREATION_AT_STARTUP,
    LAUNCHER_CREATION_WAIT_FOR_WORKERS_READY,
)

# spec.disruptionBudgetPolicy: whether the workers get a PodDisruptionBudget (desired.pdb).
DISRUPTION_BUDGET_AUTO: Final = "Auto"
DISRUPTION_BUDGET_ALWAYS: Final = "Always"
DISRUPTION_BUDGET_NEVER: Final = "Never"
DisruptionBudgetPolicy = Literal["Auto", "Always", "Never"]
DISRUPTION_BUDGET_POLICIES: Final = (
    DISRUPTION_BUDGET_AUTO,
    DISRUPTION_BUDGET_ALWAYS,
    DISRUPTION_BUDGET_NEVER,
)
DEFAULT_DISRUPTION_BUDGET_POLICY: Final = DISRUPTION_BUDGET_AUTO
"""What an unset field means; never written into the spec, so stored jobs keep their shape."""

# spec.runPolicy.managedBy
CONTROLLER_NAME: Final = "kubeflow.org/mpi-operator"
MULTIKUEUE_CONTROLLER_NAME: Final = "kueue.x-k8s.io/multikueue"
ManagedBy = Literal["kubeflow.org/mpi-operator", "kueue.x-k8s.io/multikueue"]
MANAGED_BY_VALUES: Final = (CONTROLLER_NAME, MULTIKUEUE_CONTROLLER_NAME)

# Defaults (upstream `SetDefaults_MPIJob` / CRD structural defaults), except where we deviate on
# purpose (docs/architecture.md#decisions-and-why).
DEFAULT_SLOTS_PER_WORKER: Final = 1
DEFAULT_SSH_AUTH_MOUNT_PATH: Final = "/root/.ssh"
DEFAULT_CLEAN_POD_POLICY: Final = CLEAN_POD_POLICY_NONE
DEFAULT_MPI_IMPLEMENTATION: Final = MPI_IMPLEMENTATION_OPENMPI
DEFAULT_LAUNCHER_CREATION_POLICY: Final = LAUNCHER_CREATION_WAIT_FOR_WORKERS_READY
"""Upstream defaults to AtStartup; we never start the launcher into workers that cannot answer
yet."""
DEFAULT_LAUNCHER_REPLICAS: Final = 1
DEFAULT_WORKER_REPLICAS: Final = 0
"""Upstream's default; its own validation then rejects it, so a Worker spec must name its
replicas."""
DEFAULT_LAUNCHER_RESTART_POLICY: Final = RESTART_POLICY_ON_FAILURE
DEFAULT_WORKER_RESTART_POLICY: Final = RESTART_POLICY_NEVER

# spec.elasticPolicy defaults (ours; upstream has no elastic API).
DEFAULT_ELASTIC_MIN_REPLICAS: Final = 1
DEFAULT_SCALE_IN_GRACE_PERIOD_SECONDS: Final = 30
DEFAULT_SETTLE_SECONDS: Final = 5
DEFAULT_MAX_REPLACEMENTS: Final = 10
DEFAULT_BELOW_MIN_TIMEOUT_SECONDS: Final = 300

# Legacy (v1alpha1) processing units: the resource requested per worker when
# `gpus`/`processingUnits` is used without an explicit `processingResourceType`.
DEFAULT_PROCESSING_RESOURCE_TYPE: Final = "nvidia.com/gpu"
GPU_RESOURCE: Final = "nvidia.com/gpu"

# The longest name a pod hostname / Service may have (DNS-1035 label).
DNS1035_LABEL_MAX_LENGTH: Final = 63
DNS1123_SUBDOMAIN_MAX_LENGTH: Final = hostfile.DNS1123_SUBDOMAIN_MAX_LENGTH
"""The longest DNS name, so the longest host name a hostfile may list."""

# The most workers one MPIJob may have: `Worker.replicas`, `elasticPolicy.minReplicas/maxReplicas`,
# the v1alpha1 `replicas`/`gpus`/`processingUnits` split and horovodrun's `--min-np/--max-np` all
# meet it (the CRD's `maximum`, `api/validation.py`, `api/legacy.py`); `mpi-operator run
# --max-workers-per-job` may only lower it. It is computed, not chosen: the ConfigMap `<job>-config`
# holds a `hostfile` line and a `discover_hosts.sh` line per worker (and the launcher), and with the
# longest host names the operator allows (below) and the most slot digits, that data must stay
# within CONFIG_DATA_BUDGET_BYTES. Names longer than these (a longer `--cluster-domain`) are refused
# per job by validation when they would not fit. Figures: docs/architecture.md#bounds.
CONFIG_DATA_MAX_BYTES: Final = 1024 * 1024
"""The API's limit on a ConfigMap's `data` and `binaryData` together (apiserver `MaxSecretSize`)."""
CONFIG_DATA_BUDGET_BYTES: Final = CONFIG_DATA_MAX_BYTES * 9 // 10
"""What the host lists may use in the worst case: a tenth of the limit stays free."""
NAMESPACE_MAX_LENGTH: Final = 63
"""A namespace is a DNS-1123 label."""
WORKER_SUFFIX_MIN_LENGTH: Final = len("-worker-0")
JOB_NAME_MAX_LENGTH: Final = DNS1035_LABEL_MAX_LENGTH - WORKER_SUFFIX_MIN_LENGTH
"""`<job>-worker-<i>` is a pod host name (a DNS-1035 label), so a job name is at most 54."""
REFERENCE_CLUSTER_DOMAIN: Final = "cluster.local"
"""Kubernetes' default cluster domain: the ceiling is computed with it."""
INT32_MAX: Final = 2**31 - 1
"""The largest value of a Go `int32` field: `runPolicy.backoffLimit` and `ttlSecondsAfterFinished`
are copied to the launcher Job's int32 fields, as `schedulingPolicy.scheduleTimeoutSeconds` is to
the PodGroup's, and `slotsPerWorker` is upstream's int32; the API refuses a larger value on every
retry, so validation refuses it first."""
LONGEST_HOST: Final = ".".join(
    (
        "h" * DNS1035_LABEL_MAX_LENGTH,
        "j" * JOB_NAME_MAX_LENGTH,
        "n" * NAMESPACE_MAX_LENGTH,
        "svc",
        REFERENCE_CLUSTER_DOMAIN,
    )
)
"""`<worker host>.<job>.<namespace>.svc.cluster.local` at the longest of each (200 characters): a
replaced elastic worker's host name takes the whole 63-character label (`elastic/identity.py`)."""


def host_list_bytes(hosts: int, host: str = LONGEST_HOST) -> int:
    """Bytes of `hostfile` and `discover_hosts.sh` together listing `hosts` hosts named like `host`
    with the most slot digits, by the real renderers (Open MPI's hostfile format is the longest)."""
    line = len(hostfile.render_hostfile_line(host, INT32_MAX))
    line += len(hostfile.render_discover_hosts([(host, INT32_MAX)])) - len(hostfile.SHEBANG)
    return len(hostfile.SHEBANG) + hosts * line


def most_workers(host: str = LONGEST_HOST, budget: int = CONFIG_DATA_BUDGET_BYTES) -> int:
    """The most workers whose host lists, the launcher's line included (`runLauncherAsWorker`), fit
    in `budget` with every host named like `host`."""
    per_host = host_list_bytes(1, host) - host_list_bytes(0, host)
    return (budget - host_list_bytes(0, host)) // per_host - 1


MAX_WORKER_REPLICAS: Final = most_workers()
MAX_GANG_MEMBERS: Final = MAX_WORKER_REPLICAS + 1
"""The largest PodGroup `minMember` (`schedulingPolicy.minAvailable`): every worker and the
launcher."""
INT64_MAX: Final = 2**63 - 1
"""The largest value of a Go `int64` field (`runPolicy.activeDeadlineSeconds`)."""
