"""The chaos run's CI setting: `bench/chaos.py --ci` (4 jobs, 25 s of chaos, two operator processes
with leader election, a SIGKILLed leader and a graceful failover) exits 0 and prints every invariant
counter at zero, and the disturbances it claims to have made happened.

That the zeros come from a checker able to see violations is proven by
tests/unit/bench/test_chaos_invariants.py, which feeds it bad event sequences.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from chaoslib.invariants import VIOLATIONS

from operator_testing import source_env

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 240
"""25 s of chaos, the SIGKILLed leader's 15 s lease, up to 75 s to converge and 20 s for the garbage
collector on a loaded 2-core machine: a ceiling for a broken run, not a speed requirement."""


def excerpt(out: str) -> str:
    """The counters at the head of the output and the operator logs and violations at its tail."""
    return out if len(out) <= 9000 else f"{out[:3000]}\n[...]\n{out[-6000:]}"


def counters(out: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\S[^\n]*?)\s+(\d+)$", out, re.MULTILINE)}


@pytest.mark.timeout(TIMEOUT + 30)
def test_the_ci_chaos_run_passes_with_every_counter_at_zero() -> None:
    # Its own session, so a timeout ends the script together with its operator processes.
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "chaos.py"), "--ci", "--seed", "7"],
        cwd=ROOT,
        env=source_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        raw, _ = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    out = raw.decode()
    assert proc.returncode == 0, excerpt(out)
    seen = counters(out)
    zeros = dict.fromkeys(VIOLATIONS, 0)
    assert {name: seen.get(name) for name in VIOLATIONS} == zeros, excerpt(out)
    assert seen["TOTAL"] == 0
    assert "RESULT: PASS" in out
    assert seen["jobs converged"] == 4
    assert seen["operator kill-leader"] == 1, excerpt(out)
    assert seen["leader failovers between replicas"] >= 1, excerpt(out)
    assert sum(v for k, v in seen.items() if k.startswith("faults injected")) > 0, excerpt(out)
