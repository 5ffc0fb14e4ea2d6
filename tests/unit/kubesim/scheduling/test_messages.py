"""The FailedScheduling message: kube-scheduler's FitError and the preemption suffix."""

from __future__ import annotations

from kubesim.scheduling.filters import UNSCHEDULABLE, Failure
from kubesim.scheduling.messages import fit_error, preemption_message


def test_reasons_are_counted_and_sorted_as_strings() -> None:
    failures = {
        "a": Failure((UNSCHEDULABLE,), resolvable=False),
        "b": Failure(("Insufficient cpu", "Insufficient nvidia.com/gpu"), resolvable=True),
        "c": Failure(("Insufficient nvidia.com/gpu",), resolvable=True),
    }
    assert fit_error(3, failures, preemption_message(3, failures)) == (
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable, "
        "2 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: "
        "1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming "
        "pod."
    )


def test_counts_sort_as_text_as_go_sorts_them() -> None:
    failures = {f"n{i}": Failure(("Insufficient cpu",), resolvable=True) for i in range(10)}
    failures["x"] = Failure(("Too many pods",), resolvable=True)
    failures["y"] = Failure(("Too many pods",), resolvable=True)
    assert (
        fit_error(12, failures) == "0/12 nodes are available: 10 Insufficient cpu, 2 Too many pods."
    )
