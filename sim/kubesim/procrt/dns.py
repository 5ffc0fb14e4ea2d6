"""The process runtime's DNS server: answers the pods' queries from `dnsrecords.ClusterDNS`.

The pods' resolv.conf points at the bridge address (10.244.0.1); the runtime binds a socket there
inside the bridge namespace and hands it to `DNSServer`. A and PTR answers carry TTL 5; another type
for an existing name is NODATA (so glibc does not take the name for missing); UDP answers are cut to
512 bytes, or the client's EDNS0 size up to 1232, with TC set so the client retries over TCP.
Nothing is ever forwarded: a name outside the zone is NXDOMAIN at once, because no packet may leave
the simulated network.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from typing import Any, cast

from dnslib import EDNS0, QTYPE, RCODE, RR, SOA, A, DNSRecord
from dnslib.dns import PTR

from kubesim.procrt.dnsrecords import TTL, ClusterDNS, is_ipv4

__all__ = ["DNSServer", "respond"]

log = logging.getLogger(__name__)

_UDP_PLAIN = 512  # RFC 1035 limit without EDNS0
_UDP_EDNS_MAX = 1232  # the DNS Flag Day 2020 payload size: never fragments on any sane path
_TCP_IDLE = 30.0


def _reverse_ip(name: str) -> str | None:
    """The IPv4 address of `d.c.b.a.in-addr.arpa`, else None."""
    labels = name.lower().rstrip(".").split(".")
    if len(labels) != 6 or labels[4:] != ["in-addr", "arpa"]:
        return None
    ip = ".".join(reversed(labels[:4]))
    return ip if is_ipv4(ip) else None


def _qname_text(record: DNSRecord) -> str | None:
    labels = record.q.qname.label
    if any(b"." in label for label in labels):
        return None  # a dot inside a label could impersonate a real name once joined
    try:
        return ".".join(label.decode("ascii") for label in labels)
    except UnicodeDecodeError:
        return None


def respond(dns: ClusterDNS, data: bytes, *, max_size: int | None = None) -> bytes | None:
    """The wire answer to one query, or None to drop it (malformed, or not a query at all).

    `max_size` is the UDP limit (None over TCP); EDNS0 raises it up to 1232 bytes. An answer that
    does not fit is sent empty with TC set, and the client retries over TCP as glibc does.
    """
    try:
        request = DNSRecord.parse(data)
    except Exception:
        return None
    if request.header.qr or len(request.questions) != 1:
        return None
    reply = request.reply()
    edns = next((rr for rr in request.ar if rr.rtype == QTYPE.OPT), None)
    if edns is not None:
        reply.add_ar(EDNS0(udp_len=_UDP_EDNS_MAX))
    if request.header.opcode != 0:
        reply.header.rcode = RCODE.NOTIMP
        return _pack(reply)
    question = request.q
    qtype = question.qtype
    name = _qname_text(request)
    if question.qclass != 1 or name is None:
        reply.header.rcode = RCODE.REFUSED if name is not None else RCODE.NXDOMAIN
        return _pack(reply)
    if (ip := _reverse_ip(name)) is not None:
        targets = dns.reverse(ip)
        if targets is None:
            reply.header.rcode = RCODE.NXDOMAIN
        elif qtype in (QTYPE.PTR, QTYPE.ANY):
            for target in targets:
                reply.add_answer(RR(question.qname, QTYPE.PTR, rdata=PTR(target + "."), ttl=TTL))
    elif not dns.in_zone(name):
        # Nothing is forwarded (there is no way out). RA stays set, as from CoreDNS with its
        # forwarder, so glibc takes the NXDOMAIN as final instead of trying another server; AA would
        # claim the name.
        reply.header.rcode = RCODE.NXDOMAIN
        reply.header.aa = 0
    else:
        _zone_answer(dns, reply, name)
    packed = _pack(reply)
    limit = max_size
    if limit is not None and edns is not None:
        limit = max(limit, min(int(edns.rclass), _UDP_EDNS_MAX))
    if limit is not None and len(packed) > limit:
        reply.rr, reply.auth = [], []
        reply.header.tc = 1
        packed = _pack(reply)
    return packed


def _pack(reply: DNSRecord) -> bytes:
    return bytes(reply.pack())


def _zone_answer(dns: ClusterDNS, reply: DNSRecord, name: str) -> None:
    question = reply.q
    addresses = dns.resolve(name)
    if addresses is None:
        reply.header.rcode = RCODE.NXDOMAIN
    elif question.qtype in (QTYPE.A, QTYPE.ANY):
        for ip in addresses:
            reply.add_answer(RR(question.qname, QTYPE.A, rdata=A(ip), ttl=TTL))
    elif question.qtype == QTYPE.SOA and name.lower().rstrip(".") == dns.domain:
        reply.add_answer(_soa(dns))
        return
    if not reply.rr:
        # Negative answers carry the SOA so resolvers cache them for its minimum (RFC 2308), as
        # CoreDNS.
        reply.add_auth(_soa(dns))


def _soa(dns: ClusterDNS) -> RR:
    zone = dns.domain + "."
    times = (dns.serial, 7200, 1800, 86400, TTL)
    return RR(zone, QTYPE.SOA, rdata=SOA(f"ns.dns.{zone}", f"hostmaster.{zone}", times), ttl=TTL)


def _respond_safely(dns: ClusterDNS, data: bytes, max_size: int | None) -> bytes | None:
    try:
        return respond(dns, data, max_size=max_size)
    except Exception:  # one bad query must never take the server down
        log.exception("kubesim DNS: a query failed")
        return None


class _UDPProtocol(asyncio.DatagramProtocol):
    def __init__(self, dns: ClusterDNS) -> None:
        self._dns = dns
        self._transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # The selector loop's datagram transport does not subclass asyncio.DatagramTransport.
        self._transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        reply = _respond_safely(self._dns, data, _UDP_PLAIN)
        if reply is not None and self._transport is not None:
            self._transport.sendto(reply, addr)

    def error_received(self, exc: Exception) -> None:
        log.debug("kubesim DNS: %s", exc)


class DNSServer:
    """Serves `ClusterDNS` on an already-bound UDP socket (and a bound TCP socket, if given).

    The server owns the sockets from `start()` on and closes them in `close()`.
    """

    def __init__(
        self, dns: ClusterDNS, udp: socket.socket, tcp: socket.socket | None = None
    ) -> None:
        self._dns = dns
        self._udp = udp
        self._tcp = tcp
        self._transport: asyncio.DatagramTransport | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _UDPProtocol(self._dns), sock=self._udp
        )
        self._transport = transport
        if self._tcp is not None:
            self._server = await asyncio.start_server(self._serve_tcp, sock=self._tcp)

    async def _serve_tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while True:
                async with asyncio.timeout(_TCP_IDLE):
                    (length,) = struct.unpack("!H", await reader.readexactly(2))
                    query = await reader.readexactly(length)
                reply = _respond_safely(self._dns, query, None)
                if reply is None:
                    break  # a malformed message on a stream: the framing can no longer be trusted
                writer.write(struct.pack("!H", len(reply)) + reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
            pass
        finally:
            self._connections.discard(task)
            writer.close()

    async def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> DNSServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
