"""What process a container runs: argv, environment, working directory, user and groups.

`resolve` is the pure part of starting a container, as the kubelet (`generateContainerConfig`),
containerd's CRI plugin (`buildLinuxSpec`) and runc compute it; the long form is
docs/kubesim-process-runtime.md#user-groups-environment-and-command. Environment order is
containerd's `oci.WithEnv`: PATH, TERM for a tty, HOSTNAME, the image's, the kubelet's, HOME last; a
later definition overrides a value but keeps its first position. A stand-in image's passwd and group
lines replace the host's for the same id or name (uid 1000 must be the image's user, not the
host's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesim.images import ImageSpec
from kubesim.procrt.envvars import (
    CREATE_CONTAINER_CONFIG_ERROR,
    NODE_ALLOCATABLE,
    ContainerConfigError,
    Lookup,
    expand,
    go_quote,
    kubelet_env,
)
from kubesim.procrt.hostsfiles import hostname

__all__ = [
    "CREATE_CONTAINER_CONFIG_ERROR",
    "CREATE_CONTAINER_ERROR",
    "DEFAULT_PATH",
    "ContainerConfigError",
    "Lookup",
    "ProcessSpec",
    "merge_id_file",
    "resolve",
]

CREATE_CONTAINER_ERROR = "CreateContainerError"
"""The kubelet's reason when the runtime's CreateContainer fails (here: no command to run)."""

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""containerd's PATH for a container whose image and pod set none."""


@dataclass(frozen=True)
class ProcessSpec:
    """The container's main process, ready for the sandbox to spawn."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    """In the order the process sees it; each name once (see the module docstring for the order)."""
    cwd: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    """Supplementary groups for setgroups(): sorted, without duplicates."""
    passwd: str
    """The container's /etc/passwd text."""
    group: str
    """The container's /etc/group text."""
    home: str
    """The user's home from the container's passwd ("/" when the uid has no entry): what runc puts
    in HOME when the environment has none."""
    tty: bool = False
    warnings: tuple[tuple[str, str], ...] = ()
    """(reason, message) of Warning events for the pod, e.g. InvalidEnvironmentVariableNames."""


@dataclass(frozen=True)
class _Account:
    name: str
    uid: int
    gid: int
    home: str


def resolve(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    image: ImageSpec,
    *,
    host_passwd: str,
    host_group: str,
    lookup: Lookup,
    pod_ip: str | Sequence[str],
    host_ip: str | Sequence[str],
    node_name: str,
    cluster_domain: str = "cluster.local",
    allocatable: Mapping[str, Any] = NODE_ALLOCATABLE,
    container_id: str | None = None,
    device_env: Mapping[str, str] | None = None,
) -> ProcessSpec:
    """The process `container` of `pod` runs with `image`, or ContainerConfigError.

    `pod_ip` / `host_ip` are the IP or all of `status.podIPs` / `status.hostIPs` (an empty string
    before there is one). `container_id` only completes containerd's message when there is no
    command. `device_env` is what the device plugins' `Allocate` answered
    (`NVIDIA_VISIBLE_DEVICES`): the kubelet passes it before the container's own variables, so
    those win. Errors come in the kubelet's order: ConfigMap/Secret/field references, then
    runAsNonRoot, then the command. `hostsfiles.hostname`'s ValueError passes through: such a pod
    never gets a sandbox.
    """
    env = kubelet_env(
        pod,
        container,
        lookup=lookup,
        pod_ips=_ips(pod_ip),
        host_ips=_ips(host_ip),
        node_name=node_name,
        allocatable=allocatable,
    )
    _verify_run_as_non_root(pod, container)
    variables = dict(env.env)
    command = [expand(str(word), variables) for word in container.get("command") or []]
    args = [expand(str(word), variables) for word in container.get("args") or []]
    argv = _process_args(command, args, image, container_id)

    passwd = merge_id_file(host_passwd, image.passwd)
    group = merge_id_file(host_group, image.group)
    uid = _int(_security(pod, container, "runAsUser"), 0)
    account = _account(passwd, uid)
    run_as_group = _security(pod, container, "runAsGroup")
    # containerd's WithUserID: the gid of the uid's passwd line, 0 without one; runAsGroup
    # overrides.
    gid = _int(run_as_group, account.gid if account else 0)
    home = account.home if account and account.home else "/"

    tty = container.get("tty") is True
    merged: dict[str, str] = {"PATH": DEFAULT_PATH}
    if tty:
        merged["TERM"] = "xterm"
    merged["HOSTNAME"] = hostname(pod, cluster_domain)
    merged.update(image.env)
    merged.update(device_env or {})
    merged.update(env.env)
    if not merged.get("HOME"):
        # runc checks os.Getenv("HOME") == "": an empty HOME is replaced in place, a missing one
        # appended.
        merged["HOME"] = home

    return ProcessSpec(
        argv=argv,
        env=tuple(merged.items()),
        cwd=str(container.get("workingDir") or "") or image.working_dir or "/",
        uid=uid,
        gid=gid,
        groups=_groups(pod, account, gid, group),
        passwd=passwd,
        group=group,
        home=home,
        tty=tty,
        warnings=env.warnings,
    )


def _ips(value: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,) if value else ()
    return tuple(ip for ip in value if ip)


def _security(pod: Mapping[str, Any], container: Mapping[str, Any], field: str) -> Any:
    """securitycontext.DetermineEffectiveSecurityContext for one field: the container's, else the
    pod's."""
    own = (container.get("securityContext") or {}).get(field)
    if own is not None:
        return own
    return ((pod.get("spec") or {}).get("securityContext") or {}).get(field)


def _int(value: Any, default: int) -> int:
    return default if value is None else int(value)


def _verify_run_as_non_root(pod: Mapping[str, Any], container: Mapping[str, Any]) -> None:
    """kuberuntime verifyRunAsNonRoot; a stand-in image has no USER, so without runAsUser it runs as
    0."""
    if _security(pod, container, "runAsNonRoot") is not True:
        return
    meta = pod.get("metadata") or {}
    # format.Pod: name_namespace(uid), then Go's %q around it.
    where = go_quote(f"{meta.get('name', '')}_{meta.get('namespace', '')}({meta.get('uid', '')})")
    who = f"(pod: {where}, container: {container.get('name', '')})"
    run_as_user = _security(pod, container, "runAsUser")
    if run_as_user is None:
        raise ContainerConfigError(
            CREATE_CONTAINER_CONFIG_ERROR,
            f"container has runAsNonRoot and image will run as root {who}",
        )
    if int(run_as_user) == 0:
        raise ContainerConfigError(
            CREATE_CONTAINER_CONFIG_ERROR, f"container's runAsUser breaks non-root policy {who}"
        )


def _process_args(
    command: list[str], args: list[str], image: ImageSpec, container_id: str | None
) -> tuple[str, ...]:
    """containerd's WithProcessArgs: a command replaces the entrypoint and drops the image's cmd;
    args alone replace the cmd; neither runs entrypoint + cmd. An entrypoint of [""] means none
    (Docker's way of clearing an inherited one)."""
    if not command:
        if not args:
            args = list(image.cmd)
        if image.entrypoint != ("",):
            command = list(image.entrypoint)
    if not command and not args:
        message = "failed to generate spec: no command specified"
        if container_id is not None:
            message = f'failed to generate container "{container_id}" spec: {message}'
        raise ContainerConfigError(CREATE_CONTAINER_ERROR, message)
    return (*command, *args)


def _fields(line: str) -> list[str] | None:
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return None
    return stripped.split(":")


def _id_and_name(line: str) -> tuple[int | None, str | None]:
    fields = _fields(line)
    if fields is None:
        return None, None
    ident = int(fields[2]) if len(fields) > 2 and fields[2].isdigit() else None
    return ident, fields[0] or None


def merge_id_file(host: str, image_lines: Sequence[str]) -> str:
    """The host's /etc/passwd or /etc/group text with each image line in place of the host lines
    that have its id (third field) or its name (first field), at the first such line; image lines
    that replace nothing are appended. Comments, blank and malformed host lines are kept."""
    claims = [_id_and_name(line) for line in image_lines]
    placed = [False] * len(image_lines)
    out: list[str] = []
    for line in host.splitlines():
        ident, name = _id_and_name(line)
        owner = next(
            (
                index
                for index, (claim_id, claim_name) in enumerate(claims)
                if (ident is not None and claim_id == ident)
                or (name is not None and claim_name == name)
            ),
            None,
        )
        if owner is None:
            out.append(line)
        elif not placed[owner]:
            out.append(image_lines[owner])
            placed[owner] = True
    out.extend(line for index, line in enumerate(image_lines) if not placed[index])
    return "".join(f"{line}\n" for line in out)


def _account(passwd: str, uid: int) -> _Account | None:
    """The first passwd line of `uid`, as libcontainer/user's lookup (first match wins)."""
    for line in passwd.splitlines():
        fields = _fields(line)
        if fields is None or len(fields) < 4 or not fields[2].isdigit() or int(fields[2]) != uid:
            continue
        gid = int(fields[3]) if fields[3].isdigit() else 0
        return _Account(fields[0], uid, gid, fields[5] if len(fields) > 5 else "")
    return None


def _groups(
    pod: Mapping[str, Any], account: _Account | None, gid: int, group: str
) -> tuple[int, ...]:
    """containerd: with the default `Merge` policy, the groups of /etc/group that list the user's
    name (except one named like the user: that is the primary group's job) plus the gid itself; then
    the pod's fsGroup and supplementalGroups. `Strict` keeps the pod's alone."""
    security = (pod.get("spec") or {}).get("securityContext") or {}
    gids: set[int] = set()
    if security.get("supplementalGroupsPolicy") != "Strict":
        gids.add(gid)
        if account is not None:
            for line in group.splitlines():
                fields = _fields(line)
                if fields is None or len(fields) < 4 or not fields[2].isdigit():
                    continue
                if fields[0] != account.name and account.name in fields[3].split(","):
                    gids.add(int(fields[2]))
    if security.get("fsGroup") is not None:
        gids.add(int(security["fsGroup"]))
    gids.update(int(g) for g in security.get("supplementalGroups") or [])
    return tuple(sorted(gids))
