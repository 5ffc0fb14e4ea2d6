"""`GET .../pods/{name}/log`: what `kubectl logs` gets from a simulated container, and the reading
of log records both runtimes share (`tailLines`, `sinceSeconds`, `timestamps`, `follow`).

kubesim's timer containers run no process, so there is no output to return. Answering 404 would look
like a broken API server, so the log is the container's life as the kubelet recorded it in the pod
status, each line marked `[kubesim]` and stamped with the time it stands for: when it started, how
it ended, how often it restarted. The refusals are the API server's own (a pod with several
containers and none named, an unknown container, a container still waiting, no previous run for
`--previous`), with its messages. `follow` keeps the stream open while the run goes on and adds how
it ended, as a kubelet's log stream ends when the container does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kubesim import errors
from kubesim.query import flag, integer

if TYPE_CHECKING:
    from kubesim.cluster import Cluster
    from kubesim.registry import ResourceType

Record = tuple[str, str]
"""(RFC 3339 time, text) of one log line."""


def _statuses(pod: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    status = pod.get("status") or {}
    found = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    return {str(s.get("name")): s for s in found}


def _containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = pod.get("spec") or {}
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def choose_container(pod: Mapping[str, Any], container: str | None) -> Mapping[str, Any]:
    name = pod["metadata"]["name"]
    containers = _containers(pod)
    if container:
        for c in containers:
            if c.get("name") == container:
                return c
        raise errors.bad_request(f"container {container} is not valid for pod {name}")
    main = (pod.get("spec") or {}).get("containers") or []
    if len(main) == 1:
        return dict(main[0])
    choices = " ".join(str(c.get("name")) for c in main)
    raise errors.bad_request(
        f"a container name must be specified for pod {name}, choose one of: [{choices}]"
    )


def restart_count(pod: Mapping[str, Any], container: str) -> int | None:
    status = _statuses(pod).get(container)
    return None if status is None else int(status.get("restartCount") or 0)


def _exit(ended: Mapping[str, Any]) -> Record:
    code, reason, at = ended.get("exitCode"), ended.get("reason"), ended.get("finishedAt")
    return str(at or ""), f"exited with code {code} ({reason}) at {at}"


def _run(state: Mapping[str, Any]) -> list[Record]:
    if "running" in state:
        started = state["running"].get("startedAt")
        return [(str(started or ""), f"started at {started}; running")]
    ended = state.get("terminated")
    if ended:
        started = ended.get("startedAt")
        return [(str(started or ""), f"started at {started}"), _exit(ended)]
    return []


def records(
    pod: Mapping[str, Any], container: str | None, *, previous: bool = False
) -> list[Record]:
    """The `[kubesim]` log of one container of `pod`; `errors.StatusError` (400) where a cluster
    refuses."""
    chosen = choose_container(pod, container)
    name, pod_name = str(chosen.get("name")), pod["metadata"]["name"]
    status = _statuses(pod).get(name) or {}
    state = status.get("lastState" if previous else "state") or {}
    if previous and not state.get("terminated"):
        raise errors.bad_request(
            f'previous terminated container "{name}" in pod "{pod_name}" not found'
        )
    waiting = state.get("waiting")
    if not state or waiting:
        reason = (waiting or {}).get("reason") or "ContainerCreating"
        raise errors.bad_request(
            f'container "{name}" in pod "{pod_name}" is waiting to start: {reason}'
        )
    run = _run(state)
    lines = [
        (
            run[0][0],
            f'container "{name}" (image {chosen.get("image")}) is simulated by kubesim: it writes '
            "no output",
        ),
        *run,
    ]
    if status.get("restartCount") and not previous:
        lines.append(
            (
                run[0][0],
                f"restarted {status['restartCount']} time(s); --previous shows the last run",
            )
        )
    return lines


def pod_log(pod: Mapping[str, Any], container: str | None, *, previous: bool = False) -> str:
    return "".join(f"[kubesim] {text}\n" for _, text in records(pod, container, previous=previous))


# --- reading records, for both runtimes -----------------------------------------------------------


def nano_stamp(stamp: str) -> str:
    """A status time (`...:05Z`) as the kubelet prints log times: RFC 3339 with nanoseconds."""
    if stamp.endswith("Z") and "." not in stamp:
        return stamp[:-1] + ".000000000Z"
    return stamp


def parse_stamp(stamp: str) -> datetime | None:
    # Python parses microseconds; the nanoseconds stay in the text shown with timestamps.
    try:
        head, _, tail = stamp.rstrip("Z").partition(".")
        return datetime.fromisoformat(head + ("." + tail[:6] if tail else "")).replace(tzinfo=UTC)
    except ValueError:
        return None


def select(
    lines: list[tuple[str, str]], *, timestamps: bool, since: float | None, tail: int | None
) -> str:
    """The text of `(time, line)` pairs after `sinceSeconds`, the last `tailLines`, each with its
    time."""
    out: list[str] = []
    for stamp, text in lines:
        when = parse_stamp(stamp)
        if since is not None and when is not None and when.timestamp() < since:
            continue
        out.append((f"{nano_stamp(stamp)} " if timestamps else "") + text + "\n")
    if tail is not None:
        out = out[-tail:] if tail > 0 else []
    return "".join(out)


def since_cutoff(request: web.Request) -> float | None:
    seconds = integer(request.query, "sinceSeconds")
    return None if seconds is None else time.time() - seconds


def run_ended(
    cluster: Cluster, pods_rt: ResourceType, ns: str, name: str, uid: str, container: str, run: int
) -> bool:
    """Whether run `run` of `container` is over: the pod gone or replaced, a restart, or not
    running."""
    try:
        pod = cluster.get(pods_rt, ns, name)
    except errors.StatusError:
        return True
    if str(pod["metadata"].get("uid", "")) != uid:
        return True
    status = _statuses(pod).get(container)
    if status is None:
        return True
    return int(status.get("restartCount") or 0) != run or "running" not in (
        status.get("state") or {}
    )


async def serve(
    request: web.Request, cluster: Cluster, pods_rt: ResourceType, ns: str, name: str
) -> web.StreamResponse:
    """The log of a timer-runtime container, with the kubelet's query options."""
    pod = cluster.get(pods_rt, ns, name)
    query = request.query
    previous = flag(query, "previous")
    container = query.get("container") or None
    found = [
        (stamp, f"[kubesim] {text}") for stamp, text in records(pod, container, previous=previous)
    ]
    timestamps = flag(query, "timestamps")
    body = select(
        found, timestamps=timestamps, since=since_cutoff(request), tail=integer(query, "tailLines")
    )
    chosen = str(choose_container(pod, container).get("name"))
    run = restart_count(pod, chosen) or 0
    uid = str(pod["metadata"].get("uid", ""))
    which = (ns, name, uid, chosen, run)
    if not flag(query, "follow") or previous or run_ended(cluster, pods_rt, *which):
        return web.Response(text=body, content_type="text/plain")
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await response.prepare(request)
    await response.write(body.encode())
    await wait_run_ended(cluster, pods_rt, *which)
    try:
        after = cluster.get(pods_rt, ns, name)
    except errors.StatusError:
        after = None
    if after is not None and str(after["metadata"].get("uid", "")) == uid:
        status = _statuses(after).get(chosen) or {}
        restarted = int(status.get("restartCount") or 0) != run
        ended = (status.get("lastState" if restarted else "state") or {}).get("terminated")
        if ended:
            stamp, text = _exit(ended)
            await response.write(
                select(
                    [(stamp, f"[kubesim] {text}")], timestamps=timestamps, since=None, tail=None
                ).encode()
            )
    await response.write_eof()
    return response


async def wait_run_ended(
    cluster: Cluster, pods_rt: ResourceType, ns: str, name: str, uid: str, container: str, run: int
) -> None:
    """Returns once `run_ended` holds, re-checking on every committed change of the cluster."""
    changed = asyncio.Event()

    def listener(*_args: Any) -> None:
        changed.set()

    cluster.add_listener(listener)
    try:
        while not run_ended(cluster, pods_rt, ns, name, uid, container, run):
            changed.clear()
            await changed.wait()
    finally:
        cluster.remove_listener(listener)
