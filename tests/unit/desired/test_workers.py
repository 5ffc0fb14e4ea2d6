"""desired.workers: worker pods, exactly as upstream's newWorker plus the ssh readiness probe on a
port the spec names (none, and `ssh_port_unknown`, when it names none)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mpi_operator.desired import ssh_auth
from mpi_operator.desired.workers import build_worker, build_workers, ssh_port_unknown

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


def _labels(job: str, index: str) -> dict[str, str]:
    return {
        "training.kubeflow.org/operator-name": "mpi-operator",
        "training.kubeflow.org/job-name": job,
        "training.kubeflow.org/job-role": "worker",
        "mpi_job_name": job,
        "mpi_role_type": "worker",
        "mpi-job-name": job,
        "mpi-job-role": "worker",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": index,
    }


def test_defaults() -> None:
    job = make_job("foo", "bar", worker_template=template({"name": "w", "image": "img"}))
    assert build_worker(job, 0) == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "foo-worker-0",
            "namespace": "bar",
            "labels": _labels("foo", "0"),
            "ownerReferences": [OWNER],
        },
        "spec": {
            "containers": [
                {
                    "name": "w",
                    "image": "img",
                    "command": ["/usr/sbin/sshd", "-De"],
                    "env": [{"name": "K_MPI_JOB_ROLE", "value": "worker"}],
                    # no readinessProbe: sshd's port is in its config file, which the operator
                    # cannot read
                    "volumeMounts": [{"name": "ssh-auth", "mountPath": "/root/.ssh"}],
                }
            ],
            "hostname": "foo-worker-0",
            "subdomain": "foo",
            "dnsConfig": {"searches": ["foo.bar.svc.cluster.local"]},
            "restartPolicy": "Never",
            "volumes": [
                {
                    "name": "ssh-auth",
                    "secret": {"secretName": "foo-ssh", "items": SSH_ITEMS, "defaultMode": 0o600},
                }
            ],
        },
    }


def test_overrides_non_root_host_network_custom_command() -> None:
    main = container(
        "w",
        image="mpi:intel",
        imagePullPolicy="IfNotPresent",
        command=["/entrypoint.sh"],
        env=[{"name": "FOO", "value": "bar"}],
        ports=[{"name": "ssh", "containerPort": 2222}],
        securityContext={"runAsUser": 1000},
        resources={"limits": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": 1}},
    )
    job = make_job(
        "foo",
        "bar",
        workers=13,
        worker_template={
            "metadata": {"labels": {"team": "ml"}},
            "spec": {"hostNetwork": True, "containers": [main]},
        },
        sshAuthMountPath="/home/mpiuser/.ssh",
        slotsPerWorker=5,
        mpiImplementation="Intel",
        runLauncherAsWorker=True,
    )
    pod = build_worker(job, 12, cluster_domain="corp.example")
    assert pod["metadata"]["labels"] == {"team": "ml", **_labels("foo", "13")}
    spec = pod["spec"]
    assert spec["hostNetwork"] is True
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert spec["dnsConfig"] == {"searches": ["foo.bar.svc.corp.example"]}
    worker = spec["containers"][0]
    assert worker["command"] == ["/entrypoint.sh"]
    assert worker["env"] == [
        {"name": "FOO", "value": "bar"},
        {"name": "K_MPI_JOB_ROLE", "value": "worker"},
    ]
    assert worker["readinessProbe"] == {"tcpSocket": {"port": 2222}, "periodSeconds": 2}
    assert worker["resources"] == {"limits": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": 1}}
    assert worker["volumeMounts"] == [
        {"name": "ssh-auth-home", "mountPath": "/home/mpiuser/.ssh", "subPath": "ssh"}
    ]
    assert spec["volumes"] == [
        {
            "name": "ssh-auth",
            "secret": {"secretName": "foo-ssh", "items": SSH_ITEMS, "defaultMode": 0o444},
        },
        {"name": "ssh-auth-home", "emptyDir": {"medium": "Memory"}},
    ]
    [setup] = spec["initContainers"]
    assert setup["name"] == "ssh-auth-setup"
    assert setup["image"] == "mpi:intel"
    assert setup["imagePullPolicy"] == "IfNotPresent"
    assert setup["securityContext"] == {"runAsUser": 1000}
    assert setup["resources"] == {"limits": {"cpu": "2", "memory": "4Gi"}}
    assert setup["volumeMounts"] == [
        {"name": "ssh-auth", "mountPath": "/var/run/mpi-operator/ssh-secret", "readOnly": True},
        {"name": "ssh-auth-home", "mountPath": "/var/run/mpi-operator/ssh-home"},
    ]
    assert setup["command"][:2] == ["/bin/sh", "-c"]


def test_non_root_staging_mode_uses_fs_group_when_present() -> None:
    job = make_job(
        worker_template=template(container(), securityContext={"runAsUser": 1000, "fsGroup": 1000}),
        sshAuthMountPath="/home/mpiuser/.ssh",
    )
    volumes = build_worker(job, 0)["spec"]["volumes"]
    assert volumes[0]["secret"]["defaultMode"] == 0o440


def test_setup_script_gives_the_user_a_private_copy(tmp_path: Any) -> None:
    """Runs the init container's script against a fake secret: 0700 dir, 0600 files, same bytes."""
    import subprocess

    secret, home = tmp_path / "secret", tmp_path / "home"
    secret.mkdir()
    home.mkdir()
    for name in ssh_auth.SSH_FILES:
        (secret / name).write_text(f"content of {name}\n")
        (secret / name).chmod(0o444)
    job = make_job(sshAuthMountPath="/home/mpiuser/.ssh")
    script = build_worker(job, 0)["spec"]["initContainers"][0]["command"][2]
    script = script.replace(ssh_auth.STAGING_SECRET_PATH, str(secret)).replace(
        ssh_auth.STAGING_HOME_PATH, str(home)
    )
    for _ in range(2):  # a restarted init container finds its previous copy
        subprocess.run(["/bin/sh", "-c", script], check=True, timeout=10)
    target = home / ssh_auth.HOME_SUBPATH
    assert target.stat().st_mode & 0o777 == 0o700
    assert sorted(p.name for p in target.iterdir()) == sorted(ssh_auth.SSH_FILES)
    for name in ssh_auth.SSH_FILES:
        assert (target / name).stat().st_mode & 0o777 == 0o600
        assert (target / name).read_text() == f"content of {name}\n"


def _probe(port: int) -> dict[str, Any]:
    return {"tcpSocket": {"port": port}, "periodSeconds": 2}


SSHD = "/usr/sbin/sshd"
PROBES: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {
    "default-command-no-port": ({}, None),
    "other-named-port": ({"ports": [{"name": "metrics", "containerPort": 9090}]}, None),
    "named-ssh-port": ({"ports": [{"name": "ssh", "containerPort": 2222}]}, _probe(2222)),
    "named-ssh-port-22": ({"ports": [{"name": "ssh", "containerPort": 22}]}, _probe(22)),
    "user-probe-kept": (
        {"readinessProbe": {"exec": {"command": ["true"]}}},
        {"exec": {"command": ["true"]}},
    ),
    "user-probe-kept-without-port": (
        {"command": [SSHD, "-De"], "readinessProbe": {"tcpSocket": {"port": 2022}}},
        {"tcpSocket": {"port": 2022}},
    ),
    # upstream's examples/v2beta1/pi/pi.yaml: sshd on 2222 from its own config file
    "upstream-pi-yaml": (
        {"command": [SSHD], "args": ["-De", "-f", "/home/mpiuser/.sshd_config"]},
        None,
    ),
    "upstream-pi-yaml-with-named-port": (
        {
            "command": [SSHD],
            "args": ["-De", "-f", "/home/mpiuser/.sshd_config"],
            "ports": [{"name": "ssh", "containerPort": 2222}],
        },
        _probe(2222),
    ),
    "command-p": ({"command": [SSHD, "-De", "-p", "2222"]}, _probe(2222)),
    "args-o-port": ({"command": [SSHD], "args": ["-De", "-o", "Port=2022"]}, _probe(2022)),
    "sh-c": (
        {"command": ["/bin/sh", "-c"], "args": [f"mkdir -p /run/sshd && exec {SSHD} -D -p 2222"]},
        _probe(2222),
    ),
    "entrypoint-script": ({"command": ["/entrypoint.sh"]}, None),
    "args-only-image-entrypoint": ({"args": ["-p", "2222"]}, None),
    "named-port-wins": (
        {"command": [SSHD, "-p", "3333"], "ports": [{"name": "ssh", "containerPort": 2222}]},
        _probe(2222),
    ),
}


@pytest.mark.parametrize(("fields", "probe"), list(PROBES.values()), ids=list(PROBES))
def test_readiness_probe(fields: dict[str, Any], probe: dict[str, Any] | None) -> None:
    job = make_job(worker_template=template(container(**fields)))
    worker = build_worker(job, 0)["spec"]["containers"][0]
    assert worker.get("readinessProbe") == probe
    # The planner's warning says exactly when the operator left a worker without any probe.
    assert ssh_port_unknown(job) is (probe is None)


def test_probe_port_follows_the_command_as_the_pod_runs_it() -> None:
    """The default command is applied before the port is read; a user's command is read as
    written."""
    job = make_job(worker_template=template(container(command=[SSHD, "-De", "-p", "2222"])))
    assert build_worker(job, 0)["spec"]["containers"][0]["readinessProbe"] == _probe(2222)
    job = make_job(worker_template=template(container(args=[SSHD, "-p", "2222"])))
    worker = build_worker(job, 0)["spec"]["containers"][0]
    assert "command" not in worker
    assert worker["readinessProbe"] == _probe(2222)


def test_ssh_port_unknown_without_workers_is_false() -> None:
    assert ssh_port_unknown(make_job(workers=None)) is False


def test_only_containers_0_counts() -> None:
    sidecar = container("sidecar", ports=[{"name": "ssh", "containerPort": 2222}])
    job = make_job(worker_template=template(container(), sidecar))
    pod = build_worker(job, 0)
    assert "readinessProbe" not in pod["spec"]["containers"][0]
    assert pod["spec"]["containers"][1] == sidecar
    assert ssh_port_unknown(job)


@pytest.mark.parametrize(
    ("fields", "command", "args"),
    [
        ({}, ["/usr/sbin/sshd", "-De"], None),
        ({"args": ["-f", "/home/u/.sshd_config"]}, None, ["-f", "/home/u/.sshd_config"]),
        (
            {"command": ["/usr/sbin/sshd", "-De", "-p", "2222"]},
            ["/usr/sbin/sshd", "-De", "-p", "2222"],
            None,
        ),
    ],
    ids=["default-sshd", "args-only-kept", "command-kept"],
)
def test_command_default(
    fields: dict[str, Any], command: list[str] | None, args: list[str] | None
) -> None:
    worker = build_worker(make_job(worker_template=template(container(**fields))), 0)["spec"][
        "containers"
    ][0]
    assert worker.get("command") == command
    assert worker.get("args") == args


def test_template_values_are_kept_and_overlaid() -> None:
    tmpl = {
        "metadata": {
            "labels": {
                "training.kubeflow.org/job-role": "spoofed",
                "mpi_job_name": "spoofed",
                "app": "x",
            },
            "annotations": {"a": "b"},
        },
        "spec": {
            "containers": [container(), container("sidecar")],
            "dnsConfig": {
                "searches": ["corp.example"],
                "options": [{"name": "ndots", "value": "2"}],
            },
            "restartPolicy": "Always",
            "volumes": [{"name": "data", "emptyDir": {}}],
            "priorityClassName": "high",
        },
    }
    job = make_job("pi", worker_template=tmpl)
    pod = build_worker(job, 1)
    assert pod["metadata"]["labels"]["training.kubeflow.org/job-role"] == "worker"
    assert pod["metadata"]["labels"]["mpi_job_name"] == "pi"
    assert pod["metadata"]["labels"]["app"] == "x"
    assert pod["metadata"]["annotations"] == {"a": "b"}
    spec = pod["spec"]
    assert spec["dnsConfig"] == {
        "searches": ["corp.example", "pi.default.svc.cluster.local"],
        "options": [{"name": "ndots", "value": "2"}],
    }
    assert spec["restartPolicy"] == "Never"
    assert [v["name"] for v in spec["volumes"]] == ["data", "ssh-auth"]
    assert spec["priorityClassName"] == "high"
    assert spec["containers"][1] == container("sidecar")


def test_restart_policy_comes_from_the_replica_spec() -> None:
    job = make_job(worker_restart_policy="OnFailure")
    assert build_worker(job, 0)["spec"]["restartPolicy"] == "OnFailure"


@pytest.mark.parametrize(
    ("gang", "scheduler", "labels", "annotations"),
    [
        ("volcano", "volcano", {}, {"scheduling.k8s.io/group-name": "pi"}),
        (
            "scheduler-plugins",
            "scheduler-plugins-scheduler",
            {"scheduling.x-k8s.io/pod-group": "pi"},
            {},
        ),
    ],
    ids=["volcano", "scheduler-plugins"],
)
def test_gang_scheduling_decoration(
    gang: Any, scheduler: str, labels: dict[str, str], annotations: dict[str, str]
) -> None:
    job = make_job("pi", worker_template=template(container(), schedulerName="default-scheduler"))
    pod = build_worker(job, 0, gang=gang)
    assert pod["spec"]["schedulerName"] == scheduler
    assert pod["metadata"]["labels"] == {**_labels("pi", "0"), **labels}
    assert pod["metadata"].get("annotations", {}) == annotations


def test_build_workers_by_index_and_inputs_untouched() -> None:
    tmpl = template(
        container(env=[{"name": "A", "value": "1"}], resources={"limits": {"amd.com/gpu": 2}})
    )
    job = make_job("pi", workers=3, worker_template=tmpl, sshAuthMountPath="/home/u/.ssh")
    before = copy.deepcopy(job.model_dump(by_alias=True))
    workers = build_workers(job)
    assert sorted(workers) == [0, 1, 2]
    assert [w["metadata"]["name"] for w in workers.values()] == [
        "pi-worker-0",
        "pi-worker-1",
        "pi-worker-2",
    ]
    assert job.model_dump(by_alias=True) == before
    workers[0]["spec"]["containers"][0]["env"].append({"name": "B"})
    assert workers[1]["spec"]["containers"][0]["env"] == [
        {"name": "A", "value": "1"},
        {"name": "K_MPI_JOB_ROLE", "value": "worker"},
    ]


def test_no_worker_spec() -> None:
    job = make_job(workers=None)
    assert build_workers(job) == {}
    with pytest.raises(ValueError, match="no Worker"):
        build_worker(job, 0)
