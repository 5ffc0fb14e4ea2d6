"""`GET .../pods/{name}/log`: what `kubectl logs` gets from a simulated container.

kubesim's containers run no process, so there is no output to return. Answering 404 would look like a
broken API server, so the log is the container's life as the kubelet recorded it in the pod status,
each line marked `[kubesim]`: when it started, how it ended, how often it restarted. The refusals are
the API server's own (a pod with several containers and none named, an unknown container, a container
still waiting, no previous run for `--previous`), with its messages. `follow` returns the same text and
ends the stream: nothing more would ever be written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubesim import errors


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
    raise errors.bad_request(f"a container name must be specified for pod {name}, choose one of: [{choices}]")


def _run(state: Mapping[str, Any]) -> list[str]:
    if "running" in state:
        return [f"started at {state['running'].get('startedAt')}; running"]
    ended = state.get("terminated")
    if ended:
        return [
            f"started at {ended.get('startedAt')}",
            f"exited with code {ended.get('exitCode')} ({ended.get('reason')}) at {ended.get('finishedAt')}",
        ]
    return []


def pod_log(pod: Mapping[str, Any], container: str | None, *, previous: bool = False) -> str:
    """The `[kubesim]` log of one container of `pod`; `errors.StatusError` (400) where a cluster refuses."""
    chosen = choose_container(pod, container)
    name, pod_name = str(chosen.get("name")), pod["metadata"]["name"]
    status = _statuses(pod).get(name) or {}
    state = status.get("lastState" if previous else "state") or {}
    if previous and not state.get("terminated"):
        raise errors.bad_request(f'previous terminated container "{name}" in pod "{pod_name}" not found')
    waiting = state.get("waiting")
    if not state or waiting:
        reason = (waiting or {}).get("reason") or "ContainerCreating"
        raise errors.bad_request(f'container "{name}" in pod "{pod_name}" is waiting to start: {reason}')
    lines = [
        f'container "{name}" (image {chosen.get("image")}) is simulated by kubesim: it writes no output',
        *_run(state),
    ]
    if status.get("restartCount") and not previous:
        lines.append(f"restarted {status['restartCount']} time(s); --previous shows the last run")
    return "".join(f"[kubesim] {line}\n" for line in lines)
