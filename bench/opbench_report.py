"""The Markdown report of bench/operator_elastic.py, and the percentiles and machine description in
it."""

from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Iterable
from typing import Any

import psutil  # type: ignore[import-untyped]  # psutil ships no stubs; types-psutil is not a dependency
from opbench_processes import CONVERGENCE

from mpi_operator.settings import FALLBACK_BURST


def pct(values: Iterable[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); NaN for no values."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": pct(values, 50),
        "p95": pct(values, 95),
        "max": pct(values, 100),
    }


def machine() -> dict[str, Any]:
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "arch": platform.machine(),
        "python": platform.python_version(),
        "loadavg_start": os.getloadavg(),
    }


def busy_pct(cpu0: Any, since: float) -> float:
    """Share of all CPUs' time since `since` (monotonic; `cpu0` = psutil.cpu_times() then) that was
    not idle: every process on the machine, the benchmark's own included."""
    cpu1 = psutil.cpu_times()
    busy = float(sum(cpu1) - cpu1.idle - cpu1.iowait - (sum(cpu0) - cpu0.idle - cpu0.iowait))
    return 100 * busy / ((time.monotonic() - since) * (os.cpu_count() or 1))


def _f(value: float, digits: int = 2) -> str:
    return "n/a" if math.isnan(value) else f"{value:.{digits}f}"


def _row(label: str, s: dict[str, float]) -> str:
    return f"| {label} | {int(s['n'])} | {_f(s['p50'])} | {_f(s['p95'])} | {_f(s['max'])} |"


def _reqs(r: dict[str, float]) -> str:
    parts = f"{_f(r['get'], 1)} GET, {_f(r['writes'], 1)} writes, {_f(r['non_2xx'], 1)} not 2xx"
    return f"{_f(r['total'], 1)} ({parts})"


def client_flags(a: dict[str, Any]) -> str:
    qps = f"--qps {a['operator_qps']:g} " if a["operator_qps"] is not None else ""
    return qps + (f"--burst {a['operator_burst']} " if a["operator_burst"] is not None else "")


def report(r: dict[str, Any]) -> str:
    m, a, fan, sc, st, rp = (
        r["machine"],
        r["args"],
        r["fan_in"],
        r["scale"],
        r["steady"],
        r["replace"],
    )
    total = r["operator_total"]

    def floor(per_job: dict[str, float], jobs: int) -> str:
        """Seconds the operator's token bucket (--qps, --burst) needs to let these requests
        through."""
        qps = a["operator_qps"]
        if qps is None or qps <= 0:  # unset: none, as kubesim speaks API Priority and Fairness
            return "0"
        burst = a["operator_burst"] if a["operator_burst"] is not None else FALLBACK_BURST
        return _f(max(0.0, (per_job["total"] * jobs - burst) / qps))

    fan_floor = floor(fan["requests_per_job"], a["jobs"])
    out_floor = floor(sc["out_2_to_4"]["requests_per_job"], sc["jobs"])
    in_floor = floor(sc["in_4_to_2"]["requests_per_job"], sc["jobs"])
    flags = f"--jobs {a['jobs']} --scale-jobs {a['scale_jobs']} --replace-jobs {a['replace_jobs']}"
    lines = [
        "# Operator benchmark: elastic MPIJobs",
        "",
        f"Measured {m['date']} on {m['arch']}, {m['cpus']} CPUs (shared), Python {m['python']}; "
        "load average "
        f"at start {' '.join(f'{x:.2f}' for x in m['loadavg_start'])}, at end "
        f"{' '.join(f'{x:.2f}' for x in m['loadavg_end'])}.",
        f"`python bench/operator_elastic.py {flags} --steady-seconds {a['steady_seconds']:g}"
        f"{' --quick' if a['quick'] else ''}`; "
        f"operator `{client_flags(a)}--workers {a['operator_workers']}`; "
        "jobs: 2 workers, elasticPolicy 1..4, "
        f"settleSeconds {a['settle_seconds']}, scaleInGracePeriodSeconds {a['grace_seconds']}; "
        "kubesim pod "
        f"start and ready {a['pod_seconds']:g} s each. Mounted files polled every "
        f"{a['poll_seconds']:g} s.",
        "",
        "## Fan-in",
        "",
        f"{a['jobs']} MPIJobs created at once (16 concurrent creates); all Running after "
        f"{_f(fan['all_running_s'])} s. Times per job from its create request, in seconds.",
        "",
        "| to | jobs | p50 | p95 | max |",
        "|---|---|---|---|---|",
        _row("Running condition", fan["running_s"]),
        _row("both workers in the mounted discover_hosts.sh", fan["listed_s"]),
        "",
        "| operator | value |",
        "|---|---|",
        f"| API requests per job until all Running and listed | {_reqs(fan['requests_per_job'])} |",
        f"| discovery updates (metric) | {fan['discovery_updates']:.0f} |",
        f"| client rate-limit floor for these requests, (requests - burst) / qps | {fan_floor} s |",
        "| writes per job the operator logged | "
        + ", ".join(f"{k} {v:.1f}" for k, v in fan["logged_writes_per_job"].items())
        + " |",
        f"| CPU time | {_f(fan['operator_cpu_s'])} s |",
        f"| RSS after fan-in (idle before: {_f(r['operator_idle']['rss_mib'], 1)} MiB) "
        f"| {_f(fan['operator_rss_mib'], 1)} MiB |",
        "",
        "## Scale reaction",
        "",
        f"{sc['jobs']} jobs patched at once through the scale subresource; time from the PATCH "
        "until the "
        "launcher's mounted discover_hosts.sh first changes and until it lists exactly the new set "
        "(the "
        "gap is the operator's one-change-per-settleSeconds pacing), and the operator's own "
        f"`{CONVERGENCE}` observations in the same interval (bucket-interpolated), in seconds.",
        "",
        "| step | jobs | p50 | p95 | max |",
        "|---|---|---|---|---|",
        _row("2 -> 4, first new host mounted", sc["out_2_to_4"]["first_change_mounted_s"]),
        _row("2 -> 4, all 4 mounted", sc["out_2_to_4"]["mounted_s"]),
        _row(
            "4 -> 2, first host gone from the mounted script",
            sc["in_4_to_2"]["first_change_mounted_s"],
        ),
        _row("4 -> 2, only 2 mounted", sc["in_4_to_2"]["mounted_s"]),
        "",
        "| operator histogram | observations | mean | p50 | p95 |",
        "|---|---|---|---|---|",
    ]
    for label, key in (("2 -> 4", "out_2_to_4"), ("4 -> 2", "in_4_to_2"), ("replacement", "")):
        h = sc[key]["operator_histogram_s"] if key else rp["operator_histogram_s"]
        cells = [_f(h["mean"]), _f(h["p50"]), _f(h["p95"])] if h["n"] else ["none recorded", "", ""]
        lines.append(f"| {label} | {h['n']:.0f} | {' | '.join(cells)} |")
    lines += [
        "",
        f"API requests per scaled job: 2 -> 4 {_reqs(sc['out_2_to_4']['requests_per_job'])}; "
        f"4 -> 2 {_reqs(sc['in_4_to_2']['requests_per_job'])}. Operator CPU "
        f"{_f(sc['out_2_to_4']['operator_cpu_s'])} s and {_f(sc['in_4_to_2']['operator_cpu_s'])} "
        "s. "
        f"Client rate-limit floor for the step's requests: {out_floor} s and {in_floor} s.",
        "",
        "## Steady state",
        "",
        f"After every job converged (waited {_f(st['convergence_wait_s'], 1)} s for drained pods), "
        "over "
        f"{_f(st['seconds'], 1)} s: **{st['requests']['writes']:.0f} writes**, "
        f"{st['requests']['total']:.0f} "
        f"requests in all, {st['reconciles']:.0f} reconciles, {_f(st['operator_cpu_s'])} s "
        "operator CPU.",
    ]
    if st["logged_writes"]:
        lines.append(
            "Writes the operator logged: "
            + ", ".join(f"{k} x{v}" for k, v in st["logged_writes"].items())
        )
    lines += [
        "",
        "## Replacement",
        "",
        f"Worker 1 of {rp['jobs']} jobs killed (exit 137) at once; time until its host left the "
        "mounted "
        "script and until the replacement (a new host name) is listed, in seconds.",
        "",
        "| to | jobs | p50 | p95 | max |",
        "|---|---|---|---|---|",
        _row("old host removed", rp["removed_s"]),
        _row("replacement listed", rp["replacement_listed_s"]),
        "",
        f"Replacements counted by the operator: {rp['replacements_metric']:.0f}; API requests per "
        "job "
        f"{_reqs(rp['requests_per_job'])}; operator CPU {_f(rp['operator_cpu_s'])} s; client "
        "rate-limit "
        f"floor for these requests {floor(rp['requests_per_job'], rp['jobs'])} s.",
        "",
        "## Operator process",
        "",
        f"RSS {_f(total['rss_mib'], 1)} MiB at the end, peak {_f(total['peak_rss_mib'], 1)} MiB "
        f"(sampled every 0.25 s); CPU time {_f(total['cpu_s'])} s in all "
        f"(kubesim: {_f(r['kubesim_total_cpu_s'])} s).",
        "",
    ]
    return "\n".join(lines)
