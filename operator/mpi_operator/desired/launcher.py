"""The launcher batch/v1 Job `<job>-launcher` (upstream `newLauncherJob`, `newLauncherPodTemplate`).

Upstream's Job and pod template (runPolicy's limits, `podReplacementPolicy: Failed` so there is
never a second launcher while the first terminates, the `ssh-auth` and `mpi-job-config` volumes),
with `containers[0].env` appended after the user's, in this order: `K_MPI_JOB_ROLE=launcher`; the
MPI implementation's variables (upstream's, then the Open MPI 5 / PRRTE and current MPICH names,
which those releases read instead); the NVIDIA variables blanked when the launcher asks for no
NVIDIA device, even as a worker (a CUDA image's `all` would show it every GPU of its node); then
the caller's `extra_env` (elastic bounds, `elastic.launcher_env`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, TypedDict, Unpack

from mpi_operator.api import constants as c
from mpi_operator.api.defaults import slots_per_worker
from mpi_operator.api.models import MPIJob
from mpi_operator.api.quantities import pod_containers, pod_gpus
from mpi_operator.desired import naming, podgroup, podtemplate, ssh_auth
from mpi_operator.desired.config import DISCOVER_HOSTS_KEY, HOSTFILE_KEY
from mpi_operator.desired.workers import ROLE_ENV
from mpi_operator.objects import KubeObject
from mpi_operator.settings import GangScheduler

CONFIG_VOLUME: Final = "mpi-job-config"
CONFIG_MOUNT_PATH: Final = "/etc/mpi"
HOSTFILE_PATH: Final = f"{CONFIG_MOUNT_PATH}/{HOSTFILE_KEY}"
HOSTFILE_MODE: Final = 0o444
DISCOVER_HOSTS_MODE: Final = 0o555
SSH_CONNECTION_ARGS: Final = "-o ConnectionAttempts=10"
POD_REPLACEMENT_POLICY: Final = "Failed"

OPENMPI_SLOTS_ENV: Final = "OMPI_MCA_orte_set_default_slots"
PRRTE_SLOTS_ENV: Final = "PRTE_MCA_prte_set_default_slots"
INTEL_SLOTS_ENV: Final = "I_MPI_PERHOST"
NVIDIA_ENV: Final = ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")
NVIDIA_RESOURCE_PREFIX: Final = "nvidia.com/"


def _env(pairs: list[tuple[str, str]]) -> list[KubeObject]:
    return [{"name": name, "value": value} for name, value in pairs]


def mpi_env(job: MPIJob) -> list[KubeObject]:
    """The implementation's variables, in upstream's order (PRRTE's after ORTE's for Open MPI)."""
    slots = str(slots_per_worker(job.spec))
    implementation = job.spec.mpi_implementation
    if implementation == c.MPI_IMPLEMENTATION_OPENMPI:
        return _env(
            [
                ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
                ("OMPI_MCA_orte_default_hostfile", HOSTFILE_PATH),
                ("OMPI_MCA_plm_rsh_args", SSH_CONNECTION_ARGS),
                (OPENMPI_SLOTS_ENV, slots),
                # Open MPI 5's PRRTE ignores ORTE's names (kubeflow/mpi-operator#842), v4 these.
                # No `prte_keep_fqdn_hostnames`: with it PRRTE misses the launcher's own hostfile
                # name and ssh'es to itself (Open MPI 5.0.11, tests/process/test_mpi_pi_e2e.py).
                ("PRTE_MCA_prte_default_hostfile", HOSTFILE_PATH),
                ("PRTE_MCA_plm_ssh_args", SSH_CONNECTION_ARGS),
                (PRRTE_SLOTS_ENV, slots),
            ]
        )
    if implementation == c.MPI_IMPLEMENTATION_INTEL:
        return _env(
            [
                ("I_MPI_HYDRA_HOST_FILE", HOSTFILE_PATH),
                ("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", SSH_CONNECTION_ARGS),
                (INTEL_SLOTS_ENV, slots),
            ]
        )
    return _env(
        [
            ("HYDRA_HOST_FILE", HOSTFILE_PATH),
            # Upstream's name: only early hydra read it, current hydra ignores it; users' tooling
            # may. Current hydra (MPICH 5.0.2) reads only the next.
            ("HYDRA_LAUNCH_EXTRA_ARGS", SSH_CONNECTION_ARGS),
            ("HYDRA_LAUNCHER_EXTRA_ARGS", SSH_CONNECTION_ARGS),
        ]
    )


def hides_gpus(job: MPIJob) -> bool:
    """Whether the launcher's NVIDIA variables are blanked: it asks for no GPU and no other NVIDIA
    device (MIG slices), so the device plugin gives it none. Upstream also keeps them for a
    launcher that runs as a worker without GPUs, which then sees whatever its image names."""
    template = job.launcher.template
    nvidia = any(
        str(name).startswith(NVIDIA_RESOURCE_PREFIX)
        for container in pod_containers(template)
        for section in ("limits", "requests")
        for name in _mapping((_mapping(container.get("resources"))).get(section))
    )
    return not nvidia and pod_gpus(template) == 0


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def launcher_env(job: MPIJob) -> list[KubeObject]:
    """Everything appended to the launcher's `containers[0].env`, in order."""
    env = [{"name": ROLE_ENV, "value": c.ROLE_LAUNCHER}, *mpi_env(job)]
    if hides_gpus(job):
        env.extend({"name": name, "value": ""} for name in NVIDIA_ENV)
    return env


def config_volume(job: MPIJob) -> KubeObject:
    return {
        "name": CONFIG_VOLUME,
        "configMap": {
            "name": naming.config_map_name(job),
            "items": [
                {"key": HOSTFILE_KEY, "path": HOSTFILE_KEY, "mode": HOSTFILE_MODE},
                {
                    "key": DISCOVER_HOSTS_KEY,
                    "path": DISCOVER_HOSTS_KEY,
                    "mode": DISCOVER_HOSTS_MODE,
                },
            ],
        },
    }


def template_sets_restart_policy(job: MPIJob) -> bool:
    """Upstream warns (event `SetPodTemplateRestartPolicy`) when the template names a
    restartPolicy."""
    spec = job.launcher.template.get("spec")
    return isinstance(spec, dict) and bool(spec.get("restartPolicy"))


class LauncherOptions(TypedDict, total=False):
    """`build_launcher_job`'s options, passed on to `build_launcher_pod_template` (whose defaults
    apply)."""

    gang: GangScheduler | None
    scheduler_plugins_name: str
    extra_env: Sequence[KubeObject]
    cluster_domain: str


def build_launcher_pod_template(
    job: MPIJob,
    *,
    gang: GangScheduler | None = None,
    scheduler_plugins_name: str = podgroup.DEFAULT_SCHEDULER_PLUGINS_NAME,
    extra_env: Sequence[KubeObject] = (),
    cluster_domain: str = "",
) -> KubeObject:
    template = podtemplate.copy_template(job.launcher)
    metadata = template["metadata"]
    labels = naming.pod_labels(job, c.ROLE_LAUNCHER)
    if job.spec.run_launcher_as_worker:
        labels[c.LABEL_REPLICA_INDEX] = "0"
    metadata["labels"] = podtemplate.merged(metadata.get("labels"), labels)
    podgroup.decorate_pod_template(template, job, gang, scheduler_plugins_name)
    spec = template["spec"]
    podtemplate.set_pod_identity(
        spec,
        naming.launcher_name(job),
        naming.service_name(job),
        naming.dns_search_domain(job, cluster_domain),
    )
    container = spec["containers"][0]
    podtemplate.append_env(container, [*launcher_env(job), *extra_env])
    ssh_auth.setup_ssh_on_pod(spec, job)
    spec["restartPolicy"] = job.launcher.restart_policy
    podtemplate.set_priority_class(spec, job)
    spec.setdefault("volumes", []).append(config_volume(job))
    container.setdefault("volumeMounts", []).append(
        {"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT_PATH}
    )

    out_metadata: KubeObject = {"labels": template["metadata"]["labels"]}
    if template["metadata"].get("annotations"):
        out_metadata["annotations"] = template["metadata"]["annotations"]
    out_metadata["ownerReferences"] = [naming.owner_reference(job)]
    return {"metadata": out_metadata, "spec": spec}


def build_launcher_job(job: MPIJob, **options: Unpack[LauncherOptions]) -> KubeObject:
    """The launcher Job; `extra_env` is appended after the operator's variables (elastic bounds)."""
    run_policy = job.spec.run_policy
    spec: KubeObject = {}
    if run_policy.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = run_policy.ttl_seconds_after_finished
    if run_policy.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = run_policy.active_deadline_seconds
    if run_policy.backoff_limit is not None:
        spec["backoffLimit"] = run_policy.backoff_limit
    spec["template"] = build_launcher_pod_template(job, **options)
    spec["podReplacementPolicy"] = POD_REPLACEMENT_POLICY
    if run_policy.suspend:
        spec["suspend"] = True
    return naming.owned_object(job, "batch/v1", "Job", naming.launcher_name(job), spec=spec)
