"""The PNG plots of bench/REPORT.md, drawn with matplotlib's Agg backend (no display needed)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib
import profiling

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # after the backend is chosen
from matplotlib.axes import Axes
from matplotlib.ticker import ScalarFormatter

MB = 1.048576
"""MiB -> MB (10^6 bytes), the unit of the issue's targets."""


def _fan_in(ax: Axes, r: dict[str, Any]) -> None:
    fan = r["scale"]["fan_in"]
    curves = [
        ("workers_created", "worker pods created (operator log)"),
        ("launchers_created", "launcher Jobs created (operator log)"),
        ("running", "jobs Running (watch)"),
    ]
    for key, label in curves:
        times = sorted(fan["timeline_s"][key])
        if times:
            ax.plot(
                times,
                [100 * (i + 1) / len(times) for i in range(len(times))],
                drawstyle="steps-post",
                label=label,
            )
    ax.set_xlabel("seconds from the first create request")
    ax.set_xlim(left=0)
    ax.set_ylim(0, 102)
    ax.set_ylabel("% done")
    ax.set_title(f"Fan-in: {fan['jobs']:,} jobs x {fan['workers']} workers, created at once")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)


def _reaction(ax: Axes, r: dict[str, Any]) -> None:
    rc = r["reaction"]
    ms = [1000 * t for t in rc["latencies_s"]]
    ax.plot(range(1, len(ms) + 1), ms, "o-", label="each step")
    ax.axhline(rc["p50_ms"], color="tab:green", ls="--", label=f"p50 {rc['p50_ms']:.1f} ms")
    ax.axhline(rc["p99_ms"], color="tab:orange", ls="--", label=f"p99 {rc['p99_ms']:.1f} ms")
    ax.axhline(30, color="tab:red", ls=":", label="target p99 < 30 ms")
    ax.set_xlabel("step (Worker.replicas + 1)")
    ax.set_ylabel("ms from the PATCH to the new worker pod")
    ax.set_title(f"Scale reaction, one elastic job, {rc['client_flags']}")
    ax.set_ylim(bottom=0)
    ax.legend()
    ax.grid(alpha=0.3)


def _discovery(ax: Axes, r: dict[str, Any]) -> None:
    d = r["discovery"]
    arms = [
        ("annotation", "operator annotates\nthe launcher"),
        ("configmap_only", "ConfigMap alone"),
    ]
    for i, (key, label) in enumerate(arms):
        mounted, cm = d[key]["mounted_samples_s"], d[key]["configmap_samples_s"]
        ax.scatter(
            cm,
            [i + 0.12] * len(cm),
            s=40,
            marker="x",
            color="grey",
            label="ConfigMap" if not i else None,
        )
        ax.scatter(
            mounted,
            [i] * len(mounted),
            s=50,
            alpha=0.7,
            label=f"mounted ({label.splitlines()[0]}...)",
        )
    ax.set_yticks(range(len(arms)), [label for _, label in arms])
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel("seconds from the scale-out until it lists the new worker (log scale)")
    ax.set_title(
        f"Discovery: p50 ratio {d['ratio_p50']:.0f}x (kubelet volume sync "
        f"{d['volume_sync_seconds']:g} s)"
    )
    ax.set_ylim(-0.5, len(arms) - 0.5)
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3, axis="x")


def _rss(ax: Axes, r: dict[str, Any]) -> None:
    points, s = r["memory"]["points"], r["scale"]
    jobs = [p["jobs"] for p in points]
    ax.plot(jobs, [MB * p["operator_rss_mib"] for p in points], "o-", label="operator")
    ax.plot(jobs, [MB * p["kubesim_rss_mib"] for p in points], "s-", label="kubesim")
    ax.axhline(200, color="tab:red", ls=":", label="operator target at 1,000 x 8: 200 MB")
    ax.axhline(85, color="tab:purple", ls=":", label="operator idle target: 85 MB")
    fan = s["fan_in"]
    ax.scatter(
        [fan["jobs"]],
        [MB * fan["operator_rss_mib"]],
        marker="*",
        s=120,
        color="tab:blue",
        label="operator after the fan-in",
    )
    restart = MB * s["restart"]["operator_rss_mib"]
    ax.scatter(
        [fan["jobs"]],
        [restart],
        marker="^",
        s=60,
        color="tab:cyan",
        label="operator after a restart",
    )
    ax.set_xlabel(f"jobs Running ({r['memory']['workers']} workers + a launcher each)")
    ax.set_ylabel("RSS, MB")
    ax.set_title("Memory against jobs, created in waves")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)


@dataclass
class _Node:
    samples: int = 0
    children: dict[str, _Node] = field(default_factory=dict)


def _colour(frame: str) -> str:
    path = frame.rsplit(" (", 1)[-1]
    if path.startswith("mpi_operator/"):
        return "#5b9bd5"
    if path.startswith("kubesim/"):
        return "#ed7d31"
    return (
        "#a5d6a7"
        if "/" in path and not path.startswith(("asyncio/", "json/", "logging/"))
        else "#d9d9d9"
    )


def flame_graph(collapsed: str, title: str, out: Path) -> None:
    """An icicle-style flame graph of the busy stacks: one bar per frame, as wide as its samples,
    callers above callees; the frames every stack shares (the command line, the event loop) are cut
    off the top. Blue: the operator's code, orange: kubesim's, green: libraries, grey: the standard
    library."""
    root = _Node()
    for frames, n in profiling.stacks(collapsed):
        if not profiling.is_busy(frames):
            continue
        root.samples += n
        node = root
        for f in frames:
            node = node.children.setdefault(f, _Node())
            node.samples += n
    name = "all busy samples"
    while len(root.children) == 1:  # the shared entry frames
        name, root = next(iter(root.children.items()))
    total = max(root.samples, 1)
    fig, ax = plt.subplots(figsize=(16, 9), dpi=100)
    depth_max = 0

    def draw(node: _Node, label: str, x: float, depth: int) -> None:
        nonlocal depth_max
        width = node.samples / total
        if width < 0.002:
            return
        depth_max = max(depth_max, depth)
        ax.barh(
            -depth,
            width,
            left=x,
            height=0.95,
            color=_colour(label),
            edgecolor="white",
            linewidth=0.3,
        )
        if width > 0.04:
            chars = int(width * 230)
            ax.text(x + 0.002, -depth, label[:chars], va="center", fontsize=6.5, clip_on=True)
        for child_label, child in sorted(node.children.items()):
            draw(child, child_label, x, depth + 1)
            x += child.samples / total

    draw(root, f"below {name}", 0.0, 0)
    ax.set_xlim(0, 1)
    ax.set_ylim(-depth_max - 0.6, 0.6)
    ax.set_yticks([])
    ax.set_xlabel(f"share of {root.samples:,} busy samples (py-spy, 50 Hz, thread holding the GIL)")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


PLOTS: dict[str, Callable[[Axes, dict[str, Any]], None]] = {
    "fan_in_running.png": _fan_in,
    "scale_reaction.png": _reaction,
    "discovery.png": _discovery,
    "rss_vs_jobs.png": _rss,
}


def render(results: dict[str, Any], out: Path) -> list[str]:
    """Writes every plot into `out` (flame graphs for the profiles there); returns the file
    names."""
    for name, draw in PLOTS.items():
        fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
        draw(ax, results)
        fig.tight_layout()
        fig.savefig(out / name)
        plt.close(fig)
    images = list(PLOTS)
    fan = results["scale"]["fan_in"]
    for process, prof in fan["profiles"].items():
        if "file" in prof and (out / prof["file"]).exists():
            title = (
                f"{process} during the fan-in of {fan['jobs']:,} jobs x {fan['workers']} workers"
            )
            flame_graph((out / prof["file"]).read_text(), title, out / f"flame_{process}.png")
            images.append(f"flame_{process}.png")
    return images
