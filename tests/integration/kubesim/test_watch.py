"""Contract suite, watch: initial state, replay, 410, bookmarks, timeouts, selector transitions,
drops."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim.app import KubeSim
from kubesim.settings import SimSettings

from .kubesim_contract import AS_MERGE_PATCH, configmap


@pytest.fixture
def kubesim_run_controllers() -> bool:
    return False


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return SimSettings(bookmark_seconds=0.2)


async def _events(core: client.CoreV1Api, count: int, **kwargs: Any) -> list[tuple[str, str, str]]:
    """The first `count` events of a config map watch as (type, name, resourceVersion)."""
    seen: list[tuple[str, str, str]] = []
    async with watch.Watch() as w:
        async for event in w.stream(
            core.list_namespaced_config_map, "default", timeout_seconds=5, **kwargs
        ):
            meta = event["raw_object"]["metadata"]
            seen.append((event["type"], meta.get("name", ""), meta.get("resourceVersion", "")))
            if len(seen) == count:
                break
    return seen


async def _raw_lines(
    url: str, path: str, *, limit: int, stop_after: float = 5.0
) -> list[dict[str, Any]]:
    """Up to `limit` watch lines read straight off the HTTP stream."""
    lines: list[dict[str, Any]] = []
    async with aiohttp.ClientSession() as session, session.get(url + path) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("application/json")
        async with asyncio.timeout(stop_after):
            async for raw in resp.content:
                lines.append(json.loads(raw))
                if len(lines) >= limit:
                    break
    return lines


async def test_watch_from_zero_lists_current_objects_as_added(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_config_map("default", configmap("a"))
    await core.create_namespaced_config_map("default", configmap("b"))
    events = await _events(core, 2, resource_version="0")
    assert [(t, n) for t, n, _ in events] == [("ADDED", "a"), ("ADDED", "b")]


async def test_watch_from_a_resource_version_replays_later_changes(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    first = await core.create_namespaced_config_map("default", configmap("a"))
    await core.patch_namespaced_config_map("a", "default", {"data": {"k": "2"}})
    await core.delete_namespaced_config_map("a", "default")
    events = await _events(core, 2, resource_version=first.metadata.resource_version)
    assert [(t, n) for t, n, _ in events] == [("MODIFIED", "a"), ("DELETED", "a")]
    assert int(events[1][2]) > int(events[0][2])


async def test_live_events_follow_the_initial_state(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_config_map("default", configmap("a"))
    seen: list[tuple[str, str]] = []
    async with watch.Watch() as w:
        async for event in w.stream(
            core.list_namespaced_config_map, "default", resource_version="0", timeout_seconds=5
        ):
            seen.append((event["type"], event["raw_object"]["metadata"]["name"]))
            if len(seen) == 1:  # the initial state arrived: change things while the watch is open
                await core.create_namespaced_config_map("default", configmap("b"))
                await core.delete_namespaced_config_map("a", "default")
            if len(seen) == 3:
                break
    assert seen == [("ADDED", "a"), ("ADDED", "b"), ("DELETED", "a")]


@pytest.mark.kubesim_control
async def test_compacted_resource_version_is_410_expired(
    kube_api: ApiClient, kubesim: KubeSim
) -> None:
    core = client.CoreV1Api(kube_api)
    first = await core.create_namespaced_config_map("default", configmap("a"))
    await core.create_namespaced_config_map("default", configmap("b"))
    kubesim.control.compact()
    with pytest.raises(ApiException) as err:
        await _events(core, 1, resource_version=first.metadata.resource_version)
    assert err.value.status == 410


async def test_expired_watch_is_an_error_event_inside_a_200_stream(kubesim: KubeSim) -> None:
    kubesim.control.compact()
    lines = await _raw_lines(
        kubesim.url, "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=1", limit=1
    )
    assert lines[0]["type"] == "ERROR"
    assert (lines[0]["object"]["code"], lines[0]["object"]["reason"]) == (410, "Expired")


async def test_bookmarks_carry_the_current_resource_version(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    created = await core.create_namespaced_config_map("default", configmap("a"))
    events = await _events(
        core, 1, resource_version=created.metadata.resource_version, allow_watch_bookmarks=True
    )
    assert events[0][0] == "BOOKMARK"
    assert events[0][2] == created.metadata.resource_version


async def test_send_initial_events_ends_with_an_annotated_bookmark(
    kubesim: KubeSim, kube_api: ApiClient
) -> None:
    await client.CoreV1Api(kube_api).create_namespaced_config_map("default", configmap("a"))
    path = (
        "/api/v1/namespaces/default/configmaps?watch=true&sendInitialEvents=true&allowWatchBookmarks=true"
        "&resourceVersionMatch=NotOlderThan"
    )
    lines = await _raw_lines(kubesim.url, path, limit=2)
    assert [line["type"] for line in lines] == ["ADDED", "BOOKMARK"]
    assert lines[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_timeout_seconds_ends_the_stream(kubesim: KubeSim) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    lines = await _raw_lines(
        kubesim.url, "/api/v1/namespaces/default/configmaps?watch=True&timeoutSeconds=1", limit=99
    )
    assert lines == []
    assert 0.9 <= loop.time() - started < 5


@pytest.mark.parametrize(
    "flag", ["1", "t", "T", "TRUE", "true", "True"], ids=lambda f: f"watch={f}"
)
async def test_watch_flag_is_parsed_like_go_parse_bool(kubesim: KubeSim, flag: str) -> None:
    lines = await _raw_lines(
        kubesim.url, f"/api/v1/namespaces?watch={flag}&resourceVersion=0", limit=1
    )
    assert lines[0]["type"] == "ADDED"


async def test_invalid_boolean_is_400(kubesim: KubeSim) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(kubesim.url + "/api/v1/configmaps?watch=true&allowWatchBookmarks=yes") as resp,
    ):
        assert resp.status == 400
        assert (await resp.json())["reason"] == "BadRequest"


OpenWatches = Callable[[int], Awaitable[None]]


@pytest.mark.kubesim_control
async def test_label_selector_transitions_add_and_delete(
    kube_api: ApiClient, open_watches: OpenWatches
) -> None:
    core = client.CoreV1Api(kube_api)
    created = await core.create_namespaced_config_map("default", configmap("a", tier="cold"))
    task = asyncio.create_task(
        _events(
            core, 2, resource_version=created.metadata.resource_version, label_selector="tier=hot"
        )
    )
    await open_watches(1)
    heated = await core.patch_namespaced_config_map(
        "a", "default", {"metadata": {"labels": {"tier": "hot"}}}
    )
    cooled = await core.patch_namespaced_config_map(
        "a", "default", {"metadata": {"labels": {"tier": "cold"}}}
    )
    events = await asyncio.wait_for(task, 5)
    assert events == [
        ("ADDED", "a", heated.metadata.resource_version),
        ("DELETED", "a", cooled.metadata.resource_version),
    ]


@pytest.mark.kubesim_control
async def test_field_selector_filters_watch_by_name(
    kube_api: ApiClient, open_watches: OpenWatches
) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_config_map("default", configmap("a"))
    await core.create_namespaced_config_map("default", configmap("b"))
    events = await _events(core, 1, resource_version="0", field_selector="metadata.name=b")
    # The first watch must be gone, or it could be the one counted as open below.
    await open_watches(0)
    task = asyncio.create_task(
        _events(core, 1, resource_version="0", field_selector="metadata.name=c")
    )
    await open_watches(1)
    await core.patch_namespaced_config_map("b", "default", {"data": {"k": "x"}})
    await core.create_namespaced_config_map("default", configmap("c"))
    assert [(t, n) for t, n, _ in events] == [("ADDED", "b")]
    assert [(t, n) for t, n, _ in await asyncio.wait_for(task, 5)] == [("ADDED", "c")]


@pytest.mark.kubesim_control
async def test_noop_write_emits_no_event(kube_api: ApiClient, open_watches: OpenWatches) -> None:
    core = client.CoreV1Api(kube_api)
    created = await core.create_namespaced_config_map("default", configmap("a"))
    task = asyncio.create_task(_events(core, 1, resource_version=created.metadata.resource_version))
    await open_watches(1)
    await core.patch_namespaced_config_map("a", "default", {"data": {"k": "v"}}, **AS_MERGE_PATCH)
    await core.patch_namespaced_config_map(
        "a", "default", {"data": {"k": "changed"}}, **AS_MERGE_PATCH
    )
    events = await asyncio.wait_for(task, 5)
    assert [(t, n) for t, n, _ in events] == [("MODIFIED", "a")]
    assert int(events[0][2]) == int(created.metadata.resource_version) + 1


@pytest.mark.kubesim_control
async def test_drop_watches_ends_open_streams(kubesim: KubeSim, open_watches: OpenWatches) -> None:
    async def read_all() -> list[dict[str, Any]]:
        return await _raw_lines(
            kubesim.url, "/api/v1/namespaces/default/configmaps?watch=1", limit=99
        )

    task = asyncio.create_task(read_all())
    await open_watches(1)
    assert kubesim.control.drop_watches() == 1
    assert await asyncio.wait_for(task, 2) == []
    assert kubesim.control.open_watches() == 0


async def test_in_process_watch_iterator(kubesim: KubeSim) -> None:
    from kubesim.builtins import CONFIGMAPS

    cluster = kubesim.cluster
    events: AsyncIterator[Any] = cluster.watch(CONFIGMAPS, "default", resource_version="0")
    cluster.create(CONFIGMAPS, "default", configmap("a"))
    first = await anext(events)
    await events.aclose()  # type: ignore[attr-defined]
    assert (first.type, first.object["metadata"]["name"]) == ("ADDED", "a")
    assert kubesim.control.open_watches() == 0


@pytest.mark.parametrize(
    "flag", ["0", "f", "F", "FALSE", "false", "False"], ids=lambda f: f"watch={f}"
)
async def test_a_false_watch_flag_is_a_list(kubesim: KubeSim, flag: str) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(kubesim.url + f"/api/v1/namespaces?watch={flag}") as resp,
    ):
        assert resp.status == 200
        assert (await resp.json())["kind"] == "NamespaceList"


async def test_a_watch_flag_go_would_not_parse_is_400(kubesim: KubeSim) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(kubesim.url + "/api/v1/namespaces?watch=yes") as resp,
    ):
        assert resp.status == 400
        assert (await resp.json())["message"] == 'invalid boolean value for watch: "yes"'
