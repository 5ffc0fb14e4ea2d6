"""desired.naming: child names, labels, owner references and DNS names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mpi_operator.desired import naming

from .factory import JOB_UID, make_job


def test_child_names() -> None:
    job = make_job("pi", "default")
    assert naming.service_name(job) == "pi"
    assert naming.config_map_name(job) == "pi-config"
    assert naming.ssh_secret_name(job) == "pi-ssh"
    assert naming.launcher_name(job) == "pi-launcher"
    assert naming.pod_group_name(job) == "pi"
    assert naming.worker_name(job, 12) == "pi-worker-12"


@pytest.mark.parametrize(
    ("pod_name", "index"),
    [
        ("pi-worker-0", 0),
        ("pi-worker-10", 10),
        ("pi-worker-01", None),
        ("pi-worker-", None),
        ("pi-worker-x", None),
        ("pi-launcher", None),
        ("pie-worker-1", None),
        ("pi-worker-1-2", None),
    ],
    ids=[
        "zero",
        "ten",
        "leading-zero",
        "no-index",
        "not-a-number",
        "launcher",
        "other-job",
        "nested",
    ],
)
def test_worker_index(pod_name: str, index: int | None) -> None:
    assert naming.worker_index(make_job("pi"), pod_name) == index


def test_owner_reference_is_a_controller_ref() -> None:
    assert naming.owner_reference(make_job("pi")) == {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "name": "pi",
        "uid": JOB_UID,
        "controller": True,
        "blockOwnerDeletion": True,
    }


@pytest.mark.parametrize(
    ("refs", "controlled"),
    [
        ([{"uid": JOB_UID, "controller": True}], True),
        ([{"uid": JOB_UID, "controller": False}], False),
        ([{"uid": "other", "controller": True}], False),
        ([], False),
    ],
    ids=["ours", "not-controller", "foreign", "none"],
)
def test_is_controlled_by(refs: list[dict[str, object]], controlled: bool) -> None:
    assert (
        naming.is_controlled_by({"metadata": {"ownerReferences": refs}}, make_job()) is controlled
    )


def test_pod_labels_include_the_earlier_controllers_and_the_sdks() -> None:
    assert naming.pod_labels(make_job("pi"), "launcher") == {
        "training.kubeflow.org/operator-name": "mpi-operator",
        "training.kubeflow.org/job-name": "pi",
        "training.kubeflow.org/job-role": "launcher",
        "mpi_job_name": "pi",
        "mpi_role_type": "launcher",
        "mpi-job-name": "pi",
        "mpi-job-role": "launcher",
        "training.kubeflow.org/replica-type": "launcher",
    }


def test_service_selector_matches_launcher_and_workers() -> None:
    job = make_job("pi")
    selector = naming.service_selector(job)
    for role in ("launcher", "worker"):
        labels = naming.pod_labels(job, role)
        assert all(labels[k] == v for k, v in selector.items())


@pytest.mark.parametrize(
    ("launcher_as_worker", "index", "label"),
    [(False, 0, "0"), (False, 12, "12"), (True, 0, "1"), (True, 12, "13")],
    ids=["plain-0", "plain-12", "shifted-0", "shifted-12"],
)
def test_worker_replica_index(launcher_as_worker: bool, index: int, label: str) -> None:
    job = make_job(runLauncherAsWorker=launcher_as_worker)
    assert naming.worker_replica_index(job, index) == label


@pytest.mark.parametrize(
    ("cluster_domain", "fqdn", "search"),
    [
        ("", "pi-worker-3.pi.ns1.svc", "pi.ns1.svc.cluster.local"),
        ("cluster.local", "pi-worker-3.pi.ns1.svc.cluster.local", "pi.ns1.svc.cluster.local"),
        ("corp.example", "pi-worker-3.pi.ns1.svc.corp.example", "pi.ns1.svc.corp.example"),
    ],
    ids=["unset", "cluster-local", "custom"],
)
def test_dns_names_honour_the_cluster_domain(cluster_domain: str, fqdn: str, search: str) -> None:
    job = make_job("pi", "ns1")
    assert naming.worker_fqdn(job, 3, cluster_domain) == fqdn
    assert naming.launcher_fqdn(job, cluster_domain) == fqdn.replace("worker-3", "launcher")
    assert naming.dns_search_domain(job, cluster_domain) == search


@given(st.integers(min_value=0, max_value=10**6))
def test_worker_index_inverts_worker_name(index: int) -> None:
    job = make_job("job-1")
    assert naming.worker_index(job, naming.worker_name(job, index)) == index


LABEL_VALUES = st.sampled_from(["pi", "pie", "worker", "launcher", "mpi-operator", "other", ""])


@given(
    st.dictionaries(
        st.sampled_from(sorted({*naming.worker_selector(make_job("pi")), "app", "x"})),
        LABEL_VALUES,
        max_size=5,
    )
)
def test_has_worker_labels_is_the_worker_selector_matching(labels: dict[str, str]) -> None:
    job = make_job("pi")
    selected = all(labels.get(k) == v for k, v in naming.worker_selector(job).items())
    assert naming.has_worker_labels(job, labels) == selected
    assert naming.has_worker_labels(job, {**labels, **naming.worker_selector(job)})
