"""A stand-in for `ssh` that runs Horovod's worker command "inside" a kubesim worker pod.

`horovodrun` starts each worker with `ssh [-o opt] HOST [-p P] [-i KEY] 'cd DIR ; env ... python
train.py'`. This program takes the place of `ssh` on the driver's PATH and models what a worker
container's sshd does, with the pod's life taken from kubesim over its HTTP API:

- HOST is the name `discover_hosts.sh` printed, `<spec.hostname>.<subdomain>.<ns>.svc`; the session
  is refused (exit 255, as ssh's "connection refused") unless a worker pod with that `spec.hostname`
  is Running and Ready, as a real sshd would not be up yet.
- The command runs as a local child in its own process group, for as long as the pod lives (a watch
  on it): when the pod's container exits (a kill) the session dies with SIGKILL; when the pod is
  deleted the child gets SIGTERM, then SIGKILL after 2 s, as the kubelet would do. Either way ssh
  exits 255.
- Each session appends one JSON line to $HVD_SSH_LOG when it starts and one when it ends (exit code
  and, if the pod took the process down, why), so the test can tell a worker Horovod let go from one
  the cluster killed.

Configuration comes from the environment the driver passes on: HVD_KUBESIM_URL, HVD_NAMESPACE,
HVD_SSH_LOG. Standard library only: it runs under whatever python3 the driver's PATH finds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

_WITH_VALUE = set("bcDEeFIiJLlmOopQRSWw")
"""OpenSSH options that take an argument (`ssh -o X host`, `-p 22`, `-i key`)."""

TERM_GRACE_SECONDS = 2.0
WATCH_IDLE_SECONDS = 30.0


def parse_argv(argv: list[str]) -> tuple[str, str]:
    """(host, remote command) from an ssh command line; options may come before or after the
    host."""
    host: str | None = None
    rest = list(argv)
    while rest:
        arg = rest.pop(0)
        if arg.startswith("-") and len(arg) > 1:
            if len(arg) == 2 and arg[1] in _WITH_VALUE and rest:
                rest.pop(0)
            continue
        if host is None:
            host = arg
            continue
        return host, " ".join([arg, *rest])
    raise SystemExit(f"ssh (stand-in): no host and command in {argv!r}")


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # the whole group has already exited
        os.killpg(pgid, sig)


def _get(url: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            body: dict[str, Any] = json.load(response)
            return body
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise


def find_pod(base: str, namespace: str, host: str) -> dict[str, Any] | None:
    """The worker pod whose `spec.hostname` is the first label of `host`."""
    hostname = host.split(".", 1)[0]
    selector = urllib.parse.quote("training.kubeflow.org/job-role=worker")
    pods = _get(f"{base}/api/v1/namespaces/{namespace}/pods?labelSelector={selector}") or {}
    for pod in pods.get("items") or []:
        if (pod.get("spec") or {}).get("hostname") == hostname:
            return pod
    return None


def is_ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    return (
        status.get("phase") == "Running" and ready and not pod["metadata"].get("deletionTimestamp")
    )


def end_of(pod: dict[str, Any]) -> str | None:
    """Why this state of the pod ends a session on it (None while it can host one)."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated")
        if terminated:
            return f"container exited {terminated.get('exitCode')}"
    if pod["metadata"].get("deletionTimestamp"):
        return "pod deleted"
    return None


def watch_until_gone(base: str, namespace: str, name: str, uid: str, resource_version: str) -> str:
    """Blocks until the pod can no longer host the session and says why.

    A watch, not polling: its events arrive in order, so a container that exits is seen as such even
    when the operator deletes the failed pod a few milliseconds later."""
    pod_url = f"{base}/api/v1/namespaces/{namespace}/pods/{name}"
    selector = urllib.parse.quote(f"metadata.name={name}")
    rv = resource_version
    while True:
        url = (
            f"{base}/api/v1/namespaces/{namespace}/pods?watch=1&allowWatchBookmarks=true"
            f"&fieldSelector={selector}&resourceVersion={rv}"
        )
        try:
            with urllib.request.urlopen(url, timeout=WATCH_IDLE_SECONDS) as stream:
                for line in stream:
                    event = json.loads(line)
                    obj = event["object"]
                    if event["type"] == "ERROR":  # e.g. 410 Gone: read the pod again below
                        break
                    rv = obj["metadata"].get("resourceVersion") or rv
                    if event["type"] == "BOOKMARK":
                        continue
                    if obj["metadata"].get("uid") != uid:
                        return "pod deleted"  # a successor already holds the name
                    reason = end_of(obj)
                    if reason is not None:
                        return reason
                    if event["type"] == "DELETED":
                        return "pod deleted"
        except (OSError, ValueError):
            pass  # the stream ended or stalled: re-read and watch on
        pod = _get(pod_url)
        if pod is None or pod["metadata"].get("uid") != uid:
            return "pod deleted"
        reason = end_of(pod)
        if reason is not None:
            return reason
        rv = pod["metadata"]["resourceVersion"]


def log(record: dict[str, Any]) -> None:
    path = os.environ.get("HVD_SSH_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"t": time.time(), **record}) + "\n")


def main(argv: list[str]) -> int:
    host, command = parse_argv(argv)
    base = os.environ["HVD_KUBESIM_URL"].rstrip("/")
    namespace = os.environ.get("HVD_NAMESPACE", "default")
    pod = find_pod(base, namespace, host)
    if pod is None or not is_ready(pod):
        print(f"ssh: connect to host {host} port 22: Connection refused", file=sys.stderr)
        log({"event": "refused", "host": host, "pid": os.getpid()})
        return 255
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    child = subprocess.Popen(["/bin/sh", "-c", command], start_new_session=True)

    def hang_up(signum: int, _frame: object) -> None:
        # horovodrun stops a session by signalling ssh; a real sshd then hangs up on the remote
        # command.
        _signal_group(child.pid, signal.SIGTERM)
        sys.exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, hang_up)
    log(
        {
            "event": "start",
            "host": host,
            "pod": name,
            "uid": uid,
            "pid": os.getpid(),
            "pgid": child.pid,
        }
    )
    exited = threading.Event()
    why: list[str] = []

    def kubelet() -> None:
        # What the kubelet does to the processes of a pod: SIGKILL when its container dies; on
        # deletion SIGTERM, then SIGKILL after the grace period.
        reason = watch_until_gone(base, namespace, name, uid, pod["metadata"]["resourceVersion"])
        why.append(reason)
        if reason == "pod deleted":
            _signal_group(child.pid, signal.SIGTERM)
            if exited.wait(TERM_GRACE_SECONDS):
                return
        _signal_group(child.pid, signal.SIGKILL)

    threading.Thread(target=kubelet, daemon=True).start()
    child.wait()
    exited.set()
    # A child that ended on its own (not by a signal) while its pod was going away was not killed by
    # it.
    killed = why[0] if why and child.returncode in (-signal.SIGTERM, -signal.SIGKILL) else None
    code = 255 if killed else child.returncode
    log({"event": "end", "host": host, "pod": name, "uid": uid, "exit": code, "killed": killed})
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
