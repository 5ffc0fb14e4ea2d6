"""Sockets that live in another network namespace, made from this (multi-threaded) process.

`setns(CLONE_NEWNET)` changes only the calling thread's namespace, and a socket stays in the
namespace it was created in. So a short-lived thread enters the namespace, creates the socket and
ends; the socket is then used from the event loop as any other. This is how kubesim's DNS server and
the kubelet's probes sit in the runtime's bridge namespace without kubesim itself ever leaving the
machine's namespace, and why no packet of theirs can reach the machine's own interfaces.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import socket
import threading
from collections.abc import Callable
from typing import TypeVar

CLONE_NEWNET = 0x40000000
T = TypeVar("T")

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def setns(fd: int, nstype: int) -> None:
    if _libc.setns(fd, nstype) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def run_in_netns(ns_path: str, fn: Callable[[], T]) -> T:
    """Runs `fn` on a fresh thread that has entered the network namespace at `ns_path`."""
    result: list[T] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            fd = os.open(ns_path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                setns(fd, CLONE_NEWNET)
            finally:
                os.close(fd)
            result.append(fn())
        except BaseException as exc:  # handed to the caller's thread
            failure.append(exc)

    # The thread ends right after: a thread left in another namespace must never serve other work.
    thread = threading.Thread(target=target, name="kubesim-netns", daemon=True)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


def socket_in_netns(
    ns_path: str, family: int = socket.AF_INET, kind: int = socket.SOCK_STREAM
) -> socket.socket:
    """A non-blocking socket created inside the network namespace at `ns_path` (e.g.
    /proc/PID/ns/net)."""

    def make() -> socket.socket:
        sock = socket.socket(family, kind)
        sock.setblocking(False)
        return sock

    return run_in_netns(ns_path, make)
