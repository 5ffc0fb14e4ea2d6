"""The files the kubelet writes into a pod: /etc/hosts, /etc/resolv.conf, and the UTS hostname.

Pure functions over the pod object, matching kubelet 1.32 byte for byte where it is deterministic:
`etc_hosts` (`managedHostsFileContent`, for a pod with its own network namespace, as every pod here
has), `resolv_conf` (`GetPodDNS` rendered as containerd does) and `hostname`. On purpose no way out
of the pod network: where a kubelet would copy the node's resolv.conf (dnsPolicy `Default`), the
node contributes nothing, so such a pod gets only its own `spec.dnsConfig`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MAX_HOSTNAME", "dns_policy", "etc_hosts", "host_domain", "hostname", "resolv_conf"]

MAX_HOSTNAME = 63
"""The kubelet's cap on a pod hostname (the kernel's nodename is 64 bytes including the NUL)."""
_MAX_FQDN = 64  # GetNodenameForKernel's limit for setHostnameAsFQDN
_MAX_NAMESERVERS = 3  # validation.MaxDNSNameservers
_MAX_SEARCH_PATHS = 32  # validation.MaxDNSSearchPaths
_MAX_SEARCH_CHARS = 2048  # validation.MaxDNSSearchListChars
_MAX_SEARCH_DOMAIN = 253  # glibc 2.28 aborts on longer search entries, so the kubelet drops them
_DEFAULT_OPTIONS = ("ndots:5",)

_HOSTS_HEADER = "# Kubernetes-managed hosts file.\n"
_LOCALHOST_LINES = (
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)
_ALIASES_HEADER = "\n# Entries added by HostAliases.\n"


def _spec(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("spec") or {}


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


def _short_hostname(pod: Mapping[str, Any]) -> str:
    name = str(_meta(pod).get("name") or "")
    chosen = str(_spec(pod).get("hostname") or "") or name
    if len(chosen) <= MAX_HOSTNAME:
        return chosen
    # As truncatePodHostnameIfNeeded: a hostname must not end in '-' or '.' after the cut.
    truncated = chosen[:MAX_HOSTNAME].rstrip("-.")
    if not truncated:
        raise ValueError(f"hostname for pod {name!r} was invalid: {chosen!r}")
    return truncated


def host_domain(pod: Mapping[str, Any], cluster_domain: str = "cluster.local") -> str:
    """`<subdomain>.<ns>.svc.<domain>` for a pod with `spec.subdomain`, else ""."""
    subdomain = str(_spec(pod).get("subdomain") or "")
    if not subdomain:
        return ""
    namespace = str(_meta(pod).get("namespace") or "default")
    return f"{subdomain}.{namespace}.svc.{cluster_domain}"


def hostname(pod: Mapping[str, Any], cluster_domain: str = "cluster.local") -> str:
    """The UTS hostname: `spec.hostname` or the pod name, cut to 63 characters as the kubelet does.

    With `spec.setHostnameAsFQDN` and a subdomain it is the FQDN; the kubelet refuses to create the
    sandbox when that exceeds 64 characters, hence the ValueError.
    """
    short = _short_hostname(pod)
    domain = host_domain(pod, cluster_domain)
    if domain and _spec(pod).get("setHostnameAsFQDN") is True:
        fqdn = f"{short}.{domain}"
        if len(fqdn) > _MAX_FQDN:
            raise ValueError(
                f"failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is "
                "too long "
                f"({_MAX_FQDN} characters is the max, {len(fqdn)} characters requested)"
            )
        return fqdn
    return short


def etc_hosts(
    pod: Mapping[str, Any], pod_ip: str | Sequence[str], cluster_domain: str = "cluster.local"
) -> str:
    """The kubelet-managed /etc/hosts; `pod_ip` is the pod IP or all of `status.podIPs` (a line
    each)."""
    ips = [pod_ip] if isinstance(pod_ip, str) else list(pod_ip)
    short = _short_hostname(pod)
    domain = host_domain(pod, cluster_domain)
    lines = [_HOSTS_HEADER, _LOCALHOST_LINES]
    for ip in ips:
        lines.append(f"{ip}\t{short}.{domain}\t{short}\n" if domain else f"{ip}\t{short}\n")
    aliases = _spec(pod).get("hostAliases") or []
    if aliases:
        lines.append(_ALIASES_HEADER)
        for alias in aliases:
            names = "\t".join(str(h) for h in alias.get("hostnames") or [])
            lines.append(f"{alias.get('ip', '')}\t{names}\n")
    return "".join(lines)


def dns_policy(pod: Mapping[str, Any]) -> str:
    """Which base the kubelet uses: "cluster", "host" or "none" (getPodDNSType)."""
    spec = _spec(pod)
    policy = spec.get("dnsPolicy") or "ClusterFirst"
    if policy == "None":
        return "none"
    if policy == "ClusterFirstWithHostNet":
        return "cluster"
    if policy == "ClusterFirst" and not spec.get("hostNetwork"):
        return "cluster"
    # "Default", and ClusterFirst on the host network, fall back to the node's resolver.
    return "host"


def _unique(items: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def _merge_options(base: Sequence[str], extra: Sequence[Mapping[str, Any]]) -> list[str]:
    # The kubelet merges through a Go map, so its order is random; first-seen order is one valid
    # outcome and keeps the file stable across restarts.
    merged: dict[str, str] = {}
    for text in base:
        name, _, value = text.partition(":")
        merged[name] = value
    for option in extra:
        given = option.get("value")
        merged[str(option.get("name") or "")] = "" if given is None else str(given)
    return [f"{name}:{value}" if value else name for name, value in merged.items()]


def _fit_searches(searches: list[str]) -> list[str]:
    # formDNSSearchFitsLimits: at most 32 paths, none over 253 characters, the line at most 2048.
    kept = [s for s in searches[:_MAX_SEARCH_PATHS] if len(s) <= _MAX_SEARCH_DOMAIN]
    while kept and len(" ".join(kept)) > _MAX_SEARCH_CHARS:
        kept.pop()
    return kept


def resolv_conf(
    pod: Mapping[str, Any], nameserver: str, cluster_domain: str = "cluster.local"
) -> str:
    """/etc/resolv.conf for the pod; `nameserver` is the cluster DNS address (the bridge,
    10.244.0.1)."""
    policy = dns_policy(pod)
    namespace = str(_meta(pod).get("namespace") or "default")
    servers: list[str] = []
    searches: list[str] = []
    options: list[str] = []
    if policy == "cluster":
        servers = [nameserver]
        searches = [f"{namespace}.svc.{cluster_domain}", f"svc.{cluster_domain}", cluster_domain]
        options = list(_DEFAULT_OPTIONS)
    # "host": the node's resolv.conf would be the base; here it is empty on purpose (module
    # docstring).
    config = _spec(pod).get("dnsConfig")
    if config:
        servers = _unique([*servers, *(str(s) for s in config.get("nameservers") or [])])
        searches = _unique([*searches, *(str(s) for s in config.get("searches") or [])])
        options = _merge_options(options, config.get("options") or [])
    servers = servers[:_MAX_NAMESERVERS]
    searches = _fit_searches(searches)
    out: list[str] = []
    if searches:
        out.append(f"search {' '.join(searches)}\n")
    out.extend(f"nameserver {server}\n" for server in servers)
    if options:
        out.append(f"options {' '.join(options)}\n")
    return "".join(out)
