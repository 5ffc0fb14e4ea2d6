"""`ResourceListerWatcher`: a `Kube` client bound to one resource, as `cache.reflector.ListerWatcher`.

client-go's `NewListWatchFromClient`. It satisfies the protocol structurally, so `cache` never
imports this module or the HTTP stack.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from mpi_operator.kube.resources import Resource

if TYPE_CHECKING:
    from mpi_operator.kube.client import Kube


class ResourceListerWatcher:
    """List and watch one resource (watches ask for bookmarks unless told not to)."""

    def __init__(self, kube: Kube, resource: Resource, *, allow_bookmarks: bool = True) -> None:
        self.kube = kube
        self.resource = resource
        self.allow_bookmarks = allow_bookmarks

    async def list(
        self, namespace: str | None, label_selector: str | None
    ) -> tuple[list[dict[str, Any]], str]:
        return await self.kube.list(self.resource, namespace, label_selector=label_selector)

    def watch(
        self,
        namespace: str | None,
        label_selector: str | None,
        resource_version: str,
        *,
        timeout_seconds: int | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        return self.kube.watch(
            self.resource,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            timeout_seconds=timeout_seconds,
            allow_bookmarks=self.allow_bookmarks,
        )
