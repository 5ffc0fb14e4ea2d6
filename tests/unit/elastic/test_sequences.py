"""Elastic step sequences over time: what discover_hosts.sh lists, which pods drain, die and come
back.

Each case is a script of actions on `ElasticCluster` and expectations after each operator step; the
state is read back from the ConfigMap at every step, exactly as a reconciler would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from mpi_operator.elastic import clamp_replicas

from .cluster import ElasticCluster, elastic_job


@dataclass(frozen=True)
class Do:
    """Change the world: `what(cluster)`, then one operator step unless `step=False`."""

    what: Callable[[ElasticCluster], Any]
    listed: list[str] | None = None
    draining: list[int] | None = None
    pods: list[str] | None = None
    """Worker hostnames of the pods that exist after the step, in index order."""
    step: bool = True


def scale(n: int) -> Callable[[ElasticCluster], None]:
    return lambda c: c.scale(n)


def ready(*indices: int) -> Callable[[ElasticCluster], None]:
    return lambda c: c.set_ready(*indices)


def running(*indices: int) -> Callable[[ElasticCluster], None]:
    """Running, not yet Ready: placed and starting."""
    return lambda c: c.set_ready(*indices, ready=False)


def tick(seconds: float) -> Callable[[ElasticCluster], None]:
    return lambda c: c.tick(seconds)


def both(*fns: Callable[[ElasticCluster], Any]) -> Callable[[ElasticCluster], None]:
    def run(c: ElasticCluster) -> None:
        for fn in fns:
            fn(c)

    return run


def nothing(c: ElasticCluster) -> None:
    return None


W = "hvd-worker-"
START_2 = [Do(nothing, listed=[], pods=[W + "0", W + "1"]), Do(ready(), listed=[W + "0", W + "1"])]

CASES: dict[str, tuple[dict[str, Any], list[Do]]] = {
    "scale-2-3-1-3": (
        {"replicas": 2},
        [
            *START_2,
            Do(scale(3), listed=[W + "0", W + "1"], pods=[W + "0", W + "1", W + "2"]),
            Do(ready(2), listed=[W + "0", W + "1"]),  # settling after the previous change
            Do(tick(5), listed=[W + "0", W + "1", W + "2"]),
            Do(
                both(tick(5), scale(1)),
                listed=[W + "0"],
                draining=[1, 2],
                pods=[W + "0", W + "1", W + "2"],
            ),
            Do(tick(29), listed=[W + "0"], draining=[1, 2], pods=[W + "0", W + "1", W + "2"]),
            Do(tick(1), listed=[W + "0"], draining=[], pods=[W + "0"]),
            Do(scale(3), listed=[W + "0"], pods=[W + "0", W + "1-r1", W + "2-r1"]),
            Do(ready(), listed=[W + "0", W + "1-r1", W + "2-r1"]),
        ],
    ),
    "coalesce-1-to-4-while-settling": (
        {"replicas": 1},
        [
            Do(nothing, listed=[]),
            Do(ready(0), listed=[W + "0"]),
            Do(both(scale(2), tick(1)), listed=[W + "0"]),
            Do(both(ready(1), scale(4)), listed=[W + "0"]),
            Do(ready(2, 3), listed=[W + "0"]),
            Do(tick(4), listed=[W + "0", W + "1", W + "2", W + "3"]),
        ],
    ),
    "scale-in-never-below-min": (
        {"replicas": 3, "min_replicas": 2},
        [
            Do(nothing, listed=[]),
            Do(ready(), listed=[W + "0", W + "1", W + "2"]),
            # worker-1 dies while the job is scaled to 2: it leaves at once (not a graceful removal)
            # ...
            Do(
                both(tick(5), scale(2), lambda c: c.fail(1)),
                listed=[W + "0", W + "2"],
                pods=[W + "0", W + "1-r1", W + "2"],
            ),
            # ... but worker-2 may not leave gracefully: that would take Horovod below --min-np
            Do(
                tick(60),
                listed=[W + "0", W + "2"],
                draining=[],
                pods=[W + "0", W + "1-r1", W + "2"],
            ),
            Do(ready(1), listed=[W + "0", W + "1-r1", W + "2"]),
            Do(tick(5), listed=[W + "0", W + "1-r1"], draining=[2]),
            Do(tick(30), listed=[W + "0", W + "1-r1"], draining=[], pods=[W + "0", W + "1-r1"]),
        ],
    ),
    "scale-out-during-grace-reuses-pod": (
        {"replicas": 3},
        [
            Do(nothing),
            Do(ready(), listed=[W + "0", W + "1", W + "2"]),
            Do(both(tick(5), scale(2)), listed=[W + "0", W + "1"], draining=[2]),
            Do(
                both(tick(10), scale(3)),
                listed=[W + "0", W + "1"],
                draining=[],
                pods=[W + "0", W + "1", W + "2"],
            ),
            Do(nothing, listed=[W + "0", W + "1", W + "2"], pods=[W + "0", W + "1", W + "2"]),
            Do(tick(60), listed=[W + "0", W + "1", W + "2"], pods=[W + "0", W + "1", W + "2"]),
        ],
    ),
    "failed-worker-rejoins-under-new-identity": (
        {"replicas": 2},
        [
            *START_2,
            Do(lambda c: c.fail(1, exit_code=137), listed=[W + "0"], pods=[W + "0", W + "1-r1"]),
            Do(ready(1), listed=[W + "0"]),
            Do(tick(5), listed=[W + "0", W + "1-r1"]),
            Do(
                both(tick(5), lambda c: c.fail(1, evicted=True)),
                listed=[W + "0"],
                pods=[W + "0", W + "1-r2"],
            ),
            Do(both(ready(1), tick(5)), listed=[W + "0", W + "1-r2"]),
        ],
    ),
    "deleted-worker-replaced": (
        {"replicas": 2},
        [
            *START_2,
            Do(lambda c: c.terminate(0), listed=[W + "1"], pods=[W + "0", W + "1"]),
            Do(lambda c: c.gone(0), listed=[W + "1"], pods=[W + "0-r1", W + "1"]),
            Do(both(ready(0), tick(5)), listed=[W + "0-r1", W + "1"]),
        ],
    ),
    # Two workers come Ready a second apart after the settle interval: one change, not two, while
    # the second is placed and starting (Running, or Pending with its containers being created).
    "additions-gather-starting-workers": (
        {"replicas": 1},
        [
            Do(nothing, listed=[]),
            Do(ready(0), listed=[W + "0"]),
            Do(both(tick(5), scale(3)), listed=[W + "0"], pods=[W + "0", W + "1", W + "2"]),
            Do(both(ready(1), lambda c: c.set_creating(2)), listed=[W + "0"]),
            Do(both(tick(1), running(2)), listed=[W + "0"]),
            Do(both(tick(1), ready(2)), listed=[W + "0", W + "1", W + "2"]),
        ],
    ),
    # ... but for at most half of settleSeconds from the first Ready: a worker that stays not Ready
    # does not hold the others back, and joins in its own change once Ready.
    "additions-gather-at-most-half-the-settle-interval": (
        {"replicas": 1},
        [
            Do(nothing, listed=[]),
            Do(ready(0), listed=[W + "0"]),
            Do(both(tick(5), scale(3)), listed=[W + "0"], pods=[W + "0", W + "1", W + "2"]),
            Do(both(ready(1), running(2)), listed=[W + "0"]),
            Do(tick(2), listed=[W + "0"]),
            Do(tick(0.5), listed=[W + "0", W + "1"]),
            Do(both(tick(1), ready(2)), listed=[W + "0", W + "1"]),
            Do(tick(4), listed=[W + "0", W + "1", W + "2"]),
        ],
    ),
    # A worker still waiting for room (Pending, no container statuses) is not waited for.
    "additions-do-not-wait-for-unplaced-workers": (
        {"replicas": 1},
        [
            Do(nothing, listed=[]),
            Do(ready(0), listed=[W + "0"]),
            Do(both(tick(5), scale(3)), listed=[W + "0"], pods=[W + "0", W + "1", W + "2"]),
            Do(ready(1), listed=[W + "0", W + "1"]),
        ],
    ),
    "not-ready-leaves-at-once-and-returns": (
        {"replicas": 2, "settle": 5},
        [
            *START_2,
            Do(lambda c: c.set_ready(1, ready=False), listed=[W + "0"]),
            Do(ready(1), listed=[W + "0"]),
            Do(tick(5), listed=[W + "0", W + "1"]),
        ],
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_sequence(case: tuple[dict[str, Any], list[Do]]) -> None:
    params, script = case
    cluster = ElasticCluster(elastic_job(**params))
    for n, do in enumerate(script):
        do.what(cluster)
        if do.step:
            cluster.step()
        where = f"after action {n}"
        if do.listed is not None:
            assert cluster.listed() == do.listed, where
        if do.draining is not None:
            assert cluster.draining() == do.draining, where
        if do.pods is not None:
            assert [cluster.hostname(i) for i in cluster.indices()] == do.pods, where


def test_failure_events_name_exit_code_and_new_host() -> None:
    cluster = ElasticCluster(elastic_job(2))
    cluster.step()
    cluster.set_ready()
    cluster.step()
    cluster.fail(1, exit_code=137, reason="OOMKilled")
    decision = cluster.step()
    assert [d.name for d in decision.replace] == ["hvd-worker-1"]
    failed = [e for e in decision.events if e.reason == "WorkerFailed"]
    assert len(failed) == 1
    assert "OOMKilled, exit code 137" in failed[0].message
    assert "hvd-worker-1-r1.hvd.ns.svc" in failed[0].message
    assert decision.status["replacements"] == 1
    assert cluster.state_json()["incarnations"] == {"1": 1}


def test_replacement_budget_exhausted_keeps_failed_pod() -> None:
    cluster = ElasticCluster(elastic_job(2, max_replacements=1))
    cluster.step()
    cluster.set_ready()
    cluster.step()
    cluster.fail(1)
    assert cluster.step().replace  # the one replacement the budget allows
    cluster.set_ready(1)
    cluster.tick(5)
    cluster.step()
    cluster.fail(1, exit_code=3)
    decision = cluster.step()
    assert decision.replace == []
    assert cluster.pod(1)["status"]["phase"] == "Failed"  # left in place for its logs
    assert [e.reason for e in decision.events if e.reason == "ReplacementBudgetExhausted"] == [
        "ReplacementBudgetExhausted"
    ]
    assert cluster.listed() == ["hvd-worker-0"]
    again = cluster.step()  # the exhausted budget is reported once, not on every sync
    assert not [e for e in again.events if e.reason == "ReplacementBudgetExhausted"]


@pytest.mark.parametrize(
    ("max_replacements", "elapsed", "fails"),
    [(0, 59, False), (0, 60, True), (5, 600, False)],
    ids=["within-timeout", "timeout", "replaced-in-time"],
)
def test_below_min_timeout(max_replacements: int, elapsed: int, fails: bool) -> None:
    cluster = ElasticCluster(
        elastic_job(2, min_replicas=2, max_replacements=max_replacements, below_min_timeout=60)
    )
    cluster.step()
    cluster.set_ready()
    cluster.step()
    cluster.fail(1, exit_code=137, reason="Error")
    first = cluster.step()
    assert first.fail is None
    if max_replacements == 0:
        assert [e.reason for e in first.events if e.reason == "BelowMinReplicas"] == [
            "BelowMinReplicas"
        ]
        assert first.requeue_after == 60
    else:
        cluster.set_ready(1)
    cluster.tick(elapsed)
    decision = cluster.step()
    if not fails:
        assert decision.fail is None
        return
    assert decision.fail is not None
    assert decision.fail.reason == "BelowMinReplicas"
    assert "hvd-worker-1 (host hvd-worker-1): Error, exit code 137" in decision.fail.message
    assert "only 1 of minReplicas 2" in decision.fail.message


def test_below_min_clock_waits_for_the_job_to_reach_min_first() -> None:
    cluster = ElasticCluster(elastic_job(3, min_replicas=2, below_min_timeout=10))
    cluster.step()
    cluster.set_ready(0)
    cluster.tick(3600)  # image pulls: slow, but not our timeout
    assert cluster.step().fail is None
    assert "belowMinSince" not in cluster.state_json()


def test_out_of_bounds_replicas_are_clamped_and_reported() -> None:
    cluster = ElasticCluster(elastic_job(12, max_replicas=4))
    decision = cluster.step()
    assert decision.status["desired"] == 4
    assert cluster.indices() == [0, 1, 2, 3]
    assert [e.reason for e in decision.events] == ["ReplicasOutOfBounds"]


@pytest.mark.parametrize(
    ("replicas", "want"), [(12, 4), (3, 3), (0, 2)], ids=["above-max", "in-bounds", "below-min"]
)
def test_clamp_replicas_for_the_desired_builders(replicas: int, want: int) -> None:
    job = elastic_job(replicas, min_replicas=2, max_replicas=4)
    clamped = clamp_replicas(job)
    assert clamped.worker is not None
    assert clamped.worker.replicas == want
    assert (clamped is job) == (replicas == want)


def test_never_published_excess_pod_is_deleted_at_once() -> None:
    cluster = ElasticCluster(elastic_job(3))
    cluster.step()
    cluster.set_ready(0, 1)  # worker-2 is still pulling its image
    cluster.step()
    cluster.scale(2)
    decision = cluster.step()
    assert [(d.name, d.reason) for d in decision.delete] == [("hvd-worker-2", "ScaledIn")]


def test_draining_worker_deleted_by_someone_else_is_not_reused_by_name() -> None:
    cluster = ElasticCluster(elastic_job(3))
    cluster.step()
    cluster.set_ready()
    cluster.step()
    cluster.tick(5)
    cluster.scale(2)
    cluster.step()
    assert cluster.draining() == [2]
    cluster.terminate(2)
    cluster.step()
    cluster.gone(2)
    cluster.step()
    cluster.scale(3)
    decision = cluster.step()
    assert cluster.hostname(2) == "hvd-worker-2-r1"
    assert decision.publish.replacements == 0  # a scale-in, not a failure


def test_only_dropping_a_lost_host_is_urgent() -> None:
    cluster = ElasticCluster(elastic_job(3))
    urgent = [cluster.step().urgent]  # initial publication
    cluster.set_ready()
    urgent.append(cluster.step().urgent)  # additions
    cluster.tick(60)
    cluster.scale(2)
    urgent.append(cluster.step().urgent)  # graceful scale-in
    cluster.tick(60)
    cluster.fail(0)
    lost = cluster.step()
    assert urgent == [False, False, False]
    assert lost.urgent, "a failed listed worker must leave discovery ahead of queued writes"
    assert 0 not in cluster.listed_indices()


def test_discovery_events_count_workers_in_the_singular_and_plural() -> None:
    cluster = ElasticCluster(elastic_job(2))
    cluster.step()
    cluster.set_ready()
    added = cluster.step()
    assert added.events[0].message.startswith("discover_hosts.sh lists 2 workers; added "), added
    cluster.tick(5)
    cluster.scale(1)
    removed = cluster.step()
    messages = [e.message for e in removed.events if e.reason == "DiscoveryHostsRemoved"]
    assert messages, removed.events
    assert messages[0].startswith("discover_hosts.sh lists 1 worker; scaled in "), messages


def test_a_gathering_addition_asks_to_come_back_when_its_window_ends() -> None:
    cluster = ElasticCluster(elastic_job(1, settle=8))
    cluster.step()
    cluster.set_ready(0)
    cluster.step()
    cluster.tick(8)
    cluster.scale(3)
    cluster.step()
    cluster.set_ready(1)
    cluster.set_ready(2, ready=False)
    decision = cluster.step()
    assert cluster.listed() == [W + "0"]
    assert decision.requeue_after == 4
    cluster.tick(4)
    cluster.step()
    assert cluster.listed() == [W + "0", W + "1"]
