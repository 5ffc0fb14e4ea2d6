"""NodeResourcesFit's LeastAllocated score (pkg/scheduler/framework/plugins/noderesources), over cpu
and memory (weight 1 each, the default profile) and every extended resource the pod requests, and
the choice of a node: the highest score, ties broken by name so that placement is deterministic (the
real scheduler picks among ties at random).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kubesim.scheduling import resources as res
from kubesim.scheduling.filters import NodeInfo

MAX_SCORE = 100
_NATIVE = (res.CPU, res.MEMORY, res.EPHEMERAL_STORAGE)


def least_allocated(scored: Mapping[str, int], node: NodeInfo) -> int:
    """0-100: how much of the node stays free once the pod (`scored`: its nonzero requests) is on
    it."""
    extended = (n for n, v in scored.items() if v > 0 and n not in _NATIVE)
    names = [res.CPU, res.MEMORY, *sorted(extended)]
    total = 0
    for name in names:
        capacity = node.allocatable.get(name, 0)
        requested = node.scored.get(name, 0) + scored.get(name, 0)
        if node.unlimited or capacity == 0:
            total += MAX_SCORE if node.unlimited else 0
            continue
        if requested <= capacity:
            total += (capacity - requested) * MAX_SCORE // capacity
    return total // len(names)


def pick(scored: Mapping[str, int], feasible: Sequence[NodeInfo]) -> NodeInfo:
    """The best of the feasible nodes (at least one)."""
    return min(feasible, key=lambda node: (-least_allocated(scored, node), node.name))
