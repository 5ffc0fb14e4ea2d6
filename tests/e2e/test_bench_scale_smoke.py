"""Smoke test of bench/report.py: its `--quick` setting (5 jobs x 2 workers, 5 reaction steps, 2
jobs per discovery arm with a 3 s kubelet sync) runs every scenario into a temporary directory, and
REPORT.md has every section with numbers, the plots exist, and the results the tables come from are
measured. Whether the numbers are good is the benchmark's to say, never asserted here; what is
asserted of the shared-cluster scenario is behaviour (the wave preempts within the budgets, no
elastic job fails, each loss is a disruption)."""

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

from operator_testing import source_env

ROOT = Path(__file__).resolve().parents[2]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

pytestmark = pytest.mark.timeout(330)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, Any]]:
    out = tmp_path_factory.mktemp("bench-report")
    # Its own session, so a timeout ends the benchmark together with its sim and operator processes.
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "report.py"), "--quick", "--out-dir", str(out)],
        cwd=ROOT,
        env=source_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err.decode()[-3000:]
    results = json.loads((out / "report" / "results.json").read_text())
    return out, (out / "REPORT.md").read_text(), results


def _at(results: dict[str, Any], path: str) -> float:
    value: Any = results
    for key in path.split("."):
        value = value[key]
    assert isinstance(value, int | float), (path, value)
    return float(value)


# (heading in REPORT.md, results that must be measured (finite), results that must be > 0)
SECTIONS = [
    (
        "## Scale: 5 jobs x 2 workers",
        [
            "scale.fan_in.writes_per_job_running",
            "scale.steady.requests.writes",
            "scale.restart.writes",
            "scale.operator_rss_growth_kib_per_job",
        ],
        [
            "scale.fan_in.all_running_s",
            "scale.idle.operator.rss_mib",
            "scale.fan_in.operator_rss_mib",
            "scale.restart.operator_rss_mib",
            "scale.fan_in.operator_cpu_ms_per_write",
            "scale.fan_in.writes_per_job_quiet",
            "scale.fan_in.events_per_job",
            "scale.fan_in.kubesim_cpu_s",
            "scale.fan_in.kubesim_rss_mib",
            "scale.steady.seconds",
            "scale.restart.ready_s",
        ],
    ),
    (
        "## Cost per job at any load",
        [
            "scale.fan_in.syncs_running.without_writes_per_job",
            "light.syncs_running.without_writes_per_job",
            "light.syncs_running.echoes_per_job",
        ],
        [
            "scale.fan_in.operator_cpu_ms_per_job",
            "light.operator_cpu_ms_per_job",
            "scale.fan_in.syncs_running.per_job",
            "light.syncs_quiet.per_job",
            "light.baseline.unsaturated.median_ms_per_job",
            "light.baseline.unsaturated.now_median_ms_per_job",
            "light.baseline.saturated.median_ms_per_job",
            "light.baseline.saturated.now_median_ms_per_job",
        ],
    ),
    ("## Heap snapshot", [], ["heap.total_bytes", "heap.blocks"]),
    (
        "## Scale reaction",
        ["reaction.operator_decided_p50_ms"],
        ["reaction.p50_ms", "reaction.p99_ms", "reaction.requests_per_step.writes"],
    ),
    (
        "## Discovery",
        [],
        [
            "discovery.annotation.mounted_s.p50",
            "discovery.configmap_only.mounted_s.p50",
            "discovery.configmap_only.configmap_s.max",
            "discovery.ratio_p50",
        ],
    ),
    (
        "## Scheduling: kubesim's fan-in of 5 x 2",
        [],
        [
            "scheduling.default.cpu_s",
            "scheduling.baseline.cpu_s",
            "scheduling.shaped.sim_cpu_s",
            "scheduling.shaped.scheduler_cpu_s",
            "scheduling.shaped.scheduler_syncs",
        ],
    ),
    (
        "## Big job: one elastic job of 20 workers",
        ["bigjob.create.listed_after_ready_s", "bigjob.create.event_writes"],
        [
            "bigjob.create.all_ready_s",
            "bigjob.create.all_listed_s",
            "bigjob.create.writes",
            "bigjob.create.operator_rss_mib",
            "bigjob.create.hostfile_bytes",
            "bigjob.create.discover_hosts_bytes",
            "bigjob.create.config_map_bytes",
            "bigjob.scale_in.listed_s",
            "bigjob.scale_in.pods_gone_s",
            "bigjob.scale_in.writes",
            "bigjob.scale_out.listed_s",
            "bigjob.scale_out.writes",
            "bigjob.kill.replacements_listed_s",
        ],
    ),
    (
        "## Shared cluster: 3 elastic jobs on 3 nodes",
        ["shared.failed_jobs", "shared.replacements", "shared.listed_after_last_ready_s"],
        [
            "shared.fill_s",
            "shared.wave_running_s",
            "shared.back_at_max_s",
            "shared.preempted_workers",
            "shared.disruptions",
            "shared.scheduler_preemption_events",
            "shared.writes_per_preemption",
            "shared.operator_rss_mib",
            "shared.scheduler_cpu_s",
        ],
    ),
]


@pytest.mark.parametrize(
    ("heading", "measured", "positive"),
    SECTIONS,
    ids=["scale", "cost", "heap", "reaction", "discovery", "scheduling", "bigjob", "shared"],
)
def test_every_scenario_is_reported_with_numbers(
    run: tuple[Path, str, dict[str, Any]], heading: str, measured: list[str], positive: list[str]
) -> None:
    _, markdown, results = run
    assert heading in markdown
    body = markdown.split(heading, 1)[1].split("\n## ", 1)[0]
    if heading not in ("## Heap snapshot", "## Cost per job at any load"):  # no wait to explain
        assert "**Bottleneck" in body, body
    assert "n/a" not in body, body
    if heading not in ("## Discovery", "## Heap snapshot"):  # no target for those in the issue
        assert any(line.endswith(("| met |", "| **missed** |")) for line in body.splitlines()), body
    for path in measured:
        assert math.isfinite(_at(results, path)), path
    for path in positive:
        assert _at(results, path) > 0, path


def test_the_cost_per_job_is_set_against_the_code_its_target_came_from(
    run: tuple[Path, str, dict[str, Any]],
) -> None:
    _, markdown, results = run
    base = results["light"]["baseline"]
    assert (base["commit"], base["reported_saturated_ms_per_job"]) == ("655a4b8", 9.9)
    for fan in ("saturated", "unsaturated"):
        assert len(base[fan]["ms_per_job"]) == len(base[fan]["now_ms_per_job"]) >= 1
    assert "**The machine of the day.** Both fan-ins again, once each at `655a4b8`" in markdown
    factor = base["saturated"]["median_ms_per_job"] / 9.9
    assert f"so the target's 10 ms then are {10 * factor:.1f} ms today" in markdown


def test_the_reaction_takes_every_step(run: tuple[Path, str, dict[str, Any]]) -> None:
    _, _, results = run
    assert results["reaction"]["steps"] == len(results["reaction"]["latencies_s"]) == 5


def test_the_fan_in_pipeline_is_timed_object_by_object(
    run: tuple[Path, str, dict[str, Any]],
) -> None:
    _, _, results = run
    timeline = results["scale"]["fan_in"]["timeline_s"]
    assert len(timeline["workers_created"]) == 5 * 2  # --quick: 5 jobs x 2 workers
    assert len(timeline["launchers_created"]) == len(timeline["running"]) == 5
    assert max(timeline["workers_created"]) <= max(timeline["running"])


def test_the_heap_snapshot_names_the_operators_own_code(
    run: tuple[Path, str, dict[str, Any]],
) -> None:
    _, _, results = run
    packages = dict(results["heap"]["packages"])
    assert sum(packages.values()) <= results["heap"]["total_bytes"]
    assert any(name.startswith("mpi_operator/") for name in packages), packages


def test_memory_growth_is_read_after_every_wave(run: tuple[Path, str, dict[str, Any]]) -> None:
    _, markdown, results = run
    points = results["memory"]["points"]
    assert [p["jobs"] for p in points] == [0, 2, 4]  # --quick: 5 jobs in 2 waves of 5 // 2
    assert all(p["operator_rss_mib"] > 0 and p["kubesim_rss_mib"] > 0 for p in points)
    assert math.isfinite(results["memory"]["operator_kib_per_job"])
    body = markdown.split("## Memory growth", 1)[1].split("\n## ", 1)[0]
    assert "| 4 |" in body, body


def test_the_wave_preempts_and_no_elastic_job_fails(run: tuple[Path, str, dict[str, Any]]) -> None:
    _, markdown, results = run
    shared = results["shared"]
    # --quick: 3 jobs of 2 one-GPU workers fill 3 nodes of 1 GPU shared two ways; the wave needs 2.
    assert (shared["gpus_per_node"], shared["gpu_replicas"]) == (1, 2)
    assert "each shared 2 ways by the NVIDIA device plugin's time-slicing" in markdown
    assert shared["preempted_workers"] == shared["disruptions"] == 2
    assert shared["jobs_hit"] == 2, "each job's budget allows one disruption"
    assert shared["failed_jobs"] == shared["replacements"] == 0


def test_plots_exist_and_are_linked(run: tuple[Path, str, dict[str, Any]]) -> None:
    out, markdown, _ = run
    for name in ("fan_in_running.png", "rss_vs_jobs.png", "scale_reaction.png", "discovery.png"):
        png = out / "report" / name
        assert png.read_bytes()[:8] == PNG_SIGNATURE, name
        assert f"](report/{name})" in markdown, name


def test_profiles_are_reported_or_their_absence_explained(
    run: tuple[Path, str, dict[str, Any]],
) -> None:
    out, markdown, results = run
    body = markdown.split("## Profiles of the fan-in", 1)[1]
    for name, profile in results["scale"]["fan_in"]["profiles"].items():
        if "error" in profile:
            assert f"{name}: not profiled: {profile['error']}" in body
        else:
            # A quick fan-in lasts about a second: at 50 Hz a process may show a sample or two, all
            # of them idle, so only the counts' consistency is the smoke test's business.
            assert 0 <= profile["busy"] <= profile["samples"]
            assert profile["samples"] > 0
            assert f"### {name}: {profile['busy']:,} busy of {profile['samples']:,} samples" in body
            assert (out / "report" / profile["file"]).stat().st_size > 0


def test_report_states_machine_versions_and_command(run: tuple[Path, str, dict[str, Any]]) -> None:
    _, markdown, results = run
    machine = results["machine"]
    assert machine["cpus"] >= 1
    assert machine["python"] == ".".join(map(str, sys.version_info[:3]))
    assert f"at commit `{machine['git_commit']}`" in markdown
    assert "Command: `python bench/report.py --quick --out-dir " in markdown
