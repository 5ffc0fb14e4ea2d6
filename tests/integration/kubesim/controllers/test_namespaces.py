"""The simulated namespace controller: a deleted namespace is emptied, then goes away."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.app import KubeSim
from kubesim.clock import FakeClock
from kubesim.errors import StatusError
from kubesim.settings import SimSettings

from .controller_helpers import rt


@pytest.fixture
def kubesim_settings(clock: FakeClock) -> SimSettings:
    return SimSettings(clock=clock, start_seconds=1.0, ready_seconds=1.0)


def namespace(sim: KubeSim, name: str) -> dict[str, Any] | None:
    try:
        return sim.cluster.get(rt(sim, "v1", "Namespace"), None, name)
    except StatusError as err:
        if err.code != 404:
            raise
        return None


def populate(sim: KubeSim, ns: str) -> None:
    sim.cluster.create(rt(sim, "v1", "Namespace"), None, {"metadata": {"name": ns}})
    sim.cluster.create(
        rt(sim, "v1", "ConfigMap"), ns, {"metadata": {"name": "cfg"}, "data": {"a": "1"}}
    )
    sim.cluster.create(rt(sim, "v1", "Secret"), ns, {"metadata": {"name": "s"}})
    pod = {
        "metadata": {"name": "p", "annotations": {"kubesim/termination-seconds": "20"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    sim.cluster.create(rt(sim, "v1", "Pod"), ns, pod)
    job = {
        "metadata": {"name": "j"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}],
                }
            }
        },
    }
    sim.cluster.create(rt(sim, "batch/v1", "Job"), ns, job)


def count(sim: KubeSim, ns: str) -> int:
    total = 0
    for kind in (("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "Pod"), ("batch/v1", "Job")):
        total += len(sim.cluster.list(rt(sim, *kind), ns)["items"])
    return total


async def test_deleted_namespace_is_emptied_then_removed(sim: KubeSim, clock: FakeClock) -> None:
    populate(sim, "team")
    await clock.advance(1)
    assert count(sim, "team") == 5
    assert {
        p["status"]["phase"] for p in sim.cluster.list(rt(sim, "v1", "Pod"), "team")["items"]
    } == {"Running"}
    sim.cluster.delete(rt(sim, "v1", "Namespace"), None, "team")
    terminating = namespace(sim, "team")
    assert terminating is not None
    assert terminating["status"]["phase"] == "Terminating"
    # The namespace waits for its pods, which take their 20 simulated seconds to stop.
    await clock.advance(19.9)
    assert namespace(sim, "team") is not None
    await clock.advance(0.1)
    assert namespace(sim, "team") is None
    assert count(sim, "team") == 0
    assert namespace(sim, "default") is not None


async def test_namespace_waits_for_finalized_content(sim: KubeSim, clock: FakeClock) -> None:
    sim.cluster.create(rt(sim, "v1", "Namespace"), None, {"metadata": {"name": "held"}})
    cms = rt(sim, "v1", "ConfigMap")
    sim.cluster.create(
        cms, "held", {"metadata": {"name": "cfg", "finalizers": ["example.com/hold"]}}
    )
    sim.cluster.delete(rt(sim, "v1", "Namespace"), None, "held")

    def remaining() -> dict[str, Any]:
        ns = namespace(sim, "held")
        assert ns is not None
        conds = {c["type"]: c for c in ns["status"].get("conditions", [])}
        found: dict[str, Any] = conds.get("NamespaceContentRemaining", {})
        return found

    await clock.settle()
    cond = remaining()
    assert cond["status"] == "True"
    assert cond["message"] == "Some resources are remaining: configmaps has 1 resource instances"
    assert "kubernetes" in (namespace(sim, "held") or {}).get("spec", {}).get("finalizers", [])
    cm = sim.cluster.get(cms, "held", "cfg")
    assert cm["metadata"]["deletionTimestamp"]
    sim.cluster.update(cms, "held", "cfg", {**cm, "metadata": {**cm["metadata"], "finalizers": []}})
    await clock.settle()
    assert namespace(sim, "held") is None
