"""Smoke test of bench/operator_elastic.py: one `--quick` run with tiny numbers (2 jobs, 1 scaled, 1
losing a worker) writes operator.md and operator.json, and every section carries measured numbers.
Whether the numbers are good is measured by the benchmark, never asserted here."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARGS = [
    "--quick",
    "--jobs",
    "2",
    "--scale-jobs",
    "1",
    "--replace-jobs",
    "1",
    "--steady-seconds",
    "1",
]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    out = tmp_path_factory.mktemp("bench-out")
    # Its own session, so a timeout can end the benchmark together with its sim and operator
    # processes.
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "operator_elastic.py"), *ARGS, "--out", str(out)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=80)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err.decode()[-3000:]
    return (out / "operator.md").read_text(), json.loads((out / "operator.json").read_text())


def _at(results: dict[str, Any], path: str) -> float:
    value: Any = results
    for key in path.split("."):
        value = value[key]
    assert isinstance(value, int | float), (path, value)
    return float(value)


# (section heading in operator.md, JSON paths that must be measured, which must be > 0)
SECTIONS = [
    (
        "## Fan-in",
        ["fan_in.running_s.p50", "fan_in.listed_s.max"],
        ["fan_in.requests_per_job.writes"],
    ),
    (
        "## Scale reaction",
        [
            "scale.out_2_to_4.first_change_mounted_s.p50",
            "scale.out_2_to_4.mounted_s.p50",
            "scale.in_4_to_2.mounted_s.max",
        ],
        ["scale.out_2_to_4.requests_per_job.writes", "scale.out_2_to_4.operator_histogram_s.n"],
    ),
    ("## Steady state", ["steady.requests.writes", "steady.reconciles"], ["steady.seconds"]),
    (
        "## Replacement",
        ["replace.removed_s.p50", "replace.replacement_listed_s.max"],
        ["replace.replacements_metric"],
    ),
    ("## Operator process", ["operator_total.cpu_s"], ["operator_total.peak_rss_mib"]),
]


@pytest.mark.parametrize(
    ("heading", "measured", "positive"),
    SECTIONS,
    ids=["fan-in", "scale", "steady", "replacement", "process"],
)
def test_every_section_is_reported_with_numbers(
    report: tuple[str, dict[str, Any]], heading: str, measured: list[str], positive: list[str]
) -> None:
    markdown, results = report
    assert heading in markdown
    body = markdown.split(heading, 1)[1].split("\n## ", 1)[0]
    assert any(ch.isdigit() for ch in body), body
    assert "n/a" not in body, body
    for path in measured:
        assert math.isfinite(_at(results, path)), path
    for path in positive:
        assert _at(results, path) > 0, path


def test_report_describes_the_machine(report: tuple[str, dict[str, Any]]) -> None:
    _, results = report
    machine = results["machine"]
    assert machine["cpus"] >= 1
    assert len(machine["loadavg_start"]) == 3
    assert machine["python"] == ".".join(map(str, sys.version_info[:3]))
