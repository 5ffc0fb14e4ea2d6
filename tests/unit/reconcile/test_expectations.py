"""The reconciler's expectations (`reconcile.expectations.CreatedPods`): a pod it created counts as
observed until the pod store shows that name, its job goes or is replaced, or the TTL passes."""

from __future__ import annotations

from typing import Any

import pytest

from mpi_operator.cache import transforms
from mpi_operator.flowcontrol import FakeClock
from mpi_operator.reconcile.expectations import TTL, CreatedPods

KEY = "default/big"


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "uid": f"uid-{name}"}}


def names(pods: list[dict[str, Any]]) -> list[str]:
    return sorted(p["metadata"]["name"] for p in pods)


def expecting(clock: FakeClock, *created: str, uid: str = "u1") -> CreatedPods:
    expectations = CreatedPods(clock.now)
    for name in created:
        expectations.add(KEY, uid, pod(name))
    return expectations


def nothing_cached(name: str) -> bool:
    return False


@pytest.mark.parametrize(
    ("cached", "left"),
    [
        (set(), ["w-0", "w-1", "w-2"]),
        ({"w-1"}, ["w-0", "w-2"]),
        ({"w-0", "w-1", "w-2"}, []),
        ({"other"}, ["w-0", "w-1", "w-2"]),
    ],
)
def test_a_created_pod_is_pending_until_the_store_shows_its_name(cached: set[str], left: list[str]) -> None:
    clock = FakeClock()
    expectations = expecting(clock, "w-0", "w-1", "w-2")
    assert names(expectations.pending(KEY, "u1", cached.__contains__)) == left
    # What the store showed once stays dropped, even if the pod is gone from it again.
    assert names(expectations.pending(KEY, "u1", nothing_cached)) == left
    assert len(expectations) == len(left)


def test_a_replaced_job_expects_nothing_of_its_predecessor() -> None:
    expectations = expecting(FakeClock(), "w-0")
    assert expectations.pending(KEY, "u2", nothing_cached) == []
    assert expectations.pending(KEY, "u1", nothing_cached) == []  # dropped, not kept for the old uid
    expectations.add(KEY, "u1", pod("w-0"))
    expectations.add(KEY, "u2", pod("w-1"))
    assert names(expectations.pending(KEY, "u2", nothing_cached)) == ["w-1"]


def test_an_unseen_create_is_trusted_for_the_ttl_only() -> None:
    clock = FakeClock()
    expectations = expecting(clock, "w-0")
    clock.advance(TTL / 2)
    expectations.add(KEY, "u1", pod("w-1"))
    clock.advance(TTL / 2 - 0.001)
    assert names(expectations.pending(KEY, "u1", nothing_cached)) == ["w-0", "w-1"]
    clock.advance(0.001)
    assert names(expectations.pending(KEY, "u1", nothing_cached)) == ["w-1"]
    clock.advance(TTL)
    assert expectations.pending(KEY, "u1", nothing_cached) == []
    assert len(expectations) == 0


def test_forget_drops_a_job() -> None:
    expectations = expecting(FakeClock(), "w-0")
    expectations.add("default/other", "u9", pod("o-0"))
    expectations.forget(KEY)
    assert expectations.pending(KEY, "u1", nothing_cached) == []
    assert names(expectations.pending("default/other", "u9", nothing_cached)) == ["o-0"]


def test_a_pod_the_operator_deletes_is_no_longer_in_flight() -> None:
    expectations = expecting(FakeClock(), "w-0", "w-1")
    expectations.discard(KEY, "w-0")
    expectations.discard(KEY, "never-created")
    expectations.discard("default/other", "w-1")
    assert names(expectations.pending(KEY, "u1", nothing_cached)) == ["w-1"]


def test_expires_in_counts_down_to_the_oldest_expectation() -> None:
    clock = FakeClock()
    expectations = expecting(clock, "w-0")
    assert expectations.expires_in("default/other") is None
    assert expectations.expires_in(KEY) == pytest.approx(TTL)
    clock.advance(10)
    expectations.add(KEY, "u1", pod("w-1"))
    assert expectations.expires_in(KEY) == pytest.approx(TTL - 10)
    expectations.discard(KEY, "w-0")
    assert expectations.expires_in(KEY) == pytest.approx(TTL)
    clock.advance(TTL + 5)
    assert expectations.expires_in(KEY) == 0.0
    assert expectations.pending(KEY, "u1", nothing_cached) == []
    assert expectations.expires_in(KEY) is None


def test_a_created_pod_is_kept_as_the_pod_store_keeps_it() -> None:
    created = {
        **pod("w-0"),
        "spec": {"hostname": "w-0", "containers": [{"name": "worker", "image": "x"}]},
        "status": {"phase": "Pending", "qosClass": "BestEffort"},
    }
    expectations = CreatedPods(FakeClock().now)
    expectations.add(KEY, "u1", created)
    assert expectations.pending(KEY, "u1", nothing_cached) == [transforms.pod(created)]
    assert "containers" in created["spec"], "the applier's object is not mutated"
