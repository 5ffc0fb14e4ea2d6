"""What the simulated-controller tests share besides fixtures (those are in conftest.py): type
lookups."""

from __future__ import annotations

from kubesim.app import KubeSim
from kubesim.registry import ResourceType


def rt(sim: KubeSim, api_version: str, kind: str) -> ResourceType:
    found = sim.cluster.registry.by_kind(api_version, kind)
    assert found is not None
    return found
