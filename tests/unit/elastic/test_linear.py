"""Pacing and scale-in stay linear in the worker count: a job of 2,000 workers (bench/bigjob.py)
spent most of each sync in `x in tuple` tests over every member. Counting the comparisons of
members (a tuple subclass that counts `==`) shows each is compared a bounded number of times,
never once per other member."""

from __future__ import annotations

from mpi_operator.elastic.hosts import WorkerPod
from mpi_operator.elastic.pacing import Change, next_members
from mpi_operator.elastic.scalein import plan_scale_in

N = 2000


class Counted(tuple[int, int]):
    compared = 0

    def __eq__(self, other: object) -> bool:
        Counted.compared += 1
        return tuple.__eq__(self, other)

    __hash__ = tuple.__hash__


def members(indices: range) -> list[tuple[int, int]]:
    return [Counted((i, 0)) for i in indices]


def test_pacing_compares_each_member_a_bounded_number_of_times() -> None:
    published, wanted = members(range(N // 2)), members(range(N))
    Counted.compared = 0
    added = next_members(
        published,
        wanted,
        set(wanted),
        min_workers=1,
        settle_seconds=1.0,
        changed_at=0.0,
        now=10.0,
    )
    assert added.change is Change.ADDED
    assert len(added.members) == N
    removed = next_members(
        wanted,
        members(range(N // 2)),
        set(members(range(N))),
        min_workers=1,
        settle_seconds=1.0,
        changed_at=0.0,
        now=10.0,
    )
    assert removed.change is Change.REMOVED
    assert len(removed.removed) == N // 2
    assert Counted.compared < 20 * N


def worker(index: int) -> WorkerPod:
    return WorkerPod(
        index=index,
        name=f"big-worker-{index}",
        uid=f"uid-{index}",
        incarnation=0,
        ready=True,
        terminating=False,
        finished=False,
        restarted=False,
        draining_since=None,
        failure_reason="",
        exit_code=None,
    )


def test_scale_in_compares_each_member_a_bounded_number_of_times() -> None:
    workers = {i: worker(i) for i in range(N)}
    listed = members(range(N // 2))
    removed_now = members(range(N // 2, N))
    Counted.compared = 0
    out = plan_scale_in(
        workers,
        {},
        replicas=N // 2,
        listed=tuple(listed),
        removed_now=tuple(removed_now),
        grace_seconds=1.0,
        now=10.0,
    )
    assert len(out.drain) == N // 2
    assert Counted.compared < 20 * N
