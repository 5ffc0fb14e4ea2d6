"""kube-scheduler's filters, one node at a time: cordon, taints, selectors and affinity,
resources."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.scheduling.filters import (
    AFFINITY_MISMATCH,
    UNSCHEDULABLE,
    Failure,
    NodeInfo,
    filter_node,
    node_info,
    tolerates,
)

NODE = NodeInfo(
    name="n1",
    labels={"zone": "a", "gpus": "4"},
    taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
    allocatable={"cpu": 4000, "memory": 8 * 2**30, "pods": 3, "nvidia.com/gpu": 2},
    requested={"cpu": 3000, "nvidia.com/gpu": 2},
    pods=1,
)
TOLERATE_GPU = [{"key": "gpu", "operator": "Exists"}]


def term(**expr: Any) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expr]}]
            }
        }
    }


@pytest.mark.parametrize(
    ("spec", "requests", "failure"),
    [
        ({"tolerations": TOLERATE_GPU}, {}, None),
        ({}, {}, Failure(("node(s) had untolerated taint {gpu: true}",), resolvable=False)),
        (
            {"tolerations": [{"key": "gpu", "value": "false", "effect": "NoSchedule"}]},
            {},
            Failure(("node(s) had untolerated taint {gpu: true}",), resolvable=False),
        ),
        ({"tolerations": [{"operator": "Exists"}]}, {}, None),
        (
            {"tolerations": TOLERATE_GPU, "nodeSelector": {"zone": "b"}},
            {},
            Failure((AFFINITY_MISMATCH,), False),
        ),
        (
            {
                "tolerations": TOLERATE_GPU,
                "affinity": term(key="zone", operator="In", values=["a", "c"]),
            },
            {},
            None,
        ),
        (
            {
                "tolerations": TOLERATE_GPU,
                "affinity": term(key="zone", operator="NotIn", values=["a"]),
            },
            {},
            Failure((AFFINITY_MISMATCH,), False),
        ),
        (
            {
                "tolerations": TOLERATE_GPU,
                "affinity": term(key="gpus", operator="Gt", values=["3"]),
            },
            {},
            None,
        ),
        (
            {
                "tolerations": TOLERATE_GPU,
                "affinity": term(key="gpus", operator="Lt", values=["3"]),
            },
            {},
            Failure((AFFINITY_MISMATCH,), False),
        ),
        (
            {"tolerations": TOLERATE_GPU, "affinity": term(key="ssd", operator="DoesNotExist")},
            {},
            None,
        ),
        (
            {"tolerations": TOLERATE_GPU, "affinity": term(key="ssd", operator="Exists")},
            {},
            Failure((AFFINITY_MISMATCH,), False),
        ),
        (
            {"tolerations": TOLERATE_GPU},
            {"cpu": 2000, "nvidia.com/gpu": 1, "example.com/fpga": 1},
            Failure(
                (
                    "Insufficient cpu",
                    "Insufficient example.com/fpga",
                    "Insufficient nvidia.com/gpu",
                ),
                True,
            ),
        ),
        ({"tolerations": TOLERATE_GPU}, {"cpu": 1000, "memory": 8 * 2**30}, None),
    ],
    ids=[
        "tolerated",
        "untolerated",
        "wrong-value",
        "tolerate-everything",
        "node-selector",
        "in",
        "not-in",
        "gt",
        "lt",
        "does-not-exist",
        "exists",
        "insufficient",
        "exactly-fits",
    ],
)
def test_filter_node(
    spec: dict[str, Any], requests: dict[str, int], failure: Failure | None
) -> None:
    assert filter_node(spec, requests, NODE) == failure


def test_a_cordoned_node_refuses_pods_that_do_not_tolerate_it() -> None:
    node = NodeInfo(name="n", unschedulable=True, allocatable={"pods": 10})
    assert filter_node({}, {}, node) == Failure((UNSCHEDULABLE,), resolvable=False)
    toleration = {
        "key": "node.kubernetes.io/unschedulable",
        "operator": "Exists",
        "effect": "NoSchedule",
    }
    assert filter_node({"tolerations": [toleration]}, {}, node) is None


def test_a_full_node_has_too_many_pods_and_an_unlimited_one_never_fills() -> None:
    node = NodeInfo(name="n", allocatable={"pods": 1}, pods=1)
    assert filter_node({}, {}, node) == Failure(("Too many pods",), resolvable=True)
    assert filter_node({}, {"cpu": 10**9}, NodeInfo(name="n", unlimited=True)) is None


def test_prefer_no_schedule_does_not_filter_and_no_execute_does() -> None:
    node = NodeInfo(
        name="n", allocatable={"pods": 10}, taints=[{"key": "k", "effect": "PreferNoSchedule"}]
    )
    assert filter_node({}, {}, node) is None
    node.taints = [{"key": "k", "effect": "NoExecute"}]
    assert filter_node({}, {}, node) == Failure(
        ("node(s) had untolerated taint {k: }",), resolvable=False
    )


def test_match_fields_selects_by_node_name_and_an_empty_term_matches_nothing() -> None:
    fields = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [fields]}
        }
    }
    node = NodeInfo(name="n", allocatable={"pods": 10})
    assert filter_node({"affinity": affinity}, {}, node) is None
    empty: dict[str, Any] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}
        }
    }
    assert filter_node({"affinity": empty}, {}, node) == Failure((AFFINITY_MISMATCH,), False)


def test_tolerations_match_by_key_effect_and_value() -> None:
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    assert tolerates({"key": "k", "value": "v"}, taint)
    assert tolerates({"key": "k", "operator": "Exists", "effect": "NoSchedule"}, taint)
    assert not tolerates({"key": "k", "operator": "Exists", "effect": "NoExecute"}, taint)
    assert not tolerates({"key": "other", "operator": "Exists"}, taint)


def test_node_info_reads_a_node_object() -> None:
    node = {
        "metadata": {"name": "n", "labels": {"a": "b"}},
        "spec": {"unschedulable": True, "taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "1500m", "memory": "1Gi", "pods": "110"}},
    }
    info = node_info(node)
    assert (info.name, info.unschedulable, info.allocatable) == (
        "n",
        True,
        {"cpu": 1500, "memory": 2**30, "pods": 110},
    )
