"""desired.config: the ConfigMap `<job>-config` (upstream hostfile, live discover_hosts.sh)."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mpi_discovery import hostfile
from mpi_operator.desired import config

from .factory import JOB_UID, container, make_job, template, worker_pod


@pytest.mark.parametrize(
    ("spec", "workers", "cluster_domain", "expected"),
    [
        (
            {"mpiImplementation": "OpenMPI", "slotsPerWorker": 1},
            2,
            "",
            "pi-worker-0.pi.default.svc slots=1\npi-worker-1.pi.default.svc slots=1\n",
        ),
        (
            {"mpiImplementation": "OpenMPI", "slotsPerWorker": 10},
            1,
            "cluster.local",
            "pi-worker-0.pi.default.svc.cluster.local slots=10\n",
        ),
        (
            {"mpiImplementation": "OpenMPI", "slotsPerWorker": 2, "runLauncherAsWorker": True},
            2,
            "",
            "pi-launcher slots=2\npi-worker-0.pi.default.svc slots=2\npi-worker-1.pi.default.svc "
            "slots=2\n",
        ),
        ({"mpiImplementation": "OpenMPI"}, 0, "", ""),
        (
            {"mpiImplementation": "OpenMPI", "runLauncherAsWorker": True},
            0,
            "",
            "pi-launcher slots=1\n",
        ),
        (
            {"mpiImplementation": "Intel", "slotsPerWorker": 10},
            2,
            "",
            "pi-worker-0.pi.default.svc:10\npi-worker-1.pi.default.svc:10\n",
        ),
        (
            {"mpiImplementation": "Intel", "slotsPerWorker": 1, "runLauncherAsWorker": True},
            1,
            "cluster.local",
            "pi-launcher:1\npi-worker-0.pi.default.svc.cluster.local:1\n",
        ),
        (
            {"mpiImplementation": "MPICH", "slotsPerWorker": 3},
            2,
            "",
            "pi-worker-0.pi.default.svc:3\npi-worker-1.pi.default.svc:3\n",
        ),
        ({"mpiImplementation": "MPICH"}, 0, "", ""),
        (
            {"mpiImplementation": "MPICH", "runLauncherAsWorker": True},
            1,
            "",
            "pi-launcher:1\npi-worker-0.pi.default.svc:1\n",
        ),
    ],
    ids=[
        "openmpi",
        "openmpi-slots-cluster-domain",
        "openmpi-launcher-as-worker",
        "openmpi-no-workers",
        "openmpi-launcher-only",
        "intel",
        "intel-launcher-as-worker-cluster-domain",
        "mpich",
        "mpich-no-workers",
        "mpich-launcher-as-worker",
    ],
)
def test_hostfile_matches_upstream(
    spec: dict[str, Any], workers: int, cluster_domain: str, expected: str
) -> None:
    job = make_job("pi", "default", workers=workers, **spec)
    assert config.render_hostfile(job, cluster_domain) == expected


def test_hostfile_slots_default_to_worker_gpus() -> None:
    gpu = container(resources={"limits": {"nvidia.com/gpu": 4}})
    job = make_job("pi", "default", workers=2, worker_template=template(gpu))
    assert (
        config.render_hostfile(job)
        == "pi-worker-0.pi.default.svc slots=4\npi-worker-1.pi.default.svc slots=4\n"
    )


def test_config_map_object() -> None:
    job = make_job("pi", "default", workers=1)
    assert config.build_config_map(job, [worker_pod(job, 0)]) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "pi-config",
            "namespace": "default",
            "labels": {"app": "pi"},
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v2beta1",
                    "kind": "MPIJob",
                    "name": "pi",
                    "uid": JOB_UID,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "data": {
            "hostfile": "pi-worker-0.pi.default.svc slots=1\n",
            "discover_hosts.sh": "#!/bin/sh\necho pi-worker-0.pi.default.svc:1\n",
        },
    }


def _script(
    job_kwargs: dict[str, Any], pods: list[tuple[int, dict[str, Any]]], cluster_domain: str = ""
) -> str:
    job = make_job("pi", "default", **job_kwargs)
    observed = [worker_pod(job, index, **state) for index, state in pods]
    script: str = config.build_config_map(job, observed, cluster_domain=cluster_domain)["data"][
        "discover_hosts.sh"
    ]
    return script


@pytest.mark.parametrize(
    ("job_kwargs", "pods", "cluster_domain", "expected"),
    [
        ({"workers": 2}, [], "", "#!/bin/sh\n"),
        (
            {"workers": 2},
            [(1, {}), (0, {})],
            "",
            "#!/bin/sh\necho pi-worker-0.pi.default.svc:1\necho pi-worker-1.pi.default.svc:1\n",
        ),
        (
            {"workers": 3},
            [(0, {"ready": False}), (1, {"phase": "Pending", "ready": False}), (2, {})],
            "",
            "#!/bin/sh\necho pi-worker-2.pi.default.svc:1\n",
        ),
        (
            {"workers": 2},
            [(0, {"terminating": True}), (1, {})],
            "",
            "#!/bin/sh\necho pi-worker-1.pi.default.svc:1\n",
        ),
        (
            {"workers": 2},
            [(0, {"phase": "Failed", "ready": False}), (1, {"phase": "Succeeded"})],
            "",
            "#!/bin/sh\n",
        ),
        (
            {"workers": 12},
            [(10, {}), (2, {}), (1, {})],
            "",
            "#!/bin/sh\necho pi-worker-1.pi.default.svc:1\necho pi-worker-2.pi.default.svc:1\n"
            "echo pi-worker-10.pi.default.svc:1\n",
        ),
        ({"workers": 2}, [(0, {}), (2, {})], "", "#!/bin/sh\necho pi-worker-0.pi.default.svc:1\n"),
        (
            {"workers": 1, "runLauncherAsWorker": True},
            [],
            "",
            "#!/bin/sh\necho pi-launcher.pi.default.svc:1\n",
        ),
        (
            {"workers": 1, "runLauncherAsWorker": True, "slotsPerWorker": 4},
            [(0, {})],
            "cluster.local",
            "#!/bin/sh\necho pi-launcher.pi.default.svc.cluster.local:4\n"
            "echo pi-worker-0.pi.default.svc.cluster.local:4\n",
        ),
        ({"workers": 1}, [(0, {"owner_uid": "someone-else"})], "", "#!/bin/sh\n"),
    ],
    ids=[
        "no-pods",
        "ready-workers",
        "unready-and-pending-skipped",
        "terminating-skipped",
        "finished-skipped",
        "natural-order",
        "index-beyond-replicas-skipped",
        "launcher-as-worker-always-first",
        "launcher-as-worker-cluster-domain",
        "foreign-owner-skipped",
    ],
)
def test_discover_hosts(
    job_kwargs: dict[str, Any],
    pods: list[tuple[int, dict[str, Any]]],
    cluster_domain: str,
    expected: str,
) -> None:
    assert _script(job_kwargs, pods, cluster_domain) == expected


def test_pods_of_other_jobs_and_roles_are_ignored() -> None:
    job = make_job("pi", workers=2)
    other = worker_pod(make_job("pie"), 0)
    launcher = worker_pod(job, 1)
    launcher["metadata"]["labels"]["training.kubeflow.org/job-role"] = "launcher"
    no_labels = worker_pod(job, 0)
    del no_labels["metadata"]["labels"]
    assert (
        config.discoverable_workers(job, [other, launcher, no_labels, {}, {"metadata": None}]) == []
    )


def test_explicit_discovered_hosts_override_the_pods() -> None:
    job = make_job("pi", workers=2)
    cm = config.build_config_map(
        job, [worker_pod(job, 0)], discovered=[("pi-worker-1.pi.default.svc", 2)]
    )
    assert cm["data"]["discover_hosts.sh"] == "#!/bin/sh\necho pi-worker-1.pi.default.svc:2\n"
    assert (
        cm["data"]["hostfile"]
        == "pi-worker-0.pi.default.svc slots=1\npi-worker-1.pi.default.svc slots=1\n"
    )


POD_STATE = st.fixed_dictionaries(
    {
        "phase": st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown"]),
        "ready": st.booleans(),
        "terminating": st.booleans(),
    }
)


@given(
    replicas=st.integers(min_value=0, max_value=30),
    pods=st.dictionaries(st.integers(min_value=0, max_value=40), POD_STATE, max_size=25),
    launcher_as_worker=st.booleans(),
    slots=st.one_of(st.none(), st.integers(min_value=0, max_value=8)),
)
def test_discover_hosts_properties(
    replicas: int, pods: dict[int, dict[str, Any]], launcher_as_worker: bool, slots: int | None
) -> None:
    spec: dict[str, Any] = {"runLauncherAsWorker": launcher_as_worker}
    if slots is not None:
        spec["slotsPerWorker"] = slots
    job = make_job("job-1", "ns", workers=replicas, **spec)
    observed = [worker_pod(job, index, **state) for index, state in pods.items()]
    snapshot = copy.deepcopy(observed)
    script = config.build_config_map(job, observed)["data"]["discover_hosts.sh"]
    assert observed == snapshot

    assert script.startswith("#!/bin/sh\n")
    output = [line.removeprefix("echo ") for line in script.splitlines()[1:]]
    assert all(re.fullmatch(r"[a-z0-9.-]+:[0-9]+", line) for line in output)
    hosts = hostfile.parse_discover_hosts(script)
    if launcher_as_worker:
        assert hosts[0][0] == "job-1-launcher.job-1.ns.svc"
        hosts = hosts[1:]
    indices = [int(host.split(".")[0].removeprefix("job-1-worker-")) for host, _ in hosts]
    assert indices == sorted(indices)
    eligible = {
        i
        for i, s in pods.items()
        if s["phase"] == "Running" and s["ready"] and not s["terminating"] and i < replicas
    }
    assert set(indices) == eligible
