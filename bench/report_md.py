"""bench/REPORT.md from the results of bench/report.py: the machine and versions, one table per
scenario with the issue's targets beside the measured values, the bottleneck of each scenario, and
the profiles."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from mpi_operator.settings import FALLBACK_BURST, FALLBACK_QPS

MB = 1.048576
"""MiB -> MB (10^6 bytes), the unit of the issue's targets."""


def _f(value: float, digits: int = 1) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:,.{digits}f}"


def _met(ok: bool) -> str:
    return "met" if ok else "**missed**"


def _row(what: str, measured: str, target: str, ok: bool | None) -> str:
    return f"| {what} | {measured} | {target} | {'' if ok is None else _met(ok)} |"


TABLE = ["| | measured | target | |", "|---|---|---|---|"]
SCENARIOS = (
    "scale",
    "light",
    "memory",
    "heap",
    "reaction",
    "discovery",
    "scheduling",
    "bigjob",
    "shared",
)


def _machine(r: dict[str, Any]) -> list[str]:
    m = r["machine"]
    load = (
        " ".join(f"{x:.2f}" for x in m["loadavg_start"]),
        " ".join(f"{x:.2f}" for x in m["loadavg_end"]),
    )
    busy = ", ".join(f"{k} {_f(r[k]['machine_busy_pct'], 0)} %" for k in SCENARIOS if k in r)
    dirty = " (with uncommitted changes)" if m["git_dirty"] else ""
    return [
        f"Measured {m['date']} in {_f(m['wall_s'] / 60, 1)} minutes on {m['cpus']} CPUs "
        f"({m['cpu_model']}), "
        f"{_f(m['memory_gib'], 1)} GiB of memory; load average {load[0]} at the start, {load[1]} "
        "at the end. "
        "Share of the machine's CPU time in use during each scenario (every process, this "
        "benchmark's "
        f"included): {busy}. The machine is shared with other work, so timings are noisy; the "
        "per-object "
        "figures (RSS, CPU per write, writes per job) are the ones to compare between runs.",
        "",
        f"Versions: elastic-mpi-operator {m['package_version']} at commit "
        f"`{m['git_commit']}`{dirty}, "
        f"Python {m['python']}, kubernetes-asyncio {m['kubernetes_asyncio']}, aiohttp "
        f"{m['aiohttp']}.",
        "",
        f"Command: `{r['command'].strip()}` (see bench/README.md). Every scenario runs "
        "`mpi-operator sim` "
        "and `mpi-operator run` as processes of their own, so the CPU and memory figures belong to "
        "each "
        "alone; the operator runs with its defaults (no `--qps`/`--burst`: no client-side limit "
        "once "
        "kubesim's API Priority and Fairness headers are seen) unless the command says otherwise.",
    ]


def _client_floor(r: dict[str, Any]) -> float:
    """Seconds the operator's token bucket needs for the fan-in's requests; 0 when the limit is
    lifted."""
    fan, a = r["scale"]["fan_in"], r["args"]
    if fan["client_limit_lifted"]:
        return 0.0
    qps = float(a["operator_qps"]) if a["operator_qps"] != "None" else FALLBACK_QPS
    burst = int(a["operator_burst"]) if a["operator_burst"] != "None" else FALLBACK_BURST
    return (
        max(0.0, (fan["requests_per_job"]["total"] * fan["jobs"] - burst) / qps) if qps > 0 else 0.0
    )


def _bottleneck_fan_in(r: dict[str, Any]) -> str:
    fan, cpus = r["scale"]["fan_in"], r["machine"]["cpus"] or 1
    wall, floor = fan["all_running_s"], _client_floor(r)
    shares = {
        "the operator": fan["operator_cpu_s"] / wall,
        "kubesim": fan["kubesim_cpu_s"] / wall,
        "this benchmark's client": fan["bench_client_cpu_s"] / wall,
    }
    top = max(shares, key=lambda k: shares[k])
    parts = ", ".join(f"{k} {100 * v:.0f} %" for k, v in shares.items())
    others = max(0.0, fan["machine_busy_pct"] / 100 * cpus - sum(shares.values()))
    cpu = (
        f"CPU over the {_f(wall)} s, in shares of one core ({cpus} in all): {parts}; every other "
        "process "
        f"on the machine {100 * others:.0f} %"
    )
    if floor >= 0.8 * wall:
        return f"**the operator's client-side rate limit**: it alone needs {_f(floor)} s. {cpu}."
    if shares[top] >= 0.8:
        return f"**{top}'s CPU** (a Python process runs on one core). {cpu}."
    if fan["machine_busy_pct"] >= 90:
        whose = (
            "mostly by other work on the shared machine"
            if others > sum(shares.values())
            else f"most by {top}"
        )
        return f"**the machine's CPU**, all of it in use, {whose}. {cpu}."
    limit = "lifted" if not floor else f"a floor of {_f(floor)} s"
    return (
        f"no process is CPU bound and the client limit is {limit}: the wait is kubesim's simulated "
        "pod "
        f"start and readiness ({r['args']['pod_seconds']} s each) and the hand-offs between "
        f"processes. {cpu}."
    )


def _scale_rows(r: dict[str, Any]) -> list[str]:
    s = r["scale"]
    fan, st, rs, idle = s["fan_in"], s["steady"], s["restart"], s["idle"]
    n = fan["jobs"]
    op_rss, peak = MB * fan["operator_rss_mib"], MB * fan["operator_peak_rss_mib"]
    idle_rss, restart_rss = MB * idle["operator"]["rss_mib"], MB * rs["operator_rss_mib"]
    writes = fan["writes_per_job_quiet"]
    lifted = fan["client_limit_lifted"]
    return [
        *TABLE,
        _row(
            "time until all Running",
            f"{_f(fan['all_running_s'])} s (per job: p50 {_f(fan['running_s']['p50'])} s)",
            "",
            None,
        ),
        _row("operator RSS, idle before jobs", f"{_f(idle_rss)} MB", "≤ 85 MB", idle_rss <= 85),
        _row(
            "operator RSS when all Running",
            f"{_f(op_rss)} MB (peak {_f(peak)})",
            "≤ 200 MB",
            op_rss <= 200,
        ),
        _row(
            "operator RSS after a restart", f"{_f(restart_rss)} MB", "≤ 200 MB", restart_rss <= 200
        ),
        _row(
            "operator RSS growth, idle to all Running",
            f"{_f(s['operator_rss_growth_kib_per_job'])} KiB per job, "
            f"{_f(s['operator_rss_growth_kib_per_pod'])} KiB per pod",
            "",
            None,
        ),
        _row(
            "operator CPU per object written",
            f"{_f(fan['operator_cpu_ms_per_write'], 2)} ms ({_f(fan['operator_cpu_s_quiet'])} s "
            "for "
            f"{_f(writes * n, 0)} writes; {_f(fan['operator_cpu_ms_per_write_all'], 2)} ms "
            "counting "
            "Event writes too)",
            "≤ 0.7 ms",
            fan["operator_cpu_ms_per_write"] <= 0.7,
        ),
        _row(
            "API writes per job, create to Running",
            f"{_f(fan['writes_per_job_running'])} when the last was Running, {_f(writes)} until "
            "quiet; "
            f"apart: {_f(fan['events_per_job'])} Events, "
            f"{_f(fan['event_writes_per_job_quiet'])} Event writes",
            "≤ 15, Events apart",
            writes <= 15,
        ),
        _row(
            "kubesim CPU for the fan-in",
            f"{_f(fan['kubesim_cpu_s'])} s ({_f(fan['kubesim_cpu_s_quiet'])} s until quiet); "
            f"RSS {_f(MB * fan['kubesim_rss_mib'])} MB",
            "≤ 15 s",
            fan["kubesim_cpu_s"] <= 15,
        ),
        _row("operator CPU for the fan-in", f"{_f(fan['operator_cpu_s'])} s", "", None),
        _row(
            f"steady state ({_f(st['seconds'], 0)} s)",
            f"{st['requests']['writes']:.0f} writes, {st['requests']['total']:.0f} requests; "
            "operator "
            f"{_f(st['operator_cpu_pct'], 2)} % CPU, kubesim {_f(st['kubesim_cpu_pct'], 2)} %",
            "0 writes",
            st["requests"]["writes"] == 0,
        ),
        _row(
            "restart (killed, started again): ready",
            f"{_f(rs['ready_s'], 2)} s after its start "
            f"(the first start, no jobs: {_f(idle['operator_ready_s'], 2)} s)",
            "≤ 3 s",
            rs["ready_s"] <= 3,
        ),
        _row(
            f"restart: writes in its first {_f(rs['window_s'], 0)} s",
            f"{rs['writes']:.0f} ({rs['requests']['total']:.0f} requests)",
            "0",
            rs["writes"] == 0,
        ),
        _row(
            "fan-in at the default `--qps` (unset)",
            "client limit lifted (APF headers seen): no client-side floor"
            if lifted
            else f"**limited on the client**: a floor of {_f(_client_floor(r))} s",
            "bounded by the operator's CPU, not a client-side limit",
            lifted,
        ),
    ]


def _pipeline(fan: dict[str, Any]) -> str:
    """Where the jobs waited: when the operator had created the workers, the launchers, and when
    they ran."""
    t = fan["timeline_s"]

    def span(key: str) -> str:
        times = sorted(t[key])
        return f"{_f(times[0])}-{_f(times[-1])} s" if times else "none seen"

    return (
        "Pipeline, in seconds from the first create: worker pods created "
        f"{span('workers_created')}, "
        f"launcher Jobs {span('launchers_created')} (the operator creates a launcher once its "
        "workers "
        f"are Ready), jobs Running {span('running')}."
    )


def _profiled(fan: dict[str, Any]) -> str:
    sampled = [name for name, prof in fan["profiles"].items() if "error" not in prof]
    return (
        f"; py-spy sampled {' and '.join(sampled)} meanwhile (on the same cores)" if sampled else ""
    )


def _scale(r: dict[str, Any]) -> list[str]:
    s = r["scale"]
    fan = s["fan_in"]
    n, w = fan["jobs"], fan["workers"]
    smaller = "" if n >= 1000 else " (this run is smaller: compare the per-object figures only)"
    logged = ", ".join(f"{k} {v:.2f}" for k, v in fan["logged_writes_per_job"].items()) or "none"
    return [
        f"## Scale: {n:,} jobs x {w} workers ({s['pods']:,} pods)",
        "",
        f"{n:,} static MPIJobs created at once (16 creates in flight; all sent after "
        f"{_f(fan['creates_sent_s'])} s); kubesim pods start and turn Ready "
        f"{r['args']['pod_seconds']} s "
        f"each{_profiled(fan)}. The targets are the issue's, for 1,000 x 8{smaller}. Writes are "
        "the "
        "operator's own `rest_client_requests_total` (POST, PUT, PATCH, DELETE) less its Event "
        "writes "
        "(each Event it recorded in the cluster is one create plus `count` - 1 patches); 'quiet' "
        "is when "
        "its write count "
        f"had not moved for {r['args']['quiet_seconds']} s ({_f(fan['quiet_after_s'])} s after the "
        "first "
        "create).",
        "",
        *_scale_rows(r),
        "",
        f"**Bottleneck of the fan-in:** {_bottleneck_fan_in(r)} {_pipeline(fan)}",
        "",
        "Writes per job the operator logged, until quiet (status writes are not logged): "
        f"{logged}.",
        "",
        _status_writes(fan),
        "",
        f"**Bottleneck of the restart:** {_bottleneck_restart(r)}",
        "",
    ]


def _echoes(syncs: dict[str, float]) -> str:
    """Of the syncs writing nothing, those stopped as echoes; absent from earlier results."""
    echoes = syncs.get("echoes_per_job")
    return "" if echoes is None else f", {_f(echoes, 1)} of them echoes"


def _cost_row(label: str, fan: dict[str, Any], again: list[float]) -> str:
    """The row's verdict is the median of every run of the current code in this report: the fan-in
    the syncs come from and the calibration's runs of now (`again`). One run moves by 10-15 % from
    run to run on a shared 2-core machine, more than the margins judged here."""
    running, quiet = fan["syncs_running"], fan["syncs_quiet"]
    runs = [fan["operator_cpu_ms_per_job"], *again]
    per_job = statistics.median(runs)
    of_runs = f" (median of {len(runs)} runs: {', '.join(_f(v, 1) for v in runs)})" if again else ""
    return _row(
        f"{label}: {fan['jobs']:,} x {fan['workers']}, pods in {fan['pod_seconds']} s",
        f"{_f(per_job, 1)} ms of operator CPU per job{of_runs}, create to Running; "
        f"in the first run {_f(running['per_job'], 1)} syncs per job "
        f"({_f(running['without_writes_per_job'], 1)} writing nothing{_echoes(running)}), "
        f"{_f(quiet['per_job'], 1)} until quiet "
        f"({_f(quiet['without_writes_per_job'], 1)}{_echoes(quiet)})",
        "≤ 10 ms per job",
        per_job <= 10,
    )


def _cost_per_job(r: dict[str, Any]) -> list[str]:
    """The operator's CPU per job saturated (the scale fan-in) and with time to spare (`light`),
    with the syncs behind it; absent from results of runs before these were measured."""
    light = r.get("light") or {}
    base = light.get("baseline") or {}
    fans = [("saturated", r["scale"]["fan_in"]), ("unsaturated", light)]
    rows = [
        _cost_row(label, fan, (base.get(label) or {}).get("now_ms_per_job", []))
        for label, fan in fans
        if fan and "syncs_running" in fan
    ]
    if not rows:
        return []
    return [
        "## Cost per job at any load",
        "",
        "The operator's CPU from the first create until the last job is Running, per job, in the "
        "saturated fan-in above and in one with time to spare (fewer jobs, pods starting sooner, "
        "its own cluster), where the operator syncs a job as its events come rather than once per "
        "batch; each the median of that run and the runs of the current code in the calibration "
        "below, which the verdict holds to 10 ms. Syncs are its `mpi_operator_reconcile_total`; "
        "those writing nothing its `mpi_operator_reconcile_without_writes_total` (Events aside), "
        "and of these the ones that found only the echoes of its own writes and stopped before "
        "planning its `mpi_operator_reconcile_echoes_total`.",
        "",
        *TABLE,
        *rows,
        "",
        *_cost_baseline(light),
    ]


def _cost_baseline(light: dict[str, Any]) -> list[str]:
    """Both fan-ins at the commit the 10 ms target was read off, against now, in alternating
    rounds: how much of the cost per job is the day's machine."""
    base = light.get("baseline")
    if not base or "saturated" not in base:
        return []
    commit, reported = base["commit"], base["reported_saturated_ms_per_job"]
    runs = len(base["saturated"]["ms_per_job"])
    times = "once" if runs == 1 else f"{runs} times"

    def arms(fan: dict[str, Any]) -> str:
        before, now = fan["median_ms_per_job"], fan["now_median_ms_per_job"]
        return (
            f"{_f(before, 1)} ms per job at `{commit}` against {_f(now, 1)} ms now "
            f"({_f(100 * (now / before - 1), 0)} %; runs: "
            f"{', '.join(_f(v, 1) for v in fan['ms_per_job'])} and "
            f"{', '.join(_f(v, 1) for v in fan['now_ms_per_job'])})"
        )

    saturated = base["saturated"]["median_ms_per_job"]
    factor = saturated / reported
    return [
        f"**The machine of the day.** Both fan-ins again, {times} each at `{commit}` (both "
        f"processes from that commit's tree) and now, alternating, each on a cluster of its own "
        "and without the py-spy sampling the scale fan-in above ran under (medians): saturated, "
        f"{arms(base['saturated'])}; unsaturated, "
        f"{arms(base['unsaturated'])}. `{commit}`'s saturated fan-in cost {_f(reported, 1)} ms "
        f"per job in the report of 2026-11-26, where the 10 ms target comes from; on this "
        f"machine today the same code costs {_f(factor, 2)} times that, so the target's 10 ms "
        f"then are {_f(10 * factor, 1)} ms today. Those {_f(reported, 1)} ms were measured under "
        "py-spy, as the saturated row above, and these runs were not, so if anything the factor "
        "errs low. The verdicts above hold the rows' medians to 10 ms as written.",
        "",
    ]


def _status_writes(fan: dict[str, Any]) -> str:
    """What the writes per job beyond the logged ones were: the MPIJob's status writes, and why."""
    status = fan["writes_per_job_quiet"] - sum(fan["logged_writes_per_job"].values())
    return (
        f"**Status writes per job:** {_f(status)} (the writes until quiet less the logged ones). A "
        "static "
        "job writes its status when it is created and when it is Running; the worker counts in "
        "between "
        "are progress, held back while its pods are still starting, for at most "
        "`progress_batch_seconds` "
        "(1 s) after its last status write (planning/progress.py). A job whose pods all start "
        "within that "
        "second writes twice. Here the jobs waited seconds for kubesim, the bottleneck, to start "
        "their "
        "pods, longer than that second, so the counts got a write of their own: above two, the "
        "price of "
        "a status never more than a second behind its pods."
    )


def _bottleneck_restart(r: dict[str, Any]) -> str:
    rs = r["scale"]["restart"]
    op_cpu, sim_cpu, ready = (
        rs["operator_cpu_s_until_ready"],
        rs["kubesim_cpu_s_until_ready"],
        rs["ready_s"],
    )
    facts = (
        f"until /readyz the new process made {_f(rs['requests_until_ready']['total'], 0)} requests "
        "(its "
        f"initial LISTs and watches) and used {_f(op_cpu, 2)} s of CPU (interpreter start and "
        "imports "
        f"included), kubesim {_f(sim_cpu, 2)} s, in {_f(ready, 2)} s"
    )
    if op_cpu + sim_cpu < 0.5 * ready:
        return f"**waiting for CPU on the shared machine**: {facts}."
    if op_cpu >= sim_cpu:
        return (
            f"**the operator's CPU** (start, imports, decoding and caching every object): {facts}."
        )
    return f"**kubesim's CPU** (serving the LISTs of every object): {facts}."


def _memory(r: dict[str, Any]) -> list[str]:
    m = r["memory"]
    rows = [
        f"| {p['jobs']:,} | {_f(MB * p['operator_rss_mib'])} | {_f(MB * p['kubesim_rss_mib'])} |"
        for p in m["points"]
    ]
    pods = m["workers"] + 1
    return [
        "## Memory growth",
        "",
        f"The same jobs ({m['workers']} workers each) created in {len(m['points']) - 1} waves on a "
        "cluster "
        "of their own; after each wave was Running and the operator quiet, both processes' RSS:",
        "",
        "| jobs Running | operator RSS, MB | kubesim RSS, MB |",
        "|---|---|---|",
        *rows,
        "",
        f"Least-squares growth over the waves: operator {_f(m['operator_kib_per_job'])} KiB per "
        "job "
        f"({_f(m['operator_kib_per_job'] / pods)} KiB per pod, {pods} pods a job), kubesim "
        f"{_f(m['kubesim_kib_per_job'])} KiB per job. (RSS also holds memory the allocator has not "
        "returned, "
        "so it moves in steps.)",
        "",
    ]


def _heap(r: dict[str, Any]) -> list[str]:
    h = r["heap"]
    total = h["total_bytes"]
    packages = [
        f"| `{name}` | {_f(size / 1e6, 2)} | {_f(100 * size / total)} |"
        for name, size in h["packages"]
    ]
    lines = [f"| `{site}` | {_f(size / 1e6, 2)} | {count:,} |" for site, size, count in h["lines"]]
    return [
        "## Heap snapshot",
        "",
        f"Where the operator's live Python memory was allocated with {h['jobs']:,} jobs x "
        f"{h['workers']} "
        "workers Running and the operator quiet: a tracemalloc snapshot (bench/heapsnap.py runs "
        "`mpi-operator run` with tracing on from before its first import; its RSS and timings are "
        "not "
        f"measured, tracing inflates them). {_f(total / 1e6)} MB in {h['blocks']:,} blocks are "
        "traced; "
        "RSS also holds the interpreter, C libraries and freed memory the allocator keeps. What "
        "`mpi_operator/kube` allocated and is still alive is mostly the objects its JSON codec "
        "(`kube/codec.py`) decoded from the API's answers, which the informer caches hold; "
        "`mpi_operator/cache`, what their transforms rebuilt of them; `imports`, the modules' code "
        "objects.",
        "",
        "| allocated in | MB | % |",
        "|---|---|---|",
        *packages,
        "",
        "| allocation site (file:line) | MB | blocks |",
        "|---|---|---|",
        *lines,
        "",
    ]


def _reaction(r: dict[str, Any]) -> list[str]:
    rc = r["reaction"]
    op_cpu, sim_cpu = rc["operator_cpu_ms_per_step"], rc["kubesim_cpu_ms_per_step"]
    decided, p50 = rc["operator_decided_p50_ms"], rc["p50_ms"]
    if decided >= 0.5 * p50:
        name = (
            f"**the operator**: p50 {_f(decided)} ms of the {_f(p50)} ms pass before it logs the "
            "create "
            "(the watch event, its queue and the reconcile)"
        )
    else:
        name = (
            f"**kubesim**: the operator logs the create after p50 {_f(decided)} ms of the "
            f"{_f(p50)} ms; "
            "the rest is kubesim's create and watch delivery"
        )
    return [
        "## Scale reaction",
        "",
        "One elastic job; `Worker.replicas` patched +1 through the scale subresource "
        f"{rc['steps']} times, "
        f"{r['args']['step_pause_seconds']} s apart; time from the PATCH until the new worker pod "
        "is on a "
        f"pod watch. Operator at {rc['client_flags']}.",
        "",
        *TABLE,
        _row("p50", f"{_f(p50)} ms", "", None),
        _row(
            "p99",
            f"{_f(rc['p99_ms'])} ms (max {_f(rc['max_ms'])} ms)",
            "< 30 ms at the defaults",
            rc["p99_ms"] < 30,
        ),
        _row(
            "PATCH to the operator's `create Pod` log line",
            f"p50 {_f(decided)} ms, p99 {_f(rc['operator_decided_p99_ms'])} ms",
            "",
            None,
        ),
        _row(
            "per step",
            f"{_f(rc['requests_per_step']['total'])} API requests "
            f"({_f(rc['requests_per_step']['writes'])} "
            f"writes); CPU {_f(op_cpu)} ms operator, {_f(sim_cpu)} ms kubesim",
            "",
            None,
        ),
        "",
        f"**Bottleneck:** {name}. The machine's CPU was {_f(rc['machine_busy_pct'], 0)} % in use "
        "meanwhile.",
        "",
    ]


def _discovery(r: dict[str, Any]) -> list[str]:
    d = r["discovery"]
    ann, cm = d["annotation"], d["configmap_only"]

    def arm(label: str, a: dict[str, Any]) -> str:
        c, m = a["configmap_s"], a["mounted_s"]
        cells = [
            f"{m['n']:.0f}",
            f"{_f(c['p50'], 2)} / {_f(c['max'], 2)}",
            f"{_f(m['p50'], 2)} / {_f(m['max'], 2)}",
        ]
        return f"| {label} | {' | '.join(cells)} |"

    return [
        "## Discovery: the launcher's mounted discover_hosts.sh after a scale-out",
        "",
        "**Headline: with the operator's launcher-pod annotation, a new worker reaches the "
        "launcher's "
        f"mounted script {_f(d['ratio_p50'], 0)}x sooner than with the ConfigMap alone (p50 "
        f"{_f(ann['mounted_s']['p50'], 2)} s against {_f(cm['mounted_s']['p50'], 2)} s).**",
        "",
        f"{ann['mounted_s']['n']:.0f} elastic jobs (the operator annotates their launcher pod "
        "after each "
        "change of the script, so the kubelet refreshes the volume at once) and "
        f"{cm['mounted_s']['n']:.0f} "
        "static jobs (the same ConfigMap update, no annotation: what the upstream operator does; "
        "no operator "
        "switch was needed) scaled from 2 to 3 workers, one PATCH each, all at the same moment in "
        "the same "
        f"run. kubesim's kubelet syncs volumes every {d['volume_sync_seconds']:g} s, jittered per "
        "pod by up "
        "to 50 %. Seconds from the PATCH (the new worker also has to start and turn Ready, "
        f"{r['args']['pod_seconds']} s each, before any ConfigMap lists it):",
        "",
        "| arm | jobs | ConfigMap lists it, p50 / max | mounted script lists it, p50 / max |",
        "|---|---|---|---|",
        arm("operator annotates the launcher", ann),
        arm("ConfigMap alone", cm),
        "",
        "**Bottleneck:** with the ConfigMap alone, the kubelet's periodic volume sync (from the "
        "ConfigMap to "
        "the mount is whatever is left of the pod's sync period); with the annotation, the new "
        "worker's own "
        "start and readiness, which come before the ConfigMap may list it.",
        "",
    ]


WRITES_CONSTANT = 50
"""The issue's bound on a big-job step: two writes per pod it changes plus this constant."""


def _bigjob(r: dict[str, Any]) -> list[str]:
    b = r["bigjob"]
    cr, si, so, kill = b["create"], b["scale_in"], b["scale_out"], b["kill"]

    def writes(step: dict[str, Any], pods: int) -> str:
        return _row(
            f"writes, {step.get('what', '')}".rstrip(", "),
            f"{step['writes']:.0f} for {pods} pods ({_f(step['writes'] / pods, 2)} a pod; "
            f"{step['event_writes']:.0f} Event writes apart)",
            f"<= 2 a pod + {WRITES_CONSTANT}",
            step["writes"] <= 2 * pods + WRITES_CONSTANT,
        )

    n, half = b["workers"], si["to"]
    slowest = max(
        ("listing after all Ready", cr["listed_after_ready_s"]),
        ("the scale-in's script edit", si["listed_s"]),
        ("the replacements' listing", kill["replacements_listed_s"]),
        key=lambda kv: kv[1],
    )
    return [
        f"## Big job: one elastic job of {n} workers",
        "",
        f"elasticPolicy {b['min_replicas']}..{n}, settleSeconds 1, scaleInGracePeriodSeconds 1, "
        "kubesim's timer runtime; times to the launcher's *mounted* `discover_hosts.sh`.",
        "",
        *TABLE,
        _row("create to all workers Ready", f"{_f(cr['all_ready_s'])} s", "", None),
        _row(
            "all Ready to all listed",
            f"{_f(cr['listed_after_ready_s'])} s (create to all listed {_f(cr['all_listed_s'])} s)",
            "<= 10 s",
            cr["listed_after_ready_s"] <= 10,
        ),
        writes({**cr, "what": "create"}, n),
        _row(
            "operator",
            f"CPU {_f(cr['operator_cpu_s'])} s for the create; RSS {_f(cr['operator_rss_mib'])} "
            f"MiB (peak {_f(cr['operator_peak_rss_mib'])} MiB)",
            "",
            None,
        ),
        _row(
            "ConfigMap",
            f"`hostfile` {cr['hostfile_bytes'] / 1024:.1f} KiB, `discover_hosts.sh` "
            f"{cr['discover_hosts_bytes'] / 1024:.1f} KiB, the object "
            f"{cr['config_map_bytes'] / 1024:.1f} KiB as JSON",
            "",
            None,
        ),
        _row(
            f"scale-in {n} -> {half}: removed hosts out of the script",
            f"{_f(si['listed_s'], 2)} s",
            "<= 2 s",
            si["listed_s"] <= 2,
        ),
        _row("scale-in: their pods gone", f"{_f(si['pods_gone_s'])} s", "", None),
        writes({**si, "what": "scale-in"}, si["changed_pods"]),
        _row(
            f"scale-out {half} -> {n}: all listed",
            f"{_f(so['listed_s'])} s ({_f(so['listed_after_ready_s'])} s after all Ready)",
            "",
            None,
        ),
        writes({**so, "what": "scale-out"}, so["changed_pods"]),
        _row(
            f"{kill['killed']} workers killed: replacements listed",
            f"{_f(kill['replacements_listed_s'])} s",
            "",
            None,
        ),
        writes({**kill, "what": "replacements"}, kill["killed"]),
        "",
        f"**Bottleneck:** the slowest step to the mount is {slowest[0]} ({_f(slowest[1], 2)} s). "
        f"The machine's CPU was {_f(b['machine_busy_pct'], 0)} % in use meanwhile.",
        "",
    ]


def _shared_shape(s: dict[str, Any]) -> str:
    """The cluster and jobs, and why the GPUs per node are what they are."""
    n, nodes, gpus = s["jobs"], s["nodes"], s["gpus_per_node"]
    replicas = s.get("gpu_replicas", 1)
    need, have = n * s["max_replicas"], nodes * gpus * replicas
    fit = "fill it exactly" if need == have else f"need {need:,} of its {have:,} GPUs"
    shape = f"{gpus} `nvidia.com/gpu`"
    if replicas > 1:
        shape = (
            f"{gpus} GPUs, each shared {replicas} ways by the NVIDIA device plugin's time-slicing "
            f"(`replicas: {replicas}`, {gpus * replicas} `nvidia.com/gpu` a node; kubesim's "
            f"`--gpu-replicas {replicas}`)"
        )
    why = ""
    if replicas > 1 and 2 * n > nodes * gpus:
        why = (
            f" An elastic job's minReplicas is below its maxReplicas, so at its maximum it runs at "
            f"least 2 workers of at least one GPU, and {n:,} jobs need at least {2 * n:,} GPUs: "
            f"on {nodes} x {gpus} = {nodes * gpus:,} no job could be back at its maximum. So the "
            "nodes share their GPUs, as clusters short of cards do."
        )
    return (
        f"{n:,} low-priority elastic jobs (PriorityClass `bench-low`; elasticPolicy "
        f"{s['min_replicas']}..{s['max_replicas']}, one GPU a worker, settleSeconds 1, the default "
        f"maxReplacements 10) created at their maximum on {nodes} kubesim nodes (timer runtime) "
        f"of {shape}: at their maximum they {fit}; launchers ask for no "
        f"GPU.{why} Then a wave of {s['wave_jobs']} high-priority static jobs (`bench-high`) of "
        f"{s['wave_workers']} one-GPU workers: the scheduler preempts elastic workers for them "
        "(each elastic job's PodDisruptionBudget, minAvailable 1, steers it to one worker a job). "
        "When every wave job is Running its launchers exit 0; the jobs succeed and their workers "
        "go (`cleanPodPolicy: Running`). An elastic job is at its maximum when both its workers "
        "are Ready and exactly they are listed in its ConfigMap's `discover_hosts.sh` (watches "
        "of pods, ConfigMaps and MPIJobs). Writes per preemption are the elastic jobs' own: the "
        "operator's logged writes of their objects and every MPIJob status write (read from the "
        "watch), from the wave's create until the operator was quiet after it, over the "
        "preempted workers; Event writes apart."
    )


def _shared(r: dict[str, Any]) -> list[str]:
    s = r["shared"]
    preempted, failed = s["preempted_workers"], s["failed_jobs"]
    kinds = ", ".join(f"{k} {v:.0f}" for k, v in s["elastic_writes_by_kind"].items()) or "none"
    ready, listed = s["last_replacement_ready_s"], s["listed_after_last_ready_s"]
    if ready >= listed:
        bottleneck = (
            f"**kubesim's scheduling of the replacements**: the last one was Ready {_f(ready)} s "
            "after the wave's end (the wave's pods terminate, the Pending replacements wait out "
            "their scheduling back-off, 1 s doubling to 10 s, then start and turn Ready in "
            f"{r['args']['pod_seconds']} s each); the operator listed it {_f(listed, 2)} s later"
        )
    else:
        bottleneck = (
            f"**the operator**: the last replacement was Ready {_f(ready)} s after the wave's "
            f"end and listed {_f(listed, 2)} s later (settleSeconds paces each job's changes)"
        )
    gpus = s["wave_jobs"] * s["wave_workers"]
    return [
        f"## Shared cluster: {s['jobs']:,} elastic jobs on {s['nodes']} nodes, a wave of "
        "preemption",
        "",
        _shared_shape(s),
        "",
        *TABLE,
        _row("create to every elastic job at its maximum", f"{_f(s['fill_s'])} s", "", None),
        _row(
            f"wave: {s['wave_jobs']} jobs x {s['wave_workers']} ({gpus} `nvidia.com/gpu`) Running",
            f"{_f(s['wave_running_s'])} s after their create; {preempted} elastic workers "
            f"preempted, of {s['jobs_hit']} jobs; "
            f"{s['scheduler_preemption_events']:.0f} `Preempted` events",
            "",
            None,
        ),
        _row(
            "wave's end to every elastic job back at its maximum",
            f"{_f(s['back_at_max_s'])} s",
            "",
            None,
        ),
        _row("elastic jobs failed", f"{failed}", "0", failed == 0),
        _row(
            "elastic jobs that lost more workers than their budget allows (one)",
            f"{s['jobs_hit_twice']}",
            "0",
            s["jobs_hit_twice"] == 0,
        ),
        _row(
            "losses in the elastic jobs' status",
            f"{s['disruptions']} disruptions, {s['replacements']} replacements",
            "every preemption a disruption; no replacement (maxReplacements untouched)",
            s["replacements"] == 0 and s["disruptions"] == preempted,
        ),
        _row(
            "operator writes per preemption",
            f"{_f(s['writes_per_preemption'])} ({s['elastic_writes']:.0f} for {preempted}: "
            f"{kinds}); all its writes, the wave's jobs' too: {s['writes']:.0f}, "
            f"{s['event_writes']:.0f} Event writes apart",
            "",
            None,
        ),
        _row(
            "operator",
            f"CPU {_f(s['operator_cpu_s'])} s from the wave until quiet "
            f"({_f(s['wave_to_quiet_s'])} s); RSS {_f(s['operator_rss_mib'])} MiB (peak "
            f"{_f(s['operator_peak_rss_mib'])} MiB)",
            "",
            None,
        ),
        _row(
            "kubesim",
            f"CPU {_f(s['kubesim_cpu_s'])} s, of it the scheduler {_f(s['scheduler_cpu_s'], 2)} s "
            f"in {s['scheduler_syncs']:,} attempts",
            "",
            None,
        ),
        "",
        f"**Bottleneck of the recovery:** {bottleneck}. The machine's CPU was "
        f"{_f(s['machine_busy_pct'], 0)} % in use meanwhile.",
        "",
    ]


def _scheduling(r: dict[str, Any]) -> list[str]:
    sc = r["scheduling"]
    now, base, shaped = sc["default"], sc["baseline"], sc["shaped"]
    jobs, workers = int(shaped["jobs"]), int(shaped["workers"])
    overhead = 100 * (now["cpu_s"] / base["cpu_s"] - 1) if base["cpu_s"] else math.nan
    per_pod = shaped["scheduler_cpu_s"] / shaped["pods"] * 1e6 if shaped["pods"] else math.nan
    share = (
        100 * shaped["scheduler_cpu_s"] / shaped["sim_cpu_s"] if shaped["sim_cpu_s"] else math.nan
    )

    def runs(arm: dict[str, Any]) -> str:
        return ", ".join(_f(x["sim_cpu_s"]) for x in arm["runs"])

    return [
        f"## Scheduling: kubesim's fan-in of {jobs:,} x {workers} on clusters with limits",
        "",
        "kubesim alone (a bare client plays the operator's writes, `bench/kubesim_fanin.py`). "
        f"The default cluster (one node that limits nothing) now and at commit "
        f"`{sc['baseline_commit']}`, before kubesim had nodes, a scheduler, preemption, gangs, "
        f"node lifecycle and disruption budgets: {sc['rounds']} alternating rounds, medians. "
        f"Then a cluster of {int(shaped['nodes'])} nodes of `{shaped['allocatable']}` each, "
        "where the scheduler places every pod (filters, score, binding write).",
        "",
        *TABLE,
        _row(
            "kubesim CPU, default cluster: now / before the scheduler",
            f"{_f(now['cpu_s'])} s / {_f(base['cpu_s'])} s ({overhead:+.1f} %; runs: "
            f"{runs(now)} / {runs(base)} s)",
            "at most +10 %",
            overhead <= 10,
        ),
        _row(
            "until every pod is Running, default cluster: now / before",
            f"{_f(now['running_s'])} s / {_f(base['running_s'])} s",
            "",
            None,
        ),
        _row(
            f"kubesim CPU, {int(shaped['nodes'])} nodes",
            f"{_f(shaped['sim_cpu_s'])} s; every pod Running after {_f(shaped['all_running_s'])} s",
            "",
            None,
        ),
        _row(
            f"scheduler CPU per pod, {int(shaped['nodes'])} nodes",
            f"{_f(per_pod, 0)} µs ({int(shaped['scheduler_syncs']):,} attempts for "
            f"{int(shaped['pods']):,} pods)",
            "",
            None,
        ),
        "",
        f"**Bottleneck:** the scheduler took {_f(share, 0)} % of kubesim's CPU on "
        f"{int(shaped['nodes'])} nodes; the rest is what the default cluster spends too "
        "(admission, the kubelet, the Job controller, watch delivery).",
        "",
    ]


def _profiles(r: dict[str, Any]) -> list[str]:
    lines = [
        "## Profiles of the fan-in",
        "",
        "py-spy sampled both processes from outside (`--nonblocking --gil`, 50 Hz: only the thread "
        "holding "
        "the GIL, so time blocked in a system call is not counted) from before the first create "
        "until all "
        "jobs were Running. Shares are of the busy samples (any left in the event loop's select or "
        "idle "
        "threads are dropped); inclusive lists only this project's functions. The flame graphs "
        "below "
        "are drawn from the collapsed stacks, which stay beside them (`*.pyspy.txt`, for any flame "
        "graph "
        "tool; git ignores them).",
        "",
    ]
    profiles = r["scale"]["fan_in"]["profiles"] or {"profiles": {"error": "--no-profile"}}
    for name, prof in profiles.items():
        if "error" in prof:
            lines += [f"{name}: not profiled: {prof['error']}.", ""]
            continue
        lines += [
            f"### {name}: {prof['busy']:,} busy of {prof['samples']:,} samples (`{prof['file']}`)",
            "",
        ]
        lines += ["| self | % | inclusive (this project) | % |", "|---|---|---|---|"]
        rows = max(len(prof["self"]), len(prof["inclusive"]))
        pad = [("", math.nan)] * rows
        for (own, a), (inc, b) in zip(
            [*prof["self"], *pad][:rows], [*prof["inclusive"], *pad][:rows], strict=True
        ):
            lines.append(f"| `{own}` | {_f(100 * a)} | `{inc}` | {_f(100 * b)} |")
        lines.append("")
    return lines


def render(r: dict[str, Any], images: list[str], plots: Path) -> str:
    def img(name: str, alt: str) -> list[str]:
        return [f"![{alt}]({plots / name})", ""] if name in images else []

    lines = ["# Scale benchmark report", "", *_machine(r), ""]
    lines += _scale(r) + img("fan_in_running.png", "the fan-in pipeline over time")
    lines += _cost_per_job(r)
    lines += _memory(r) + img("rss_vs_jobs.png", "RSS against Running jobs")
    lines += _heap(r)
    lines += _reaction(r) + img("scale_reaction.png", "scale reaction per step")
    lines += _discovery(r) + img("discovery.png", "discovery comparison")
    lines += _scheduling(r) if "scheduling" in r else []
    lines += _bigjob(r) if "bigjob" in r else []
    lines += _shared(r) if "shared" in r else []
    lines += _profiles(r)
    for process in r["scale"]["fan_in"]["profiles"]:
        lines += img(f"flame_{process}.png", f"flame graph of {process}")
    walls = ", ".join(f"{k} {_f(r[k]['wall_s'], 0)} s" for k in SCENARIOS if k in r)
    lines += [f"Scenario wall times: {walls}.", ""]
    return "\n".join(lines)
