"""The process runtime's DNS server on a real kubesim, queried over loopback UDP and TCP.

Objects are written through the HTTP API (and, with the timer kubelet, by the kubelet itself); the
server's `ClusterDNS` learns about them as a cluster listener, so an answer reflects a write as soon
as it returns. Only 127.0.0.1 is ever queried.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio
from dnslib import QTYPE, RCODE, DNSRecord
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from kubesim.app import KubeSim
from kubesim.clock import FakeClock
from kubesim.procrt.dns import DNSServer
from kubesim.procrt.dnsrecords import ClusterDNS
from kubesim.settings import SimSettings

WORKER = "w-0.workers.default.svc.cluster.local"
QUERY_TIMEOUT = 5.0


@pytest.fixture
def kubesim_settings(clock: FakeClock) -> SimSettings:
    return SimSettings(clock=clock, start_seconds=1.0, ready_seconds=1.0)


@pytest.fixture
def kubesim_run_controllers() -> bool:
    # The tests below set pod status themselves; a test that wants the kubelet parametrizes this.
    return False


@dataclass
class Served:
    dns: ClusterDNS
    port: int
    tcp_port: int


@pytest_asyncio.fixture
async def served(kubesim: KubeSim) -> AsyncIterator[Served]:
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    dns = ClusterDNS(kubesim.cluster)
    kubesim.cluster.add_listener(dns.on_change)
    server = DNSServer(dns, udp, tcp)
    ports = udp.getsockname()[1], tcp.getsockname()[1]
    await server.start()
    try:
        yield Served(dns, *ports)
    finally:
        await server.close()
        kubesim.cluster.remove_listener(dns.on_change)


async def query(served: Served, name: str, qtype: str = "A", *, tcp: bool = False) -> DNSRecord:
    """One query over loopback; the blocking client runs on a thread so the server keeps the
    loop."""
    port = served.tcp_port if tcp else served.port
    question = DNSRecord.question(name, qtype)
    raw = await asyncio.to_thread(question.send, "127.0.0.1", port, tcp, QUERY_TIMEOUT)
    reply = DNSRecord.parse(raw)
    assert reply.header.id == question.header.id
    return reply


def addresses(reply: DNSRecord) -> list[str]:
    assert reply.header.rcode == RCODE.NOERROR
    return [str(rr.rdata) for rr in reply.rr if rr.rtype == QTYPE.A]


# Typed Any: the client accepts plain dicts, though its annotations name the V1 models.
HEADLESS: Any = {
    "metadata": {"name": "workers"},
    "spec": {"clusterIP": "None", "selector": {"app": "w"}, "ports": [{"port": 22}]},
}


def worker_pod(name: str = "job-worker-0") -> Any:
    return {
        "metadata": {"name": name, "labels": {"app": "w"}},
        "spec": {
            "hostname": "w-0",
            "subdomain": "workers",
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox"}],
        },
    }


def running(ready: bool) -> dict[str, Any]:
    return {
        "status": {
            "phase": "Running",
            "podIP": "10.244.0.7",
            "podIPs": [{"ip": "10.244.0.7"}],
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        }
    }


async def test_a_record_follows_pod_readiness(kube_api: ApiClient, served: Served) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_service("default", HEADLESS)
    await core.create_namespaced_pod("default", worker_pod())
    assert (await query(served, WORKER)).header.rcode == RCODE.NXDOMAIN  # no IP, not Ready yet

    await core.patch_namespaced_pod_status("job-worker-0", "default", running(ready=True))
    assert addresses(await query(served, WORKER)) == ["10.244.0.7"]
    assert addresses(await query(served, "workers.default.svc.cluster.local")) == ["10.244.0.7"]
    assert addresses(await query(served, WORKER.upper(), tcp=True)) == ["10.244.0.7"]
    nodata = await query(served, WORKER, "AAAA")
    assert nodata.header.rcode == RCODE.NOERROR
    assert nodata.rr == []

    await core.patch_namespaced_pod_status("job-worker-0", "default", running(ready=False))
    assert (await query(served, WORKER)).header.rcode == RCODE.NXDOMAIN
    assert (await query(served, "workers.default.svc.cluster.local")).header.rcode == RCODE.NXDOMAIN


async def test_cluster_ip_service_and_names_outside_the_zone(
    kube_api: ApiClient, served: Served
) -> None:
    core = client.CoreV1Api(kube_api)
    body: Any = {
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "w"}, "ports": [{"port": 80}]},
    }
    created = await core.create_namespaced_service("default", body)
    assert addresses(await query(served, "web.default.svc.cluster.local")) == [
        created.spec.cluster_ip
    ]
    for name in ("example.com", "kubesim-node", "web.default.svc.cluster.local.example.com"):
        reply = await query(served, name)
        assert reply.header.rcode == RCODE.NXDOMAIN
        assert reply.rr == []
    assert (await query(served, "default.svc.cluster.local")).header.rcode == RCODE.NOERROR


async def test_malformed_datagrams_do_not_stop_the_server(served: Served) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as raw:
        raw.sendto(b"\xff\x00garbage", ("127.0.0.1", served.port))
        raw.sendto(b"", ("127.0.0.1", served.port))
    # The same socket handles datagrams in order: an answer now proves the garbage was survived.
    assert (await query(served, "cluster.local", "SOA")).rr[0].rtype == QTYPE.SOA


@pytest.mark.parametrize("kubesim_run_controllers", [True])
async def test_kubelet_readiness_reaches_dns_built_after_the_objects(
    kube_api: ApiClient, kubesim: KubeSim, clock: FakeClock
) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_service("default", HEADLESS)
    await core.create_namespaced_pod("default", worker_pod())
    # The kubelet starts the pod after 1 simulated second and reports it Ready 1 s later.
    await clock.advance(2)
    pod = await core.read_namespaced_pod("job-worker-0", "default")
    assert any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)
    # Built only now: it must pick up the service and the Ready pod from the cluster's state.
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    dns = ClusterDNS(kubesim.cluster)
    kubesim.cluster.add_listener(dns.on_change)
    served = Served(dns, udp.getsockname()[1], 0)
    async with DNSServer(dns, udp):
        assert addresses(await query(served, WORKER)) == [pod.status.pod_ip]
        await core.delete_namespaced_pod("job-worker-0", "default", grace_period_seconds=0)
        await clock.settle()
        assert not (await core.list_namespaced_pod("default")).items
        assert (await query(served, WORKER)).header.rcode == RCODE.NXDOMAIN
    kubesim.cluster.remove_listener(dns.on_change)


async def test_dig_if_installed(kube_api: ApiClient, served: Served) -> None:
    dig = shutil.which("dig")
    if dig is None:
        pytest.skip("dig is not installed on this machine")
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_service("default", HEADLESS)
    await core.create_namespaced_pod("default", worker_pod())
    await core.patch_namespaced_pod_status("job-worker-0", "default", running(ready=True))
    proc = await asyncio.create_subprocess_exec(
        dig,
        "@127.0.0.1",
        "-p",
        str(served.port),
        "+short",
        "+time=5",
        "+tries=1",
        WORKER,
        "A",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    assert out.decode().split() == ["10.244.0.7"]
