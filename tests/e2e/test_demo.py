"""The README's first command: `mpi-operator demo` runs to a zero exit and shows its timeline."""

from __future__ import annotations

import subprocess
import sys

from operator_testing import source_env


def test_demo_scales_out_and_in_and_exits_zero() -> None:
    # The timeout is a ceiling for a hung demo, not a speed requirement: the demo bounds each of its
    # steps itself (exit 1, saying which).
    result = subprocess.run(
        [sys.executable, "-m", "mpi_operator", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        env=source_env(),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    steps = [line for line in lines if line.strip() and line.lstrip()[0].isdigit()]
    assert any("2 workers ready and discovered" in line for line in steps)
    assert any("scaled out to 3" in line for line in steps)
    assert any("scaled in to 1" in line for line in steps)
    # Scale-in: the hosts leave the launcher's discovery at once while their pods drain for the
    # grace.
    draining = next(line for line in steps if "pods draining" in line)
    assert "workers 3/3 ready, 2 draining" in draining
    assert draining.count(".svc:1") == 1
    final = next(line for line in steps if "scaled in to 1" in line)
    assert "workers 1/1 ready" in final
    assert "demo finished" in lines[-1]
