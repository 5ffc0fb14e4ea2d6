"""Every log line emitted during a reconcile names its job, in both formats, whichever logger wrote
it (the worker's own failure lines and tasks started by the reconcile included); lines outside do
not."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator

import pytest

from mpi_operator.cache.workqueue import WorkQueue
from mpi_operator.flowcontrol import FakeClock
from mpi_operator.runtime import logging as oplog
from mpi_operator.runtime import loops
from mpi_operator.runtime.metrics import Metrics
from mpi_operator.runtime.types import PermanentError, Result

KEYS = ["ns-a/job-1", "ns-b/job-2", "ns-a/job-3"]


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    out = io.StringIO()
    yield out
    for handler in list(root.handlers):
        if handler not in saved[0]:
            root.removeHandler(handler)
    root.setLevel(saved[1])


class ChattyReconciler:
    """Logs through several loggers, from a child task too, and fails in both ways on some keys."""

    async def reconcile(self, key: str) -> Result:
        logging.getLogger("mpi_operator.reconcile.reconciler").info(
            "planning", extra={"creates": 2}
        )
        await asyncio.create_task(
            self._child()
        )  # suspends this reconcile: the key must survive that
        logging.getLogger("kubernetes_asyncio.client").warning("slow answer")
        if key.endswith("2"):
            raise RuntimeError("apply failed")
        if key.endswith("3"):
            raise PermanentError("invalid spec")
        return Result()

    async def _child(self) -> None:
        logging.getLogger("mpi_operator.kube.events").info("event recorded")


async def reconcile_all(log_format: oplog.LogFormat, stream: io.StringIO) -> list[str]:
    oplog.setup(log_format, stream=stream)
    logging.getLogger("mpi_operator.runtime.manager").info("before any reconcile")
    queue: WorkQueue[str] = WorkQueue(name="t", clock=FakeClock())  # no real timer, whatever fails
    for key in KEYS:
        queue.add(key)
    tasks = [
        asyncio.create_task(loops.worker(queue, ChattyReconciler(), metrics=Metrics()))
        for _ in range(2)
    ]
    # Keys already queued are still handed out after the shutdown; the workers return once all are
    # done.
    await queue.shut_down_with_drain()
    await asyncio.gather(*tasks)
    logging.getLogger("mpi_operator.runtime.manager").info("after")
    return stream.getvalue().splitlines()


async def test_json_lines_name_the_key_of_the_reconcile_that_wrote_them(
    stream: io.StringIO,
) -> None:
    entries = [
        json.loads(line) for line in await reconcile_all("json", stream) if line.startswith("{")
    ]
    assert entries[0]["msg"] == "before any reconcile"
    assert entries[0]["key"] is None
    assert entries[-1]["key"] is None
    during = entries[1:-1]
    assert all(e["key"] in KEYS for e in during)
    assert {e["key"] for e in during} == set(KEYS)
    for key in KEYS:
        msgs = [e["msg"] for e in during if e["key"] == key]
        assert msgs[:3] == ["planning", "event recorded", "slow answer"], key
    failure = next(e for e in during if e["key"] == "ns-b/job-2" and e["level"] == "error")
    assert failure["logger"] == "mpi_operator.runtime.loops"
    assert "RuntimeError: apply failed" in failure["exc"]
    permanent = next(e for e in during if e["key"] == "ns-a/job-3" and e["level"] == "error")
    assert "invalid spec" in permanent["msg"]
    planning = next(e for e in during if e["msg"] == "planning")
    assert planning["creates"] == 2  # extras are kept as fields
    assert set(planning) >= {"ts", "level", "logger", "msg", "key"}
    assert planning["ts"].endswith("Z")


async def test_text_lines_name_the_key_of_the_reconcile_that_wrote_them(
    stream: io.StringIO,
) -> None:
    lines = await reconcile_all("text", stream)
    records = [line for line in lines if line[:4].isdigit()]  # drop traceback continuation lines
    assert "[" not in records[0]
    assert "before any reconcile" in records[0]
    assert "after" in records[-1]
    assert "[" not in records[-1]
    during = records[1:-1]
    assert during
    for line in during:
        assert any(f"[{key}]" in line for key in KEYS), line
    assert any("[ns-a/job-1] planning creates=2" in line for line in during)
    assert any("Traceback" in line for line in lines)


def test_setup_twice_keeps_one_handler(stream: io.StringIO) -> None:
    oplog.setup("json", stream=stream)
    oplog.setup("text", stream=stream)
    ours = [h for h in logging.getLogger().handlers if h.get_name() == "mpi-operator"]
    assert len(ours) == 1
    assert isinstance(ours[0].formatter, oplog.TextFormatter)


def test_key_context_nests_and_restores() -> None:
    assert oplog.reconcile_key.get() is None
    with oplog.key_context("a/b"):
        with oplog.key_context("c/d"):
            assert oplog.reconcile_key.get() == "c/d"
        assert oplog.reconcile_key.get() == "a/b"
    assert oplog.reconcile_key.get() is None


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"count": 3, "city": "caf\u00e9"}, {"count": 3, "city": "caf\u00e9"}),
        ({"big": 2**70}, {"big": 2**70}),  # past 64 bits: written by json, as before
        ({"by_index": {1: "a"}}, {"by_index": {"1": "a"}}),  # a key that is not a string
        ({"obj": object}, {"obj": str(object)}),  # what JSON cannot hold is written as its str()
    ],
)
def test_json_lines_carry_extra_fields_as_json_would(
    stream: io.StringIO, extra: dict[str, object], expected: dict[str, object]
) -> None:
    oplog.setup("json", stream=stream)
    logging.getLogger("mpi_operator.test").info("with extras", extra=extra)
    entry = json.loads(stream.getvalue().splitlines()[-1])
    assert {k: entry[k] for k in expected} == expected
    assert entry["msg"] == "with extras"
