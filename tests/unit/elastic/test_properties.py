"""Properties of the elastic step over random histories of scaling, readiness, failures and time."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpi_operator.desired import config
from mpi_operator.elastic import DRAINING_ANNOTATION, elastic_step, published_state
from mpi_operator.objects import is_pod_ready, is_terminating

from .cluster import ElasticCluster, elastic_job

MIN, MAX, SETTLE = 2, 5, 5

ops = st.one_of(
    st.tuples(st.just("scale"), st.integers(MIN, MAX)),
    st.tuples(
        st.sampled_from(["ready", "unready", "fail", "evict", "terminate", "gone"]),
        st.integers(0, MAX - 1),
    ),
    st.tuples(st.just("tick"), st.sampled_from([0, 1, 2, 5, 10, 31])),
)


def act(cluster: ElasticCluster, op: str, arg: int) -> None:
    if op == "scale":
        cluster.scale(arg)
    elif op == "tick":
        cluster.tick(arg)
    elif arg in cluster.indices():
        pod = cluster.pod(arg)
        if op == "ready":
            cluster.set_ready(arg)
        elif op == "unready":
            cluster.set_ready(arg, ready=False)
        elif op in ("fail", "evict") and pod["status"]["phase"] != "Failed":
            cluster.fail(arg, evicted=op == "evict")
        elif op == "terminate":
            cluster.terminate(arg)
        elif op == "gone":
            cluster.gone(arg)


def usable(pod: dict[str, Any]) -> bool:
    return is_pod_ready(pod) and not is_terminating(pod) and pod["status"]["phase"] == "Running"


def draining(pod: dict[str, Any]) -> bool:
    return DRAINING_ANNOTATION in (pod["metadata"].get("annotations") or {})


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=st.lists(ops, min_size=1, max_size=40), start=st.integers(MIN, MAX))
def test_elastic_invariants(history: list[tuple[str, int]], start: int) -> None:
    cluster = ElasticCluster(
        elastic_job(start, min_replicas=MIN, max_replicas=MAX, settle=SETTLE, grace=30)
    )
    cluster.step()
    last_change: float | None = None
    for op, arg in history:
        act(cluster, op, arg)
        before = copy.deepcopy(cluster.pods)
        by_index = {config.observed_worker_index(cluster.job, p): p for p in before.values()}
        old = set(cluster.listed())
        published = published_state(cluster.job, cluster.config_map)
        # deterministic: the same objects and time give the same decision
        assert elastic_step(
            cluster.job, list(before.values()), published, now=cluster.now
        ) == elastic_step(
            cluster.job, copy.deepcopy(list(before.values())), published, now=cluster.now
        )
        decision = cluster.step()
        new = set(cluster.listed())
        now = cluster.now.timestamp()

        # only Ready, running, non-terminating, non-draining pods, under their current host name
        for host in new:
            index = int(host.split("-worker-", 1)[1].split("-", 1)[0])
            pod = by_index[index]
            assert usable(pod), host
            assert not draining(pod), host
            assert pod["spec"]["hostname"] == host
            assert pod["metadata"]["name"] in cluster.pods  # not deleted in the same step

        # one step at a time: a pure addition or a pure removal
        assert new <= old or new >= old
        if new > old and old:
            assert last_change is None or now - last_change >= SETTLE
        removed_usable = [
            h
            for h in old - new
            if any(p["spec"]["hostname"] == h and usable(p) for p in before.values())
        ]
        if removed_usable:
            assert len(new) >= MIN, "graceful removal below minReplicas"
        if new != old:
            last_change = now

        # never delete a usable worker the job still wants
        desired = int(decision.status["desired"])
        for deletion in [*decision.delete, *decision.replace]:
            pod = before[deletion.name]
            current = decision.incarnations.get(deletion.index, 0)
            wanted = (
                deletion.index < desired
                and usable(pod)
                and pod["spec"]["hostname"].endswith(
                    f"-r{current}" if current else f"-worker-{deletion.index}"
                )
            )
            assert not wanted, deletion
