"""One job's expectations (`reconcile.expectations.CreatedPods`): a pod the reconciler created
counts as observed until the pod store shows that name, the job is replaced, or the TTL passes."""

from __future__ import annotations

from typing import Any

import pytest

from mpi_operator.cache import transforms
from mpi_operator.flowcontrol import FakeClock
from mpi_operator.reconcile.expectations import TTL, CreatedPods


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "uid": f"uid-{name}"}}


def names(pods: list[dict[str, Any]]) -> list[str]:
    return sorted(p["metadata"]["name"] for p in pods)


def expecting(clock: FakeClock, *created: str, uid: str = "u1") -> CreatedPods:
    expectations = CreatedPods()
    for name in created:
        expectations.add(uid, pod(name), clock.now())
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
def test_a_created_pod_is_pending_until_the_store_shows_its_name(
    cached: set[str], left: list[str]
) -> None:
    clock = FakeClock()
    expectations = expecting(clock, "w-0", "w-1", "w-2")
    assert names(expectations.pending("u1", cached.__contains__, clock.now())) == left
    # What the store showed once stays dropped, even if the pod is gone from it again.
    assert names(expectations.pending("u1", nothing_cached, clock.now())) == left
    assert len(expectations) == len(left)


def test_a_replaced_job_expects_nothing_of_its_predecessor() -> None:
    clock = FakeClock()
    expectations = expecting(clock, "w-0")
    assert expectations.pending("u2", nothing_cached, clock.now()) == []
    assert (
        expectations.pending("u1", nothing_cached, clock.now()) == []
    )  # dropped, not kept for the old uid
    expectations.add("u1", pod("w-0"), clock.now())
    expectations.add("u2", pod("w-1"), clock.now())
    assert names(expectations.pending("u2", nothing_cached, clock.now())) == ["w-1"]


def test_an_unseen_create_is_trusted_for_the_ttl_only() -> None:
    clock = FakeClock()
    expectations = expecting(clock, "w-0")
    clock.advance(TTL / 2)
    expectations.add("u1", pod("w-1"), clock.now())
    clock.advance(TTL / 2 - 0.001)
    assert names(expectations.pending("u1", nothing_cached, clock.now())) == ["w-0", "w-1"]
    clock.advance(0.001)
    assert names(expectations.pending("u1", nothing_cached, clock.now())) == ["w-1"]
    clock.advance(TTL)
    assert expectations.pending("u1", nothing_cached, clock.now()) == []
    assert len(expectations) == 0


def test_a_pod_the_operator_deletes_is_no_longer_in_flight() -> None:
    clock = FakeClock()
    expectations = expecting(clock, "w-0", "w-1")
    expectations.discard("w-0")
    expectations.discard("never-created")
    assert names(expectations.pending("u1", nothing_cached, clock.now())) == ["w-1"]


def test_expires_in_counts_down_to_the_oldest_expectation() -> None:
    clock = FakeClock()
    expectations = expecting(clock, "w-0")
    assert CreatedPods().expires_in(clock.now()) is None
    assert expectations.expires_in(clock.now()) == pytest.approx(TTL)
    clock.advance(10)
    expectations.add("u1", pod("w-1"), clock.now())
    assert expectations.expires_in(clock.now()) == pytest.approx(TTL - 10)
    expectations.discard("w-0")
    assert expectations.expires_in(clock.now()) == pytest.approx(TTL)
    clock.advance(TTL + 5)
    assert expectations.expires_in(clock.now()) == 0.0
    assert expectations.pending("u1", nothing_cached, clock.now()) == []
    assert expectations.expires_in(clock.now()) is None


def test_a_created_pod_is_kept_as_the_pod_store_keeps_it() -> None:
    created = {
        **pod("w-0"),
        "spec": {"hostname": "w-0", "containers": [{"name": "worker", "image": "x"}]},
        "status": {"phase": "Pending", "qosClass": "BestEffort"},
    }
    clock = FakeClock()
    expectations = CreatedPods()
    expectations.add("u1", created, clock.now())
    assert expectations.pending("u1", nothing_cached, clock.now()) == [transforms.pod(created)]
    assert "containers" in created["spec"], "the applier's object is not mutated"
