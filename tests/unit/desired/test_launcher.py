"""desired.launcher: the launcher batch/v1 Job, its env order, volumes and GPU isolation."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mpi_operator.desired.launcher import (
    build_launcher_job,
    hides_gpus,
    template_sets_restart_policy,
)

from .factory import JOB_UID, container, make_job, template

OWNER = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "name": "foo",
    "uid": JOB_UID,
    "controller": True,
    "blockOwnerDeletion": True,
}
SSH_ITEMS = [
    {"key": "ssh-privatekey", "path": "id_rsa"},
    {"key": "ssh-publickey", "path": "id_rsa.pub"},
    {"key": "ssh-publickey", "path": "authorized_keys"},
]
CONFIG_VOLUME = {
    "name": "mpi-job-config",
    "configMap": {
        "name": "foo-config",
        "items": [
            {"key": "hostfile", "path": "hostfile", "mode": 0o444},
            {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555},
        ],
    },
}
NVIDIA_OFF = [
    {"name": "NVIDIA_VISIBLE_DEVICES", "value": ""},
    {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": ""},
]
ROLE = [{"name": "K_MPI_JOB_ROLE", "value": "launcher"}]


def _env(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"name": n, "value": v} for n, v in pairs]


def _openmpi(slots: str) -> list[dict[str, str]]:
    return _env(
        ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
        ("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
        ("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10"),
        ("OMPI_MCA_orte_set_default_slots", slots),
        ("PRTE_MCA_prte_default_hostfile", "/etc/mpi/hostfile"),
        ("PRTE_MCA_plm_ssh_args", "-o ConnectionAttempts=10"),
        ("PRTE_MCA_prte_set_default_slots", slots),
    )


def test_defaults() -> None:
    job = make_job("foo", "bar", launcher_template=template({"name": "l", "image": "img"}))
    assert build_launcher_job(job) == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "foo-launcher",
            "namespace": "bar",
            "labels": {"app": "foo"},
            "ownerReferences": [OWNER],
        },
        "spec": {
            "template": {
                "metadata": {
                    "labels": {
                        "training.kubeflow.org/operator-name": "mpi-operator",
                        "training.kubeflow.org/job-name": "foo",
                        "training.kubeflow.org/job-role": "launcher",
                        "mpi_job_name": "foo",
                        "mpi_role_type": "launcher",
                        "mpi-job-name": "foo",
                        "mpi-job-role": "launcher",
                        "training.kubeflow.org/replica-type": "launcher",
                    },
                    "ownerReferences": [OWNER],
                },
                "spec": {
                    "containers": [
                        {
                            "name": "l",
                            "image": "img",
                            "env": ROLE + _openmpi("1") + NVIDIA_OFF,
                            "volumeMounts": [
                                {"name": "ssh-auth", "mountPath": "/root/.ssh"},
                                {"name": "mpi-job-config", "mountPath": "/etc/mpi"},
                            ],
                        }
                    ],
                    "hostname": "foo-launcher",
                    "subdomain": "foo",
                    "dnsConfig": {"searches": ["foo.bar.svc.cluster.local"]},
                    "restartPolicy": "OnFailure",
                    "volumes": [
                        {
                            "name": "ssh-auth",
                            "secret": {
                                "secretName": "foo-ssh",
                                "items": SSH_ITEMS,
                                "defaultMode": 0o600,
                            },
                        },
                        CONFIG_VOLUME,
                    ],
                },
            },
            "podReplacementPolicy": "Failed",
        },
    }


@pytest.mark.parametrize(
    ("implementation", "slots", "mpi_env"),
    [
        ("OpenMPI", 3, _openmpi("3")),
        (
            "Intel",
            5,
            _env(
                ("I_MPI_HYDRA_HOST_FILE", "/etc/mpi/hostfile"),
                ("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", "-o ConnectionAttempts=10"),
                ("I_MPI_PERHOST", "5"),
            ),
        ),
        (
            "MPICH",
            2,
            _env(
                ("HYDRA_HOST_FILE", "/etc/mpi/hostfile"),
                ("HYDRA_LAUNCH_EXTRA_ARGS", "-o ConnectionAttempts=10"),
                ("HYDRA_LAUNCHER_EXTRA_ARGS", "-o ConnectionAttempts=10"),
            ),
        ),
    ],
    ids=["openmpi", "intel", "mpich"],
)
def test_env_order_per_implementation(
    implementation: str, slots: int, mpi_env: list[dict[str, str]]
) -> None:
    user = {"name": "FOO", "value": "bar"}
    job = make_job(
        launcher_template=template(container(env=[user])),
        mpiImplementation=implementation,
        slotsPerWorker=slots,
    )
    env = build_launcher_job(job)["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == [user, *ROLE, *mpi_env, *NVIDIA_OFF]


def _gpus(name: str, amount: int) -> dict[str, Any]:
    return template(container(resources={"limits": {name: amount}}))


@pytest.mark.parametrize(
    ("launcher_template", "launcher_as_worker", "blanked"),
    [
        (template(), False, True),
        (_gpus("nvidia.com/gpu", 1), False, False),
        (_gpus("amd.com/gpu", 1), False, False),
        (_gpus("example.com/fpga", 1), False, True),
        (_gpus("nvidia.com/mig-1g.5gb", 1), False, False),
        (template(), True, True),
        (_gpus("nvidia.com/gpu", 1), True, False),
    ],
    ids=[
        "cpu-launcher",
        "nvidia-launcher",
        "amd-launcher",
        "other-extended-resource",
        "mig-launcher",
        "launcher-as-worker-without-gpus",
        "launcher-as-worker-with-gpus",
    ],
)
def test_nvidia_variables(
    launcher_template: dict[str, Any], launcher_as_worker: bool, blanked: bool
) -> None:
    job = make_job(launcher_template=launcher_template, runLauncherAsWorker=launcher_as_worker)
    main = build_launcher_job(job)["spec"]["template"]["spec"]["containers"][0]
    names = [e["name"] for e in main["env"]]
    assert ("NVIDIA_VISIBLE_DEVICES" in names) is blanked
    assert ("NVIDIA_DRIVER_CAPABILITIES" in names) is blanked
    assert hides_gpus(job) is blanked
    assert main.get("resources") == launcher_template["spec"]["containers"][0].get("resources")


def test_slots_env_follows_worker_gpus() -> None:
    job = make_job(worker_template=_gpus("nvidia.com/gpu", 8))
    env = build_launcher_job(job)["spec"]["template"]["spec"]["containers"][0]["env"]
    values = {e["name"]: e["value"] for e in env}
    assert values["OMPI_MCA_orte_set_default_slots"] == "8"
    assert values["PRTE_MCA_prte_set_default_slots"] == "8"


@pytest.mark.parametrize(
    ("run_policy", "expected"),
    [
        ({}, {}),
        (
            {"ttlSecondsAfterFinished": 1, "activeDeadlineSeconds": 2, "backoffLimit": 3},
            {"ttlSecondsAfterFinished": 1, "activeDeadlineSeconds": 2, "backoffLimit": 3},
        ),
        ({"backoffLimit": 0}, {"backoffLimit": 0}),
        ({"suspend": True}, {"suspend": True}),
        ({"suspend": False}, {}),
    ],
    ids=["none", "all-copied", "zero-kept", "suspended", "not-suspended"],
)
def test_run_policy_copies(run_policy: dict[str, Any], expected: dict[str, Any]) -> None:
    spec = build_launcher_job(make_job(runPolicy=run_policy))["spec"]
    copied = {k: v for k, v in spec.items() if k not in ("template", "podReplacementPolicy")}
    assert copied == expected
    assert spec["podReplacementPolicy"] == "Failed"


def test_overrides_host_network_user_volumes_non_root() -> None:
    main = container(
        "l",
        securityContext={"runAsUser": 1000},
        volumeMounts=[{"name": "foo-vol", "mountPath": "/mnt/foo"}],
    )
    tmpl = {
        "metadata": {"labels": {"foo": "bar"}, "annotations": {"x": "y"}},
        "spec": {
            "hostNetwork": True,
            "restartPolicy": "Never",
            "containers": [main, container("sidecar")],
            "volumes": [{"name": "foo-vol", "emptyDir": {}}],
        },
    }
    job = make_job(
        "foo",
        launcher_template=tmpl,
        launcher_restart_policy="Never",
        sshAuthMountPath="/home/mpiuser/.ssh",
        runLauncherAsWorker=True,
    )
    pod_template = build_launcher_job(job)["spec"]["template"]
    assert pod_template["metadata"]["labels"]["foo"] == "bar"
    assert pod_template["metadata"]["labels"]["training.kubeflow.org/replica-index"] == "0"
    assert pod_template["metadata"]["labels"]["mpi_role_type"] == "launcher"
    assert pod_template["metadata"]["annotations"] == {"x": "y"}
    spec = pod_template["spec"]
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    # Like the workers, the launcher resolves the job's short host names (its own included).
    assert spec["dnsConfig"] == {"searches": ["foo.default.svc.cluster.local"]}
    assert spec["restartPolicy"] == "Never"
    assert [v["name"] for v in spec["volumes"]] == [
        "foo-vol",
        "ssh-auth",
        "ssh-auth-home",
        "mpi-job-config",
    ]
    assert spec["containers"][0]["volumeMounts"] == [
        {"name": "foo-vol", "mountPath": "/mnt/foo"},
        {"name": "ssh-auth-home", "mountPath": "/home/mpiuser/.ssh", "subPath": "ssh"},
        {"name": "mpi-job-config", "mountPath": "/etc/mpi"},
    ]
    assert spec["initContainers"][0]["securityContext"] == {"runAsUser": 1000}
    assert spec["containers"][1] == container("sidecar")
    assert template_sets_restart_policy(job)
    assert not template_sets_restart_policy(make_job())


def test_launcher_has_no_readiness_probe_and_keeps_its_command() -> None:
    job = make_job(launcher_template=template(container(command=["mpirun", "-n", "2", "app"])))
    main = build_launcher_job(job)["spec"]["template"]["spec"]["containers"][0]
    assert main["command"] == ["mpirun", "-n", "2", "app"]
    assert "readinessProbe" not in main


@pytest.mark.parametrize(
    ("gang", "metadata_key", "marker"),
    [
        ("volcano", "annotations", {"scheduling.k8s.io/group-name": "foo"}),
        ("scheduler-plugins", "labels", {"scheduling.x-k8s.io/pod-group": "foo"}),
    ],
    ids=["volcano", "scheduler-plugins"],
)
def test_gang_markers(gang: Any, metadata_key: str, marker: dict[str, str]) -> None:
    pod_template = build_launcher_job(make_job("foo"), gang=gang)["spec"]["template"]
    assert marker.items() <= pod_template["metadata"][metadata_key].items()
    assert pod_template["spec"]["schedulerName"] in ("volcano", "scheduler-plugins-scheduler")


def test_inputs_untouched() -> None:
    tmpl = template(
        container(env=[{"name": "A", "value": "1"}]), volumes=[{"name": "v", "emptyDir": {}}]
    )
    job = make_job(launcher_template=tmpl, sshAuthMountPath="/home/u/.ssh")
    before = copy.deepcopy(job.model_dump(by_alias=True))
    first = build_launcher_job(job)
    assert job.model_dump(by_alias=True) == before
    assert build_launcher_job(job) == first
