"""The README's quick tour, run as written: kubesim, the operator, kubectl and curl in a shell; then
stopped as the README says, and run again in the same way (a second run must not trip on the first).

Its commands are taken from the README itself, so the tour cannot drift from what is tested.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _blocks() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## A quick tour without a cluster", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, flags=re.S)


def test_readme_quick_tour_runs_twice(tmp_path: Path) -> None:
    for tool in ("kubectl", "curl"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    if not (ROOT / ".venv" / "bin" / "mpi-operator").exists():
        pytest.skip("the tour uses .venv/bin/mpi-operator, which scripts/setup.sh creates")
    blocks = _blocks()
    assert len(blocks) == 2, "the quick tour is one sh block, then the one that stops it"
    tour, stop = (block.replace("/tmp/", f"{tmp_path}/") for block in blocks)
    # Every line must succeed; the background processes are stopped whatever happens.
    script = "\n".join(
        [
            "set -euo pipefail",
            "trap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT",
            f"export HOME={tmp_path}",
            tour,
            stop,
            "echo '--- second run ---'",
            tour,
            stop,
        ]
    )
    result = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    runs = result.stdout.split("--- second run ---\n")
    assert len(runs) == 2, result.stdout
    for out in runs:
        assert "tensorflow2-mnist-elastic-launcher" in out
        assert "scaled" in out
        assert "MPIJobCreated" in out, "kubectl events --for mpijob/NAME lists the operator's"
        listed = re.findall(r"^echo tensorflow2-mnist-elastic-worker-\d\.\S+:1$", out, flags=re.M)
        assert len(listed) == 3, out
    # The background processes wrote to their logs, not into kubectl's output.
    assert "kubesim" not in result.stderr, result.stderr
    assert (tmp_path / "kubesim.log").exists()
    assert (tmp_path / "mpi-operator.log").exists()
