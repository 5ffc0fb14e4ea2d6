"""The DefaultTolerationSeconds defaults (`kubesim.admission.defaults.default_tolerations`)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.admission.defaults import default_tolerations

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"


def _added(key: str) -> dict[str, Any]:
    return {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}


@pytest.mark.parametrize(
    ("given", "added"),
    [
        ([], [NOT_READY, UNREACHABLE]),
        ([{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute"}], [UNREACHABLE]),
        ([{"key": UNREACHABLE, "operator": "Exists"}], [NOT_READY]),  # an empty effect counts
        ([{"operator": "Exists"}], []),  # tolerates every taint
        ([{"operator": "Exists", "effect": "NoExecute"}], []),
        # A toleration of the key with another effect does not cover NoExecute.
        (
            [{"key": NOT_READY, "operator": "Exists", "effect": "NoSchedule"}],
            [NOT_READY, UNREACHABLE],
        ),
        ([{"operator": "Exists", "effect": "NoSchedule"}], [NOT_READY, UNREACHABLE]),
        ([{"key": "gpu", "operator": "Exists"}], [NOT_READY, UNREACHABLE]),
    ],
)
def test_the_not_ready_and_unreachable_tolerations_are_added_unless_tolerated(
    given: list[dict[str, Any]], added: list[str]
) -> None:
    tolerations: list[Any] = [dict(t) for t in given]
    default_tolerations(tolerations)
    assert tolerations == [*given, *(_added(key) for key in added)]
