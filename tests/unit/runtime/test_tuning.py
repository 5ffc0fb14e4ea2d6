"""`runtime.tuning`: the event loop, collector and allocator settings `mpi-operator run` applies.

What they save is measured by bench/scale.py, not asserted here; these tests say what is set, that a
C library other than glibc is left alone, and that `run` applies them."""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Iterator

import pytest

from mpi_operator.runtime import tuning
from operator_testing import run_python


class RecordingLibc:
    def __init__(self, answer: int = 1) -> None:
        self.answer = answer
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, param: int, value: int, /) -> int:
        self.calls.append((param, value))
        return self.answer


@pytest.fixture
def restore_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restore_gc")
@pytest.mark.parametrize("answer", [1, 0])
def test_tune_memory_freezes_raises_thresholds_and_fixes_the_mmap_threshold(answer: int) -> None:
    libc = RecordingLibc(answer)
    tuning.tune_memory(lambda: libc)
    assert gc.get_threshold() == tuning.GC_THRESHOLDS
    assert gc.get_freeze_count() > 0
    assert libc.calls == [(tuning.M_MMAP_THRESHOLD, tuning.MMAP_THRESHOLD_BYTES)]


@pytest.mark.usefixtures("restore_gc")
def test_without_glibc_only_the_collector_is_tuned() -> None:
    tuning.tune_memory(lambda: None)
    assert gc.get_threshold() == tuning.GC_THRESHOLDS


def test_glibc_is_found_only_where_it_is_the_c_library() -> None:
    libc = tuning.glibc()
    if sys.platform.startswith("linux") and libc is not None:
        assert libc.mallopt(tuning.M_MMAP_THRESHOLD, tuning.MMAP_THRESHOLD_BYTES) == 1
    if sys.platform == "darwin":
        assert libc is None


def test_the_loop_is_uvloops_where_it_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvloop

    assert tuning.loop_factory() is uvloop.new_event_loop
    monkeypatch.setitem(sys.modules, "uvloop", None)  # what `import` meets where it is missing
    assert tuning.loop_factory() is None


def test_run_tunes_the_process_before_it_connects() -> None:
    script = """
import gc, json
from mpi_operator import cli
code = cli.main(["run", "--kubeconfig", "/nonexistent/kubeconfig", "--no-leader-elect",
                 "--metrics-address", "127.0.0.1:0"])
print(json.dumps([code, gc.get_threshold(), gc.get_freeze_count() > 0]))
"""
    result = run_python(script)
    assert result.returncode == 0, result.stderr
    code, thresholds, frozen = json.loads(result.stdout.splitlines()[-1])
    assert code == 1, "stops at the missing kubeconfig, after tuning"
    assert tuple(thresholds) == tuning.GC_THRESHOLDS
    assert frozen
