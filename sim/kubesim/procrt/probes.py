"""Container probes of the process runtime: the specs and their success rules.

The process runtime's kubelet probes the real programs of a pod the way the kubelet does
(pkg/probe, pkg/kubelet/prober): the same defaults, the same success rules and thresholds, the same
messages, so events and `kubectl describe` read as on a real node. This module parses the specs;
probeworker.py runs them on the kubelet's schedule (`ContainerProber`); prober.py makes one attempt,
through a `Transport` that creates its sockets inside the runtime's bridge namespace, so a probe
reaches pod IPs and never the machine's own network.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubesim.downward import go_quote
from kubesim.expansion import expand


class ProbeType(enum.Enum):
    """The value is the word the kubelet's events start with."""

    STARTUP = "Startup"
    LIVENESS = "Liveness"
    READINESS = "Readiness"

    @property
    def field(self) -> str:
        return f"{self.value.lower()}Probe"


class Outcome(enum.Enum):
    SUCCESS = "success"
    WARNING = "warning"
    """Counts as a success; the kubelet records a ProbeWarning (a redirect it did not follow)."""
    FAILURE = "failure"
    ERROR = "error"
    """The kubelet could not run the probe (e.g. an unknown named port): an event, but the result is
    thrown away, counting neither as a success nor as a failure."""


@dataclass(frozen=True)
class ProbeResult:
    outcome: Outcome
    output: str = ""
    """The probe's output as the kubelet puts it after `... probe failed: ` in its event."""

    @property
    def ok(self) -> bool:
        return self.outcome in (Outcome.SUCCESS, Outcome.WARNING)


@dataclass(frozen=True)
class ProbeEvent:
    """An event the kubelet records for a probe attempt, on the container's pod."""

    reason: str
    message: str
    type: str = "Warning"


def probe_event(probe_type: ProbeType, result: ProbeResult) -> ProbeEvent | None:
    """The kubelet's event for one (retried) attempt; None for a plain success."""
    kind = probe_type.value
    if result.outcome is Outcome.FAILURE:
        return ProbeEvent("Unhealthy", f"{kind} probe failed: {result.output}")
    if result.outcome is Outcome.ERROR:
        return ProbeEvent(
            "Unhealthy", f"{kind} probe errored and resulted in unknown state: {result.output}"
        )
    if result.outcome is Outcome.WARNING:
        return ProbeEvent("ProbeWarning", f"{kind} probe warning: {result.output}")
    return None


@dataclass(frozen=True)
class TCPSocketAction:
    port: int
    host: str = ""
    """Empty: the pod IP."""


@dataclass(frozen=True)
class HTTPGetAction:
    port: int
    path: str = "/"
    host: str = ""
    """Empty: the pod IP (the `Host` header can still be set through `headers`)."""
    scheme: str = "HTTP"
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ExecAction:
    command: tuple[str, ...]
    """With `$(VAR)` already expanded from the container's literal env values, as the kubelet
    does."""


@dataclass(frozen=True)
class GRPCAction:
    port: int
    service: str = ""


@dataclass(frozen=True)
class BrokenAction:
    """A probe the kubelet cannot run (a named port the container does not declare, no handler):
    every attempt is a probe error with the kubelet's message."""

    error: str


ProbeAction = TCPSocketAction | HTTPGetAction | ExecAction | GRPCAction | BrokenAction


@dataclass(frozen=True)
class ProbeSpec:
    action: ProbeAction
    initial_delay_seconds: int = 0
    period_seconds: int = 10
    timeout_seconds: int = 1
    success_threshold: int = 1
    failure_threshold: int = 3
    termination_grace_period_seconds: int | None = None
    """Liveness and startup probes only: overrides the pod's grace period when the probe kills."""

    @classmethod
    def from_k8s(cls, probe: Mapping[str, Any], container: Mapping[str, Any]) -> ProbeSpec:
        """From a container's `livenessProbe` / `readinessProbe` / `startupProbe` and the container
        itself (its `ports[].name` for named ports, its `env` for `$(VAR)` in exec commands). Zero
        or missing timings take the Kubernetes defaults, as the API server's defaulting does. A
        probe the kubelet cannot run (a port name the container does not declare) parses to a
        `BrokenAction`: each attempt is then the kubelet's probe error, with its message."""
        try:
            action = _action(probe, container)
        except _Unrunnable as err:
            action = BrokenAction(str(err))
        grace = probe.get("terminationGracePeriodSeconds")
        return cls(
            action=action,
            initial_delay_seconds=max(0, int(probe.get("initialDelaySeconds") or 0)),
            period_seconds=_positive(probe, "periodSeconds", 10),
            timeout_seconds=_positive(probe, "timeoutSeconds", 1),
            success_threshold=_positive(probe, "successThreshold", 1),
            failure_threshold=_positive(probe, "failureThreshold", 3),
            termination_grace_period_seconds=None if grace is None else int(grace),
        )


def container_probes(container: Mapping[str, Any]) -> dict[ProbeType, ProbeSpec]:
    """The probes a container declares."""
    return {
        kind: ProbeSpec.from_k8s(container[kind.field], container)
        for kind in ProbeType
        if isinstance(container.get(kind.field), Mapping)
    }


class _Unrunnable(Exception):
    pass


def _positive(probe: Mapping[str, Any], key: str, default: int) -> int:
    value = int(probe.get(key) or 0)
    return value if value > 0 else default


def _action(probe: Mapping[str, Any], container: Mapping[str, Any]) -> ProbeAction:
    # The kubelet's order; validation lets a probe have one handler only.
    if isinstance(exec_ := probe.get("exec"), Mapping):
        env = {str(e.get("name")): str(e.get("value") or "") for e in container.get("env") or []}
        return ExecAction(tuple(expand(str(arg), env) for arg in exec_.get("command") or ()))
    if isinstance(http := probe.get("httpGet"), Mapping):
        return HTTPGetAction(
            port=_resolve_port(http.get("port"), container),
            path=str(http.get("path") or "/"),
            host=str(http.get("host") or ""),
            scheme=str(http.get("scheme") or "HTTP"),
            headers=tuple(
                (str(h.get("name")), str(h.get("value"))) for h in http.get("httpHeaders") or ()
            ),
        )
    if isinstance(tcp := probe.get("tcpSocket"), Mapping):
        return TCPSocketAction(
            _resolve_port(tcp.get("port"), container), str(tcp.get("host") or "")
        )
    if isinstance(grpc := probe.get("grpc"), Mapping):
        return GRPCAction(int(grpc.get("port") or 0), str(grpc.get("service") or ""))
    raise _Unrunnable(f"missing probe handler for {container.get('name', '')}")


def _resolve_port(value: Any, container: Mapping[str, Any]) -> int:
    """probe.ResolveContainerPort: an int, a name from `ports[]`, or (last ditch) a number in a
    string."""
    if isinstance(value, str):
        named = [p for p in container.get("ports") or () if p.get("name") == value]
        if named:
            port = int(named[0].get("containerPort") or 0)
        elif value.isascii() and value.removeprefix("+").removeprefix("-").isdigit():
            port = int(value)
        else:
            raise _Unrunnable(f"strconv.Atoi: parsing {go_quote(value)}: invalid syntax")
    else:
        port = int(value or 0)
    if not 0 < port < 65536:
        raise _Unrunnable(f"invalid port number: {port}")
    return port
