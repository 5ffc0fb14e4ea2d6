"""Pacing: how the discovered host set moves from what is published towards what is wanted.

One change at a time, because Horovod 0.28.1 loses a removal that arrives mid-reset and deadlocks
below `--min-np` (docs/architecture.md#the-elastic-state-machine): a listed host that can no longer
run leaves at once; otherwise nothing changes until `settleSeconds` after the previous change; then
all additions in one change (intermediate targets coalesced), gathering the workers still starting
for at most half of `settleSeconds`; only when nothing is to be added do unwanted hosts leave
gracefully, highest index first, never below `minReplicas`. So each change is a pure addition or a
pure removal; `next_members` is pure and deterministic.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from mpi_operator.elastic.state import Member


class Change(Enum):
    NONE = "none"
    INITIAL = "initial"
    LOST = "lost"
    """Hosts that cannot run any more left at once."""
    ADDED = "added"
    REMOVED = "removed"
    """Hosts left gracefully (scale-in)."""


@dataclass(frozen=True)
class PacingResult:
    members: tuple[Member, ...]
    change: Change
    added: tuple[Member, ...] = ()
    removed: tuple[Member, ...] = ()
    wait: float | None = None
    """Seconds until a pending change may be published (None: nothing pending, or nothing time can
    fix)."""


def next_members(
    published: Sequence[Member] | None,
    wanted: Sequence[Member],
    alive: Collection[Member],
    *,
    min_workers: int,
    settle_seconds: float,
    changed_at: float | None,
    now: float,
    arriving: Collection[Member] = (),
    ready_since: Mapping[Member, float] | None = None,
) -> PacingResult:
    """The members to publish now; see the module docstring for the rules."""
    target = tuple(sorted(set(wanted)))
    if published is None:
        return PacingResult(target, Change.INITIAL, added=target)
    current = tuple(sorted(set(published)))
    # Sets for every membership test: these run over thousands of workers on each sync.
    alive_set = alive if isinstance(alive, set | frozenset) else frozenset(alive)
    kept = tuple(m for m in current if m in alive_set)
    if kept != current:
        lost = tuple(m for m in current if m not in alive_set)
        return PacingResult(kept, Change.LOST, removed=lost)
    if current == target:
        return PacingResult(current, Change.NONE)
    if changed_at is not None and now < changed_at + settle_seconds:
        return PacingResult(current, Change.NONE, wait=changed_at + settle_seconds - now)
    current_set, target_set = frozenset(current), frozenset(target)
    added = tuple(m for m in target if m not in current_set)
    if added:
        gathered_by = _gathered_by(added, arriving, ready_since, settle_seconds, changed_at, now)
        if gathered_by is not None and now < gathered_by:
            return PacingResult(current, Change.NONE, wait=gathered_by - now)
        return PacingResult(tuple(sorted({*current, *added})), Change.ADDED, added=added)
    unwanted = sorted((m for m in current if m not in target_set), reverse=True)
    allowed = max(len(current) - min_workers, 0)
    removed = tuple(sorted(unwanted[:allowed]))
    if not removed:
        return PacingResult(current, Change.NONE)
    gone = frozenset(removed)
    return PacingResult(tuple(m for m in current if m not in gone), Change.REMOVED, removed=removed)


def _gathered_by(
    added: Sequence[Member],
    arriving: Collection[Member],
    ready_since: Mapping[Member, float] | None,
    settle_seconds: float,
    changed_at: float | None,
    now: float,
) -> float | None:
    """When `added` stops waiting for `arriving` workers; None when there is nothing to wait for.

    The window counts from the earliest Ready among `added` (a missing time: from when the settle
    interval let them in; a time ahead of the operator's clock: from now), so a worker that never
    comes Ready holds the additions back only for the window."""
    if not arriving or settle_seconds <= 0:
        return None
    since = [ready_since[m] for m in added if ready_since and m in ready_since]
    if since:
        start = min(min(since), now)
    elif changed_at is not None:
        start = min(changed_at + settle_seconds, now)
    else:
        return None
    return start + settle_seconds / 2
