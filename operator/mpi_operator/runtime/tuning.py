"""Process-wide settings of `mpi-operator run`: its event loop, and what it sets once start-up
imported everything.

  * uvloop's loop where it imports (asyncio's API on libuv: less CPU per request and watch event);
  * `gc.freeze()` and a generation-0 threshold of 50,000: what start-up loaded lives as long as the
    process, and the cached JSON trees are freed by reference counting (kubesim does the same);
  * on glibc a fixed mmap threshold (`mallopt(M_MMAP_THRESHOLD)`): glibc would raise its threshold
    to each freed LIST page and keep later pages in the heap; fixed, every block above 128 KiB goes
    to mmap and back to the system when freed. Elsewhere than glibc nothing is changed.
No `malloc_trim`: what the operator keeps is mostly in pymalloc's arenas, which it does not reach.
The figures behind each are in `docs/architecture.md` ("Decisions and why").
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import logging
from collections.abc import Callable
from typing import Final, Protocol

log = logging.getLogger(__name__)

GC_THRESHOLDS: Final = (50_000, 20, 10)
M_MMAP_THRESHOLD: Final = -3
"""glibc's `mallopt` parameter number (malloc.h)."""
MMAP_THRESHOLD_BYTES: Final = 128 * 1024
"""glibc's default threshold, fixed."""


class Libc(Protocol):
    def mallopt(self, param: int, value: int, /) -> int: ...


def glibc() -> Libc | None:
    """The C library when it is glibc (it has `gnu_get_libc_version`), else None (musl, macOS).

    Looked up in the process's own symbols (`dlopen(NULL)`): no search for a library file, which
    `ctypes.util.find_library` does by running `ldconfig` or a compiler."""
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return None
    return libc


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's `new_event_loop` when uvloop imports, else None (asyncio's default loop), for
    `asyncio.Runner(loop_factory=...)`."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def tune_memory(libc: Callable[[], Libc | None] = glibc) -> None:
    """Freezes what start-up allocated, raises the collector's thresholds and, on glibc, fixes the
    mmap threshold (see the module docstring). Call it once, after the imports and before the caches
    fill."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    c = libc()
    if c is not None and c.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) != 1:
        log.debug("mallopt(M_MMAP_THRESHOLD) was refused; big buffers stay with glibc's default")
