"""Process-wide memory settings of `mpi-operator run`, applied once after start-up has imported everything.

Measured with bench/scale.py at 1,000 jobs x 8 workers (9,000 pods) on 2 cores:

  * The cyclic collector: what start-up loaded (modules, classes, the CRD models) lives as long as the
    process, so `gc.freeze()` moves it out of every collection's sight, and the generation-0 threshold
    goes from 700 to 50,000 allocations. The cached objects are JSON trees freed by reference counting,
    so collecting less often finds the same garbage: with the defaults the collector took 1.2 s of the
    operator's CPU in the fan-in and 0.6 s of the 2.5 s a restart spends until its caches are synced;
    with these settings 0.1 s each, and the same RSS (kubesim does the same, `kubesim.cli`).
  * glibc's malloc: a LIST page (about 1.6 MB of JSON for 500 pods) is bigger than its mmap threshold,
    but glibc raises that threshold to the size of each mmapped block freed, so from the second page on
    the pages come from the heap, whose free space it keeps: 8 MB of RSS after a restart. A fixed
    threshold (`mallopt(M_MMAP_THRESHOLD)`, which turns the raising off) sends every block above
    128 KiB to mmap, returned to the system when freed. Elsewhere than glibc nothing is changed.

What the operator keeps is mostly Python objects in pymalloc's arenas, which `malloc_trim` does not
reach: trimming after a fan-in gave back 0.3 MB, so the operator does not trim.
"""

from __future__ import annotations

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


def tune_memory(libc: Callable[[], Libc | None] = glibc) -> None:
    """Freezes what start-up allocated, raises the collector's thresholds and, on glibc, fixes the mmap
    threshold (see the module docstring). Call it once, after the imports and before the caches fill."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    c = libc()
    if c is not None and c.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) != 1:
        log.debug("mallopt(M_MMAP_THRESHOLD) was refused; big buffers stay with glibc's default")
