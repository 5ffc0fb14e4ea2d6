"""desired.build: the whole desired state, valid for Kubernetes' own schemas, never touching its
inputs."""

from __future__ import annotations

import copy
import json
from typing import Any

import kubernetes_validate
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpi_operator import desired
from mpi_operator.api.models import MPIJob
from mpi_operator.desired.secret import SSHKeyPair
from mpi_operator.settings import Settings

from .factory import container, make_job, template, worker_pod

KEYS = SSHKeyPair(
    private_key_pem=b"-----BEGIN EC PRIVATE KEY-----\n", public_key=b"ecdsa-sha2-nistp521 AAAA\n"
)
KUBERNETES_VERSION = "1.32.0"

RICH_MAIN = container(
    "trainer",
    command=[
        "horovodrun",
        "--host-discovery-script",
        "/etc/mpi/discover_hosts.sh",
        "python",
        "train.py",
    ],
    env=[{"name": "EPOCHS", "value": "3"}],
    ports=[{"name": "ssh", "containerPort": 2222}],
    resources={"limits": {"nvidia.com/gpu": 2, "cpu": "4", "memory": "8Gi"}},
    securityContext={"runAsUser": 1000, "runAsNonRoot": True},
    volumeMounts=[{"name": "data", "mountPath": "/data"}],
)
RICH_TEMPLATE = {
    "metadata": {"labels": {"team": "ml"}, "annotations": {"note": "x"}},
    "spec": {
        "containers": [RICH_MAIN, container("sidecar")],
        "initContainers": [container("fetch", command=["true"])],
        "volumes": [{"name": "data", "emptyDir": {}}],
        "securityContext": {"fsGroup": 1000},
        "dnsConfig": {"searches": ["corp.example"]},
        "hostNetwork": True,
        "priorityClassName": "high",
        "nodeSelector": {"accelerator": "a100"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    },
}

CASES: dict[str, tuple[dict[str, Any], Settings]] = {
    "defaults": ({}, Settings()),
    "intel": ({"mpiImplementation": "Intel", "slotsPerWorker": 4}, Settings()),
    "mpich": ({"mpiImplementation": "MPICH"}, Settings()),
    "non-root-rich-templates": (
        {
            "sshAuthMountPath": "/home/mpiuser/.ssh",
            "worker_template": RICH_TEMPLATE,
            "launcher_template": RICH_TEMPLATE,
            "runLauncherAsWorker": True,
            "runPolicy": {
                "ttlSecondsAfterFinished": 60,
                "activeDeadlineSeconds": 3600,
                "backoffLimit": 2,
            },
        },
        Settings(cluster_domain="cluster.local"),
    ),
    "volcano": ({"worker_template": RICH_TEMPLATE}, Settings(gang_scheduling="volcano")),
    "scheduler-plugins": ({}, Settings(gang_scheduling="scheduler-plugins")),
    "suspended": ({"runPolicy": {"suspend": True}}, Settings(gang_scheduling="volcano")),
    "launcher-only": ({"workers": None}, Settings()),
}


def _state(case: str) -> tuple[MPIJob, desired.DesiredState]:
    spec, operator_settings = CASES[case]
    job = make_job("pi", "default", **copy.deepcopy(spec))
    observed = [worker_pod(job, i) for i in range(job.worker.replicas if job.worker else 0)]
    state = desired.build(job, observed_pods=observed, settings=operator_settings, ssh_keys=KEYS)
    return job, state


def _built_in_objects(state: desired.DesiredState) -> list[dict[str, Any]]:
    assert state.secret is not None
    return [
        state.service,
        state.config_map,
        state.secret,
        state.launcher_job,
        *state.workers.values(),
    ]


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_every_object_is_valid_for_the_api_server(case: str) -> None:
    """Strict schema validation: nothing we send would be refused or silently pruned."""
    _, state = _state(case)
    for obj in _built_in_objects(state):
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(
                f"{obj['kind']} {obj['metadata']['name']}: {error.message} at "
                f"{list(error.absolute_path)}"
            )
        json.dumps(obj)  # plain JSON data only


def test_build_defaults() -> None:
    _job, state = _state("defaults")
    assert state.service["metadata"]["name"] == "pi"
    assert state.config_map["data"] == {
        "hostfile": "pi-worker-0.pi.default.svc slots=1\npi-worker-1.pi.default.svc slots=1\n",
        "discover_hosts.sh": (
            "#!/bin/sh\necho pi-worker-0.pi.default.svc:1\necho pi-worker-1.pi.default.svc:1\n"
        ),
    }
    assert state.secret is not None
    assert state.secret["metadata"]["name"] == "pi-ssh"
    assert state.launcher_job["metadata"]["name"] == "pi-launcher"
    assert {i: w["metadata"]["name"] for i, w in state.workers.items()} == {
        0: "pi-worker-0",
        1: "pi-worker-1",
    }
    assert state.pod_group is None


def test_suspended_job_wants_no_workers_and_no_pod_group() -> None:
    _, state = _state("suspended")
    assert state.workers == {}
    assert state.pod_group is None
    assert state.launcher_job["spec"]["suspend"] is True


@pytest.mark.parametrize(
    ("case", "api_version"),
    [
        ("volcano", "scheduling.volcano.sh/v1beta1"),
        ("scheduler-plugins", "scheduling.x-k8s.io/v1alpha1"),
    ],
    ids=["volcano", "scheduler-plugins"],
)
def test_gang_scheduling_builds_a_pod_group(case: str, api_version: str) -> None:
    _, state = _state(case)
    assert state.pod_group is not None
    assert state.pod_group["apiVersion"] == api_version
    assert all(w["spec"]["schedulerName"] for w in state.workers.values())


def test_no_keys_means_no_secret() -> None:
    state = desired.build(make_job(), settings=Settings())
    assert state.secret is None


def test_cluster_domain_reaches_hostfile_discovery_and_dns_search() -> None:
    job = make_job("pi", "ns", workers=1)
    state = desired.build(
        job, observed_pods=[worker_pod(job, 0)], settings=Settings(cluster_domain="corp.example")
    )
    assert state.config_map["data"]["hostfile"] == "pi-worker-0.pi.ns.svc.corp.example slots=1\n"
    assert (
        state.config_map["data"]["discover_hosts.sh"]
        == "#!/bin/sh\necho pi-worker-0.pi.ns.svc.corp.example:1\n"
    )
    assert state.workers[0]["spec"]["dnsConfig"]["searches"] == ["pi.ns.svc.corp.example"]


def test_outputs_share_nothing_with_the_job() -> None:
    job, state = _state("non-root-rich-templates")
    before = job.model_dump(by_alias=True)
    for obj in [state.launcher_job, *state.workers.values()]:
        pod_spec = obj["spec"]["template"]["spec"] if obj["kind"] == "Job" else obj["spec"]
        pod_spec["containers"][0]["env"].clear()
        pod_spec["volumes"].clear()
        pod_spec["dnsConfig"] = {}
    assert job.model_dump(by_alias=True) == before


JOB_SPECS = st.fixed_dictionaries(
    {
        "workers": st.integers(min_value=0, max_value=5),
        "runLauncherAsWorker": st.booleans(),
        "mpiImplementation": st.sampled_from(["OpenMPI", "Intel", "MPICH"]),
        "sshAuthMountPath": st.sampled_from(["/root/.ssh", "/home/mpiuser/.ssh"]),
        "worker_template": st.sampled_from([template(), RICH_TEMPLATE]),
        "launcher_template": st.sampled_from([template(), RICH_TEMPLATE]),
        "runPolicy": st.sampled_from(
            [{}, {"suspend": True}, {"schedulingPolicy": {"minAvailable": 1}}]
        ),
    }
)


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=JOB_SPECS,
    gang=st.sampled_from([None, "volcano", "scheduler-plugins"]),
    ready=st.lists(st.booleans(), max_size=6),
)
def test_build_never_mutates_its_inputs_and_is_deterministic(
    spec: dict[str, Any], gang: Any, ready: list[bool]
) -> None:
    job = make_job("job", "ns", **copy.deepcopy(spec))
    pods = [worker_pod(job, i, ready=r) for i, r in enumerate(ready)]
    job_before = job.model_dump(by_alias=True)
    pods_before = copy.deepcopy(pods)
    operator_settings = Settings(gang_scheduling=gang)
    first = desired.build(
        job, observed_pods=pods, settings=operator_settings, ssh_keys=KEYS, priority_classes={}
    )
    second = desired.build(
        job, observed_pods=pods, settings=operator_settings, ssh_keys=KEYS, priority_classes={}
    )
    assert job.model_dump(by_alias=True) == job_before
    assert pods == pods_before
    assert first == second
