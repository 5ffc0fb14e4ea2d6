"""The process runtime's cluster DNS: records, wire answers, and the kubelet's /etc/hosts and
resolv.conf."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from dnslib import EDNS0, QTYPE, RCODE, DNSRecord
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesim import builtins
from kubesim.cluster import Cluster
from kubesim.procrt.dns import respond
from kubesim.procrt.dnsrecords import ClusterDNS, compute_records
from kubesim.procrt.hostsfiles import MAX_HOSTNAME, etc_hosts, hostname, resolv_conf
from kubesim.settings import SimSettings

DOMAIN = "cluster.local"


def pod(
    name: str,
    ip: str | None = "10.244.0.5",
    *,
    ns: str = "default",
    labels: dict[str, str] | None = None,
    ready: bool = True,
    terminating: bool = False,
    phase: str = "Running",
    hostname: str = "",
    subdomain: str = "",
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "labels": {"app": "w"} if labels is None else labels,
    }
    if terminating:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    if hostname:
        spec["hostname"] = hostname
    if subdomain:
        spec["subdomain"] = subdomain
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    if ip:
        status |= {"podIP": ip, "podIPs": [{"ip": ip}]}
    return {"metadata": meta, "spec": spec, "status": status}


def svc(
    name: str,
    *,
    ns: str = "default",
    selector: dict[str, str] | None = None,
    cluster_ip: str = "None",
    publish: bool = False,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"clusterIP": cluster_ip, "ports": [{"port": 22}]}
    spec["selector"] = {"app": "w"} if selector is None else selector
    if publish:
        spec["publishNotReadyAddresses"] = True
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec}


def namespace(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}}


def cluster_dns(*objects: dict[str, Any], domain: str = DOMAIN) -> ClusterDNS:
    """A ClusterDNS on an empty cluster, fed `objects` through on_change as a listener would be."""
    dns = ClusterDNS(Cluster(SimSettings(cluster_domain=domain)))
    dns.on_change("ADDED", builtins.NAMESPACES, namespace("other"), None)
    for obj in objects:
        rt = builtins.PODS if "containers" in obj.get("spec", {}) else builtins.SERVICES
        dns.on_change("ADDED", rt, obj, None)
    return dns


WORKERS = "workers.default.svc.cluster.local"
W0 = "w-0.workers.default.svc.cluster.local"

RECORD_CASES: list[tuple[str, list[dict[str, Any]], str, list[str] | None]] = [
    ("headless-ready", [svc("workers"), pod("a")], WORKERS, ["10.244.0.5"]),
    ("headless-not-ready", [svc("workers"), pod("a", ready=False)], WORKERS, None),
    (
        "publish-not-ready",
        [svc("workers", publish=True), pod("a", ready=False)],
        WORKERS,
        ["10.244.0.5"],
    ),
    ("terminating", [svc("workers"), pod("a", terminating=True)], WORKERS, None),
    (
        "terminating-published",
        [svc("workers", publish=True), pod("a", terminating=True)],
        WORKERS,
        ["10.244.0.5"],
    ),
    (
        "succeeded-published",
        [svc("workers", publish=True), pod("a", phase="Succeeded")],
        WORKERS,
        None,
    ),
    ("failed-published", [svc("workers", publish=True), pod("a", phase="Failed")], WORKERS, None),
    ("no-pod-ip", [svc("workers", publish=True), pod("a", ip=None)], WORKERS, None),
    ("selector-mismatch", [svc("workers", selector={"app": "x"}), pod("a")], WORKERS, None),
    ("no-selector", [svc("workers", selector={}), pod("a")], WORKERS, None),
    ("other-namespace-pod", [svc("workers"), pod("a", ns="other")], WORKERS, None),
    (
        "several-sorted",
        [
            svc("workers"),
            pod("b", "10.244.0.10"),
            pod("a", "10.244.0.9"),
            pod("c", "10.244.0.11", ready=False),
        ],
        WORKERS,
        ["10.244.0.9", "10.244.0.10"],
    ),
    (
        "cluster-ip",
        [svc("web", cluster_ip="10.96.0.20"), pod("a")],
        "web.default.svc.cluster.local",
        ["10.96.0.20"],
    ),
    (
        "cluster-ip-no-pods",
        [svc("web", cluster_ip="10.96.0.20")],
        "web.default.svc.cluster.local",
        ["10.96.0.20"],
    ),
    (
        "hostname",
        [svc("workers"), pod("a", hostname="w-0", subdomain="workers")],
        W0,
        ["10.244.0.5"],
    ),
    (
        "hostname-not-ready",
        [svc("workers"), pod("a", ready=False, hostname="w-0", subdomain="workers")],
        W0,
        None,
    ),
    (
        "hostname-published",
        [svc("workers", publish=True), pod("a", ready=False, hostname="w-0", subdomain="workers")],
        W0,
        ["10.244.0.5"],
    ),
    ("hostname-no-subdomain-service", [pod("a", hostname="w-0", subdomain="workers")], W0, None),
    (
        "hostname-other-service",
        [svc("other"), pod("a", hostname="w-0", subdomain="workers")],
        W0,
        None,
    ),
    (
        "hostname-not-selected",
        [svc("workers", selector={"app": "x"}), pod("a", hostname="w-0", subdomain="workers")],
        W0,
        None,
    ),
    (
        "hostname-cluster-ip-service",
        [svc("workers", cluster_ip="10.96.0.3"), pod("a", hostname="w-0", subdomain="workers")],
        W0,
        None,
    ),
    ("hostname-without-subdomain", [svc("workers"), pod("a", hostname="w-0")], W0, None),
    (
        "dashed-endpoint",
        [svc("workers"), pod("a")],
        "10-244-0-5.workers.default.svc.cluster.local",
        ["10.244.0.5"],
    ),
    (
        "dashed-endpoint-hidden-by-hostname",
        [svc("workers"), pod("a", hostname="w-0", subdomain="workers")],
        "10-244-0-5.workers.default.svc.cluster.local",
        None,
    ),
    (
        "case-insensitive",
        [svc("workers"), pod("a")],
        "WORKERS.Default.SVC.Cluster.Local.",
        ["10.244.0.5"],
    ),
    (
        "case-insensitive-hostname",
        [svc("workers"), pod("a", hostname="w-0", subdomain="workers")],
        "W-0." + WORKERS.upper(),
        ["10.244.0.5"],
    ),
    ("namespace-isolation", [svc("workers"), pod("a")], "workers.other.svc.cluster.local", None),
    ("pod-insecure", [], "10-1-2-3.default.pod.cluster.local", ["10.1.2.3"]),
    ("pod-insecure-missing-namespace", [], "10-1-2-3.nope.pod.cluster.local", None),
    ("pod-not-an-ip", [], "10-1-2.default.pod.cluster.local", None),
    ("pod-leading-zero", [], "10-01-2-3.default.pod.cluster.local", None),
    ("apex", [], "cluster.local", []),
    ("svc-apex", [], "svc.cluster.local", []),
    ("namespace-name", [], "default.svc.cluster.local", []),
    ("missing-namespace", [], "nope.svc.cluster.local", None),
    ("missing-service", [], "nope.default.svc.cluster.local", None),
    ("not-svc-or-pod", [], "a.default.foo.cluster.local", None),
    (
        "too-long",
        [svc("workers"), pod("a")],
        "x.y.10-244-0-5.workers.default.svc.cluster.local",
        None,
    ),
    ("outside", [], "example.com", None),
    ("suffix-not-label", [], "notcluster.local", None),
]


@pytest.mark.parametrize(
    ("objects", "name", "expected"), [c[1:] for c in RECORD_CASES], ids=[c[0] for c in RECORD_CASES]
)
def test_resolve(objects: list[dict[str, Any]], name: str, expected: list[str] | None) -> None:
    assert cluster_dns(*objects).resolve(name) == expected


def test_compute_records_lists_every_service_and_endpoint_name() -> None:
    objects = [
        svc("workers"),
        svc("web", cluster_ip="10.96.0.20"),
        pod("a", hostname="w-0", subdomain="workers"),
    ]
    objects.append(pod("b", "10.244.0.6"))
    pods = [o for o in objects if "containers" in o["spec"]]
    services = [o for o in objects if o not in pods]
    assert compute_records(pods, services, "Cluster.Local.") == {
        WORKERS: ["10.244.0.5", "10.244.0.6"],
        W0: ["10.244.0.5"],
        "10-244-0-6.workers.default.svc.cluster.local": ["10.244.0.6"],
        "web.default.svc.cluster.local": ["10.96.0.20"],
    }


def test_custom_domain() -> None:
    dns = cluster_dns(svc("workers"), pod("a"), domain="sim.test")
    assert dns.resolve("workers.default.svc.sim.test") == ["10.244.0.5"]
    assert dns.resolve(WORKERS) is None


def test_changes_apply_to_the_next_query() -> None:
    dns = cluster_dns(svc("workers"))
    assert dns.resolve(WORKERS) is None
    dns.on_change("ADDED", builtins.PODS, pod("a"), None)
    assert dns.resolve(WORKERS) == ["10.244.0.5"]
    dns.on_change("MODIFIED", builtins.PODS, pod("a", ready=False), pod("a"))
    assert dns.resolve(WORKERS) is None
    dns.on_change("MODIFIED", builtins.PODS, pod("a"), None)
    dns.on_change("DELETED", builtins.SERVICES, svc("workers"), None)
    assert dns.resolve(WORKERS) is None
    dns.on_change("DELETED", builtins.NAMESPACES, namespace("default"), None)
    assert dns.resolve("default.svc.cluster.local") is None


def test_unrelated_pod_changes_do_not_invalidate() -> None:
    dns = cluster_dns(svc("workers"), pod("a"))
    dns.resolve(WORKERS)
    serial = dns.serial
    churn = pod("a")
    churn["status"]["containerStatuses"] = [{"name": "main", "restartCount": 3}]
    dns.on_change("MODIFIED", builtins.PODS, churn, pod("a"))
    assert dns.serial == serial


def test_takes_the_cluster_state_at_construction() -> None:
    cluster = Cluster()
    cluster.create(builtins.SERVICES, "default", svc("workers"))
    body = pod("a", hostname="w-0", subdomain="workers")
    status = body.pop("status")
    created = cluster.create(builtins.PODS, "default", body).object
    cluster.update(
        builtins.PODS, "default", "a", {**created, "status": status}, subresource="status"
    )
    dns = ClusterDNS(cluster)
    assert dns.resolve(W0) == ["10.244.0.5"]
    assert dns.reverse("10.244.0.5") == [W0]


def test_reverse_prefers_the_service_cluster_ip() -> None:
    dns = cluster_dns(svc("web", cluster_ip="10.96.0.20"), svc("workers"), pod("a"))
    assert dns.reverse("10.96.0.20") == ["web.default.svc.cluster.local"]
    assert dns.reverse("10.244.0.5") == ["10-244-0-5.workers.default.svc.cluster.local"]
    assert dns.reverse("10.244.0.99") is None


# --- properties -----------------------------------------------------------------------------------

LABELS = st.dictionaries(st.sampled_from(["app", "role"]), st.sampled_from(["a", "b"]), max_size=2)
NAMESPACES = st.sampled_from(["default", "other"])


@st.composite
def pods(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(0, 6))
    out = []
    for i in range(count):
        out.append(
            pod(
                f"p{i}",
                draw(st.sampled_from([None, f"10.244.1.{i + 1}"])),
                ns=draw(NAMESPACES),
                labels=draw(LABELS),
                ready=draw(st.booleans()),
                terminating=draw(st.booleans()),
                phase=draw(st.sampled_from(["Pending", "Running", "Succeeded", "Failed"])),
                hostname=draw(st.sampled_from(["", "h0", "h1"])),
                subdomain=draw(st.sampled_from(["", "s0", "s1"])),
            )
        )
    return out


@st.composite
def services(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(
        st.lists(
            st.tuples(NAMESPACES, st.sampled_from(["s0", "s1", "s2"])), unique=True, max_size=4
        )
    )
    return [
        svc(
            name,
            ns=ns,
            selector=draw(LABELS),
            cluster_ip=draw(st.sampled_from(["None", f"10.96.0.{i + 1}"])),
            publish=draw(st.booleans()),
        )
        for i, (ns, name) in enumerate(names)
    ]


def expected_addresses(service: dict[str, Any], all_pods: list[dict[str, Any]]) -> list[str]:
    """The rule as the brief states it, written independently of the implementation."""
    selector = service["spec"]["selector"]
    publish = service["spec"].get("publishNotReadyAddresses", False)
    found = []
    for p in all_pods:
        status, meta = p["status"], p["metadata"]
        if not selector or meta["namespace"] != service["metadata"]["namespace"]:
            continue
        if any(meta["labels"].get(k) != v for k, v in selector.items()):
            continue
        if not status.get("podIP") or status["phase"] in ("Succeeded", "Failed"):
            continue
        ready = status["conditions"][0]["status"] == "True" and "deletionTimestamp" not in meta
        if publish or ready:
            found.append(status["podIP"])
    return sorted(found, key=lambda ip: int(ipaddress.IPv4Address(ip)))


@settings(max_examples=150, deadline=None)
@given(all_pods=pods(), all_services=services())
def test_records_follow_the_endpoint_rules(
    all_pods: list[dict[str, Any]], all_services: list[dict[str, Any]]
) -> None:
    dns = cluster_dns(*all_services, *all_pods)
    for service in all_services:
        ns, name = service["metadata"]["namespace"], service["metadata"]["name"]
        fqdn = f"{name}.{ns}.svc.{DOMAIN}"
        if service["spec"]["clusterIP"] != "None":
            assert dns.resolve(fqdn) == [service["spec"]["clusterIP"]]
            assert dns.resolve(f"h0.{fqdn}") is None
            continue
        addresses = expected_addresses(service, all_pods)
        assert dns.resolve(fqdn.upper()) == (addresses or None)
        for host in ("h0", "h1"):
            members = [
                p["status"]["podIP"]
                for p in all_pods
                if p["spec"].get("hostname") == host
                and p["spec"].get("subdomain") == name
                and p["metadata"]["namespace"] == ns
                and p["status"].get("podIP") in addresses
            ]
            assert dns.resolve(f"{host}.{fqdn}") == (
                sorted(members, key=lambda ip: int(ipaddress.IPv4Address(ip))) or None
            )


@settings(max_examples=100, deadline=None)
@given(first=pods(), later=pods(), all_services=services(), query_between=st.booleans())
def test_incremental_updates_match_a_fresh_computation(
    first: list[dict[str, Any]],
    later: list[dict[str, Any]],
    all_services: list[dict[str, Any]],
    query_between: bool,
) -> None:
    dns = cluster_dns(*all_services, *first)
    if query_between:
        for service in all_services:
            dns.resolve(
                f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc.{DOMAIN}"
            )
    later_names = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in later}
    for p in first:
        if (p["metadata"]["namespace"], p["metadata"]["name"]) not in later_names:
            dns.on_change("DELETED", builtins.PODS, p, None)
    for p in later:
        dns.on_change("MODIFIED", builtins.PODS, p, None)
    # One pod per (namespace, name): the later version replaced the first.
    final = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in later}
    records = compute_records(final.values(), all_services, DOMAIN)
    for name, ips in records.items():
        assert dns.resolve(name) == ips
    for service in all_services:
        fqdn = f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc.{DOMAIN}"
        if fqdn not in records:
            assert dns.resolve(fqdn) is None


# --- wire answers ---------------------------------------------------------------------------------


def ask(dns: ClusterDNS, name: str, qtype: str = "A", *, max_size: int | None = 512) -> DNSRecord:
    reply = respond(dns, DNSRecord.question(name, qtype).pack(), max_size=max_size)
    assert reply is not None
    return DNSRecord.parse(reply)


def test_a_answer_has_ttl_5_and_echoes_the_question_case() -> None:
    reply = ask(cluster_dns(svc("workers"), pod("a")), "Workers.Default.svc.cluster.local")
    assert reply.header.rcode == RCODE.NOERROR
    assert reply.header.aa == 1
    assert [(str(rr.rname), str(rr.rdata), rr.ttl) for rr in reply.rr] == [
        ("Workers.Default.svc.cluster.local.", "10.244.0.5", 5)
    ]


@pytest.mark.parametrize("qtype", ["AAAA", "MX", "TXT", "SRV"])
def test_other_types_of_an_existing_name_are_nodata(qtype: str) -> None:
    reply = ask(cluster_dns(svc("workers"), pod("a")), WORKERS, qtype)
    assert reply.header.rcode == RCODE.NOERROR
    assert reply.rr == []
    assert [QTYPE[rr.rtype] for rr in reply.auth] == ["SOA"]


def test_missing_name_in_zone_is_nxdomain_with_soa() -> None:
    reply = ask(cluster_dns(), "nope.default.svc.cluster.local")
    assert reply.header.rcode == RCODE.NXDOMAIN
    assert reply.auth[0].rdata.times[-1] == 5


@pytest.mark.parametrize(
    "name", ["example.com", "localhost", "cluster.local.example.com", "kubernetes"]
)
def test_names_outside_the_zone_are_nxdomain(name: str) -> None:
    reply = ask(cluster_dns(), name)
    assert reply.header.rcode == RCODE.NXDOMAIN
    assert reply.rr == []
    assert reply.auth == []


def test_ptr() -> None:
    dns = cluster_dns(svc("workers"), pod("a", hostname="w-0", subdomain="workers"))
    assert [str(rr.rdata) for rr in ask(dns, "5.0.244.10.in-addr.arpa", "PTR").rr] == [W0 + "."]
    assert ask(dns, "9.0.244.10.in-addr.arpa", "PTR").header.rcode == RCODE.NXDOMAIN


@pytest.mark.parametrize(
    "packet",
    [
        b"",
        b"\x00",
        b"\xff" * 12,
        b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x3fabc",
        bytes(range(64)),
    ],
    ids=["empty", "one-byte", "garbage-header", "truncated-label", "noise"],
)
def test_malformed_packets_are_dropped(packet: bytes) -> None:
    assert respond(cluster_dns(), packet) is None


def test_responses_are_not_answered() -> None:
    reply = respond(cluster_dns(), DNSRecord.question(WORKERS).reply().pack())
    assert reply is None


def test_large_answers_truncate_over_udp_and_fit_over_tcp() -> None:
    objects = [svc("workers"), *(pod(f"p{i}", f"10.244.2.{i}") for i in range(1, 101))]
    dns = cluster_dns(*objects)
    udp = ask(dns, WORKERS)
    assert udp.header.tc == 1
    assert udp.rr == []
    assert len(ask(dns, WORKERS, max_size=None).rr) == 100
    query = DNSRecord.question(WORKERS)
    query.add_ar(EDNS0(udp_len=4096))
    raw = respond(dns, query.pack(), max_size=512)
    assert raw is not None
    assert DNSRecord.parse(raw).header.tc == 1  # 100 answers need more than the 1232-byte cap
    small = cluster_dns(svc("workers"), *(pod(f"p{i}", f"10.244.2.{i}") for i in range(1, 41)))
    query_small = DNSRecord.question(WORKERS)
    query_small.add_ar(EDNS0(udp_len=4096))
    raw_small = respond(small, query_small.pack(), max_size=512)
    assert raw_small is not None
    assert 512 < len(raw_small) <= 1232
    assert len(DNSRecord.parse(raw_small).rr) == 40


def test_other_classes_are_refused() -> None:
    query = DNSRecord.question(WORKERS, "A", "CH")
    reply = respond(cluster_dns(), query.pack())
    assert reply is not None
    assert DNSRecord.parse(reply).header.rcode == RCODE.REFUSED


# --- /etc/hosts, resolv.conf, hostname ------------------------------------------------------------

LOCALHOST = (
    "# Kubernetes-managed hosts file.\n"
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)


def test_etc_hosts_plain() -> None:
    assert etc_hosts(pod("web-1"), "10.244.0.5") == LOCALHOST + "10.244.0.5\tweb-1\n"


def test_etc_hosts_with_subdomain_and_aliases() -> None:
    p = pod("job-worker-0", ns="ml", hostname="w-0", subdomain="workers")
    p["spec"]["hostAliases"] = [
        {"ip": "127.0.0.1", "hostnames": ["foo.local", "bar.local"]},
        {"ip": "10.1.2.3", "hostnames": ["foo.remote"]},
    ]
    assert etc_hosts(p, ["10.244.0.5"], "sim.test") == (
        LOCALHOST + "10.244.0.5\tw-0.workers.ml.svc.sim.test\tw-0\n"
        "\n# Entries added by HostAliases.\n"
        "127.0.0.1\tfoo.local\tbar.local\n"
        "10.1.2.3\tfoo.remote\n"
    )


def test_hostname() -> None:
    assert hostname(pod("web-1")) == "web-1"
    assert hostname(pod("web-1", hostname="w-0")) == "w-0"
    long_name = "a" * 62 + "-b" + "c" * 10
    assert hostname(pod(long_name)) == "a" * 62  # cut at 63, then the trailing '-' goes
    fqdn = pod("x", ns="ml", hostname="w-0", subdomain="workers")
    fqdn["spec"]["setHostnameAsFQDN"] = True
    assert hostname(fqdn) == "w-0.workers.ml.svc.cluster.local"
    fqdn["spec"]["hostname"] = "w" * 40
    with pytest.raises(ValueError, match="too long"):
        hostname(fqdn)


@given(st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,120}[a-z0-9])?", fullmatch=True))
def test_hostname_fits_the_kernel(name: str) -> None:
    result = hostname({"metadata": {"name": name}, "spec": {}})
    assert len(result) <= MAX_HOSTNAME
    assert name.startswith(result)
    assert not result.endswith(("-", ".")) or result == name


def with_dns(
    policy: str | None = None, config: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    p = pod("web-1", ns="ml")
    if policy:
        p["spec"]["dnsPolicy"] = policy
    if config is not None:
        p["spec"]["dnsConfig"] = config
    p["spec"].update(spec)
    return p


CLUSTER_FIRST = (
    "search ml.svc.cluster.local svc.cluster.local cluster.local\nnameserver "
    "10.244.0.1\noptions ndots:5\n"
)
RESOLV_CASES: list[tuple[str, dict[str, Any], str]] = [
    (
        "cluster-first-default",
        with_dns(),
        CLUSTER_FIRST,
    ),
    (
        "cluster-first-merged",
        with_dns(
            "ClusterFirst",
            {
                "nameservers": ["10.244.0.1", "192.0.2.53"],
                "searches": ["cluster.local", "example.test"],
                "options": [
                    {"name": "ndots", "value": "2"},
                    {"name": "edns0"},
                    {"name": "timeout", "value": "1"},
                ],
            },
        ),
        "search ml.svc.cluster.local svc.cluster.local cluster.local example.test\n"
        "nameserver 10.244.0.1\nnameserver 192.0.2.53\noptions ndots:2 edns0 timeout:1\n",
    ),
    ("none-empty", with_dns("None", {}), ""),
    (
        "none",
        with_dns(
            "None",
            {
                "nameservers": ["10.244.0.1"],
                "searches": ["a.test"],
                "options": [{"name": "ndots", "value": "1"}],
            },
        ),
        "search a.test\nnameserver 10.244.0.1\noptions ndots:1\n",
    ),
    ("default-has-no-nameserver", with_dns("Default"), ""),
    ("default-with-config", with_dns("Default", {"searches": ["a.test"]}), "search a.test\n"),
    ("host-network-cluster-first", with_dns("ClusterFirst", hostNetwork=True), ""),
    (
        "host-network-cluster-first-with-host-net",
        with_dns("ClusterFirstWithHostNet", hostNetwork=True),
        CLUSTER_FIRST,
    ),
    (
        "three-nameservers-at-most",
        with_dns("None", {"nameservers": ["192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"]}),
        "nameserver 192.0.2.1\nnameserver 192.0.2.2\nnameserver 192.0.2.3\n",
    ),
]


@pytest.mark.parametrize(
    ("p", "expected"), [c[1:] for c in RESOLV_CASES], ids=[c[0] for c in RESOLV_CASES]
)
def test_resolv_conf(p: dict[str, Any], expected: str) -> None:
    assert resolv_conf(p, "10.244.0.1") == expected


def test_resolv_conf_search_limits() -> None:
    searches = [f"d{i}.test" for i in range(40)] + ["x" * 254]
    out = resolv_conf(with_dns("None", {"searches": searches}), "10.244.0.1")
    assert out == "search " + " ".join(searches[:32]) + "\n"
    many = [f"{i:03d}" + "y" * 96 + ".test" for i in range(30)]
    line = (
        resolv_conf(with_dns("None", {"searches": many}), "10.244.0.1")
        .removeprefix("search ")
        .strip()
    )
    assert len(line) <= 2048
    assert line.split() == many[: len(line.split())]
    assert resolv_conf(with_dns(), "10.244.0.1", "sim.test").startswith(
        "search ml.svc.sim.test svc.sim.test sim.test\n"
    )
