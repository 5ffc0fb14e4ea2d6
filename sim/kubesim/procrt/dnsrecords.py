"""Cluster DNS records for the process runtime: CoreDNS's kubernetes plugin over kubesim's own
state.

`DNSServer` answers on a socket the runtime binds at the bridge address, which the pods' resolv.conf
names. Records follow CoreDNS (`pods insecure`, TTL 5) over the endpoints the EndpointSlice
controller would publish: services, headless endpoints by hostname or dashed IP, pod IPs, and PTR
records (docs/kubesim-process-runtime.md#cluster-dns has the table). No SRV, no records under
ClusterIP services' endpoints, ExternalName without data, and nothing is forwarded: a name outside
the zone is NXDOMAIN at once, because no packet may leave the simulated network.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from kubesim.controllers import resource_type

if TYPE_CHECKING:
    from kubesim.cluster import Cluster, EventType
    from kubesim.registry import ResourceType

__all__ = ["TTL", "ClusterDNS", "PodInfo", "ServiceInfo", "compute_records", "endpoints", "is_ipv4"]

log = logging.getLogger(__name__)

TTL = 5
"""CoreDNS's default: short, so a pod turning Ready shows up within seconds through glibc/nscd
caches."""


@dataclass(frozen=True)
class PodInfo:
    """What DNS needs of a pod; on_change keeps only this, so unrelated status churn costs
    nothing."""

    namespace: str
    name: str
    labels: Mapping[str, str]
    ips: tuple[str, ...]
    ready: bool
    terminating: bool
    terminal: bool
    hostname: str = ""
    subdomain: str = ""

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> PodInfo:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        status = pod.get("status") or {}
        ips = [str(p.get("ip") or "") for p in status.get("podIPs") or []] or [
            str(status.get("podIP") or "")
        ]
        conditions = status.get("conditions") or []
        return cls(
            namespace=str(meta.get("namespace") or "default").lower(),
            name=str(meta.get("name") or ""),
            labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
            ips=tuple(ip for ip in ips if is_ipv4(ip)),
            ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
            terminating=bool(meta.get("deletionTimestamp")),
            terminal=status.get("phase") in ("Succeeded", "Failed"),
            hostname=str(spec.get("hostname") or "").lower(),
            subdomain=str(spec.get("subdomain") or "").lower(),
        )


@dataclass(frozen=True)
class ServiceInfo:
    namespace: str
    name: str
    headless: bool
    cluster_ips: tuple[str, ...]
    selector: Mapping[str, str]
    publish_not_ready: bool = False
    external: bool = False

    @classmethod
    def of(cls, service: Mapping[str, Any]) -> ServiceInfo:
        meta = service.get("metadata") or {}
        spec = service.get("spec") or {}
        ips = [str(ip) for ip in spec.get("clusterIPs") or []] or [str(spec.get("clusterIP") or "")]
        return cls(
            namespace=str(meta.get("namespace") or "default").lower(),
            name=str(meta.get("name") or "").lower(),
            headless=spec.get("clusterIP") == "None" or ips[0] == "None",
            cluster_ips=tuple(ip for ip in ips if is_ipv4(ip)),
            # An empty selector is no selector: the apiserver drops empty maps, so the controller
            # sees nil.
            selector={str(k): str(v) for k, v in (spec.get("selector") or {}).items()},
            publish_not_ready=spec.get("publishNotReadyAddresses") is True,
            external=spec.get("type") == "ExternalName",
        )


_Info = TypeVar("_Info", PodInfo, ServiceInfo)


def is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def endpoints(service: ServiceInfo, pods: Iterable[PodInfo]) -> list[PodInfo]:
    """The pods CoreDNS would see as ready addresses of `service` (EndpointSlice rules + ready
    filter)."""
    if not service.selector or service.external:
        return []
    chosen = []
    for pod in pods:
        if pod.namespace != service.namespace or not pod.ips or pod.terminal:
            continue
        if any(pod.labels.get(key) != value for key, value in service.selector.items()):
            continue
        if service.publish_not_ready or (pod.ready and not pod.terminating):
            chosen.append(pod)
    return chosen


def _ip_order(ip: str) -> int:
    return int(ipaddress.IPv4Address(ip))


def _dashed(ip: str) -> str:
    return ip.replace(".", "-")


@dataclass
class _Records:
    """One namespace's names, relative to `<ns>.svc.<domain>` ("web", "web-0.workers")."""

    forward: dict[str, tuple[str, ...]] = field(default_factory=dict)
    cluster_ips: dict[str, str] = field(default_factory=dict)  # ip -> service name
    endpoint_names: dict[str, list[str]] = field(default_factory=dict)  # ip -> relative names


def _namespace_records(services: Iterable[ServiceInfo], pods: Iterable[PodInfo]) -> _Records:
    pods = list(pods)
    out = _Records()
    for svc in sorted(services, key=lambda s: s.name):
        if svc.external:
            out.forward[svc.name] = ()
        elif not svc.headless:
            out.forward[svc.name] = svc.cluster_ips
            for ip in svc.cluster_ips:
                out.cluster_ips.setdefault(ip, svc.name)
        else:
            named: dict[str, set[str]] = {}
            for pod in endpoints(svc, pods):
                for ip in pod.ips:
                    label = (
                        pod.hostname if pod.hostname and pod.subdomain == svc.name else _dashed(ip)
                    )
                    named.setdefault(label, set()).add(ip)
            if not named:
                continue  # no endpoints: CoreDNS answers NXDOMAIN for a headless service
            all_ips = set().union(*named.values())
            out.forward[svc.name] = tuple(sorted(all_ips, key=_ip_order))
            for label, ips in named.items():
                out.forward[f"{label}.{svc.name}"] = tuple(sorted(ips, key=_ip_order))
                for ip in ips:
                    out.endpoint_names.setdefault(ip, []).append(f"{label}.{svc.name}")
    return out


def compute_records(
    pods: Iterable[Mapping[str, Any]], services: Iterable[Mapping[str, Any]], cluster_domain: str
) -> dict[str, list[str]]:
    """Every service and endpoint name (lowercase FQDN, no trailing dot) -> its A addresses."""
    pod_infos = [PodInfo.of(p) for p in pods]
    service_infos = [ServiceInfo.of(s) for s in services]
    domain = cluster_domain.lower().strip(".")
    names: dict[str, list[str]] = {}
    for ns in sorted({s.namespace for s in service_infos}):
        records = _namespace_records(
            [s for s in service_infos if s.namespace == ns],
            [p for p in pod_infos if p.namespace == ns],
        )
        for rel, ips in records.forward.items():
            names[f"{rel}.{ns}.svc.{domain}"] = list(ips)
    return names


class ClusterDNS:
    """The zone's records, kept current by `on_change` (a kubesim `Watching`) and rebuilt lazily.

    Takes the cluster's state when built; register `on_change` with the cluster
    (`cluster.add_listener` or the controllers' fan-out) in the same synchronous step so no change
    falls in between.
    """

    def __init__(self, cluster: Cluster, cluster_domain: str | None = None) -> None:
        self.domain = (cluster_domain or cluster.settings.cluster_domain).lower().strip(".")
        self.serial = 1
        """SOA serial: bumped on every change that can alter an answer."""
        self._pods_rt = resource_type(cluster, "v1", "Pod")
        self._services_rt = resource_type(cluster, "v1", "Service")
        self._namespaces_rt = resource_type(cluster, "v1", "Namespace")
        self._namespaces: set[str] = set()
        self._pods: dict[str, dict[str, PodInfo]] = {}
        self._services: dict[str, dict[str, ServiceInfo]] = {}
        self._records: dict[str, _Records] = {}
        self._dirty: set[str] = set()
        for ns in cluster.list(self._namespaces_rt, None)["items"]:
            self.on_change("ADDED", self._namespaces_rt, ns, None)
        for rt in (self._services_rt, self._pods_rt):
            for obj in cluster.list(rt, None)["items"]:
                self.on_change("ADDED", rt, obj, None)

    def on_change(
        self, event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        """Records the change and marks its namespace for a rebuild on the next query; nothing
        more."""
        if event not in ("ADDED", "MODIFIED", "DELETED"):
            return
        meta = obj.get("metadata") or {}
        if rt == self._namespaces_rt:
            name = str(meta.get("name") or "").lower()
            present = name in self._namespaces
            if event == "DELETED" and present:
                self._namespaces.discard(name)
                self._bump()
            elif event != "DELETED" and not present:
                self._namespaces.add(name)
                self._bump()
            return
        if rt == self._pods_rt:
            self._put(self._pods, PodInfo.of(obj), event)
        elif rt == self._services_rt:
            self._put(self._services, ServiceInfo.of(obj), event)

    def _put(self, table: dict[str, dict[str, _Info]], info: _Info, event: EventType) -> None:
        known = table.setdefault(info.namespace, {})
        if event == "DELETED":
            if known.pop(info.name, None) is None:
                return
        elif known.get(info.name) == info:
            return  # e.g. container status churn: nothing DNS shows has changed
        else:
            known[info.name] = info
        self._dirty.add(info.namespace)
        self._bump()

    def _bump(self) -> None:
        self.serial = self.serial % 0xFFFFFFFF + 1

    def _namespace(self, ns: str) -> _Records:
        if ns in self._dirty or ns not in self._records:
            self._records[ns] = _namespace_records(
                self._services.get(ns, {}).values(), self._pods.get(ns, {}).values()
            )
            self._dirty.discard(ns)
        return self._records[ns]

    def in_zone(self, name: str) -> bool:
        name = name.lower().rstrip(".")
        return name == self.domain or name.endswith("." + self.domain)

    def resolve(self, name: str) -> list[str] | None:
        """A addresses of `name`; [] when it exists without any, None when it does not exist."""
        name = name.lower().rstrip(".")
        if name == self.domain:
            return []
        if not name.endswith("." + self.domain):
            return None
        labels = name[: -len(self.domain) - 1].split(".")
        kind = labels[-1]
        if kind not in ("svc", "pod") or "" in labels:
            return None
        if len(labels) == 1:
            return []
        ns = labels[-2]
        if ns not in self._namespaces:
            return None
        if len(labels) == 2:
            return []
        if kind == "pod":
            return self._pod_name(labels[:-2])
        if len(labels) > 4:  # _port._proto.svc.ns.svc is SRV territory, not served
            return None
        ips = self._namespace(ns).forward.get(".".join(labels[:-2]))
        return None if ips is None else list(ips)

    @staticmethod
    def _pod_name(labels: list[str]) -> list[str] | None:
        # `pods insecure`: the name is the address; CoreDNS ignores any labels left of it.
        dashed = labels[-1]
        if dashed.count("-") == 3 and "--" not in dashed:
            ip = dashed.replace("-", ".")
            return [ip] if is_ipv4(ip) else None
        try:
            ipaddress.IPv6Address(dashed.replace("-", ":"))
        except ValueError:
            return None
        return []  # an IPv6 pod name exists, but it has no A record

    def reverse(self, ip: str) -> list[str] | None:
        """PTR targets of an IPv4 address: its service (cluster IP) else its headless endpoint
        names."""
        for ns in sorted(self._namespaces):
            svc = self._namespace(ns).cluster_ips.get(ip)
            if svc is not None:
                return [f"{svc}.{ns}.svc.{self.domain}"]
        names = [
            f"{rel}.{ns}.svc.{self.domain}"
            for ns in sorted(self._namespaces)
            for rel in self._namespace(ns).endpoint_names.get(ip, [])
        ]
        return names or None
