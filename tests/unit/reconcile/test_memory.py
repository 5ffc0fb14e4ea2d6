"""`reconcile.memory.Memories`: one `JobMemory` per job key, made on first use, dropped whole by one
`forget` (the reconciler's side of it: tests/integration/reconcile/test_memory.py); and what a job's
memory keeps of a status write (`StatusWrite`)."""

from __future__ import annotations

import json

from mpi_operator.flowcontrol import FakeClock
from mpi_operator.reconcile.memory import Memories, StatusWrite


def test_one_memory_per_key_until_forgotten() -> None:
    clock = FakeClock()
    memories = Memories(clock.now)
    memory = memories.of("ns/a")
    assert memories.of("ns/a") is memory
    assert memories.get("ns/b") is None
    assert "ns/b" not in memories
    memory.created_pods.add("u1", {"kind": "Pod", "metadata": {"name": "a-worker-0"}}, clock.now())
    memory.made.add("u1", {"kind": "Service", "metadata": {"name": "a"}})
    memory.deleted.add("child-uid")
    memory.status_written_at = clock.now()
    memories.of("ns/b")
    memories.forget("ns/a")
    assert "ns/a" not in memories
    assert len(memories) == 1
    fresh = memories.of("ns/a")
    assert len(fresh.created_pods) == 0
    assert not fresh.made.refs
    assert "child-uid" not in fresh.deleted
    assert fresh.status_written_at is None


ANSWER = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "metadata": {
        "name": "pi",
        "uid": "u1",
        "resourceVersion": "8",
        "labels": {"team": "a"},
        "managedFields": [{"manager": "mpi-operator", "operation": "Update"}],
    },
    "spec": {"slotsPerWorker": 1},
    "status": {"conditions": [{"type": "Created", "status": "True"}]},
}
CACHED = {
    "metadata": {"name": "pi", "uid": "u1", "resourceVersion": "7", "labels": {"team": "a"}},
    "spec": {"slotsPerWorker": 1},
}


def test_a_status_write_keeps_only_what_it_changed_without_managed_fields() -> None:
    kept = json.loads(StatusWrite.of("7", ANSWER).changed)
    assert kept.keys() == {"metadata", "status"}
    assert "managedFields" not in kept["metadata"]
    assert kept["metadata"]["resourceVersion"] == "8"
    assert kept["status"] == ANSWER["status"]


def test_a_status_write_is_laid_over_the_version_it_replaced_only() -> None:
    write = StatusWrite.of("7", ANSWER)
    latest = write.over(CACHED)
    assert latest is not None
    assert latest["metadata"]["resourceVersion"] == "8"
    assert latest["status"] == ANSWER["status"]
    assert latest["spec"] == CACHED["spec"]
    assert "managedFields" not in latest["metadata"]
    moved_on = {**CACHED, "metadata": {**CACHED["metadata"], "resourceVersion": "9"}}
    assert write.over(moved_on) is None
    recreated = {**CACHED, "metadata": {**CACHED["metadata"], "uid": "u2"}}
    assert write.over(recreated) is None
