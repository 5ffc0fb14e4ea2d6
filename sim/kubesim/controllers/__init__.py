"""The controllers a cluster runs, simulated: kubelet, Job controller, garbage collector, namespaces.

CONTRACT STUB written by the lead; the kubesim controllers helper fills it in. The composition root
(`kubesim.server` / the fixture) calls `build_controllers` once and runs every `Controller.run()` as a task
for the life of the simulated cluster, and adds `routes` to the HTTP app.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from aiohttp import web

if TYPE_CHECKING:
    from kubesim.cluster import Cluster
    from kubesim.settings import SimSettings


class Controller(Protocol):
    name: str

    async def run(self) -> None:
        """Runs until cancelled."""


@dataclass
class Controllers:
    all: list[Controller] = field(default_factory=list)
    routes: list[web.RouteDef] = field(default_factory=list)


def build_controllers(cluster: Cluster, settings: SimSettings) -> Controllers:
    return Controllers()
