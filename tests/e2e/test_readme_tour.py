"""The README's quick tour, run as written: kubesim, the operator, kubectl and curl in a shell.

Its commands are taken from the README itself, so the tour cannot drift from what is tested.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tour() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## A quick tour without a cluster", 1)[1]
    match = re.search(r"```sh\n(.*?)```", section, flags=re.S)
    assert match, "the README's quick tour has no sh block"
    return match.group(1)


def test_readme_quick_tour_runs(tmp_path: Path) -> None:
    for tool in ("kubectl", "curl"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    if not (ROOT / ".venv" / "bin" / "mpi-operator").exists():
        pytest.skip("the tour uses .venv/bin/mpi-operator, which scripts/setup.sh creates")
    tour = _tour().replace("/tmp/kubesim.kubeconfig", str(tmp_path / "kubesim.kubeconfig"))
    # Every line must succeed; the background processes are stopped whatever happens.
    script = (
        "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\nexport "
        f"HOME={tmp_path}\n{tour}"
    )
    result = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "tensorflow2-mnist-elastic-launcher" in result.stdout
    assert "scaled" in result.stdout
    assert re.search(r"^echo tensorflow2-mnist-elastic-worker-0\.\S+:1$", result.stdout, flags=re.M)
