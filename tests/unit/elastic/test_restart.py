"""An operator restarted mid-sequence continues from the API objects alone, including partial
applies."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from mpi_operator.desired import config
from mpi_operator.elastic import DRAINING_ANNOTATION, ElasticDecision, elastic_step, published_state

from .cluster import ElasticCluster, elastic_job


def restarted(cluster: ElasticCluster) -> ElasticCluster:
    """A new operator: only the job, the pods and the ConfigMap survive."""
    fresh = ElasticCluster(cluster.job, now=cluster.now)
    fresh.pods = copy.deepcopy(cluster.pods)
    fresh.config_map = copy.deepcopy(cluster.config_map)
    return fresh


def draining_at_3_to_1(c: ElasticCluster) -> None:
    c.step()
    c.set_ready()
    c.step()
    c.tick(5)
    c.scale(1)
    c.step()
    c.tick(10)


def settling_after_scale_out(c: ElasticCluster) -> None:
    c.scale(2)
    c.step()
    c.set_ready()
    c.step()
    c.scale(3)
    c.step()
    c.set_ready()
    c.tick(1)


def replacing_failed_worker(c: ElasticCluster) -> None:
    c.step()
    c.set_ready()
    c.step()
    c.fail(2, exit_code=1)
    c.step()
    c.set_ready()
    c.tick(2)


MIDPOINTS: dict[str, Callable[[ElasticCluster], None]] = {
    "draining": draining_at_3_to_1,
    "settling": settling_after_scale_out,
    "replacing": replacing_failed_worker,
}


@pytest.mark.parametrize("midpoint", list(MIDPOINTS.values()), ids=list(MIDPOINTS))
def test_restart_continues_the_same(midpoint: Callable[[ElasticCluster], None]) -> None:
    original = ElasticCluster(elastic_job(3))
    midpoint(original)
    twin = restarted(original)
    for seconds in (0, 1, 3, 5, 20, 30):
        original.tick(seconds)
        twin.tick(seconds)
        a, b = original.step(), twin.step()
        assert a == b
        assert original.pods == twin.pods
        assert original.config_map == twin.config_map


def test_crash_after_drain_patch_before_configmap_keeps_grace() -> None:
    """A stamp whose script change was lost (an operator that wrote the stamps first left it): the
    host is still listed, and its grace period starts again when it really leaves."""
    cluster = ElasticCluster(elastic_job(3))
    cluster.step()
    cluster.set_ready()
    cluster.step()
    cluster.tick(5)
    cluster.scale(2)
    before = copy.deepcopy(cluster.config_map)
    decision = elastic_step(
        cluster.job,
        list(cluster.pods.values()),
        published_state(cluster.job, before),
        now=cluster.now,
    )
    assert [p.name for p in decision.drain] == ["hvd-worker-2"]
    cluster.apply(
        ElasticDecision(discovered=[], publish=decision.publish, drain=decision.drain), create=False
    )
    cluster.config_map = before  # the ConfigMap write failed; the operator restarts
    cluster.tick(40)  # longer than the grace period since the (stale) stamp
    after = restarted(cluster).step()
    assert after.delete == []  # still listed: removed now, stamped now, not deleted
    assert [p.annotations[DRAINING_ANNOTATION] for p in after.drain] == ["2026-11-25T12:00:45Z"]


def test_crash_after_configmap_before_drain_patch_keeps_grace() -> None:
    """The drain stamps are written after the script (a thousand of them must not hold its edit
    back); if they are lost, the published state names whom the script dropped, and they drain from
    the script's change: stamped then, deleted a grace period after it, not at once."""
    cluster = ElasticCluster(elastic_job(3))
    cluster.step()
    cluster.set_ready()
    cluster.step()
    cluster.tick(5)
    cluster.scale(2)
    decision = cluster.step()  # the script drops worker-2 ...
    assert [p.name for p in decision.drain] == ["hvd-worker-2"]
    assert decision.publish.removed == ((2, 0),)
    cluster.pods["hvd-worker-2"]["metadata"]["annotations"].pop(DRAINING_ANNOTATION)  # ... crash
    cluster.tick(10)
    after = restarted(cluster).step()
    assert after.delete == [], "deleted at once, as a pod Horovod never saw"
    # The script changed at 12:00:05: its grace runs from then.
    assert [p.annotations[DRAINING_ANNOTATION] for p in after.drain] == ["2026-11-25T12:00:05Z"]
    cluster = restarted(cluster)
    cluster.apply(after, create=False)
    cluster.tick(21)  # 31 s after the script's change: past the grace period
    assert [d.name for d in cluster.step().delete] == ["hvd-worker-2"]


def test_crash_after_configmap_before_replacement_delete_counts_once() -> None:
    """The bumped incarnation is written with the script before the failed pod is deleted; a crash
    in between re-finds the old pod as superseded and does not count it twice."""
    cluster = ElasticCluster(elastic_job(2))
    cluster.step()
    cluster.set_ready()
    cluster.step()
    cluster.fail(1)
    failed_pod = copy.deepcopy(cluster.pod(1))
    decision = cluster.step(create=False)
    assert decision.publish.replacements == 1
    cluster.pods["hvd-worker-1"] = failed_pod  # the delete never happened
    again = restarted(cluster).step()
    assert [(d.name, d.reason) for d in again.replace] == [("hvd-worker-1", "Superseded")]
    assert again.publish.replacements == 1
    assert again.incarnations == {1: 1}
    assert not [e for e in again.events if e.reason == "WorkerFailed"]


def test_configmap_without_state_recovers_listed_workers_from_the_script() -> None:
    """A ConfigMap written before the elastic layer ran: listed excess workers still drain."""
    cluster = ElasticCluster(elastic_job(3))
    cluster.step()
    cluster.set_ready()
    cluster.config_map = config.build_config_map(cluster.job, list(cluster.pods.values()))
    cluster.scale(2)
    decision = cluster.step()
    assert decision.delete == []
    assert [p.name for p in decision.drain] == ["hvd-worker-2"]
    assert cluster.listed() == ["hvd-worker-0", "hvd-worker-1"]


def test_stale_drain_stamp_on_a_wanted_listed_worker_is_removed_without_delisting() -> None:
    """A scale-in stamped a pod, the operator died before the ConfigMap, and the job was scaled
    back."""
    cluster = ElasticCluster(elastic_job(3))
    cluster.step()
    cluster.set_ready()
    cluster.step()
    cluster.pod(2)["metadata"]["annotations"] = {DRAINING_ANNOTATION: "2026-11-25T11:00:00Z"}
    cluster.tick(60)
    decision = cluster.step()
    assert cluster.listed() == ["hvd-worker-0", "hvd-worker-1", "hvd-worker-2"]
    assert [(p.name, dict(p.annotations)) for p in decision.drain] == [
        ("hvd-worker-2", {DRAINING_ANNOTATION: None})
    ]
    assert decision.delete == []
    assert cluster.draining() == []
