"""The state a sync leaves (`reconcile.echoes.Echo`): a later sync that finds it, its own writes
come back and kubelet bookkeeping on its pods aside, hears only echoes and may be skipped; any
change a sync reads, by anyone, a pod more or less, or the time the sync asked to be woken at, makes
the next sync a full one."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from mpi_operator.planning import ObjectRef, Observed
from mpi_operator.reconcile.echoes import JOB, Echo, state_of

Obj = dict[str, Any]


def obj(kind: str, name: str, rv: str, **fields: Any) -> Obj:
    return {"kind": kind, "metadata": {"name": name, "resourceVersion": rv}, **fields}


def pod(name: str, rv: str, phase: str = "Pending", **status: Any) -> Obj:
    return obj("Pod", name, rv, spec={"hostname": name}, status={"phase": phase, **status})


def ref(kind: str, name: str) -> ObjectRef:
    return ObjectRef("v1", kind, "default", name)


JOB_READ = obj("MPIJob", "pi", "10")
CONFIG = obj("ConfigMap", "pi-config", "11", data={"hostfile": ""})


def after_first_sync() -> Echo:
    """A first sync read the job and its ConfigMap, created two workers and wrote the status."""
    observed = Observed(config_map=CONFIG)
    written = {ref("Pod", "pi-worker-0"): pod("pi-worker-0", "12")}
    written[ref("Pod", "pi-worker-1")] = pod("pi-worker-1", "13")
    return Echo.after(obj("MPIJob", "pi", "14"), observed, written)


def cached(config: Obj = CONFIG, job: Obj | None = None, *pods: Obj) -> dict[tuple[str, str], Any]:
    workers = pods or (pod("pi-worker-0", "12"), pod("pi-worker-1", "13"))
    return state_of(
        job or obj("MPIJob", "pi", "14"), Observed(config_map=config, worker_pods=workers)
    )


def bound(rv: str, name: str) -> Obj:
    """The scheduler bound the pod and the kubelet started creating its container: nothing a sync
    reads."""
    return pod(
        name,
        rv,
        startTime="2026-11-28T07:00:00Z",
        containerStatuses=[{"name": "main", "restartCount": 0, "state": {"waiting": {}}}],
    )


HEARD: list[tuple[str, Callable[[], dict[tuple[str, str], Any]]]] = [
    ("its own writes, back", lambda: cached()),
    (
        "a pod bound and its container being made",
        lambda: cached(CONFIG, None, bound("20", "pi-worker-0"), pod("pi-worker-1", "13")),
    ),
]
NOT_HEARD: list[tuple[str, Callable[[], dict[tuple[str, str], Any]]]] = [
    (
        "a pod Running",
        lambda: cached(CONFIG, None, pod("pi-worker-0", "20", "Running"), pod("pi-worker-1", "13")),
    ),
    (
        "a pod being deleted",
        lambda: cached(
            CONFIG,
            None,
            {
                **pod("pi-worker-0", "20"),
                "metadata": {
                    "name": "pi-worker-0",
                    "resourceVersion": "20",
                    "deletionTimestamp": "t",
                },
            },
            pod("pi-worker-1", "13"),
        ),
    ),
    (
        "a pod Unschedulable",
        lambda: cached(
            CONFIG,
            None,
            pod(
                "pi-worker-0",
                "20",
                conditions=[
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/3 nodes",
                    }
                ],
            ),
            pod("pi-worker-1", "13"),
        ),
    ),
    ("a pod gone", lambda: cached(CONFIG, None, pod("pi-worker-0", "12"))),
    (
        "a pod more",
        lambda: cached(
            CONFIG,
            None,
            pod("pi-worker-0", "12"),
            pod("pi-worker-1", "13"),
            pod("pi-worker-2", "20"),
        ),
    ),
    (
        "the ConfigMap edited",
        lambda: cached(obj("ConfigMap", "pi-config", "20", data={"hostfile": "x"})),
    ),
    ("the job edited", lambda: cached(CONFIG, obj("MPIJob", "pi", "20"))),
    ("the status write not back", lambda: cached(CONFIG, JOB_READ)),
]


@pytest.mark.parametrize(("case", "state"), HEARD, ids=[c for c, _ in HEARD])
def test_only_echoes_are_heard(case: str, state: Callable[[], dict[tuple[str, str], Any]]) -> None:
    assert after_first_sync().heard(state(), now=0.0), case


@pytest.mark.parametrize(("case", "state"), NOT_HEARD, ids=[c for c, _ in NOT_HEARD])
def test_a_change_a_sync_reads_is_not_an_echo(
    case: str, state: Callable[[], dict[tuple[str, str], Any]]
) -> None:
    assert not after_first_sync().heard(state(), now=0.0), case


def test_an_echo_is_heard_only_until_the_sync_asked_to_be_woken() -> None:
    echo = Echo(after_first_sync().state, until=5.0)
    assert echo.heard(cached(), now=4.9)
    assert not echo.heard(cached(), now=5.0)


def test_a_written_pod_is_kept_as_the_pod_store_keeps_it() -> None:
    """The API's answer to a create carries the whole pod; the store keeps it slimmed
    (`cache.transforms.pod`), and the two must compare equal."""
    answer = copy.deepcopy(pod("pi-worker-0", "12"))
    answer["spec"] |= {"containers": [{"name": "main", "image": "x"}], "nodeName": "kubesim-1"}
    answer["metadata"]["managedFields"] = [{"manager": "mpi-operator"}]
    echo = Echo.after(JOB_READ, Observed(), {ref("Pod", "pi-worker-0"): answer})
    slim = state_of(JOB_READ, Observed(worker_pods=(pod("pi-worker-0", "12"),)))
    assert echo.heard(slim, now=0.0)


def test_an_echo_keeps_of_the_api_answers_only_their_versions() -> None:
    """An echo lives until the job's next sync, which a quiet job may not have for hours: the
    answers of its writes (the status write's, a created Job's) are kept by resourceVersion, pods
    (compared by content) whole."""
    answer = obj("MPIJob", "pi", "14", spec={"big": "x" * 1000}, status={"conditions": []})
    launcher = obj("Job", "pi-launcher", "15", spec={"template": {}})
    worker = pod("pi-worker-0", "12")
    echo = Echo.after(answer, Observed(config_map=CONFIG), {ref("Job", "pi-launcher"): launcher})
    assert echo.state[JOB] == {"metadata": {"resourceVersion": "14"}}
    assert echo.state[("Job", "pi-launcher")] == {"metadata": {"resourceVersion": "15"}}
    assert echo.state[("ConfigMap", "pi-config")] == {"metadata": {"resourceVersion": "11"}}
    kept = Echo.after(answer, Observed(worker_pods=(worker,)), {}).state[("Pod", "pi-worker-0")]
    assert kept is worker
