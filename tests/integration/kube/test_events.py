"""EventRecorder against kubesim: core/v1 Events, count aggregation of repeats, truncation, best
effort."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import pytest_asyncio

from kubesim.app import KubeSim
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.kube.events import MAX_MESSAGE_LENGTH, EventRecorder


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest_asyncio.fixture
async def subject(kube: Kube) -> dict[str, Any]:
    return await kube.create(
        resources.CONFIG_MAP,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "job", "namespace": "default"},
        },
    )


async def events(kube: Kube) -> list[dict[str, Any]]:
    items, _ = await kube.list(resources.EVENT, "default")
    return sorted(items, key=lambda e: e["metadata"]["name"])


async def test_repeats_within_the_window_bump_count_instead_of_creating_events(
    kube: Kube, subject: dict[str, Any]
) -> None:
    clock = Clock()
    recorder = EventRecorder(kube, host="node-a", now=clock)
    for _ in range(3):
        recorder.record(subject, "Warning", "ValidationError", "spec is wrong")
        clock.now += 60
    recorder.record(subject, "Normal", "MPIJobCreated", "created")
    await recorder.flush()
    got = await events(kube)
    by_reason = {e["reason"]: e for e in got}
    assert sorted(by_reason) == ["MPIJobCreated", "ValidationError"]
    repeated = by_reason["ValidationError"]
    assert repeated["count"] == 3
    assert repeated["type"] == "Warning"
    assert repeated["firstTimestamp"] == "2027-01-15T08:00:00Z"
    assert repeated["lastTimestamp"] == "2027-01-15T08:02:00Z"
    assert repeated["source"] == {"component": "mpi-job-controller", "host": "node-a"}
    ref = repeated["involvedObject"]
    assert (ref["kind"], ref["name"], ref["namespace"], ref["uid"]) == (
        "ConfigMap",
        "job",
        "default",
        subject["metadata"]["uid"],
    )


async def test_a_repeat_after_the_window_or_after_the_event_expired_starts_a_new_event(
    kube: Kube, subject: dict[str, Any]
) -> None:
    clock = Clock()
    recorder = EventRecorder(kube, now=clock)
    recorder.record(subject, "Normal", "R", "m")
    await recorder.flush()
    clock.now += 601
    recorder.record(subject, "Normal", "R", "m")
    await recorder.flush()
    assert [e["count"] for e in await events(kube)] == [1, 1]
    for event in await events(kube):
        await kube.delete(resources.EVENT, event["metadata"]["name"], namespace="default")
    recorder.record(subject, "Normal", "R", "m")  # its Event is gone (TTL): patch 404 -> create
    await recorder.flush()
    assert [e["count"] for e in await events(kube)] == [1]


async def test_messages_are_truncated_to_the_api_limit(kube: Kube, subject: dict[str, Any]) -> None:
    recorder = EventRecorder(kube)
    recorder.record(subject, "Warning", "Long", "x" * 5000)
    await recorder.close()
    [event] = await events(kube)
    assert len(event["message"]) == MAX_MESSAGE_LENGTH
    assert event["message"].endswith("...")


async def test_messages_are_truncated_in_bytes_not_characters(
    kube: Kube, subject: dict[str, Any]
) -> None:
    recorder = EventRecorder(kube)
    recorder.record(subject, "Warning", "Long", "ü" * 1000)  # 1000 characters, 2000 bytes
    await recorder.close()
    [event] = await events(kube)
    assert len(event["message"].encode()) <= MAX_MESSAGE_LENGTH
    assert event["message"] == "ü" * 510 + "..."


async def test_recording_never_raises_into_the_caller(
    kube: Kube, kubesim: KubeSim, subject: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    kubesim.control.inject_error(500, method="POST", path="/events$", count=None)
    recorder = EventRecorder(kube)
    with caplog.at_level(logging.WARNING, logger="mpi_operator.kube.events"):
        recorder.record(subject, "Normal", "Lost", "the server is down")
        await recorder.flush()
    assert "could not record event" in caplog.text
    assert await events(kube) == []
    kubesim.control.clear_faults()
    recorder.record(subject, "Normal", "Back", "the server is back")
    await recorder.close()
    assert [e["reason"] for e in await events(kube)] == ["Back"]


async def test_a_flood_of_similar_events_about_one_object_comes_to_a_handful(
    kube: Kube, subject: dict[str, Any]
) -> None:
    """A scale-in of 1,000 workers drains each with its own message: client-go's correlator
    combines them after ten and its spam filter stops the writes after 25 (tests/unit/kube has the
    rules)."""
    clock = Clock()
    recorder = EventRecorder(kube, now=clock)
    for i in range(1000):
        recorder.record(subject, "Normal", "WorkerDrained", f"worker job-worker-{i} deleted")
        clock.now += 0.01
    await recorder.flush()
    got = await events(kube)
    assert len(got) == 10
    combined = [e for e in got if e["message"].startswith("(combined from similar events): ")]
    assert len(combined) == 1
    assert sum(e["count"] for e in got) == 25
