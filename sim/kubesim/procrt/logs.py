"""`GET /api/v1/namespaces/{ns}/pods/{name}/log` for pods of the process runtime.

Registered before the API server's generic routes, on the same path, so `kubectl logs` reaches it
exactly as it reaches the timer pods' log. A container's output is the CRI log file its shim wrote
(`<RFC 3339 ns> <stream> <P|F> <text>`), one file per run: `--previous` reads the run before the
current one. `follow` keeps the stream open until that run has ended; `tailLines`, `sinceSeconds`
and `timestamps` act as the kubelet's log reader does. A pod the runtime never ran (no log
directory) gets the timer pods' answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from kubesim import errors, podlog
from kubesim.query import flag, integer

if TYPE_CHECKING:
    from kubesim.cluster import Cluster
    from kubesim.registry import ResourceType

LogDir = Callable[[str, str, str], Path | None]
FOLLOW_POLL_SECONDS = 0.1


def routes(cluster: Cluster, pods_rt: ResourceType, log_dir: LogDir) -> list[web.RouteDef]:
    async def handle(request: web.Request) -> web.StreamResponse:
        ns, name = request.match_info["ns"], request.match_info["pod"]
        try:
            return await _serve(request, cluster, pods_rt, log_dir, ns, name)
        except errors.StatusError as err:
            return web.json_response(err.status(), status=err.code)

    return [web.get("/api/v1/namespaces/{ns}/pods/{pod}/log", handle)]


def parse(line: str) -> tuple[datetime, str, bool, str] | None:
    """(time, stream, full line, text) of one CRI log line."""
    parts = line.rstrip("\n").split(" ", 3)
    if len(parts) < 3:
        return None
    stamp, stream, tag = parts[0], parts[1], parts[2]
    text = parts[3] if len(parts) == 4 else ""
    try:
        # Python parses microseconds; the nanoseconds are kept in the text shown with timestamps.
        when = (
            datetime.fromisoformat(stamp[:26] + "+00:00")
            if len(stamp) > 26
            else datetime.fromisoformat(stamp)
        )
    except ValueError:
        return None
    return when, stream, tag == "F", text


def render(
    lines: list[str], *, timestamps: bool, since: float | None, tail: int | None
) -> list[str]:
    """The log text of whole CRI records (partial `P` records joined with their line)."""
    joined: list[tuple[str, str]] = []
    partial = ""
    first_stamp = ""
    for raw in lines:
        parsed = parse(raw)
        if parsed is None:
            continue
        _, _, full, text = parsed
        if not partial:
            first_stamp = raw.split(" ", 1)[0]
        partial += text
        if full:
            joined.append((first_stamp, partial))
            partial = ""
    return podlog.select(joined, timestamps=timestamps, since=since, tail=tail).splitlines(
        keepends=True
    )


async def _serve(
    request: web.Request,
    cluster: Cluster,
    pods_rt: ResourceType,
    log_dir: LogDir,
    ns: str,
    name: str,
) -> web.StreamResponse:
    pod = cluster.get(pods_rt, ns, name)
    query = request.query
    previous = flag(query, "previous")
    chosen = podlog.choose_container(pod, query.get("container") or None)
    container = str(chosen.get("name"))
    uid = str(pod["metadata"].get("uid", ""))
    base = log_dir(ns, name, uid)
    restarts = podlog.restart_count(pod, container)
    run = None if restarts is None else restarts - (1 if previous else 0)
    path = None if base is None or run is None or run < 0 else base / container / f"{run}.log"
    if path is None or not path.exists():
        return await podlog.serve(request, cluster, pods_rt, ns, name)
    timestamps = flag(query, "timestamps")
    since = podlog.since_cutoff(request)
    tail = integer(query, "tailLines")
    lines = path.read_text(errors="replace").splitlines(keepends=True)
    body = render(lines, timestamps=timestamps, since=since, tail=tail)
    if not flag(query, "follow") or previous:
        return web.Response(text="".join(body), content_type="text/plain")
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await response.prepare(request)
    await response.write("".join(body).encode())
    offset = sum(len(line.encode()) for line in lines)
    async for text in _follow(cluster, pods_rt, (ns, name, uid, container, run or 0), path, offset):
        rendered = render(
            text.splitlines(keepends=True), timestamps=timestamps, since=None, tail=None
        )
        await response.write("".join(rendered).encode())
    await response.write_eof()
    return response


async def _follow(
    cluster: Cluster,
    pods_rt: ResourceType,
    which: tuple[str, str, str, str, int],
    path: Path,
    offset: int,
) -> AsyncIterator[str]:
    """New complete lines of the run's log as they are written, until the run has ended."""
    pending = b""
    while True:
        ended = podlog.run_ended(cluster, pods_rt, *which)
        # Read after the check: the shim writes a run's last lines before the run is reported ended.
        with path.open("rb") as f:
            f.seek(offset)
            data = f.read()
        offset += len(data)
        pending += data
        cut = len(pending) if ended else pending.rfind(b"\n") + 1
        if cut:
            yield pending[:cut].decode(errors="replace")
            pending = pending[cut:]
        if ended:
            return
        await asyncio.sleep(FOLLOW_POLL_SECONDS)
