"""`python bench/heapsnap.py OUT run ...` is `mpi-operator run ...` under tracemalloc, for
bench/report.py's heap snapshot: on SIGUSR1 it writes where the live Python allocations were made to
the file OUT (JSON).

Tracing starts before the operator's first import, so the modules' own objects count too.
tracemalloc roughly doubles the memory and slows every allocation: this process's RSS and timings
measure nothing; only the snapshot's shares do.
"""

from __future__ import annotations

import json
import runpy
import signal
import sys
import sysconfig
import tracemalloc
from collections import Counter
from pathlib import Path

TOP = 25


def package(filename: str) -> str:
    """Where an allocation site lives: a library's top package, this project's module, or the
    standard library's module."""
    if filename.startswith("<frozen importlib"):
        return "imports (module code objects and import machinery)"
    parts = Path(filename).parts
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1].removesuffix(".py")
    for root in ("mpi_operator", "kubesim", "mpi_discovery"):
        if root in parts:
            at = parts.index(root)
            return "/".join(parts[at : at + 2]).removesuffix(".py")
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    if Path(filename).is_relative_to(stdlib):
        return "stdlib " + Path(filename).relative_to(stdlib).with_suffix("").as_posix()
    return filename


def dump(out: Path) -> None:
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    lines = snapshot.statistics("lineno")
    total = sum(s.size for s in lines)
    packages: Counter[str] = Counter()
    for s in lines:
        packages[package(s.traceback[0].filename)] += s.size
    report = {
        "total_bytes": total,
        "blocks": sum(s.count for s in lines),
        "packages": packages.most_common(TOP),
        "lines": [
            (f"{package(s.traceback[0].filename)}:{s.traceback[0].lineno}", s.size, s.count)
            for s in lines[:TOP]
        ],
    }
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1))
    tmp.replace(out)  # whole or not at all: the benchmark polls for the file


def main() -> None:
    tracemalloc.start()
    out = Path(sys.argv[1])
    signal.signal(signal.SIGUSR1, lambda _signum, _frame: dump(out))
    sys.argv = ["mpi-operator", *sys.argv[2:]]
    runpy.run_module("mpi_operator", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
