"""The README's first command: `mpi-operator demo` runs to a zero exit and shows its timeline, in
100 columns; so does its second scene, `--scene shared-cluster`, with the story's key lines."""

from __future__ import annotations

import re
import subprocess
import sys

from operator_testing import source_env


def _demo(*args: str) -> subprocess.CompletedProcess[str]:
    """`mpi-operator demo *args`, which must exit 0 with every line in 100 columns."""
    # The timeout is a ceiling for a hung demo, not a speed requirement: the demo bounds each of its
    # steps itself (exit 1, saying which).
    result = subprocess.run(
        [sys.executable, "-m", "mpi_operator", "demo", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=source_env(),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    too_wide = [line for line in result.stdout.splitlines() if len(line) > 100]
    assert not too_wide, too_wide
    return result


def test_demo_scales_out_and_in_and_exits_zero() -> None:
    result = _demo()
    lines = result.stdout.splitlines()
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


def _steps(lines: list[str]) -> dict[str, list[str]]:
    """Each timeline step of the shared-cluster scene -> its detail lines, a wrapped detail joined
    into one line (`nodes   kubesim-1 [EE] ...`, `event   Preempted ...`)."""
    steps: dict[str, list[str]] = {}
    details: list[str] = []
    for line in lines:
        step = re.match(r"^ *\d+\.\ds  (.*)$", line)
        if step:
            details = steps.setdefault(step.group(1), [])
        elif re.match(r"^ {9}[a-z]+ +\S", line):
            details.append(line.strip())
        elif line.startswith(" " * 17) and details:
            details[-1] += " " + line.strip()
    return steps


def _detail(details: list[str], label: str) -> list[str]:
    return [d.split(None, 1)[1] for d in details if d.split(None, 1)[0] == label]


def _lost(line: str, reason: str) -> int:
    """How many hosts a `lost` line lists as disruptions for `reason`; 0 when it says otherwise."""
    prefix = f"Disruption ({reason}): "
    return len(line.removeprefix(prefix).split()) if line.startswith(prefix) else 0


def _events(steps: dict[str, list[str]], step: str) -> list[str]:
    """The events shown at `step` and at the next step that shows any: the operator records its
    events in the background, so one may be written just after the step's state was seen."""
    names = list(steps)
    later = [name for name in names[names.index(step) + 1 :] if steps[name]][:1]
    return [e for name in [step, *later] for e in _detail(steps[name], "event")]


def test_shared_cluster_scene_tells_preemption_regrowth_drain_and_dead_node() -> None:
    result = _demo("--scene", "shared-cluster")
    print(result.stdout)  # pytest shows it when an assertion below fails
    lines = result.stdout.splitlines()
    assert "terminationGracePeriodSeconds is 1s (default 30s)" in result.stdout
    steps = _steps(lines)

    full = steps["elastic fills the 6 GPUs"]
    assert _detail(full, "nodes") == ["kubesim-1 [EE]  kubesim-2 [EE]  kubesim-3 [EE]"]
    assert _detail(full, "hosts") == [" ".join(f"worker-{i}" for i in range(6))]

    # The preemption: two GPUs go to the urgent job, the elastic job trains on four and its two
    # replacements wait Pending, in the scheduler's and the operator's words.
    preempted = steps["urgent preempts 2; elastic trains on 4"]
    (nodes,) = _detail(preempted, "nodes")
    assert (nodes.count("U"), nodes.count("E")) == (2, 4), nodes
    assert nodes.endswith("2 elastic Pending"), nodes
    assert len(_detail(preempted, "hosts")[0].split()) == 4, preempted
    events = _events(steps, "urgent preempts 2; elastic trains on 4")
    assert sum(e.startswith("Preempted pod/elastic-worker-") for e in events) == 2, events
    (lost,) = _detail(preempted, "lost")
    assert _lost(lost, "PreemptionByScheduler") == 2, lost
    disrupted = [e for e in events if e.startswith("WorkerDisrupted mpijob/elastic")]
    assert len(disrupted) == 2, events
    assert all("(PreemptionByScheduler)" in e for e in disrupted), events
    assert all("not counted against maxReplacements" in e for e in disrupted), events
    assert any(
        e.startswith("WorkersPending mpijob/elastic: 2/6 workers are Pending") for e in events
    )
    assert any("Insufficient nvidia.com/gpu" in e for e in events), events

    # The regrowth, under fresh host names.
    back = steps["urgent succeeded; elastic back to 6"]
    hosts = _detail(back, "hosts")[0].split()
    assert (len(hosts), sum(h.endswith("-r1") for h in hosts)) == (6, 2), hosts

    # The drain goes down to minReplicas and no further.
    drain_step = "the drain stops at the budget: 3 = minReplicas"
    drained = steps[drain_step]
    assert len(_detail(drained, "hosts")[0].split()) == 3, drained
    assert "cordoned" in _detail(drained, "nodes")[0], drained
    (refusal,) = _detail(drained, "drain")
    assert refusal.endswith("Cannot evict pod as it would violate the pod's disruption budget.")
    # The job's status says why each worker went; its events may be held back by then (client-go's
    # spam filter lets 25 through per object).
    (lost,) = _detail(drained, "lost")
    assert _lost(lost, "EvictionByEvictionAPI") == 3, lost
    assert len(_detail(steps["elastic back to 6 on the uncordoned nodes"], "hosts")[0].split()) == 6

    # The dead node: its workers leave discovery and the taint manager deletes them.
    dead_step = next(step for step in steps if "NotReady, its workers deleted" in step)
    dead = steps[dead_step]
    assert "NotReady" in _detail(dead, "nodes")[0], dead
    assert len(_detail(dead, "hosts")[0].split()) == 4, dead
    (lost,) = _detail(dead, "lost")
    assert _lost(lost, "DeletionByTaintManager") == 2, lost
    assert len(_detail(steps["elastic back to 6"], "hosts")[0].split()) == 6
    assert "demo finished" in lines[-1]
