"""The words of a failed scheduling attempt: `FitError.Error()` (pkg/scheduler/framework/types.go)
and the preemption suffix DefaultPreemption's PostFilter adds to it.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubesim.scheduling.filters import Failure

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_ELIGIBLE = "preemption: not eligible due to preemptionPolicy=Never."


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
    """What preemption reports when it finds no victims: nodes whose failure removing pods cannot
    cure are not helpful, the rest had none to remove. The hook a preemption implementation
    replaces with its own outcome."""
    counts: dict[str, int] = {}
    for failure in failures.values():
        reason = NO_VICTIMS if failure.resolvable else NOT_HELPFUL
        counts[reason] = counts.get(reason, 0) + 1
    return f"preemption: 0/{total_nodes} nodes are available: {_counted(counts)}."
