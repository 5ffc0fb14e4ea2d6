"""The elastic building blocks: host identity, the stored state, pacing rules, the launcher's
bounds."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mpi_discovery import hostfile
from mpi_operator.api import constants as c
from mpi_operator.api.elastic import effective_elastic_policy
from mpi_operator.api.models import ElasticPolicy, MPIJob
from mpi_operator.elastic import (
    PublishedState,
    WorkerFailure,
    discovery_revision_annotation,
    launcher_env,
    pod_group_min_member,
    process_bounds,
    state_annotations,
    state_from_config_map,
    worker_host,
    worker_hostname,
)
from mpi_operator.elastic.identity import parse_worker_host, pod_incarnation
from mpi_operator.elastic.pacing import Change, next_members

from .cluster import elastic_job


@pytest.mark.parametrize(
    ("name", "index", "incarnation", "want"),
    [
        ("hvd", 0, 0, "hvd-worker-0"),
        ("hvd", 3, 1, "hvd-worker-3-r1"),
        ("hvd", 12, 40, "hvd-worker-12-r40"),
    ],
    ids=["upstream-name", "first-replacement", "later"],
)
def test_worker_hostname(name: str, index: int, incarnation: int, want: str) -> None:
    job = elastic_job(2, name=name)
    assert worker_hostname(job, index, incarnation) == want
    host = worker_host(job, index, incarnation)
    assert host == f"{want}.{name}.ns.svc"
    assert parse_worker_host(job, host) == (index, incarnation)


def test_long_job_names_keep_distinct_dns_labels() -> None:
    job = elastic_job(2, name="j" * 48)  # `<name>-worker-9` is 57 characters: no room for `-r10`
    names = {worker_hostname(job, i, n) for i in range(10) for n in range(12)}
    assert len(names) == 120
    for name in names:
        assert len(name) <= c.DNS1035_LABEL_MAX_LENGTH
        assert hostfile.is_dns_name(name)


@given(index=st.integers(0, 500), incarnation=st.integers(0, 10_000))
def test_pod_incarnation_reads_back_from_hostname_or_annotation(
    index: int, incarnation: int
) -> None:
    job = elastic_job(2)
    hostname = worker_hostname(job, index, incarnation)
    assert pod_incarnation(job, index, {"spec": {"hostname": hostname}}) == incarnation
    annotated = {
        "metadata": {"annotations": {"mpi-operator.kubeflow.org/incarnation": str(incarnation)}}
    }
    assert pod_incarnation(job, index, annotated) == incarnation


failures = st.builds(
    WorkerFailure,
    index=st.integers(0, 50),
    incarnation=st.integers(0, 50),
    pod=st.just("hvd-worker-1"),
    host=st.just("hvd-worker-1-r1"),
    reason=st.sampled_from(["Error", "Evicted", "OOMKilled"]),
    exit_code=st.none() | st.integers(0, 255),
    at=st.floats(0, 2e9, allow_nan=False),
    disruption=st.booleans(),
)
states = st.builds(
    PublishedState,
    members=st.lists(
        st.tuples(st.integers(0, 50), st.integers(0, 9)), unique_by=lambda m: m[0]
    ).map(lambda ms: tuple(sorted(ms))),
    changed_at=st.none() | st.floats(0, 2e9, allow_nan=False),
    incarnations=st.dictionaries(st.integers(0, 50), st.integers(1, 9)),
    replacements=st.integers(0, 100),
    disruptions=st.integers(0, 100),
    reached_min=st.booleans(),
    below_min_since=st.none() | st.floats(0, 2e9, allow_nan=False),
    failures=st.lists(failures, max_size=3).map(tuple),
    out_of_bounds_reported=st.none() | st.integers(0, 10_000),
)


@given(state=states)
def test_state_round_trips_through_the_configmap_annotation(state: PublishedState) -> None:
    config_map: dict[str, Any] = {"metadata": {"annotations": state_annotations(state)}}
    assert state_from_config_map(config_map) == state


@pytest.mark.parametrize(
    "config_map",
    [
        None,
        {},
        {"metadata": {"annotations": {"mpi-operator.kubeflow.org/elastic-state": "{not json"}}},
    ],
    ids=["absent", "no-annotation", "junk"],
)
def test_unreadable_state_is_none(config_map: dict[str, Any] | None) -> None:
    assert state_from_config_map(config_map) is None


ALIVE = {(0, 0), (1, 0), (2, 0), (3, 0)}


@pytest.mark.parametrize(
    ("published", "wanted", "alive", "changed_at", "now", "want", "change"),
    [
        (None, [(0, 0)], ALIVE, None, 0, [(0, 0)], Change.INITIAL),
        ([(0, 0), (1, 0)], [(0, 0), (1, 0), (2, 0)], ALIVE, 0, 4, [(0, 0), (1, 0)], Change.NONE),
        (
            [(0, 0), (1, 0)],
            [(0, 0), (1, 0), (2, 0), (3, 0)],
            ALIVE,
            0,
            5,
            sorted(ALIVE),
            Change.ADDED,
        ),
        ([(0, 0), (1, 0), (2, 0)], [(0, 0)], ALIVE - {(1, 0)}, 0, 1, [(0, 0), (2, 0)], Change.LOST),
        ([(0, 0), (1, 0), (2, 0)], [(0, 0)], ALIVE, 0, 5, [(0, 0), (1, 0)], Change.REMOVED),
        ([(0, 0), (2, 0)], [(0, 0), (1, 0)], ALIVE, 0, 5, [(0, 0), (1, 0), (2, 0)], Change.ADDED),
        ([(0, 0), (3, 0)], [(0, 0)], ALIVE, 0, 5, [(0, 0), (3, 0)], Change.NONE),
    ],
    ids=[
        "initial",
        "settling",
        "coalesced-add",
        "lost-at-once",
        "remove-highest-to-min",
        "add-before-remove",
        "min-blocks-removal",
    ],
)
def test_pacing(
    published: list[tuple[int, int]] | None,
    wanted: list[tuple[int, int]],
    alive: set[tuple[int, int]],
    changed_at: float | None,
    now: float,
    want: list[tuple[int, int]],
    change: Change,
) -> None:
    result = next_members(
        published, wanted, alive, min_workers=2, settle_seconds=5, changed_at=changed_at, now=now
    )
    assert list(result.members) == want
    assert result.change is change


def horovod_job(command: str, **spec: Any) -> MPIJob:
    launcher = {
        "template": {
            "spec": {"containers": [{"name": "l", "image": "i", "command": ["sh", "-c", command]}]}
        }
    }
    worker = {"replicas": 2, "template": {"spec": {"containers": [{"name": "w", "image": "i"}]}}}
    return MPIJob.model_validate(
        {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": {"name": "mnist", "namespace": "ns"},
            "spec": {"mpiReplicaSpecs": {"Launcher": launcher, "Worker": worker}, **spec},
        }
    )


@pytest.mark.parametrize(
    ("spec", "want_np", "want_env"),
    [
        ({}, (1, 3), {"MPIJOB_MIN_NP": "1", "MPIJOB_MAX_NP": "3", "MPIJOB_SLOTS_PER_WORKER": "1"}),
        (
            {"slotsPerWorker": 2},
            (2, 6),
            {"MPIJOB_MIN_NP": "2", "MPIJOB_MAX_NP": "6", "MPIJOB_MAX_REPLICAS": "3"},
        ),
        ({"runLauncherAsWorker": True}, (2, 4), {"MPIJOB_MIN_NP": "2", "MPIJOB_MAX_NP": "4"}),
    ],
    ids=["inferred-from-horovodrun", "slots", "launcher-as-worker"],
)
def test_launcher_env_carries_effective_bounds(
    spec: dict[str, Any], want_np: tuple[int, int], want_env: dict[str, str]
) -> None:
    if "slotsPerWorker" in spec:
        job = horovod_job("true", elasticPolicy={"minReplicas": 1, "maxReplicas": 3}, **spec)
    else:
        job = horovod_job(
            "horovodrun -np 2 --min-np 1 --max-np 3 --host-discovery-script "
            "/etc/mpi/discover_hosts.sh "
            "python t.py",
            **spec,
        )
    policy = effective_elastic_policy(job)
    assert policy is not None
    assert process_bounds(job, policy) == want_np
    env = {e["name"]: e["value"] for e in launcher_env(job, policy)}
    assert env["MPIJOB_DISCOVERY_SCRIPT"] == "/etc/mpi/discover_hosts.sh"
    assert want_env.items() <= env.items()
    assert pod_group_min_member(job, policy) == policy.min_replicas  # the launcher waits


def test_discovery_revision_changes_with_the_host_list() -> None:
    one = discovery_revision_annotation([("a.j.ns.svc", 1)])
    assert one == discovery_revision_annotation([("a.j.ns.svc", 1)])
    assert one != discovery_revision_annotation([("a.j.ns.svc", 2)])
    assert one != discovery_revision_annotation([])


@pytest.mark.parametrize(("launcher", "want"), [("AtStartup", 4), ("WaitForWorkersReady", 3)])
def test_min_member_follows_min_replicas(launcher: str, want: int) -> None:
    """The launcher counts only when it is created with the workers (desired.podgroup)."""
    job = horovod_job("horovodrun python t.py", launcherCreationPolicy=launcher)
    assert pod_group_min_member(job, ElasticPolicy(min_replicas=3, max_replicas=5)) == want


@pytest.mark.parametrize(
    ("arriving", "ready_since", "changed_at", "now", "want", "wait"),
    [
        ((), {(2, 0): 10.0}, 0, 10, [(0, 0), (1, 0), (2, 0)], None),
        ({(3, 0)}, {(2, 0): 10.0}, 0, 10, [(0, 0), (1, 0)], 2.5),
        ({(3, 0)}, {(2, 0): 10.0}, 0, 12, [(0, 0), (1, 0)], 0.5),
        ({(3, 0)}, {(2, 0): 10.0}, 0, 12.5, [(0, 0), (1, 0), (2, 0)], None),
        ({(3, 0)}, {(2, 0): 60.0}, 0, 10, [(0, 0), (1, 0)], 2.5),
        ({(3, 0)}, {}, 0, 6, [(0, 0), (1, 0)], 1.5),
        ({(3, 0)}, {}, 0, 7.5, [(0, 0), (1, 0), (2, 0)], None),
        ({(3, 0)}, {}, None, 7, [(0, 0), (1, 0), (2, 0)], None),
    ],
    ids=[
        "nothing-arriving",
        "gathering",
        "gathering-from-the-first-ready",
        "window-over",
        "ready-time-ahead-of-the-clock",
        "no-ready-time-counts-from-settle",
        "no-ready-time-window-over",
        "never-changed-nothing-to-count-from",
    ],
)
def test_additions_gather_arriving_workers_for_half_the_settle_interval(
    arriving: set[tuple[int, int]],
    ready_since: dict[tuple[int, int], float],
    changed_at: float | None,
    now: float,
    want: list[tuple[int, int]],
    wait: float | None,
) -> None:
    result = next_members(
        [(0, 0), (1, 0)],
        [(0, 0), (1, 0), (2, 0)],
        ALIVE,
        min_workers=2,
        settle_seconds=5,
        changed_at=changed_at,
        now=now,
        arriving=arriving,
        ready_since=ready_since,
    )
    assert list(result.members) == want
    assert result.wait == wait


members = st.sets(st.tuples(st.integers(0, 7), st.just(0)), max_size=8)


@given(
    published=members,
    wanted=members,
    arriving=members,
    ready_at=st.dictionaries(st.tuples(st.integers(0, 7), st.just(0)), st.floats(0, 100)),
    settle=st.integers(0, 30),
    changed_at=st.none() | st.floats(0, 100),
    now=st.floats(0, 200),
)
def test_gathering_delays_an_addition_by_at_most_half_the_settle_interval(
    published: set[tuple[int, int]],
    wanted: set[tuple[int, int]],
    arriving: set[tuple[int, int]],
    ready_at: dict[tuple[int, int], float],
    settle: int,
    changed_at: float | None,
    now: float,
) -> None:
    """Once settled, an addition is held only while workers are arriving, never for more than half
    of settleSeconds from now, and gathering changes when hosts are added, never which."""
    kwargs: dict[str, Any] = {"min_workers": 1, "settle_seconds": settle, "changed_at": changed_at}
    plain = next_members(sorted(published), sorted(wanted), published | wanted, now=now, **kwargs)
    gathered = next_members(
        sorted(published),
        sorted(wanted),
        published | wanted,
        now=now,
        arriving=arriving,
        ready_since=ready_at,
        **kwargs,
    )
    if plain.change is not Change.ADDED:
        assert gathered == plain
        return
    if gathered.change is Change.ADDED:
        assert gathered == plain
        return
    assert arriving
    assert gathered.change is Change.NONE
    assert gathered.members == tuple(sorted(published))
    assert gathered.wait is not None
    assert 0 < gathered.wait <= settle / 2
    if any(at > now for at in ready_at.values()):
        return  # a kubelet clock ahead of the operator's: the window counts from now until then
    later = next_members(
        sorted(published),
        sorted(wanted),
        published | wanted,
        now=now + gathered.wait,
        arriving=arriving,
        ready_since=ready_at,
        **kwargs,
    )
    assert later.members == plain.members
    assert later.change is Change.ADDED
