"""The words of a failed scheduling attempt: `FitError.Error()` (pkg/scheduler/framework/types.go)
and the preemption suffix DefaultPreemption's PostFilter adds to it.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubesim.scheduling.filters import Failure

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_ELIGIBLE = "preemption: not eligible due to preemptionPolicy=Never."
TERMINATING_ON_NOMINATED = (
    "preemption: not eligible due to a terminating pod on the nominated node."
)


def _counted(counts: Mapping[str, int]) -> str:
    # Sorted as strings, count first, as the scheduler sorts them ("10 x" before "2 y").
    return ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items()))


def fit_error(total_nodes: int, failures: Mapping[str, Failure], post_filter: str = "") -> str:
    """`0/N nodes are available: <count reason, ...>.` then the PostFilter's message, if any."""
    counts: dict[str, int] = {}
    for failure in failures.values():
        for reason in failure.reasons:
            counts[reason] = counts.get(reason, 0) + 1
    message = f"0/{total_nodes} nodes are available: {_counted(counts)}."
    return f"{message} {post_filter}" if post_filter else message


def preemption_message(total_nodes: int, failures: Mapping[str, Failure]) -> str:
    """What preemption reports when it finds no candidate, from each node's filter failure: nodes
    whose failure removing pods cannot cure are not helpful, the rest had none to remove."""
    statuses = {
        name: NOT_HELPFUL if not failure.resolvable else NO_VICTIMS
        for name, failure in failures.items()
    }
    return preemption_failed(
        total_nodes, {n: Failure((r,), resolvable=False) for n, r in statuses.items()}
    )


def preemption_failed(total_nodes: int, statuses: Mapping[str, Failure]) -> str:
    """`preemption: 0/N nodes are available: ...` from what preemption found on each node (not
    helpful, no victims, or the filter failure left once every lower-priority pod is gone)."""
    counts: dict[str, int] = {}
    for status in statuses.values():
        for reason in status.reasons:
            counts[reason] = counts.get(reason, 0) + 1
    return f"preemption: 0/{total_nodes} nodes are available: {_counted(counts)}."
