"""`Kube` over real HTTP against kubesim: dicts in and out, typed errors, retries, content types,
limiter.

Retry waits are recorded, not slept; the client-side limiter runs on a `FakeClock`, so its pacing is
asserted request by request in exact fake time."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio import config as kube_config

from kubesim.app import KubeSim
from kubesim.settings import SimSettings
from kubesim.testing import eventually
from mpi_operator.flowcontrol import FakeClock, TokenBucket
from mpi_operator.kube import errors, resources
from mpi_operator.kube.client import Kube
from mpi_operator.kube.retry import RetryPolicy

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


class RecordingSleep:
    """The retry policy's sleep: remembers the delays and does not wait."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return SimSettings(bookmark_seconds=0.2)


@pytest.fixture
def sleeps() -> RecordingSleep:
    return RecordingSleep()


@pytest_asyncio.fixture
async def kube(kubesim: KubeSim, sleeps: RecordingSleep) -> AsyncIterator[Kube]:
    client = await Kube.from_kubeconfig(
        str(kubesim.kubeconfig_path),
        qps=1000,
        burst=1000,
        retry=RetryPolicy(attempts=4, sleep=sleeps),
    )
    try:
        yield client
    finally:
        await client.close()


@contextlib.asynccontextmanager
async def paced_kube(
    kubesim: KubeSim, clock: FakeClock, qps: float, burst: int, *, limit_until_apf: bool = False
) -> AsyncIterator[Kube]:
    """A client whose QPS/burst limiter runs on `clock`."""
    api = await kube_config.new_client_from_config(config_file=str(kubesim.kubeconfig_path))
    limiter = TokenBucket(qps, burst, clock=clock)
    retry = RetryPolicy(attempts=1)
    async with Kube(api, limiter=limiter, retry=retry, limit_until_apf=limit_until_apf) as kube:
        yield kube


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "rt"}},
        "data": data,
    }


def mpijob(name: str, **spec_extra: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "mpioperator/mpi-pi:openmpi"}
    template = {"spec": {"containers": [container]}}
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template},
                "Worker": {"replicas": 2, "template": template},
            },
            **spec_extra,
        },
    }


async def test_crud_round_trip_with_plain_dicts(kube: Kube, kubesim: KubeSim) -> None:
    created = await kube.create(resources.CONFIG_MAP, configmap("a", k="1"))
    assert isinstance(created, dict)
    assert created["metadata"]["uid"]
    assert created["data"] == {"k": "1"}
    got = await kube.get(resources.CONFIG_MAP, "a", "default")
    assert got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    items, rv = await kube.list(resources.CONFIG_MAP, "default", label_selector="app=rt")
    assert [i["metadata"]["name"] for i in items] == ["a"]
    assert (items[0]["kind"], items[0]["apiVersion"]) == ("ConfigMap", "v1")
    assert int(rv) >= int(created["metadata"]["resourceVersion"])
    replaced = await kube.replace(resources.CONFIG_MAP, {**got, "data": {"k": "2"}})
    assert replaced["data"] == {"k": "2"}
    patched = await kube.patch(resources.CONFIG_MAP, "a", {"data": {"m": "3"}}, namespace="default")
    assert patched["data"] == {"k": "2", "m": "3"}
    patched = await kube.patch(
        resources.CONFIG_MAP,
        "a",
        [{"op": "remove", "path": "/data/k"}],
        namespace="default",
        patch_type="json",
    )
    assert patched["data"] == {"m": "3"}
    await kube.delete(
        resources.CONFIG_MAP, "a", namespace="default", uid=created["metadata"]["uid"]
    )
    with pytest.raises(errors.NotFound):
        await kube.get(resources.CONFIG_MAP, "a", "default")
    writes = kubesim.control.recorded(resource="configmaps")
    assert all("mpi-operator" in r.user_agent for r in writes)
    assert [r.content_type.split(";")[0] for r in writes if r.verb == "patch"] == [
        MERGE,
        JSON_PATCH,
    ]
    assert {
        r.content_type.split(";")[0] for r in writes if r.verb in ("create", "update", "delete")
    } == {"application/json"}
    assert all(
        "fieldManager=mpi-operator" in r.query
        for r in writes
        if r.verb in ("create", "update", "patch")
    )


async def test_list_follows_continue_pages(kube: Kube, kubesim: KubeSim) -> None:
    for i in range(7):
        await kube.create(resources.CONFIG_MAP, configmap(f"page-{i}"))
    items, _ = await kube.list(
        resources.CONFIG_MAP, "default", label_selector="app=rt", page_size=3
    )
    assert sorted(i["metadata"]["name"] for i in items) == [f"page-{i}" for i in range(7)]
    assert len(kubesim.control.recorded(verb="list", resource="configmaps")) == 3


async def test_list_transforms_each_page_before_asking_for_the_next(
    kube: Kube, kubesim: KubeSim
) -> None:
    for i in range(7):
        await kube.create(resources.CONFIG_MAP, configmap(f"page-{i}"))
    pages_asked: list[int] = []

    def transform(obj: dict[str, Any]) -> dict[str, Any]:
        pages_asked.append(len(kubesim.control.recorded(verb="list", resource="configmaps")))
        return {"kind": obj["kind"], "metadata": {"name": obj["metadata"]["name"]}}

    items, _ = await kube.list(
        resources.CONFIG_MAP, "default", label_selector="app=rt", page_size=3, transform=transform
    )
    assert pages_asked == [1, 1, 1, 2, 2, 2, 3]
    assert sorted(items, key=lambda i: i["metadata"]["name"]) == [
        {"kind": "ConfigMap", "metadata": {"name": f"page-{i}"}} for i in range(7)
    ]


async def test_list_restarts_unpaginated_when_its_continue_token_expires(
    kube: Kube, kubesim: KubeSim, fake_clock: FakeClock
) -> None:
    for i in range(4):
        await kube.create(resources.CONFIG_MAP, configmap(f"page-{i}"))
    async with paced_kube(kubesim, fake_clock, qps=1, burst=1) as paced:
        # One token: the first page goes at once, the second waits for the next token on the clock.
        listing = asyncio.create_task(paced.list(resources.CONFIG_MAP, "default", page_size=3))
        await fake_clock.parked()
        assert [r.status for r in kubesim.control.recorded(verb="list", resource="configmaps")] == [
            200
        ]
        await kube.create(resources.CONFIG_MAP, configmap("late"))
        kubesim.control.compact()  # ... so the first page's continue token is now too old: 410
        items, rv = await fake_clock.run_until(listing)
    assert sorted(i["metadata"]["name"] for i in items) == [
        "late",
        *(f"page-{i}" for i in range(4)),
    ]
    assert int(rv) == kubesim.control.resource_version
    answered = kubesim.control.recorded(verb="list", resource="configmaps")
    assert [r.status for r in answered] == [200, 410, 200]
    assert "continue=" in answered[1].query
    assert "limit=" not in answered[2].query


@pytest.mark.parametrize(
    ("status", "expected", "retried"),
    [
        (404, errors.NotFound, False),
        (409, errors.Conflict, False),
        (410, errors.Gone, False),
        (422, errors.Invalid, False),
        (403, errors.Forbidden, False),
        (429, errors.TooManyRequests, True),
        (500, errors.ServerError, True),
        (503, errors.ServerError, True),
    ],
    ids=["404", "409", "410", "422", "403", "429", "500", "503"],
)
async def test_error_statuses_map_to_typed_errors_and_only_transient_ones_are_retried(
    kube: Kube,
    kubesim: KubeSim,
    sleeps: RecordingSleep,
    status: int,
    expected: type[Exception],
    retried: bool,
) -> None:
    kubesim.control.inject_error(
        status, method="GET", path="/configmaps/x$", count=None, retry_after=1
    )
    with pytest.raises(expected) as caught:
        await kube.get(resources.CONFIG_MAP, "x", "default")
    assert type(caught.value) is expected
    assert isinstance(caught.value, errors.ApiError)
    assert caught.value.status == status
    attempts = len(kubesim.control.recorded(verb="get", name="x"))
    assert attempts == (4 if retried else 1)
    assert len(sleeps.delays) == attempts - 1


async def test_real_conflicts_and_validation_errors_are_typed(kube: Kube, kubesim: KubeSim) -> None:
    created = await kube.create(resources.CONFIG_MAP, configmap("c"))
    with pytest.raises(errors.AlreadyExists):
        await kube.create(resources.CONFIG_MAP, configmap("c"))
    await kube.patch(resources.CONFIG_MAP, "c", {"data": {"k": "new"}}, namespace="default")
    with pytest.raises(errors.Conflict) as stale:
        await kube.replace(resources.CONFIG_MAP, created)  # carries the old resourceVersion
    assert not isinstance(stale.value, errors.AlreadyExists)
    with pytest.raises(errors.Conflict):
        await kube.delete(resources.CONFIG_MAP, "c", namespace="default", uid="not-the-uid")
    with pytest.raises(errors.Invalid) as invalid:
        await kube.create(resources.CONFIG_MAP, configmap("Not_A_DNS_Name"))
    assert invalid.value.causes, "422 carries field causes"
    assert len(kubesim.control.recorded(verb="create", resource="configmaps")) == 3, (
        "no retries of 409/422"
    )


async def test_transient_failures_are_retried_until_the_call_succeeds(
    kube: Kube, kubesim: KubeSim, sleeps: RecordingSleep
) -> None:
    kubesim.control.inject_error(500, method="POST", path="/configmaps$", count=2)
    created = await kube.create(resources.CONFIG_MAP, configmap("r"))
    assert created["metadata"]["name"] == "r"
    assert len(kubesim.control.recorded(verb="create", resource="configmaps")) == 3
    assert len(sleeps.delays) == 2
    assert all(0 < d <= 5.0 for d in sleeps.delays)


async def test_429_waits_exactly_retry_after(
    kube: Kube, kubesim: KubeSim, sleeps: RecordingSleep
) -> None:
    kubesim.control.inject_error(429, method="GET", path="/configmaps$", count=2, retry_after=3)
    items, _ = await kube.list(resources.CONFIG_MAP, "default")
    assert items == []
    assert sleeps.delays == [3.0, 3.0]


async def test_connection_refused_is_transient_and_retried(
    sleeps: RecordingSleep, kubesim: KubeSim
) -> None:
    kube = await Kube.from_kubeconfig(
        str(kubesim.kubeconfig_path), retry=RetryPolicy(attempts=3, sleep=sleeps)
    )
    kube.api_client.configuration.host = "http://127.0.0.1:9"  # discard port: nothing listens
    try:
        with pytest.raises(errors.TransientError):
            await kube.get(resources.CONFIG_MAP, "x", "default")
        assert len(sleeps.delays) == 2
    finally:
        await kube.close()


async def test_patches_to_custom_resources_send_explicit_content_types(
    kube: Kube, kubesim: KubeSim, install_mpijob_crd: Callable[[Kube], Awaitable[None]]
) -> None:
    await install_mpijob_crd(kube)
    await kube.create(resources.MPIJOB, mpijob("pi"))
    patched = await kube.patch(
        resources.MPIJOB, "pi", {"spec": {"slotsPerWorker": 2}}, namespace="default"
    )
    assert patched["spec"]["slotsPerWorker"] == 2
    status = await kube.patch_status(
        resources.MPIJOB,
        "pi",
        {"status": {"conditions": [], "replicaStatuses": {}}},
        namespace="default",
    )
    assert status["metadata"]["generation"] == patched["metadata"]["generation"]
    with pytest.raises(ValueError, match="strategic"):
        await kube.patch(
            resources.MPIJOB, "pi", {"spec": {}}, namespace="default", patch_type="strategic"
        )
    patches = kubesim.control.recorded(verb="patch", resource="mpijobs")
    assert [(r.subresource, r.content_type.split(";")[0]) for r in patches] == [
        ("", MERGE),
        ("status", MERGE),
    ]
    assert all("fieldManager=mpi-operator" in r.query for r in patches)


async def test_warning_headers_are_logged_and_handed_to_the_callback(
    kube: Kube,
    kubesim: KubeSim,
    install_mpijob_crd: Callable[[Kube], Awaitable[None]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    await install_mpijob_crd(kube)
    seen: list[str] = []
    kube.on_warning = seen.append
    with caplog.at_level(logging.WARNING, logger="mpi_operator.kube.client"):
        await kube.create(resources.MPIJOB, mpijob("typo", slotPerWorker=2))
    assert seen, "the server warned about the unknown field"
    assert any("slotPerWorker" in w for w in seen)
    assert "slotPerWorker" in caplog.text
    sent = kubesim.control.warnings(user_agent="mpi-operator")
    assert seen == sent, "every header, with its quoted-string unescaped"


async def test_watch_streams_events_and_bookmarks_until_the_server_timeout(
    kube: Kube, kubesim: KubeSim
) -> None:
    _, rv = await kube.list(resources.CONFIG_MAP, "default")
    seen: list[tuple[str, str]] = []

    async def consume() -> None:
        async for event in kube.watch(
            resources.CONFIG_MAP, "default", resource_version=rv, timeout_seconds=1
        ):
            seen.append((event["type"], event["object"]["metadata"].get("name", "")))

    watcher = asyncio.create_task(consume())
    # Created whether or not the stream is open yet: a watch from `rv` replays what came after it.
    await kube.create(resources.CONFIG_MAP, configmap("w"))
    await asyncio.wait_for(watcher, 30)  # ends by itself: timeoutSeconds
    assert ("ADDED", "w") in seen
    assert any(kind == "BOOKMARK" for kind, _ in seen)
    [request] = kubesim.control.recorded(verb="watch", resource="configmaps")
    assert "allowWatchBookmarks=true" in request.query
    assert "timeoutSeconds=1" in request.query


async def test_watch_from_a_compacted_version_yields_a_410_error_event(
    kube: Kube, kubesim: KubeSim
) -> None:
    _, rv = await kube.list(resources.CONFIG_MAP, "default")
    await kube.create(resources.CONFIG_MAP, configmap("x"))
    kubesim.control.compact()
    events = [
        e
        async for e in kube.watch(
            resources.CONFIG_MAP, "default", resource_version=rv, timeout_seconds=2
        )
    ]
    assert [e["type"] for e in events] == ["ERROR"]
    assert isinstance(errors.from_status_object(events[0]["object"]), errors.Gone)


async def test_kubeconfig_comes_from_the_environment_when_no_path_is_given(
    kubesim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kubesim.kubeconfig_path))
    async with await Kube.from_kubeconfig() as kube:
        namespace = await kube.get(resources.NAMESPACE, "default")
    assert namespace["metadata"]["name"] == "default"


async def release_one_at_a_time(
    clock: FakeClock, finished: Callable[[], int], waiting: int
) -> None:
    """Moves `clock` to each waiting request's token in turn, letting each finish before the next,
    so every request is stamped with the fake time its token came due."""
    await clock.parked(sleepers=waiting)
    for done in range(finished() + 1, finished() + waiting + 1):
        clock.advance_to_next()
        await eventually(
            functools.partial(count_is, finished, done), what="the request just let go"
        )


def count_is(count: Callable[[], int], expected: int) -> bool:
    return count() == expected


async def test_the_client_side_limiter_holds_qps(kubesim: KubeSim, fake_clock: FakeClock) -> None:
    async with paced_kube(kubesim, fake_clock, qps=20, burst=2) as kube:
        sent_at: list[float] = []

        async def get() -> None:
            await kube.get(resources.NAMESPACE, "default")
            sent_at.append(fake_clock.now())

        requests = [asyncio.create_task(get()) for _ in range(12)]
        await eventually(lambda: len(sent_at) == 2)
        await release_one_at_a_time(fake_clock, lambda: len(sent_at), waiting=10)
        await asyncio.gather(*requests)
    # 2 from the burst at once, then 10 more at 20 per second: one every 50 ms of fake time.
    assert sent_at == pytest.approx([0.0, 0.0, *(k / 20 for k in range(1, 11))])
    assert len(kubesim.control.recorded(verb="get", resource="namespaces")) == 12


async def test_an_urgent_request_does_not_queue_behind_the_others(
    kubesim: KubeSim, fake_clock: FakeClock
) -> None:
    async with paced_kube(kubesim, fake_clock, qps=4, burst=1) as kube:
        done: dict[str, float] = {}

        async def get(tag: str) -> None:
            await kube.get(resources.NAMESPACE, "default")
            done[tag] = fake_clock.now()

        queued = [
            asyncio.create_task(get(f"normal-{i}")) for i in range(6)
        ]  # at 0, .25, ... 1.25 s
        await fake_clock.parked(sleepers=5)  # every reservation but the burst's waits on the clock
        with (
            kube.urgent()
        ):  # the clock stands still: a request queued for a token would never finish
            await asyncio.wait_for(get("urgent"), 30)
        assert done["urgent"] == 0.0, "went at once, ahead of the five reserved before it"
        later = asyncio.create_task(get("after-urgent"))
        await eventually(lambda: "normal-0" in done)
        await release_one_at_a_time(fake_clock, lambda: len(done), waiting=6)
        await asyncio.gather(*queued, later)
    assert [done[f"normal-{i}"] for i in range(6)] == pytest.approx(
        [0.0, 0.25, 0.5, 0.75, 1.0, 1.25]
    )
    assert done["after-urgent"] == pytest.approx(1.75), (
        "the borrowed token is paid back by the next one"
    )


async def test_the_limit_lifts_once_the_server_shows_priority_and_fairness(
    kubesim: KubeSim, fake_clock: FakeClock
) -> None:
    async with paced_kube(kubesim, fake_clock, qps=1, burst=1, limit_until_apf=True) as kube:
        assert not kube.server_has_apf
        await kube.get(
            resources.NAMESPACE, "default"
        )  # the burst's token; the answer has the headers
        assert kube.server_has_apf
        # The fake clock never moves: a request waiting for a token would never finish.
        await asyncio.wait_for(
            asyncio.gather(*(kube.get(resources.NAMESPACE, "default") for _ in range(10))), 30
        )
        assert fake_clock.now() == 0.0
        assert fake_clock.sleepers == 0
    assert len(kubesim.control.recorded(verb="get", resource="namespaces")) == 11


async def test_without_priority_and_fairness_the_limit_holds(
    kubesim: KubeSim, fake_clock: FakeClock
) -> None:
    kubesim.control.priority_and_fairness = False
    async with paced_kube(kubesim, fake_clock, qps=1, burst=1, limit_until_apf=True) as kube:
        await kube.get(resources.NAMESPACE, "default")
        assert not kube.server_has_apf
        second = asyncio.create_task(kube.get(resources.NAMESPACE, "default"))
        await fake_clock.parked(sleepers=1)
        assert fake_clock.next_deadline == pytest.approx(1.0), "waits one token at 1 qps"
        fake_clock.advance(1.0)
        await asyncio.wait_for(second, 30)
    assert len(kubesim.control.recorded(verb="get", resource="namespaces")) == 2
