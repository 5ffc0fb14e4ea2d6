"""The pure logic of node failure, table-driven: eviction delays from tolerations, the lifecycle
controller's health taints and Unknown conditions, a pod's Ready turning False."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.controllers import nodehealth as nh

UNREACHABLE_NE = {"key": nh.UNREACHABLE, "effect": "NoExecute"}
DEFAULTS = [
    {"key": nh.NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": nh.UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]


@pytest.mark.parametrize(
    ("tolerations", "taints", "delay"),
    [
        ([], [], None),
        ([], [{"key": "a", "effect": "NoSchedule"}], None),
        ([], [UNREACHABLE_NE], 0.0),
        (DEFAULTS, [UNREACHABLE_NE], 300.0),
        (DEFAULTS, [UNREACHABLE_NE, {"key": "x", "effect": "NoExecute"}], 0.0),
        ([{"operator": "Exists"}], [UNREACHABLE_NE], None),
        (
            [{"key": nh.UNREACHABLE, "operator": "Exists", "tolerationSeconds": -5}],
            [UNREACHABLE_NE],
            0.0,
        ),
        (
            [{"key": "x", "operator": "Exists", "tolerationSeconds": 60}, *DEFAULTS],
            [UNREACHABLE_NE, {"key": "x", "effect": "NoExecute"}],
            60.0,
        ),
        # The first toleration matching a taint is the one used (GetMatchingTolerations).
        ([{"operator": "Exists"}, *DEFAULTS], [UNREACHABLE_NE], None),
    ],
)
def test_eviction_delay(
    tolerations: list[dict[str, Any]], taints: list[dict[str, Any]], delay: float | None
) -> None:
    assert nh.eviction_delay(tolerations, taints) == delay


@pytest.mark.parametrize(
    ("taints", "ready", "keys"),
    [
        ([], "True", []),
        ([], "Unknown", [(nh.UNREACHABLE, "NoSchedule"), (nh.UNREACHABLE, "NoExecute")]),
        ([], "False", [(nh.NOT_READY, "NoSchedule"), (nh.NOT_READY, "NoExecute")]),
        (
            [{"key": "user", "effect": "NoSchedule"}, UNREACHABLE_NE],
            "True",
            [("user", "NoSchedule")],
        ),
        (
            [{"key": nh.UNREACHABLE, "effect": "NoSchedule"}, UNREACHABLE_NE],
            "False",
            [(nh.NOT_READY, "NoSchedule"), (nh.NOT_READY, "NoExecute")],
        ),
    ],
)
def test_health_taints(
    taints: list[dict[str, Any]], ready: str, keys: list[tuple[str, str]]
) -> None:
    result = nh.health_taints(taints, ready, "T")
    assert [(t["key"], t["effect"]) for t in result] == keys
    for t in result:
        if t["key"] in nh.HEALTH_TAINT_KEYS:
            assert ("timeAdded" in t) == (t["effect"] == "NoExecute")


def test_health_taints_keep_the_time_a_taint_was_added() -> None:
    first = nh.health_taints([], "Unknown", "T1")
    assert nh.health_taints(first, "Unknown", "T2") == first


def test_unknown_conditions_keep_the_heartbeat() -> None:
    conditions = [
        {
            "type": "Ready",
            "status": "True",
            "lastHeartbeatTime": "H",
            "lastTransitionTime": "A",
            "reason": "KubeletReady",
            "message": "m",
        },
        {
            "type": "PIDPressure",
            "status": "Unknown",
            "lastHeartbeatTime": "H",
            "lastTransitionTime": "B",
            "reason": nh.UNKNOWN_REASON,
            "message": nh.UNKNOWN_MESSAGE,
        },
    ]
    ready, pid = nh.unknown_conditions(conditions, "NOW")
    assert ready == {
        "type": "Ready",
        "status": "Unknown",
        "lastHeartbeatTime": "H",
        "lastTransitionTime": "NOW",
        "reason": nh.UNKNOWN_REASON,
        "message": nh.UNKNOWN_MESSAGE,
    }
    assert pid == conditions[1]


@pytest.mark.parametrize(
    ("conditions", "written"),
    [
        (
            [{"type": "Ready", "status": "True", "lastTransitionTime": "A"}],
            [{"type": "Ready", "status": "False", "lastTransitionTime": "NOW"}],
        ),
        ([{"type": "Ready", "status": "False", "lastTransitionTime": "A"}], None),
        ([], None),
    ],
)
def test_pod_not_ready(
    conditions: list[dict[str, Any]], written: list[dict[str, Any]] | None
) -> None:
    changed = nh.pod_not_ready({"phase": "Running", "conditions": conditions}, "NOW")
    assert (None if changed is None else changed["conditions"]) == written
