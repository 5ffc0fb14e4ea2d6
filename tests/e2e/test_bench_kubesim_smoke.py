"""Smoke test of `bench/kubesim_throughput.py fanin`: a run with 2 jobs of 2 workers writes its
report with every metric measured. Whether the numbers are good is for the benchmark to say, never
asserted here."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from operator_testing import source_env

ROOT = Path(__file__).resolve().parents[2]
JOBS, WORKERS = 2, 2


def run_fanin(tmp_path: Path, *extra: str) -> dict[str, str]:
    """The report's rows, by the label's first words."""
    out = tmp_path / "kubesim-fanin.md"
    args = ["fanin", "--jobs", str(JOBS), "--workers", str(WORKERS), "--pod-seconds", "0.1", *extra]
    # Its own session, so a timeout ends the benchmark together with its sim process.
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "kubesim_throughput.py"), *args, "--out", str(out)],
        cwd=ROOT,
        env=source_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err.decode()[-3000:]
    rows = dict(re.findall(r"^\| (.+?) \| (.+?) \|$", out.read_text(), re.MULTILINE))
    return {label.split(",")[0].split(" (")[0]: value for label, value in rows.items()}


def test_the_fanin_scenario_reports_every_metric(tmp_path: Path) -> None:
    measured = run_fanin(tmp_path)
    for label in (
        "kubesim CPU time",
        "wall time until every pod is Running",
        "creates/s during the create phase",
    ):
        assert re.fullmatch(r"\d+(\.\d+)? s|\d+", measured[label]), (label, measured[label])
    # The CRD, then per job: the MPIJob, Service, ConfigMap, Secret, workers and launcher Job, then
    # the Created status, the ConfigMap update and the Running status.
    assert measured["writes by the client"] == str(1 + JOBS * (WORKERS + 8))
    assert re.fullmatch(r"\d+ / \d+ MiB", measured["kubesim RSS before / after"])


def test_the_fanin_runs_on_a_shaped_cluster_and_reports_the_scheduler(tmp_path: Path) -> None:
    measured = run_fanin(tmp_path, "--nodes", "3", "--node-allocatable", "nvidia.com/gpu=8,pods=4")
    assert measured["nodes"] == "3"
    assert re.fullmatch(r"\d+ µs", measured["scheduler CPU per pod"])
