"""DefaultPreemption's choices as data: victims on one node, budgets, the node picked, eligibility
and the `preemption:` words when nothing helps."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.admission.builtin import selector_matches
from kubesim.scheduling import messages, preemption
from kubesim.scheduling.filters import Failure, NodeInfo
from kubesim.scheduling.preemption import (
    Budget,
    PodOnNode,
    Victims,
    eligible,
    pick_node,
    preempt,
    select_victims,
    split_by_budgets,
)

CPU4 = {"cpu": 4000, "memory": 8 << 30, "pods": 110}


def on(name: str, priority: int, cpu: int, start: str = "", **labels: str) -> PodOnNode:
    return PodOnNode("default", name, priority, {"cpu": cpu}, labels, start)


def node(name: str, pods: list[PodOnNode]) -> NodeInfo:
    used = sum(p.requests["cpu"] for p in pods)
    return NodeInfo(name, allocatable=dict(CPU4), requested={"cpu": used}, pods=len(pods))


def names(outcome: Victims | Failure) -> list[str]:
    assert isinstance(outcome, Victims), outcome
    return [p.name for p in outcome.pods]


@pytest.mark.parametrize(
    ("pods", "wanted", "priority", "victims"),
    [
        # Only as many as needed, the least important first to go.
        ([on("a", 1, 1000), on("b", 2, 1000), on("c", 3, 2000)], 1000, 10, ["a"]),
        ([on("a", 1, 1000), on("b", 2, 1000), on("c", 3, 2000)], 2000, 10, ["b", "a"]),
        # Equal priority is not lower: never a victim.
        ([on("a", 10, 4000)], 1000, 10, None),
        # A larger lower-priority pod goes rather than two smaller ones when reprieving from the
        # top keeps the smaller ones.
        ([on("big", 1, 2000), on("s1", 5, 1000), on("s2", 5, 1000)], 2000, 10, ["big"]),
        # Same priority: the later started is less important, so it goes first.
        (
            [
                on("old", 1, 2000, "2024-01-01T00:00:00Z"),
                on("new", 1, 2000, "2024-01-02T00:00:00Z"),
            ],
            2000,
            10,
            ["new"],
        ),
    ],
    ids=["one", "two-lowest", "equal-priority", "reprieve-from-top", "latest-start-goes"],
)
def test_victims_on_one_node(
    pods: list[PodOnNode], wanted: int, priority: int, victims: list[str] | None
) -> None:
    outcome = select_victims({}, {"cpu": wanted}, priority, node("n", pods), pods)
    if victims is None:
        assert outcome == Failure((messages.NO_VICTIMS,), resolvable=False)
    else:
        assert names(outcome) == victims


def test_a_pod_too_big_even_on_an_emptied_node_reports_the_filter() -> None:
    pods = [on("a", 1, 1000)]
    outcome = select_victims({}, {"cpu": 8000}, 10, node("n", pods), pods)
    assert outcome == Failure(("Insufficient cpu",), resolvable=True)


def test_budget_violating_victims_are_reprieved_first_and_counted() -> None:
    pods = [on("guarded", 1, 2000, app="db"), on("free", 2, 2000)]
    budget = Budget("default", {"matchLabels": {"app": "db"}}, disruptions_allowed=0)
    outcome = select_victims({}, {"cpu": 2000}, 10, node("n", pods), pods, [budget])
    # Without the budget "guarded" (lower priority) would go; with it, "free" goes instead.
    assert names(outcome) == ["free"]
    assert isinstance(outcome, Victims)
    assert outcome.pdb_violations == 0
    outcome = select_victims({}, {"cpu": 4000}, 10, node("n", pods), pods, [budget])
    assert isinstance(outcome, Victims)
    assert outcome.pdb_violations == 1


@pytest.mark.parametrize(
    ("budget", "violating"),
    [
        (Budget("default", {"matchLabels": {"app": "db"}}, 1), ["b"]),
        (Budget("default", {"matchLabels": {"app": "db"}}, 2), []),
        (Budget("other", {"matchLabels": {"app": "db"}}, 0), []),
        (Budget("default", {}, 0), []),  # an empty selector selects nothing here
        (Budget("default", {"matchLabels": {"app": "db"}}, 0, frozenset({"a"})), ["b"]),
    ],
    ids=["allowance-used-up", "enough", "other-namespace", "empty-selector", "already-disrupted"],
)
def test_split_by_budgets(budget: Budget, violating: list[str]) -> None:
    pods = [on("a", 1, 1, app="db"), on("b", 1, 1, app="db")]
    bad, good = split_by_budgets(pods, [budget])
    assert [p.name for p in bad] == violating
    assert len(bad) + len(good) == 2


def test_a_pod_is_matched_only_against_budgets_that_could_select_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One budget per job, as the operator makes them: a pod's budgets are found by its labels, not
    by trying every budget of the cluster (a preemption's cost grew with jobs squared)."""
    calls = []

    def counted(selector: dict[str, Any], labels: dict[str, str]) -> bool:
        calls.append(selector)
        return selector_matches(selector, labels)

    monkeypatch.setattr(preemption, "selector_matches", counted)
    budgets = [
        Budget("default", {"matchLabels": {"job": f"j{i}", "role": "w"}}, 0) for i in range(50)
    ]
    budgets.append(
        Budget("default", {"matchExpressions": [{"key": "job", "operator": "Exists"}]}, 1)
    )
    pods = [on("a", 1, 1, job="j7", role="w"), on("b", 1, 1, job="j7", role="w")]
    bad, good = split_by_budgets(pods, budgets)
    assert [p.name for p in bad] == ["a", "b"]  # j7's budget allows none; the other one, one
    assert good == []
    assert len(calls) == 2 * 2


def v(node: str, *pods: tuple[int, str], violations: int = 0) -> Victims:
    return Victims(
        node,
        tuple(PodOnNode("d", f"{node}{i}", p, {}, {}, s) for i, (p, s) in enumerate(pods)),
        violations,
    )


@pytest.mark.parametrize(
    ("candidates", "picked"),
    [
        ([v("a", (1, ""), violations=1), v("b", (5, ""))], "b"),
        ([v("a", (5, "")), v("b", (1, ""), (1, ""))], "b"),
        ([v("a", (3, ""), (3, "")), v("b", (3, ""), (1, ""))], "b"),
        ([v("a", (3, ""), (-5, "")), v("b", (3, ""))], "b"),
        ([v("a", (3, "2024-01-01T00:00:00Z")), v("b", (3, "2024-01-02T00:00:00Z"))], "b"),
        ([v("a", (3, "")), v("b", (3, ""))], "a"),
        ([v("a", (3, "")), v("b")], "b"),
    ],
    ids=[
        "fewest-violations",
        "lowest-highest-priority",
        "smallest-sum",
        "fewest-victims",
        "latest-start",
        "first-on-ties",
        "no-victims",
    ],
)
def test_pick_node(candidates: list[Victims], picked: str) -> None:
    assert pick_node(candidates).node == picked


@pytest.mark.parametrize(
    ("spec", "nominated", "failure", "terminating", "expected"),
    [
        ({"preemptionPolicy": "Never"}, "", None, [], messages.NOT_ELIGIBLE),
        ({}, "n", Failure(("Insufficient cpu",), True), [1], messages.TERMINATING_ON_NOMINATED),
        ({}, "n", Failure(("Insufficient cpu",), True), [10], ""),
        ({}, "n", Failure(("x",), False), [1], ""),
        ({}, "", None, [1], ""),
    ],
    ids=["never", "victim-terminating", "higher-terminating", "node-now-unfit", "not-nominated"],
)
def test_eligibility(
    spec: dict[str, Any],
    nominated: str,
    failure: Failure | None,
    terminating: list[int],
    expected: str,
) -> None:
    assert eligible(spec, 10, nominated, failure, terminating) == expected


def test_preempt_over_the_cluster_and_its_words_when_nothing_helps() -> None:
    low = [on("low", 1, 4000)]
    high = [on("high", 100, 4000)]
    nodes = [node("a", high), node("b", low), NodeInfo("c", allocatable=dict(CPU4))]
    failures = {
        "a": Failure(("Insufficient cpu",), True),
        "b": Failure(("Insufficient cpu",), True),
        "c": Failure(("node(s) were unschedulable",), False),
    }
    chosen, _ = preempt({}, {"cpu": 1000}, 10, nodes, failures, {"a": high, "b": low})
    assert chosen is not None
    assert (chosen.node, names(chosen)) == ("b", ["low"])
    chosen, statuses = preempt({}, {"cpu": 1000}, 0, nodes, failures, {"a": high, "b": low})
    assert chosen is None
    assert messages.preemption_failed(3, statuses) == (
        "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod."
    )
    chosen, statuses = preempt({}, {"cpu": 9000}, 10, nodes, failures, {"a": high, "b": low})
    assert messages.preemption_failed(3, statuses) == (
        "preemption: 0/3 nodes are available: 1 Insufficient cpu, "
        "1 No preemption victims found for incoming pod, 1 Preemption is not helpful for "
        "scheduling."
    )
