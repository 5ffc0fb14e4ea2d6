"""Elastic bounds: elasticPolicy, or inferred from the launcher's horovodrun --min-np/--max-np."""

from __future__ import annotations

from typing import Any

import pytest

from mpi_operator.api import normalize
from mpi_operator.api.elastic import (
    HorovodrunArgs,
    effective_elastic_policy,
    infer_elastic_policy,
    parse_horovodrun,
)


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["python", "train.py"], None),
        (
            [
                "horovodrun",
                "-np",
                "2",
                "--min-np",
                "1",
                "--max-np",
                "3",
                "--host-discovery-script",
                "/d.sh",
                "python",
            ],
            HorovodrunArgs(np=2, min_np=1, max_np=3, host_discovery_script="/d.sh"),
        ),
        (
            ["/usr/local/bin/horovodrun", "--num-proc=4", "--max-np=8"],
            HorovodrunArgs(np=4, max_np=8),
        ),
        (["horovodrun", "--min-np", "x", "-np"], HorovodrunArgs()),
    ],
    ids=["no-horovodrun", "flags", "equals-and-path", "junk"],
)
def test_parse_horovodrun(argv: list[str], want: HorovodrunArgs | None) -> None:
    assert parse_horovodrun(argv) == want


def _job(launcher: dict[str, Any], workers: int = 2, slots: int | None = None, **spec: Any) -> Any:
    container = {"name": "c", "image": "i"}
    obj = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "e"},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"template": {"spec": {"containers": [container | launcher]}}},
                "Worker": {"replicas": workers, "template": {"spec": {"containers": [container]}}},
            }
        }
        | spec,
    }
    if slots is not None:
        obj["spec"]["slotsPerWorker"] = slots
    return normalize(obj).job


DISCOVERY = ["--host-discovery-script", "/etc/mpi/discover_hosts.sh"]


@pytest.mark.parametrize(
    ("launcher", "slots", "bounds"),
    [
        (
            {
                "command": [
                    "horovodrun",
                    "-np",
                    "2",
                    "--min-np",
                    "1",
                    "--max-np",
                    "3",
                    *DISCOVERY,
                    "python",
                ]
            },
            1,
            (1, 3),
        ),
        (
            {"command": ["horovodrun"], "args": ["--min-np", "4", "--max-np", "16", *DISCOVERY]},
            4,
            (1, 4),
        ),
        ({"command": ["horovodrun", "--min-np", "6", "--max-np", "16", *DISCOVERY]}, 4, (2, 4)),
        (
            {
                "command": [
                    "sh",
                    "-c",
                    "cd /w && horovodrun -np 4 --host-discovery-script /d.sh python t.py",
                ]
            },
            2,
            (2, 2),
        ),
        ({"command": ["horovodrun", "-np", "2", "python", "t.py"]}, 1, None),
    ],
    ids=["v1-example", "slots-4", "min-rounds-up", "shell-script", "not-elastic"],
)
def test_infer_elastic_policy(
    launcher: dict[str, Any], slots: int, bounds: tuple[int, int] | None
) -> None:
    policy = infer_elastic_policy(_job(launcher, slots=slots))
    assert (None if policy is None else (policy.min_replicas, policy.max_replicas)) == bounds


def test_explicit_policy_wins_over_inference() -> None:
    job = _job(
        {"command": ["horovodrun", "--min-np", "1", "--max-np", "3", *DISCOVERY]},
        elasticPolicy={"minReplicas": 2, "maxReplicas": 6},
    )
    policy = effective_elastic_policy(job)
    assert policy is not None
    assert (policy.min_replicas, policy.max_replicas) == (2, 6)
