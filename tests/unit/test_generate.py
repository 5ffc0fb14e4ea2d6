"""`mpi_operator.generate`: every flavour and option -> a v2beta1 MPIJob that the operator
validates, the CRD admits (Strict, with CEL) and whose child objects Kubernetes' rules accept; bad
options name the flag."""

from __future__ import annotations

import argparse
import copy
import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesim.admission import AdmissionError, admit
from mpi_operator import desired, generate, generate_cli
from mpi_operator.api import constants, parse_and_validate, to_canonical_dict
from mpi_operator.api import elastic as api_elastic
from mpi_operator.api.defaults import slots_per_worker
from mpi_operator.desired import launcher as launcher_builder
from mpi_operator.desired.config import DISCOVER_HOSTS_KEY
from mpi_operator.desired.secret import SSHKeyPair
from mpi_operator.generate import CommonOptions, GenerateError
from mpi_operator.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
KEYS = SSHKeyPair(private_key_pem=b"-----BEGIN EC PRIVATE KEY-----\n", public_key=b"ecdsa AAAA\n")


def _crd_schema() -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / "crds" / "kubeflow.org_mpijobs.yaml").read_text(encoding="utf-8"))
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v2beta1")
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


SCHEMA = _crd_schema()


def common(**fields: Any) -> CommonOptions:
    return CommonOptions(**{"name": "job", "image": "registry.example/train:1", **fields})


def admitted(job: dict[str, Any]) -> dict[str, Any]:
    """The job as the API server stores it, after Strict CRD admission including the CEL rules."""
    result = admit(
        operation="CREATE",
        api_version="kubeflow.org/v2beta1",
        kind="MPIJob",
        obj=copy.deepcopy(job),
        old=None,
        schema=SCHEMA,
        field_validation="Strict",
    )
    assert result.warnings == []
    return result.obj


def children_admitted(job: dict[str, Any]) -> None:
    """The Service, ConfigMap, Secret, launcher Job and worker Pods the operator builds pass
    admission."""
    body = copy.deepcopy(job)
    body["metadata"] = {"namespace": "default", "uid": "0000-1", **body["metadata"]}
    canonical = parse_and_validate(body).job
    state = desired.build(canonical, settings=Settings(), ssh_keys=KEYS)
    assert state.secret is not None
    # A Job's selector and uid come from the API server, so its pod template is checked as a Pod.
    launcher_template = state.launcher_job["spec"]["template"]
    launcher_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "launcher", "namespace": "default", **launcher_template["metadata"]},
        "spec": launcher_template["spec"],
    }
    for obj in [
        state.service,
        state.config_map,
        state.secret,
        launcher_pod,
        *state.workers.values(),
    ]:
        admit(
            operation="CREATE",
            api_version=obj["apiVersion"],
            kind=obj["kind"],
            obj=obj,
            old=None,
            schema=None,
            field_validation="Strict",
        )


def launcher(job: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"][
        "containers"
    ][0]
    return container


def worker_spec(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["mpiReplicaSpecs"]["Worker"]
    return spec


def worker_limits(job: dict[str, Any]) -> dict[str, Any]:
    limits: dict[str, Any] = (
        worker_spec(job)["template"]["spec"]["containers"][0].get("resources", {}).get("limits", {})
    )
    return limits


# (flavour builder, kwargs, expected workers, expected slots, expected worker limits)
CASES: dict[str, tuple[Callable[..., dict[str, Any]], dict[str, Any], int, int, dict[str, Any]]] = {
    "simple-16-gpus-8-per-node": (
        generate.simple,
        {"gpus": 16, "gpus_per_node": 8},
        2,
        8,
        {"nvidia.com/gpu": 8},
    ),
    "simple-defaults": (generate.simple, {"gpus": 1}, 1, 1, {"nvidia.com/gpu": 1}),
    "simple-4-per-node-1": (
        generate.simple,
        {"gpus": 4, "gpus_per_node": 1},
        4,
        1,
        {"nvidia.com/gpu": 1},
    ),
    "simple-fewer-than-a-node": (
        generate.simple,
        {"gpus": 4, "gpus_per_node": 8},
        1,
        4,
        {"nvidia.com/gpu": 4},
    ),
    "simple-exactly-a-node": (
        generate.simple,
        {"gpus": 8, "gpus_per_node": 8},
        1,
        8,
        {"nvidia.com/gpu": 8},
    ),
    "custom-defaults": (generate.custom, {}, 1, 1, {"nvidia.com/gpu": 1}),
    "custom-3x2": (
        generate.custom,
        {"replicas": 3, "gpus_per_replica": 2},
        3,
        2,
        {"nvidia.com/gpu": 2},
    ),
    "custom-cpu-only": (generate.custom, {"replicas": 2, "gpus_per_replica": 0}, 2, 1, {}),
    "openmpi-defaults": (generate.openmpi, {"exec_": "python train.py"}, 4, 1, {}),
    "openmpi-sized": (
        generate.openmpi,
        {"workers": 2, "gpu": 2, "cpu": "4", "memory": "8Gi", "exec_": "python train.py"},
        2,
        2,
        {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": 2},
    ),
    "openmpi-millicores": (
        generate.openmpi,
        {"workers": 1, "cpu": "500m", "exec_": "hostname"},
        1,
        1,
        {"cpu": "500m"},
    ),
    "elastic-cpu": (generate.elastic, {"min_replicas": 1, "max_replicas": 4}, 1, 1, {}),
    "elastic-gpu": (
        generate.elastic,
        {"min_replicas": 2, "max_replicas": 6, "replicas": 3, "gpus_per_worker": 4},
        3,
        4,
        {"nvidia.com/gpu": 4},
    ),
    "elastic-explicit-slots": (
        generate.elastic,
        {"min_replicas": 1, "max_replicas": 2, "slots": 2, "gpus_per_worker": 1},
        1,
        2,
        {"nvidia.com/gpu": 1},
    ),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_flavour_shape_is_valid_and_admitted(case: str) -> None:
    build, kwargs, workers, slots, limits = CASES[case]
    job = build(common(), **kwargs)
    canonical = parse_and_validate(job).job
    assert canonical.worker is not None
    assert canonical.worker.replicas == workers
    assert slots_per_worker(canonical.spec) == slots
    assert worker_limits(job) == limits
    assert job["spec"]["runPolicy"]["cleanPodPolicy"] == "Running"
    stored = admitted(job)
    assert stored["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == workers
    # The canonical form loses nothing the API server keeps.
    assert parse_and_validate(to_canonical_dict(canonical)).job == canonical
    children_admitted(job)


def test_simple_16_gpus_8_per_node_is_two_workers_of_eight() -> None:
    job = generate.simple(common(name="tf-benchmarks"), gpus=16, gpus_per_node=8)
    assert worker_spec(job)["replicas"] == 2
    assert worker_limits(job) == {"nvidia.com/gpu": 8}
    assert job["spec"]["slotsPerWorker"] == 8
    assert "resources" not in launcher(job)  # the launcher gets no GPUs
    admitted(job)


@pytest.mark.parametrize(
    ("fields", "command", "args"),
    [
        ({}, None, None),
        (
            {"command": "mpirun -np 2 python /opt/train.py"},
            ["mpirun", "-np", "2", "python", "/opt/train.py"],
            None,
        ),
        ({"command": "sh -c 'echo a b'"}, ["sh", "-c", "echo a b"], None),
        (
            {"args": "--batch_size=64,--model=resnet50"},
            None,
            ["--batch_size=64", "--model=resnet50"],
        ),
        ({"command": "python t.py", "args": "--lr=0.1"}, ["python", "t.py"], ["--lr=0.1"]),
    ],
    ids=["none", "split-like-a-shell", "quoted", "args-comma-separated", "both"],
)
def test_command_and_args_go_to_the_launcher_only(
    fields: dict[str, str], command: list[str] | None, args: list[str] | None
) -> None:
    for job in (
        generate.simple(common(**fields), gpus=2),
        generate.custom(common(**fields), replicas=2),
    ):
        assert launcher(job).get("command") == command
        assert launcher(job).get("args") == args
        worker = worker_spec(job)["template"]["spec"]["containers"][0]
        assert "command" not in worker  # the operator starts sshd
        assert "args" not in worker
        admitted(job)


def test_name_namespace_and_image_are_applied() -> None:
    job = generate.custom(common(name="bert", namespace="team-a", image="my/img:2"), replicas=2)
    assert job["metadata"] == {"name": "bert", "namespace": "team-a"}
    assert launcher(job)["image"] == "my/img:2"
    assert worker_spec(job)["template"]["spec"]["containers"][0]["image"] == "my/img:2"
    assert "namespace" not in generate.custom(common(), replicas=1)["metadata"]


def test_openmpi_waits_for_workers_then_runs_mpirun_with_exec() -> None:
    job = generate.openmpi(
        common(), workers=3, gpu=2, exec_="python /opt/train.py --epochs 3", init_timeout=120
    )
    container = launcher(job)
    assert container["command"] == [
        "/bin/sh",
        "-c",
        generate.WAIT_FOR_WORKERS_SCRIPT,
        "wait-for-workers",
    ]
    assert container["args"] == [
        "mpirun", "--allow-run-as-root", "-np", "6", "python", "/opt/train.py", "--epochs", "3",
    ]  # fmt: skip
    assert container["env"] == [{"name": generate.INIT_TIMEOUT_ENV, "value": "120"}]
    assert "resources" not in container
    spec = job["spec"]
    assert spec["launcherCreationPolicy"] == "AtStartup"  # the launcher itself bounds the wait
    assert spec["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 0}
    assert spec["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] == "Never"
    assert admitted(job)["spec"]["launcherCreationPolicy"] == "AtStartup"


def test_openmpi_command_replaces_mpirun_and_args_are_appended() -> None:
    job = generate.openmpi(common(command="/opt/run.sh", args="a,b"), workers=1)
    assert launcher(job)["args"] == ["/opt/run.sh", "a", "b"]
    assert launcher(job)["command"][-1] == "wait-for-workers"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("disk=ssd", {"disk": "ssd"}),
        (
            "cloud.google.com/gke-accelerator=nvidia-tesla-k80,zone=a",
            {"cloud.google.com/gke-accelerator": "nvidia-tesla-k80", "zone": "a"},
        ),
        ("example.com/empty=", {"example.com/empty": ""}),
    ],
    ids=["one", "prefixed-and-two", "empty-value"],
)
def test_node_selector_goes_to_workers_only(text: str, expected: dict[str, str]) -> None:
    job = generate.openmpi(common(), workers=2, node_selector=text, exec_="hostname")
    assert worker_spec(job)["template"]["spec"]["nodeSelector"] == expected
    assert "nodeSelector" not in job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    admitted(job)
    children_admitted(job)


@pytest.mark.parametrize(
    ("kwargs", "np", "min_np", "max_np"),
    [
        ({"min_replicas": 1, "max_replicas": 4}, 1, 1, 4),
        ({"min_replicas": 2, "max_replicas": 5, "replicas": 3}, 3, 2, 5),
        ({"min_replicas": 1, "max_replicas": 3, "gpus_per_worker": 8}, 8, 8, 24),
        ({"min_replicas": 2, "max_replicas": 4, "slots": 2}, 4, 4, 8),
        ({"min_replicas": 3, "max_replicas": 3}, 3, 3, 3),
    ],
    ids=["cpu", "start-between-bounds", "gpus-give-slots", "explicit-slots", "fixed-size"],
)
def test_elastic_horovodrun_bounds_are_worker_bounds_times_slots(
    kwargs: dict[str, int], np: int, min_np: int, max_np: int
) -> None:
    job = generate.elastic(common(), **kwargs)
    command = launcher(job)["command"]
    assert command[:11] == [
        "horovodrun", "-np", str(np), "--min-np", str(min_np), "--max-np", str(max_np),
        "--host-discovery-script", "/etc/mpi/discover_hosts.sh", "--network-interface", "eth0",
    ]  # fmt: skip
    assert command[11:] == ["python", generate.DEFAULT_ELASTIC_SCRIPT]
    policy = job["spec"]["elasticPolicy"]
    assert policy == {"minReplicas": kwargs["min_replicas"], "maxReplicas": kwargs["max_replicas"]}
    # The operator reads the same bounds back from the command (the inference for manifests without
    # a policy).
    canonical = parse_and_validate(job).job
    inferred = api_elastic.infer_elastic_policy(canonical)
    assert inferred is not None
    assert (inferred.min_replicas, inferred.max_replicas) == (
        policy["minReplicas"],
        policy["maxReplicas"],
    )
    admitted(job)


def test_elastic_script_command_and_args() -> None:
    job = generate.elastic(
        common(args="--epochs=3"), max_replicas=2, script="/train/pytorch_synthetic_elastic.py"
    )
    assert launcher(job)["command"][-2:] == ["python", "/train/pytorch_synthetic_elastic.py"]
    assert launcher(job)["args"] == ["--epochs=3"]
    job = generate.elastic(common(command="python3 -u /t.py"), max_replicas=2)
    assert launcher(job)["command"][-3:] == ["python3", "-u", "/t.py"]


SIMPLE, CUSTOM, OPENMPI, ELASTIC = (
    generate.simple,
    generate.custom,
    generate.openmpi,
    generate.elastic,
)
NS, TIMEOUT = "--node-selector", "--init-timeout"


def sel(text: str) -> dict[str, str]:
    return {"node_selector": text, "exec_": "x"}


# id -> (builder, common options, flavour options, the option the error names, a fragment of its
# message)
BAD: dict[str, tuple[Callable[..., dict[str, Any]], dict[str, str], dict[str, Any], str, str]] = {
    "gpus-not-divisible": (
        SIMPLE,
        {},
        {"gpus": 12, "gpus_per_node": 8},
        "--gpus",
        "cannot be split",
    ),
    "zero-gpus": (SIMPLE, {}, {"gpus": 0}, "--gpus", "at least 1"),
    "negative-gpus": (SIMPLE, {}, {"gpus": -8}, "--gpus", "at least 1"),
    "zero-per-node": (SIMPLE, {}, {"gpus": 8, "gpus_per_node": 0}, "--gpus-per-node", "at least 1"),
    "zero-replicas": (CUSTOM, {}, {"replicas": 0}, "--replicas", "at least 1"),
    "negative-gpus-per-replica": (
        CUSTOM,
        {},
        {"gpus_per_replica": -1},
        "--gpus-per-replica",
        "negative",
    ),
    "zero-workers": (OPENMPI, {}, {"workers": 0, "exec_": "x"}, "--workers", "at least 1"),
    "negative-gpu": (OPENMPI, {}, {"gpu": -1, "exec_": "x"}, "--gpu", "negative"),
    "cpu-not-quantity": (OPENMPI, {}, {"cpu": "four", "exec_": "x"}, "--cpu", "quantity"),
    "memory-not-quantity": (OPENMPI, {}, {"memory": "8 GB", "exec_": "x"}, "--memory", "quantity"),
    "memory-padded": (OPENMPI, {}, {"memory": " 8Gi", "exec_": "x"}, "--memory", "quantity"),
    "negative-cpu": (OPENMPI, {}, {"cpu": "-500m", "exec_": "x"}, "--cpu", "negative"),
    "zero-init-timeout": (OPENMPI, {}, {"init_timeout": 0, "exec_": "x"}, TIMEOUT, "at least 1"),
    "negative-init-timeout": (
        OPENMPI,
        {},
        {"init_timeout": -5, "exec_": "x"},
        TIMEOUT,
        "at least 1",
    ),
    "openmpi-without-program": (OPENMPI, {}, {}, "--exec", "required"),
    "exec-and-command": (OPENMPI, {"command": "a"}, {"exec_": "b"}, "--exec", "cannot be combined"),
    "selector-without-equals": (OPENMPI, {}, sel("disk"), NS, "key="),
    "selector-without-key": (OPENMPI, {}, sel("=ssd"), NS, "key="),
    "selector-trailing-comma": (OPENMPI, {}, sel("a=b,"), NS, "key="),
    "selector-space-in-key": (OPENMPI, {}, sel("a b=x"), NS, "label key"),
    "selector-bad-prefix": (OPENMPI, {}, sel("B_/k=x"), NS, "label key"),
    "selector-bad-value": (OPENMPI, {}, sel("k=a b"), NS, "label value"),
    "selector-duplicate": (OPENMPI, {}, sel("k=a,k=b"), NS, "twice"),
    "min-above-max": (
        ELASTIC,
        {},
        {"min_replicas": 3, "max_replicas": 2},
        "--min",
        "greater than --max",
    ),
    "zero-min": (ELASTIC, {}, {"min_replicas": 0, "max_replicas": 2}, "--min", "at least 1"),
    "zero-max": (ELASTIC, {}, {"max_replicas": 0}, "--max", "at least 1"),
    "replicas-above-max": (
        ELASTIC,
        {},
        {"max_replicas": 4, "replicas": 5},
        "--replicas",
        "outside",
    ),
    "replicas-below-min": (
        ELASTIC,
        {},
        {"min_replicas": 2, "max_replicas": 4, "replicas": 1},
        "--replicas",
        "outside",
    ),
    "zero-slots": (ELASTIC, {}, {"max_replicas": 4, "slots": 0}, "--slots", "at least 1"),
    "negative-gpus-per-worker": (
        ELASTIC,
        {},
        {"max_replicas": 4, "gpus_per_worker": -2},
        "--gpus-per-worker",
        "negative",
    ),
    "script-and-command": (
        ELASTIC,
        {"command": "a"},
        {"max_replicas": 4, "script": "b"},
        "--script",
        "with",
    ),
    "name-starts-with-digit": (CUSTOM, {"name": "1-job"}, {}, "--name", "DNS-1035"),
    "name-uppercase": (CUSTOM, {"name": "Job"}, {}, "--name", "DNS-1035"),
    "name-too-long-for-workers": (
        CUSTOM,
        {"name": "x" * 60},
        {"replicas": 2},
        "--name",
        "DNS-1035",
    ),
    "bad-namespace": (CUSTOM, {"namespace": "Team_A"}, {}, "--namespace", "namespace"),
    "empty-image": (CUSTOM, {"image": ""}, {}, "--image", "empty"),
    "unterminated-quote": (CUSTOM, {"command": "'unterminated"}, {}, "--command", "split"),
    "blank-command": (CUSTOM, {"command": "  "}, {}, "--command", "empty"),
    "empty-arg": (CUSTOM, {"args": "a,,b"}, {}, "--args", "empty items"),
    "ssh-port-zero": (CUSTOM, {"ssh_port": 0}, {}, "--ssh-port", "TCP port"),
    "ssh-port-too-big": (CUSTOM, {"ssh_port": 65536}, {}, "--ssh-port", "TCP port"),
    "negative-uid": (CUSTOM, {"run_as_user": -1}, {}, "--run-as-user", "negative"),
    "non-root-without-home": (
        CUSTOM,
        {"run_as_user": 1000},
        {},
        "--ssh-auth-mount-path",
        "required",
    ),
    "relative-ssh-path": (
        CUSTOM,
        {"ssh_auth_mount_path": ".ssh"},
        {},
        "--ssh-auth-mount-path",
        "absolute",
    ),
}


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_bad_options_name_the_option(case: str) -> None:
    build, common_fields, kwargs, option, fragment = BAD[case]
    with pytest.raises(GenerateError) as caught:
        build(common(**common_fields), **kwargs)
    assert caught.value.option == option
    assert fragment in caught.value.message
    assert str(caught.value).startswith(f"{option}: ")


@settings(max_examples=60, deadline=None)
@given(
    min_replicas=st.integers(1, 8),
    extra=st.integers(0, 8),
    start=st.integers(0, 16),
    gpus=st.integers(0, 8),
)
def test_elastic_output_is_always_admitted(
    min_replicas: int, extra: int, start: int, gpus: int
) -> None:
    max_replicas = min_replicas + extra
    replicas = min_replicas + start % (extra + 1)
    job = generate.elastic(
        common(),
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        replicas=replicas,
        gpus_per_worker=gpus,
    )
    slots = max(gpus, 1)
    assert launcher(job)["command"][2] == str(replicas * slots)
    admitted(job)


@settings(max_examples=60, deadline=None)
@given(gpus=st.integers(1, 256), per_node=st.integers(1, 16))
def test_simple_never_loses_or_invents_gpus(gpus: int, per_node: int) -> None:
    if gpus > per_node and gpus % per_node:
        with pytest.raises(GenerateError, match=r"^--gpus: "):
            generate.simple(common(), gpus=gpus, gpus_per_node=per_node)
        return
    job = generate.simple(common(), gpus=gpus, gpus_per_node=per_node)
    total = worker_spec(job)["replicas"] * worker_limits(job)["nvidia.com/gpu"]
    assert total == gpus
    assert job["spec"]["slotsPerWorker"] == worker_limits(job)["nvidia.com/gpu"] <= per_node
    admitted(job)


NON_ROOT = {"run_as_user": 1000, "ssh_port": 2222, "ssh_auth_mount_path": "/home/mpiuser/.ssh"}


@pytest.mark.parametrize(
    "build",
    [
        lambda c: generate.simple(c, gpus=2),
        lambda c: generate.custom(c, replicas=2),
        lambda c: generate.openmpi(c, workers=2, exec_="hostname"),
        lambda c: generate.elastic(c, max_replicas=2),
    ],
    ids=["simple", "custom", "openmpi", "elastic"],
)
def test_non_root_ssh_contract_reaches_spec_pods_and_probe(
    build: Callable[[CommonOptions], Any],
) -> None:
    job = build(common(**NON_ROOT))
    assert job["spec"]["sshAuthMountPath"] == "/home/mpiuser/.ssh"
    for role in ("Launcher", "Worker"):
        pod_spec = job["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]
        assert pod_spec["securityContext"] == {
            "runAsUser": 1000,
            "runAsNonRoot": True,
            "fsGroup": 1000,
        }
    worker = worker_spec(job)["template"]["spec"]["containers"][0]
    assert worker["ports"] == [{"name": "ssh", "containerPort": 2222}]
    admitted(job)
    children_admitted(job)
    # The operator's worker pod probes the declared port and gets the keys through its init
    # container.
    canonical = parse_and_validate({**job, "metadata": {"name": "job", "namespace": "default"}}).job
    pod = desired.build(canonical, settings=Settings(), ssh_keys=KEYS).workers[0]
    assert pod["spec"]["containers"][0]["readinessProbe"]["tcpSocket"] == {"port": 2222}
    assert pod["spec"]["initContainers"][0]["name"] == "ssh-auth-setup"


def test_root_run_as_user_keeps_the_default_mount_path() -> None:
    job = generate.custom(common(run_as_user=0, ssh_port=22))
    assert "sshAuthMountPath" not in job["spec"]
    assert job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["securityContext"] == {
        "runAsUser": 0
    }
    admitted(job)


CLI_MINIMAL = {
    "simple": [],
    "custom": [],
    "openmpi": ["--exec", "hostname"],
    "elastic": ["--max", "2"],
}


@pytest.mark.parametrize("flavour", list(CLI_MINIMAL))
def test_cli_defaults_declare_the_ssh_port_the_operator_probes(flavour: str) -> None:
    """Each flavour's default image has a known sshd port; the output declares it, so the operator's
    workers get a readiness probe instead of a guess (or of no probe and a SSHPortUnknown
    Warning)."""
    parser = argparse.ArgumentParser()
    generate_cli.register(parser.add_subparsers())
    args = parser.parse_args(["generate", flavour, "--name", "job", *CLI_MINIMAL[flavour]])
    job = generate_cli.build(args)
    port = generate_cli.SSH_DEFAULTS[flavour][1]
    assert port is not None
    assert worker_spec(job)["template"]["spec"]["containers"][0]["ports"] == [
        {"name": "ssh", "containerPort": port}
    ]
    canonical = parse_and_validate({**job, "metadata": {"name": "job", "namespace": "default"}}).job
    pod = desired.build(canonical, settings=Settings(), ssh_keys=KEYS).workers[0]
    assert pod["spec"]["containers"][0]["readinessProbe"]["tcpSocket"] == {"port": port}


def test_without_a_port_the_worker_declares_none() -> None:
    job = generate.custom(common(), replicas=1)
    assert "ports" not in worker_spec(job)["template"]["spec"]["containers"][0]


def test_yaml_output_round_trips_and_keeps_the_wait_script_readable() -> None:
    job = generate.openmpi(common(), workers=2, exec_="python t.py")
    text = generate_cli.to_yaml(job)
    assert yaml.safe_load(text) == job
    assert "&id" not in generate_cli.to_yaml(generate.elastic(common(**NON_ROOT), max_replicas=2))
    assert "command:\n            - /bin/sh\n            - -c\n            - |\n" in text


def _run_wait_script(
    tmp_path: Path, ssh_exit: int, timeout: int
) -> subprocess.CompletedProcess[str]:
    """The launcher's wait script under /bin/sh with a fake `ssh` and a hostfile of two workers."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_ssh = bin_dir / "ssh"
    fake_ssh.write_text(
        f'#!/bin/sh\necho "$@" >> {tmp_path}/ssh.log\nexit {ssh_exit}\n', encoding="utf-8"
    )
    fake_ssh.chmod(fake_ssh.stat().st_mode | stat.S_IEXEC)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text(
        "job-worker-0.job.default.svc slots=2\njob-worker-1.job.default.svc slots=2\n"
    )
    script = generate.WAIT_FOR_WORKERS_SCRIPT.replace(generate.HOSTFILE, str(hostfile))
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        generate.INIT_TIMEOUT_ENV: str(timeout),
    }
    return subprocess.run(
        ["/bin/sh", "-c", script, "wait-for-workers", "echo", "started", "mpirun"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )


def test_wait_script_runs_the_program_once_every_worker_answers(tmp_path: Path) -> None:
    done = _run_wait_script(tmp_path, ssh_exit=0, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "started mpirun\n"
    hosts = [line.split()[-2] for line in (tmp_path / "ssh.log").read_text().splitlines()]
    assert hosts == ["job-worker-0.job.default.svc", "job-worker-1.job.default.svc"]


def test_wait_script_gives_up_after_the_init_timeout(tmp_path: Path) -> None:
    done = _run_wait_script(tmp_path, ssh_exit=255, timeout=1)
    assert done.returncode == generate.INIT_TIMEOUT_EXIT_CODE
    assert done.stdout == ""
    assert "job-worker-0.job.default.svc did not accept ssh within 1s" in done.stderr


def test_constants_match_the_operator() -> None:
    assert generate.GPU_RESOURCE == constants.GPU_RESOURCE
    assert generate.HOSTFILE == launcher_builder.HOSTFILE_PATH
    assert f"{launcher_builder.CONFIG_MOUNT_PATH}/{DISCOVER_HOSTS_KEY}" == generate.DISCOVER_HOSTS


def test_admission_really_checks_the_cel_rules() -> None:
    """Guards the test helper: a job the CEL rules refuse is refused here."""
    job = generate.elastic(common(), min_replicas=1, max_replicas=2)
    job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 3
    with pytest.raises(AdmissionError, match="maxReplicas"):
        admitted(job)
