"""The worker ceiling (`constants.MAX_WORKER_REPLICAS`) is computed from the ConfigMap's limit: a
job at the ceiling with the longest names the operator allows, every worker replaced once (so each
host name takes the whole 63-character label), 10-digit slots, the launcher listed as a worker and
every worker in `discover_hosts.sh`, renders host lists within nine tenths of 1 MiB; one more worker
would not. Names longer than the computation's (a long `--cluster-domain`) are refused per job."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mpi_operator.api import InvalidMPIJob, parse_and_validate
from mpi_operator.api import constants as c
from mpi_operator.desired import config
from mpi_operator.elastic import identity
from mpi_operator.planning.limits import DATA_MAX_BYTES

CEILING = c.MAX_WORKER_REPLICAS
DOMAIN = c.REFERENCE_CLUSTER_DOMAIN


def body(name: str, namespace: str, workers: int, **spec: Any) -> dict[str, Any]:
    container = {"name": "w", "image": "mpi:1"}
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "slotsPerWorker": c.INT32_MAX,
            "runLauncherAsWorker": True,
            "elasticPolicy": {"minReplicas": 1, "maxReplicas": workers},
            "mpiReplicaSpecs": {
                "Launcher": {"template": {"spec": {"containers": [copy.deepcopy(container)]}}},
                "Worker": {"replicas": workers, "template": {"spec": {"containers": [container]}}},
            },
            **spec,
        },
    }


def worst_case_data_bytes(workers: int) -> int:
    """The host lists of the longest-named valid job of `workers` workers, by the real renderers."""
    name = "j" * (c.DNS1035_LABEL_MAX_LENGTH - len(f"-worker-{workers - 1}"))
    job = parse_and_validate(
        body(name, "n" * c.NAMESPACE_MAX_LENGTH, workers), cluster_domain=DOMAIN
    ).job
    hostnames = {i: identity.worker_hostname(job, i, 1) for i in range(workers)}
    assert {len(h) for h in hostnames.values()} == {c.DNS1035_LABEL_MAX_LENGTH}
    discovered = [identity.worker_host(job, i, 1, DOMAIN) for i in range(workers)]
    config_map = config.build_config_map(
        job,
        cluster_domain=DOMAIN,
        discovered=[(host, c.INT32_MAX) for host in discovered],
        hostnames=hostnames,
    )
    return sum(len(value.encode()) for value in config_map["data"].values())


def test_a_job_at_the_ceiling_with_the_longest_names_fits_well_inside_the_limit() -> None:
    size = worst_case_data_bytes(CEILING)
    assert size <= c.CONFIG_DATA_BUDGET_BYTES <= 0.9 * DATA_MAX_BYTES
    # The constant's arithmetic is the renderers' own, never an under-estimate.
    assert size <= c.host_list_bytes(CEILING + 1)


def test_one_worker_more_would_not_fit_well_inside() -> None:
    assert c.host_list_bytes(CEILING + 2) > c.CONFIG_DATA_BUDGET_BYTES
    assert c.most_workers() == CEILING


def test_the_ceiling_is_accepted_and_one_more_is_refused_naming_the_ceiling() -> None:
    parse_and_validate(body("big", "default", CEILING))
    with pytest.raises(InvalidMPIJob, match=f"must be no more than {CEILING} workers"):
        parse_and_validate(body("big", "default", CEILING + 1))


def test_a_long_cluster_domain_leaves_room_for_fewer_workers_and_says_how_many() -> None:
    domain = ".".join(["d" * 30] * 2)
    job = body("j" * 40, "n" * c.NAMESPACE_MAX_LENGTH, CEILING)
    with pytest.raises(InvalidMPIJob) as caught:
        parse_and_validate(job, cluster_domain=domain)
    message = str(caught.value)
    assert "metadata.name" in message
    assert "use a shorter job name, namespace or cluster domain" in message
    most = int(message.split("at most ")[1].split(" workers")[0])
    assert 1000 < most < CEILING
    fewer = body("j" * 40, "n" * c.NAMESPACE_MAX_LENGTH, most)
    parse_and_validate(fewer, cluster_domain=domain)
    # The same names with the reference domain take the whole ceiling.
    parse_and_validate(job, cluster_domain=DOMAIN)
