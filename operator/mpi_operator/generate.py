"""The old ksonnet MPI prototypes (`simple`, `custom`, `openmpi`, `elastic`) as v2beta1 MPIJob
builders.

Pure: options -> a `kubeflow.org/v2beta1` MPIJob dict, or `GenerateError` naming the option; every
output goes through `parse_and_validate`, so what is printed is what `validate` accepts. Common to
all: `--command` is split like a shell line (ksonnet's one argv word only worked for one-word
commands), `--args` is comma-separated as ksonnet's, workers keep `sshd -De`, `cleanPodPolicy:
Running` as upstream's examples, and the SSH user, port and mount path describe the image
(`generate_cli.SSH_DEFAULTS`); without a port the worker declares none and is not probed.
"""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

# Spelled out rather than imported: `mpi_operator.api` costs half a second to import, and every
# `mpi-operator` command builds this parser; `_check` imports it only when a job is generated.
# tests/unit/test_generate.py pins these to the API's own constants.
GPU_RESOURCE: Final = "nvidia.com/gpu"
HOSTFILE: Final = "/etc/mpi/hostfile"
DISCOVER_HOSTS: Final = "/etc/mpi/discover_hosts.sh"
ELASTIC_NIC: Final = "eth0"
INIT_TIMEOUT_ENV: Final = "MPI_INIT_TIMEOUT_SECONDS"
INIT_TIMEOUT_EXIT_CODE: Final = 124
DEFAULT_ELASTIC_SCRIPT: Final = "/examples/elastic/tensorflow2_mnist_elastic.py"

# Bounded wait for the workers (the ksonnet openmpi prototype's `wait_workers_running`): every host
# of the hostfile must accept a non-interactive ssh, then the program given as "$@" replaces the
# shell.
WAIT_FOR_WORKERS_SCRIPT: Final = f"""\
deadline=$(( $(date +%s) + ${{{INIT_TIMEOUT_ENV}}} ))
for host in $(sed -e 's/[ :].*//' {HOSTFILE}); do
  until ssh -o BatchMode=yes -o ConnectTimeout=5 -o StrictHostKeyChecking=no \\
      -o UserKnownHostsFile=/dev/null "$host" true >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "worker $host did not accept ssh within ${{{INIT_TIMEOUT_ENV}}}s" >&2
      exit {INIT_TIMEOUT_EXIT_CODE}
    fi
    sleep 2
  done
done
exec "$@"
"""

# apimachinery's IsDNS1123Label / IsDNS1123Subdomain / IsQualifiedName name part /
# IsValidLabelValue.
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


class GenerateError(ValueError):
    """A bad option or combination of options; `option` names the flag to fix."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"{option}: {message}")
        self.option = option
        self.message = message


@dataclass(frozen=True)
class CommonOptions:
    """Options every flavour takes."""

    name: str
    image: str
    namespace: str | None = None
    command: str | None = None
    args: str | None = None
    run_as_user: int | None = None
    ssh_port: int | None = None
    ssh_auth_mount_path: str | None = None


def _positive(option: str, value: int) -> int:
    if value < 1:
        raise GenerateError(option, f"must be at least 1, got {value}")
    return value


def _non_negative(option: str, value: int) -> int:
    if value < 0:
        raise GenerateError(option, f"must not be negative, got {value}")
    return value


def _quantity(option: str, value: str | None) -> str | None:
    if value is None:
        return None
    from mpi_operator.api.quantities import Quantity

    try:
        negative = Quantity.parse(value).value < 0
    except ValueError:
        negative = None
    if negative is None or value != value.strip():
        raise GenerateError(
            option, f"must be a resource quantity such as 2, 500m or 4Gi, got {value!r}"
        )
    if negative:
        raise GenerateError(option, f"must not be negative, got {value!r}")
    return value


def _split_command(option: str, text: str | None) -> list[str]:
    if text is None:
        return []
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise GenerateError(option, f"cannot be split into words: {exc}") from None
    if not words:
        raise GenerateError(option, "must not be empty")
    return words


def split_args(text: str | None) -> list[str]:
    """ksonnet's `--args` convention: a comma-separated list (no item may be empty)."""
    if text is None:
        return []
    items = text.split(",")
    if any(not item for item in items):
        raise GenerateError(
            "--args", f"must be a comma-separated list without empty items, got {text!r}"
        )
    return items


def parse_node_selector(text: str) -> dict[str, str]:
    """`k=v,k2=v2` -> a nodeSelector; keys and values must be valid Kubernetes label keys and
    values."""
    selector: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise GenerateError(
                "--node-selector", f"expected key=value[,key=value...], got {item!r}"
            )
        prefix, slash, label = key.rpartition("/")
        bad_prefix = slash and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix))
        if bad_prefix or len(label) > 63 or not _LABEL_NAME.match(label):
            raise GenerateError("--node-selector", f"{key!r} is not a valid label key")
        if value and (len(value) > 63 or not _LABEL_NAME.match(value)):
            raise GenerateError(
                "--node-selector", f"{value!r} is not a valid label value for {key!r}"
            )
        if key in selector:
            raise GenerateError("--node-selector", f"{key!r} is given twice")
        selector[key] = value
    return selector


def _container(name: str, image: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": image, **{k: v for k, v in fields.items() if v}}


def _limits(gpus: int = 0, cpu: str | None = None, memory: str | None = None) -> dict[str, Any]:
    limits: dict[str, Any] = {}
    if cpu is not None:
        limits["cpu"] = cpu
    if memory is not None:
        limits["memory"] = memory
    if gpus > 0:
        limits[GPU_RESOURCE] = gpus
    return {"limits": limits} if limits else {}


def _job(
    common: CommonOptions,
    *,
    launcher: dict[str, Any],
    worker: dict[str, Any],
    workers: int,
    slots: int,
    spec: dict[str, Any] | None = None,
    launcher_spec: dict[str, Any] | None = None,
    worker_pod_spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    if not common.image:
        raise GenerateError("--image", "must not be empty")
    metadata: dict[str, Any] = {"name": common.name}
    if common.namespace is not None:
        if len(common.namespace) > 63 or not _DNS1123_LABEL.match(common.namespace):
            raise GenerateError(
                "--namespace", f"{common.namespace!r} is not a valid namespace name"
            )
        metadata["namespace"] = common.namespace
    ssh_spec, pod_security = _ssh_contract(common)
    if common.ssh_port is not None:
        worker = {**worker, "ports": [{"name": "ssh", "containerPort": common.ssh_port}]}
    job = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": metadata,
        "spec": {
            "slotsPerWorker": slots,
            **ssh_spec,
            **(spec or {}),
            "runPolicy": {"cleanPodPolicy": "Running", **(spec or {}).get("runPolicy", {})},
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    **(launcher_spec or {}),
                    "template": {"spec": {**pod_security, "containers": [launcher]}},
                },
                "Worker": {
                    "replicas": workers,
                    "template": {
                        "spec": {**pod_security, **(worker_pod_spec or {}), "containers": [worker]}
                    },
                },
            },
        },
    }
    _check(job)
    return copy.deepcopy(job)  # no dict shared between the launcher and the worker templates


def _ssh_contract(common: CommonOptions) -> tuple[dict[str, Any], dict[str, Any]]:
    """(spec fields, pod spec fields) for the image's SSH user: `sshAuthMountPath` and a
    securityContext.

    A non-root user needs its own ~/.ssh as the mount path (the operator copies the keys there with
    the modes StrictModes wants); `fsGroup` lets that copy read the Secret through a group-only
    mode.
    """
    if common.ssh_port is not None and not 1 <= common.ssh_port <= 65535:
        raise GenerateError("--ssh-port", f"must be a TCP port (1-65535), got {common.ssh_port}")
    path = common.ssh_auth_mount_path
    if path is not None and not path.startswith("/"):
        raise GenerateError("--ssh-auth-mount-path", f"must be an absolute path, got {path!r}")
    if common.run_as_user is None:
        return ({"sshAuthMountPath": path} if path else {}), {}
    uid = _non_negative("--run-as-user", common.run_as_user)
    if uid != 0 and path is None:
        raise GenerateError(
            "--ssh-auth-mount-path", f"required with --run-as-user {uid}: that user's ~/.ssh"
        )
    security: dict[str, Any] = {"runAsUser": uid}
    if uid != 0:
        security.update(runAsNonRoot=True, fsGroup=uid)
    return ({"sshAuthMountPath": path} if path else {}), {"securityContext": security}


def _check(job: dict[str, Any]) -> None:
    """The operator's own validation; a failure here names the option that caused it."""
    from mpi_operator.api import InvalidMPIJob, parse_and_validate

    try:
        parse_and_validate(job)
    except InvalidMPIJob as exc:
        for error in exc.errors:
            if error.path.startswith("metadata.name"):
                raise GenerateError("--name", error.message) from None
        raise GenerateError("generate", "; ".join(str(e) for e in exc.errors)) from None


def _launcher(common: CommonOptions) -> dict[str, Any]:
    return _container(
        "launcher",
        common.image,
        command=_split_command("--command", common.command),
        args=split_args(common.args),
    )


def simple(common: CommonOptions, *, gpus: int, gpus_per_node: int = 1) -> dict[str, Any]:
    """`--gpus` in total, split into workers of `--gpus-per-node` GPUs (one MPI slot per GPU).

    v1alpha1 `spec.gpus` semantics, with the operator's default of 1 GPU per node: fewer GPUs than a
    node gives one worker with all of them, otherwise the total must be a multiple.
    """
    _positive("--gpus", gpus)
    _positive("--gpus-per-node", gpus_per_node)
    if gpus < gpus_per_node:
        workers, per_worker = 1, gpus
    elif gpus % gpus_per_node:
        raise GenerateError(
            "--gpus",
            f"{gpus} GPUs cannot be split into workers of {gpus_per_node} (--gpus-per-node)",
        )
    else:
        workers, per_worker = gpus // gpus_per_node, gpus_per_node
    worker = _container("worker", common.image, resources=_limits(per_worker))
    return _job(
        common, launcher=_launcher(common), worker=worker, workers=workers, slots=per_worker
    )


def custom(
    common: CommonOptions, *, replicas: int = 1, gpus_per_replica: int = 1
) -> dict[str, Any]:
    """`--replicas` workers with `--gpus-per-replica` GPUs each (0: CPU workers with one slot)."""
    _positive("--replicas", replicas)
    _non_negative("--gpus-per-replica", gpus_per_replica)
    worker = _container("worker", common.image, resources=_limits(gpus_per_replica))
    slots = max(gpus_per_replica, 1)
    return _job(common, launcher=_launcher(common), worker=worker, workers=replicas, slots=slots)


def openmpi(
    common: CommonOptions,
    *,
    workers: int = 4,
    gpu: int = 0,
    cpu: str | None = None,
    memory: str | None = None,
    node_selector: str | None = None,
    init_timeout: int = 300,
    exec_: str | None = None,
) -> dict[str, Any]:
    """The kubeflow-openmpi prototype: sized workers, a bounded wait for them, then `mpirun <exec>`.

    Limits and `--node-selector` on workers only, as the prototype. The launcher starts at once and,
    as the prototype's `init.sh`, exits 124 when the workers do not accept ssh within
    `--init-timeout`; `restartPolicy: Never` and `backoffLimit: 0` then fail the MPIJob.
    """
    _positive("--workers", workers)
    _non_negative("--gpu", gpu)
    _quantity("--cpu", cpu)
    _quantity("--memory", memory)
    _positive("--init-timeout", init_timeout)
    slots = max(gpu, 1)
    if exec_ is not None and common.command is not None:
        raise GenerateError(
            "--exec", "cannot be combined with --command (both name the launcher's program)"
        )
    if exec_ is not None:
        program = ["mpirun", "--allow-run-as-root", "-np", str(workers * slots)]
        program += _split_command("--exec", exec_)
    elif common.command is not None:
        program = _split_command("--command", common.command)
    else:
        raise GenerateError(
            "--exec", "required: the command mpirun runs on the workers (or give --command)"
        )
    launcher = _container(
        "launcher",
        common.image,
        command=["/bin/sh", "-c", WAIT_FOR_WORKERS_SCRIPT, "wait-for-workers"],
        args=[*program, *split_args(common.args)],
        env=[{"name": INIT_TIMEOUT_ENV, "value": str(init_timeout)}],
    )
    worker = _container("worker", common.image, resources=_limits(gpu, cpu, memory))
    pod_spec = (
        {"nodeSelector": parse_node_selector(node_selector)} if node_selector is not None else {}
    )
    return _job(
        common,
        launcher=launcher,
        worker=worker,
        workers=workers,
        slots=slots,
        spec={"launcherCreationPolicy": "AtStartup", "runPolicy": {"backoffLimit": 0}},
        launcher_spec={"restartPolicy": "Never"},
        worker_pod_spec=pod_spec,
    )


def horovodrun_command(
    *, replicas: int, min_replicas: int, max_replicas: int, slots: int, program: Sequence[str]
) -> list[str]:
    """The launcher's elastic `horovodrun`: process bounds are worker bounds times slots per worker.

    `--network-interface` skips Horovod's two-host NIC probe, which keeps one worker from starting.
    """
    return [
        "horovodrun",
        "-np",
        str(replicas * slots),
        "--min-np",
        str(min_replicas * slots),
        "--max-np",
        str(max_replicas * slots),
        "--host-discovery-script",
        DISCOVER_HOSTS,
        "--network-interface",
        ELASTIC_NIC,
        *program,
    ]


def elastic(
    common: CommonOptions,
    *,
    max_replicas: int,
    min_replicas: int = 1,
    replicas: int | None = None,
    slots: int | None = None,
    gpus_per_worker: int = 0,
    script: str | None = None,
) -> dict[str, Any]:
    """An elastic Horovod job: `--min`..`--max` workers, starting at `--replicas` (default
    `--min`)."""
    _positive("--min", min_replicas)
    _positive("--max", max_replicas)
    if min_replicas > max_replicas:
        raise GenerateError("--min", f"{min_replicas} is greater than --max {max_replicas}")
    start = min_replicas if replicas is None else _positive("--replicas", replicas)
    if not min_replicas <= start <= max_replicas:
        raise GenerateError(
            "--replicas", f"{start} is outside --min {min_replicas} .. --max {max_replicas}"
        )
    _non_negative("--gpus-per-worker", gpus_per_worker)
    per_worker = max(gpus_per_worker, 1) if slots is None else _positive("--slots", slots)
    if script is not None and common.command is not None:
        raise GenerateError(
            "--script", "cannot be combined with --command (both name the training program)"
        )
    if common.command is not None:
        program = _split_command("--command", common.command)
    else:
        program = ["python", *_split_command("--script", script or DEFAULT_ELASTIC_SCRIPT)]
    command = horovodrun_command(
        replicas=start,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        slots=per_worker,
        program=program,
    )
    launcher = _container("launcher", common.image, command=command, args=split_args(common.args))
    worker = _container("worker", common.image, resources=_limits(gpus_per_worker))
    return _job(
        common,
        launcher=launcher,
        worker=worker,
        workers=start,
        slots=per_worker,
        spec={"elasticPolicy": {"minReplicas": min_replicas, "maxReplicas": max_replicas}},
    )
