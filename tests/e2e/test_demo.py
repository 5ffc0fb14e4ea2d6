"""The README's first command: `mpi-operator demo` runs to a zero exit and shows its timeline, in
100 columns."""

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
    too_wide = [line for line in lines if len(line) > 100]
    assert not too_wide, too_wide
    steps = [line for line in lines if line.strip() and line.lstrip()[0].isdigit()]
    # Columns stay apart: the workers column starts at the same place on every row that has one.
    header = next(line for line in lines if line.lstrip().startswith("time"))
    at = header.index("workers")
    rows = [line for line in steps if " ready" in line]
    assert rows, steps
    assert all(line[at - 1] == " " and line[at].isdigit() for line in rows), (at, rows)
    assert any("2 workers ready and discovered" in line for line in steps)
    assert any("scaled out to 3" in line for line in steps)
    # The legend says what the short host names stand for and why the grace is short.
    assert "worker-0:1 stands for" in result.stdout
    assert "tensorflow2-mnist-elastic-worker-0.tensorflow2-mnist-elastic.default.svc:1" in (
        result.stdout
    )
    assert "drain for 3s (the example says 30s)" in result.stdout
    # Progress lines say which goal they wait for and what is seen now.
    waiting = [line for line in lines if line.lstrip().startswith("…")]
    assert waiting, result.stdout
    assert all('until "' in line and '": now ' in line for line in waiting), waiting
    # Scale-in: the hosts leave the launcher's discovery at once while their pods drain for the
    # grace.
    draining = next(line for line in steps if "2 pods draining" in line)
    assert "3/3 ready, 2 draining" in draining
    assert draining.rstrip().endswith(" worker-0:1"), draining
    final = next(line for line in steps if "drained pods deleted after 3s" in line)
    assert "1/1 ready" in final
    assert "demo finished" in lines[-1]
