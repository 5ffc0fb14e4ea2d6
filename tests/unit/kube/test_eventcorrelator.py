"""client-go's EventCorrelator, pure, on a fake clock: similar events (same source, object, type and
reason) are combined after ten distinct messages within ten minutes, and a token bucket per source,
object, type and reason (burst 25, one back every 5 minutes) holds back floods."""

from __future__ import annotations

from mpi_operator.kube.eventcorrelator import (
    COMBINED_PREFIX,
    MAX_SIMILAR_EVENTS,
    SPAM_BURST,
    SPAM_REFILL_SECONDS,
    Correlated,
    EventCorrelator,
)

SOURCE = ("mpi-job-controller", "")
JOB = ("uid-1", "MPIJob", "default/big")
T0 = 1_800_000_000.0


def drained(
    correlator: EventCorrelator, i: int, now: float = T0, about: tuple[str, ...] = JOB
) -> Correlated | None:
    return correlator.correlate(
        SOURCE, about, "Normal", "WorkerDrained", f"worker big-worker-{i} deleted", now
    )


def test_nine_distinct_messages_pass_and_the_tenth_on_are_combined_under_one_key() -> None:
    correlator = EventCorrelator()
    first = [drained(correlator, i) for i in range(MAX_SIMILAR_EVENTS - 1)]
    assert all(c is not None and not c.combined for c in first)
    assert len({c.key for c in first if c is not None}) == MAX_SIMILAR_EVENTS - 1
    later = [drained(correlator, i) for i in range(100, 110)]
    assert all(c is not None and c.combined for c in later)
    assert len({c.key for c in later if c is not None}) == 1
    assert later[-1] == Correlated(
        (*SOURCE, *JOB, "Normal", "WorkerDrained"),
        COMBINED_PREFIX + "worker big-worker-109 deleted",
        combined=True,
    )


def test_an_exact_repeat_keeps_its_own_key() -> None:
    correlator = EventCorrelator()
    once, again = drained(correlator, 1), drained(correlator, 1, T0 + 1)
    assert once == again
    assert once is not None
    assert not once.combined


def test_similar_events_ten_minutes_apart_count_again() -> None:
    correlator = EventCorrelator()
    for i in range(MAX_SIMILAR_EVENTS - 1):
        drained(correlator, i, T0 + i)
    later = drained(correlator, 99, T0 + MAX_SIMILAR_EVENTS - 2 + 601)
    assert later is not None
    assert not later.combined


def test_other_reasons_types_and_objects_are_not_similar() -> None:
    correlator = EventCorrelator()
    for i in range(MAX_SIMILAR_EVENTS - 1):
        drained(correlator, i)
    other_job = drained(correlator, 99, about=("uid-2", "MPIJob", "default/other"))
    warning = correlator.correlate(SOURCE, JOB, "Warning", "WorkerDrained", "x", T0)
    other_reason = correlator.correlate(SOURCE, JOB, "Normal", "ScaledIn", "x", T0)
    assert [c is not None and c.combined for c in (other_job, warning, other_reason)] == [False] * 3


def test_the_spam_filter_lets_a_burst_through_then_one_event_per_five_minutes() -> None:
    correlator = EventCorrelator()
    passed = [drained(correlator, i % 3) is not None for i in range(SPAM_BURST + 5)]
    assert passed == [True] * SPAM_BURST + [False] * 5
    assert drained(correlator, 1, T0 + SPAM_REFILL_SECONDS - 1) is None
    assert drained(correlator, 1, T0 + SPAM_REFILL_SECONDS) is not None
    assert drained(correlator, 1, T0 + SPAM_REFILL_SECONDS) is None
    # Another object, source, type or reason has a bucket of its own.
    assert drained(correlator, 1, about=("uid-2", "MPIJob", "default/other")) is not None
    other = correlator.correlate(("leader-election", ""), JOB, "Normal", "R", "m", T0)
    assert other is not None
    warning = correlator.correlate(SOURCE, JOB, "Warning", "WorkerDrained", "m", T0)
    assert warning is not None


def test_a_flood_of_one_reason_does_not_silence_another() -> None:
    """A scale-in's drains used up a bucket per object, and the job's next `WorkerDisrupted`
    warning, which says what kind of loss it was, was dropped."""
    correlator = EventCorrelator()
    assert sum(drained(correlator, i) is not None for i in range(1000)) == SPAM_BURST
    disrupted = [
        correlator.correlate(
            SOURCE, JOB, "Warning", "WorkerDisrupted", f"worker big-worker-{i} preempted", T0 + 1
        )
        for i in range(3)
    ]
    assert all(c is not None for c in disrupted)
    # A quiet object fills its bucket again, up to the burst.
    later = T0 + 100 * SPAM_REFILL_SECONDS
    assert sum(drained(correlator, 1, later) is not None for _ in range(50)) == SPAM_BURST


def test_a_scale_in_of_a_thousand_workers_comes_to_ten_events_and_25_writes() -> None:
    correlator = EventCorrelator()
    results = [drained(correlator, i, T0 + i / 100) for i in range(1000)]
    written = [c for c in results if c is not None]
    assert len(written) == SPAM_BURST
    assert len({c.key for c in written}) == MAX_SIMILAR_EVENTS


def test_what_it_remembers_is_bounded() -> None:
    correlator = EventCorrelator(cache_size=8)
    for i in range(100):
        drained(correlator, i, about=(f"uid-{i}", "Pod", f"default/p{i}"))
    assert len(correlator._similar) == 8
    assert len(correlator._buckets) == 8
