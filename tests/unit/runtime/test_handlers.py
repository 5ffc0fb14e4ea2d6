"""Event -> MPIJob key mapping (runtime.handlers): direct children, launcher pods through their Job,
foreign and stale owners ignored, every informer event kind enqueued with a plain add; and the watch
table (which informers, which selectors)."""

from __future__ import annotations

from typing import Any

import pytest

from mpi_operator.cache import transforms
from mpi_operator.cache.store import Store
from mpi_operator.runtime import handlers

JOB_UID = "uid-job"
BATCH_UID = "uid-launcher"


def mpijob(name: str = "pi", namespace: str = "ns", uid: str = JOB_UID) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": "1"},
    }


def ref(
    kind: str, api_version: str, name: str, uid: str, *, controller: bool | None = True
) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": kind, "apiVersion": api_version, "name": name, "uid": uid}
    if controller is not None:
        out["controller"] = controller
    return out


def child(kind: str, name: str, *refs: dict[str, Any], namespace: str = "ns") -> dict[str, Any]:
    return {
        "kind": kind,
        "apiVersion": "batch/v1" if kind == "Job" else "v1",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "ownerReferences": list(refs),
            "resourceVersion": "7",
        },
    }


MPI_REF = ref("MPIJob", "kubeflow.org/v2beta1", "pi", JOB_UID)
LAUNCHER_JOB = child("Job", "pi-launcher", MPI_REF)
LAUNCHER_JOB["metadata"]["uid"] = BATCH_UID
BATCH_REF = ref("Job", "batch/v1", "pi-launcher", BATCH_UID)


@pytest.fixture
def stores() -> tuple[Store, Store]:
    mpijobs, jobs = Store(), Store()
    mpijobs.upsert(mpijob())
    jobs.upsert(LAUNCHER_JOB)
    plain = child("Job", "plain")  # a Job no MPIJob controls
    plain["metadata"]["uid"] = "u5"
    jobs.upsert(plain)
    return mpijobs, jobs


CASES = [
    ("worker-pod", child("Pod", "pi-worker-0", MPI_REF), "ns/pi"),
    ("service", child("Service", "pi", MPI_REF), "ns/pi"),
    ("configmap", child("ConfigMap", "pi-config", MPI_REF), "ns/pi"),
    ("secret", child("Secret", "pi-ssh", MPI_REF), "ns/pi"),
    ("podgroup", child("PodGroup", "pi", MPI_REF), "ns/pi"),
    ("launcher-job", LAUNCHER_JOB, "ns/pi"),
    ("launcher-pod-via-job", child("Pod", "pi-launcher-x7", BATCH_REF), "ns/pi"),
    (
        "legacy-v1-owner",
        child("Pod", "p", ref("MPIJob", "kubeflow.org/v1", "pi", JOB_UID)),
        "ns/pi",
    ),
    (
        "controller-among-several-refs",
        child("Pod", "p", ref("ConfigMap", "v1", "x", "u1", controller=None), MPI_REF),
        "ns/pi",
    ),
    ("no-owner", child("Pod", "lonely"), None),
    (
        "owner-not-controller",
        child("Pod", "p", ref("MPIJob", "kubeflow.org/v2beta1", "pi", JOB_UID, controller=False)),
        None,
    ),
    ("foreign-kind", child("Pod", "p", ref("ReplicaSet", "apps/v1", "rs", "u2")), None),
    (
        "mpijob-of-other-group",
        child("Pod", "p", ref("MPIJob", "example.com/v1", "pi", JOB_UID)),
        None,
    ),
    ("stale-uid", child("Pod", "p", ref("MPIJob", "kubeflow.org/v2beta1", "pi", "old-uid")), None),
    (
        "owner-not-cached",
        child("Pod", "p", ref("MPIJob", "kubeflow.org/v2beta1", "gone", "u3")),
        None,
    ),
    ("other-namespace", child("Pod", "p", MPI_REF, namespace="elsewhere"), None),
    ("pod-of-unknown-job", child("Pod", "p", ref("Job", "batch/v1", "cron-123", "u4")), None),
    ("pod-of-stale-job", child("Pod", "p", ref("Job", "batch/v1", "pi-launcher", "old")), None),
    ("pod-of-foreign-job", child("Pod", "p", ref("Job", "batch/v1", "plain", "u5")), None),
]


@pytest.mark.parametrize(("obj", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_owner_key(stores: tuple[Store, Store], obj: dict[str, Any], expected: str | None) -> None:
    mpijobs, jobs = stores
    assert handlers.owner_key(obj, mpijobs=mpijobs, jobs=jobs) == expected


def test_mpijob_events_map_to_own_key_on_add_update_and_delete(stores: tuple[Store, Store]) -> None:
    mpijobs, jobs = stores
    added: list[str] = []
    h = handlers.EventHandlers(added.append, mpijobs=mpijobs, jobs=jobs)
    job = mpijob("other", "ns2", "uid-2")  # not even cached: MPIJob events never need a lookup
    h.on_mpijob(job)
    h.on_mpijob_update(job, {**job, "spec": {"runPolicy": {"suspend": True}}})
    h.on_mpijob(job)
    assert added == ["ns2/other"] * 3


def test_child_update_enqueues_old_and_new_owner_once_each(stores: tuple[Store, Store]) -> None:
    mpijobs, jobs = stores
    mpijobs.upsert(mpijob("b", uid="uid-b"))
    added: list[str] = []
    h = handlers.EventHandlers(added.append, mpijobs=mpijobs, jobs=jobs)
    old = child("Pod", "p", MPI_REF)
    new = child("Pod", "p", ref("MPIJob", "kubeflow.org/v2beta1", "b", "uid-b"))
    h.on_child_update(old, new)
    assert added == ["ns/b", "ns/pi"]
    added.clear()
    h.on_child_update(old, old)
    assert added == ["ns/pi"]
    added.clear()
    h.on_child(child("Pod", "lonely"))
    h.on_child_update(child("Pod", "lonely"), child("Pod", "lonely"))
    assert added == []


def test_a_deleted_incarnations_child_going_enqueues_the_job_now_of_that_name(
    stores: tuple[Store, Store],
) -> None:
    """Deleted and re-created under the same name: the old incarnation's leftover pod blocked the
    new one's worker of that name (ErrResourceExists, retried with a backoff grown to minutes under
    chaos); its deletion is the event that unblocks the new incarnation. Found by bench/chaos.py: 10
    of 50 jobs re-created during the run never started."""
    mpijobs, jobs = stores
    added: list[str] = []
    h = handlers.EventHandlers(
        lambda key, urgent=False: added.append(key), mpijobs=mpijobs, jobs=jobs
    )
    old_ref = ref("MPIJob", "kubeflow.org/v2beta1", "pi", "uid-before")
    leftover = child("Pod", "pi-worker-0", old_ref)
    h.on_child(leftover)  # its add and updates still belong to nobody
    h.on_pod_update(leftover, leftover)
    assert added == []
    h.on_pod_delete(leftover)
    h.on_child_delete(child("ConfigMap", "pi-config", old_ref))
    assert added == ["ns/pi", "ns/pi"]
    added.clear()
    gone = ref("MPIJob", "kubeflow.org/v2beta1", "never-recreated", "uid-x")
    h.on_pod_delete(child("Pod", "never-recreated-worker-0", gone))
    h.on_child_delete(child("Service", "svc", ref("Deployment", "apps/v1", "pi", "uid-d")))
    assert added == []
    assert (
        handlers.successor_key(child("Pod", "p", MPI_REF), mpijobs=mpijobs) is None
    )  # same incarnation


@pytest.mark.parametrize(
    ("gang", "expected"),
    [
        (
            None,
            [
                "mpijobs",
                "pods",
                "jobs",
                "services",
                "configmaps",
                "secrets",
                "poddisruptionbudgets",
            ],
        ),
        (
            "volcano",
            [
                "mpijobs",
                "pods",
                "jobs",
                "services",
                "configmaps",
                "secrets",
                "poddisruptionbudgets",
                "podgroups",
                "priorityclasses",
            ],
        ),
    ],
    ids=["default", "gang-scheduling"],
)
def test_watch_table(gang: handlers.GangScheduler | None, expected: list[str]) -> None:
    table = handlers.watches(gang, handlers.WatchSelectors())
    assert [w.name for w in table] == expected
    by_name = {w.name: w for w in table}
    assert by_name["mpijobs"].events == "mpijob"
    assert by_name["pods"].selector == "training.kubeflow.org/operator-name=mpi-operator"
    assert by_name["services"].selector is None  # upstream labels them only `app: <job>`
    if gang:
        assert by_name["podgroups"].resource.group == "scheduling.volcano.sh"
        assert by_name["priorityclasses"].events is None  # cached for priorities, never enqueues
        assert not by_name["priorityclasses"].resource.namespaced


def test_owned_only_filters_every_child() -> None:
    table = handlers.watches("scheduler-plugins", handlers.WatchSelectors.owned_only())
    children = [w for w in table if w.events == "child"]
    assert len(children) == 7
    assert {w.selector for w in children} == {handlers.OWNED_SELECTOR}


def pod(*, ready: bool = True, deleting: bool = False, phase: str = "Running") -> dict[str, Any]:
    obj = child("Pod", "pi-worker-1", MPI_REF)
    obj["status"] = {"phase": phase, "conditions": [{"type": "Ready", "status": str(ready)}]}
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-11-26T00:00:00Z"
    return obj


def launcher_pod(*, ready: bool = True, phase: str = "Running") -> dict[str, Any]:
    obj = child("Pod", "pi-launcher-x7", BATCH_REF)
    obj["status"] = {"phase": phase, "conditions": [{"type": "Ready", "status": str(ready)}]}
    return obj


POD_EVENTS = [
    ("became-not-ready", pod(), pod(ready=False), True),
    ("failed", pod(), pod(ready=False, phase="Failed"), True),
    ("failed-with-stale-ready", pod(), pod(phase="Failed"), True),
    ("terminating", pod(), pod(deleting=True), True),
    ("deleted", pod(), None, True),
    ("became-ready", pod(ready=False), pod(), False),
    ("never-ready-deleted", pod(ready=False), None, False),
    (
        "annotation-only",
        pod(),
        {**pod(), "metadata": {**pod()["metadata"], "annotations": {"a": "b"}}},
        False,
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "urgent"), [c[1:] for c in POD_EVENTS], ids=[c[0] for c in POD_EVENTS]
)
def test_a_worker_pod_that_stops_being_usable_enqueues_its_job_urgently(
    stores: tuple[Store, Store], old: dict[str, Any], new: dict[str, Any] | None, urgent: bool
) -> None:
    mpijobs, jobs = stores
    added: list[tuple[str, bool]] = []

    def enqueue(key: str, *, urgent: bool = False) -> None:
        added.append((key, urgent))

    h = handlers.EventHandlers(enqueue, mpijobs=mpijobs, jobs=jobs)
    if new is None:
        h.on_pod_delete(old)
    else:
        h.on_pod_update(old, new)
    assert added == [("ns/pi", urgent)]
    assert handlers.lost_pod(old, new) is urgent


def with_status(obj: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**obj, "status": {**obj["status"], **fields}}


def with_meta(obj: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], **fields}}


def recording(stores: tuple[Store, Store]) -> tuple[handlers.EventHandlers, list[str]]:
    """Handlers on `stores` and the keys they enqueue."""
    mpijobs, jobs = stores
    added: list[str] = []
    h = handlers.EventHandlers(
        lambda key, *, urgent=False: added.append(key), mpijobs=mpijobs, jobs=jobs
    )
    return h, added


def containers(**fields: Any) -> list[dict[str, Any]]:
    return [{"name": "main", "ready": False, "started": False, "restartCount": 0, **fields}]


WAITING = {"waiting": {"reason": "ContainerCreating"}}
RUNNING = {"running": {"startedAt": "2026-11-26T00:00:01Z"}}
TERMINATED = {"terminated": {"exitCode": 137, "reason": "Error"}}
STARTING = with_status(
    pod(ready=False, phase="Pending"), containerStatuses=containers(state=WAITING)
)
STARTED = with_status(pod(ready=False), containerStatuses=containers(state=RUNNING, started=True))

# (id, old, new, matters): what a sync reads of a pod changed, or only what it never reads.
UNSCHEDULABLE = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "Unschedulable",
    "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
}
POD_UPDATES = [
    ("resource-version-only", pod(), with_meta(pod(), resourceVersion="8"), False),
    ("managed-fields-only", pod(), with_meta(pod(), managedFields=[{"manager": "kubelet"}]), False),
    ("start-time", pod(), with_status(pod(), startTime="2026-11-26T00:00:00Z"), False),
    (
        "ready-false-added",
        {**pod(phase="Pending"), "status": {"phase": "Pending"}},
        pod(ready=False, phase="Pending"),
        False,
    ),
    (
        "ready-transition-time",
        pod(),
        with_status(
            pod(), conditions=[{"type": "Ready", "status": "True", "lastTransitionTime": "t"}]
        ),
        False,
    ),
    (
        "other-condition",
        pod(),
        with_status(pod(), conditions=[*pod()["status"]["conditions"], {"type": "PodScheduled"}]),
        False,
    ),
    ("container-waiting", pod(ready=False, phase="Pending"), STARTING, False),
    (
        "container-started-running",
        with_status(pod(ready=False), containerStatuses=containers(state=WAITING)),
        STARTED,
        False,
    ),
    (
        "container-ready",
        STARTED,
        with_status(STARTED, containerStatuses=containers(state=RUNNING, ready=True)),
        False,
    ),
    ("phase", STARTING, with_status(STARTING, phase="Running"), True),
    ("became-ready", pod(ready=False), pod(), True),
    ("became-not-ready", pod(), pod(ready=False), True),
    ("launcher-became-ready", launcher_pod(ready=False), launcher_pod(), False),
    (
        "launcher-running",
        launcher_pod(ready=False, phase="Pending"),
        launcher_pod(ready=False),
        True,
    ),
    ("launcher-failed", launcher_pod(ready=False), launcher_pod(ready=False, phase="Failed"), True),
    (
        "launcher-annotation",
        launcher_pod(),
        with_meta(launcher_pod(), annotations={"a": "b"}),
        True,
    ),
    ("reason", pod(), with_status(pod(), reason="Evicted"), True),
    ("message", pod(), with_status(pod(), message="The node was low on resource"), True),
    (
        "restart-count",
        STARTED,
        with_status(STARTED, containerStatuses=containers(state=RUNNING, restartCount=1)),
        True,
    ),
    (
        "terminated",
        STARTED,
        with_status(STARTED, containerStatuses=containers(state=TERMINATED)),
        True,
    ),
    (
        "last-state-terminated",
        STARTED,
        with_status(STARTED, containerStatuses=containers(state=RUNNING, lastState=TERMINATED)),
        True,
    ),
    ("deletion", pod(), with_meta(pod(), deletionTimestamp="2026-11-26T00:00:00Z"), True),
    ("annotation", pod(), with_meta(pod(), annotations={"a": "b"}), True),
    ("label", pod(), with_meta(pod(), labels={"a": "b"}), True),
    ("owner", pod(), with_meta(pod(), ownerReferences=[]), True),
    ("node", pod(), {**pod(), "spec": {"nodeName": "n1"}}, True),
    (
        "bound-as-the-store-keeps-it",  # no sync reads nodeName: the pod transform drops it
        transforms.pod({**pod(ready=False, phase="Pending"), "spec": {"hostname": "h"}}),
        transforms.pod(
            {**pod(ready=False, phase="Pending"), "spec": {"hostname": "h", "nodeName": "n1"}}
        ),
        False,
    ),
    (
        "unschedulable",
        pod(ready=False, phase="Pending"),
        with_status(pod(ready=False, phase="Pending"), conditions=[UNSCHEDULABLE]),
        True,
    ),
    (
        "unschedulable-other-message",
        with_status(pod(ready=False, phase="Pending"), conditions=[UNSCHEDULABLE]),
        with_status(
            pod(ready=False, phase="Pending"),
            conditions=[
                {**UNSCHEDULABLE, "message": "0/3 nodes are available: 3 Insufficient cpu."}
            ],
        ),
        True,
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "matters"), [c[1:] for c in POD_UPDATES], ids=[c[0] for c in POD_UPDATES]
)
def test_a_pod_update_enqueues_its_job_only_when_it_changes_what_a_sync_reads(
    stores: tuple[Store, Store], old: dict[str, Any], new: dict[str, Any], matters: bool
) -> None:
    h, added = recording(stores)
    h.on_pod_update(old, new)
    assert handlers.pod_update_matters(old, new) is matters
    assert added == (["ns/pi"] if matters else [])


def with_spec(obj: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**obj, "spec": {**obj.get("spec", {}), **fields}}


SPEC = with_spec(mpijob(), runPolicy={"suspend": False})
# (id, new, matters): an MPIJob update from SPEC that changed only its status and unread metadata,
# or more.
MPIJOB_UPDATES = [
    ("status-only", {**SPEC, "status": {"conditions": [{"type": "Created"}]}}, False),
    ("resource-version", with_meta(SPEC, resourceVersion="2"), False),
    ("managed-fields", with_meta(SPEC, managedFields=[{"manager": "kubectl"}]), False),
    ("spec", with_spec(SPEC, runPolicy={"suspend": True}), True),
    ("generation", with_meta(SPEC, generation=2), True),
    ("deletion", with_meta(SPEC, deletionTimestamp="2026-11-26T00:00:00Z"), True),
    ("finalizers", with_meta(SPEC, finalizers=["x"]), True),
    ("annotation", with_meta(SPEC, annotations={"a": "b"}), True),
    ("label", with_meta(SPEC, labels={"a": "b"}), True),
]


@pytest.mark.parametrize(
    ("new", "matters"), [c[1:] for c in MPIJOB_UPDATES], ids=[c[0] for c in MPIJOB_UPDATES]
)
def test_an_mpijob_update_enqueues_it_unless_only_its_status_changed(
    stores: tuple[Store, Store], new: dict[str, Any], matters: bool
) -> None:
    h, added = recording(stores)
    h.on_mpijob_update(SPEC, new)
    assert handlers.mpijob_update_matters(SPEC, new) is matters
    assert added == (["ns/pi"] if matters else [])


STARTED_JOB: dict[str, Any] = {
    **LAUNCHER_JOB,
    "spec": {"suspend": False, "template": {"spec": {"containers": [{"name": "main"}]}}},
    "status": {"startTime": "2026-11-29T00:00:00Z", "active": 1, "terminating": 0},
}
# (id, new, matters): a launcher Job update from STARTED_JOB.
JOB_UPDATES = [
    ("ready-count", with_status(STARTED_JOB, ready=1), False),
    ("active-count", with_status(STARTED_JOB, active=0), False),
    ("terminating-count", with_status(STARTED_JOB, terminating=1), False),
    ("uncounted", with_status(STARTED_JOB, uncountedTerminatedPods={"failed": ["u"]}), False),
    ("resource-version", with_meta(STARTED_JOB, resourceVersion="8"), False),
    ("failed-count", with_status(STARTED_JOB, failed=1), True),
    ("start-time", with_status(STARTED_JOB, startTime="2026-11-29T00:01:00Z"), True),
    ("completion-time", with_status(STARTED_JOB, completionTime="2026-11-29T00:02:00Z"), True),
    (
        "complete",
        with_status(STARTED_JOB, conditions=[{"type": "Complete", "status": "True"}]),
        True,
    ),
    ("suspend", {**STARTED_JOB, "spec": {**STARTED_JOB["spec"], "suspend": True}}, True),
    ("deletion", with_meta(STARTED_JOB, deletionTimestamp="2026-11-29T00:03:00Z"), True),
    ("owner", with_meta(STARTED_JOB, ownerReferences=[]), True),
    ("status-gone", {k: v for k, v in STARTED_JOB.items() if k != "status"}, True),
]


@pytest.mark.parametrize(
    ("new", "matters"), [c[1:] for c in JOB_UPDATES], ids=[c[0] for c in JOB_UPDATES]
)
def test_a_launcher_job_update_enqueues_its_mpijob_unless_only_its_pod_counts_changed(
    stores: tuple[Store, Store], new: dict[str, Any], matters: bool
) -> None:
    h, added = recording(stores)
    h.on_job_update(STARTED_JOB, new)
    assert handlers.job_update_matters(STARTED_JOB, new) is matters
    assert added == (["ns/pi"] if matters else [])
