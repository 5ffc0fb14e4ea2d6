"""`reconcile.memory.Memories`: one `JobMemory` per job key, made on first use, dropped whole by one
`forget` (the reconciler's side of it: tests/integration/reconcile/test_memory.py)."""

from __future__ import annotations

from mpi_operator.flowcontrol import FakeClock
from mpi_operator.reconcile.memory import Memories


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
