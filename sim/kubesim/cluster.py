"""The cluster's state and the apiserver's verb semantics, in process (no HTTP here).

CONTRACT STUB written by the lead: the kubesim core helper implements these signatures (it may add
more); the HTTP layer and the simulated controllers (kubelet, Job controller, GC) both call them.
Objects in and out are plain JSON dicts; every returned object is a copy the caller may mutate.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from kubesim.registry import Registry, ResourceType
from kubesim.settings import SimSettings

EventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]


@dataclass(frozen=True)
class WatchEvent:
    type: EventType
    object: dict[str, Any]


@dataclass(frozen=True)
class WriteOptions:
    dry_run: bool = False
    field_validation: Literal["Ignore", "Warn", "Strict"] = "Warn"
    field_manager: str = ""
    user_agent: str = ""


@dataclass(frozen=True)
class DeleteOptions:
    propagation_policy: Literal["Background", "Foreground", "Orphan"] | None = None
    grace_period_seconds: int | None = None
    preconditions: dict[str, str] | None = None  # {"uid": ..., "resourceVersion": ...}
    dry_run: bool = False


@dataclass
class Written:
    """Result of a write: the stored object and the admission warnings (sent as `Warning` headers)."""

    object: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    created: bool = False


# Listener(event_type, resource_type, new_or_final_object, old_object_or_None); called synchronously
# after every committed change, in commit order. Controllers use it to learn about changes cheaply.
Listener = Callable[[EventType, ResourceType, dict[str, Any], dict[str, Any] | None], None]


class Cluster:
    """All objects of the simulated cluster, with apiserver semantics (StatusError on refusal)."""

    registry: Registry
    settings: SimSettings

    def __init__(self, settings: SimSettings | None = None) -> None:
        raise NotImplementedError

    # --- reads -----------------------------------------------------------------------------
    def get(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        raise NotImplementedError

    def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> dict[str, Any]:
        """A `<Kind>List` with metadata.resourceVersion (and `continue` when limited)."""
        raise NotImplementedError

    def watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        resource_version: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
        allow_bookmarks: bool = False,
        send_initial_events: bool = False,
    ) -> AsyncIterator[WatchEvent]:
        raise NotImplementedError

    # --- writes ----------------------------------------------------------------------------
    def create(
        self,
        rt: ResourceType,
        namespace: str | None,
        body: dict[str, Any],
        *,
        opts: WriteOptions | None = None,
    ) -> Written:
        raise NotImplementedError

    def update(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: dict[str, Any],
        *,
        subresource: str | None = None,
        opts: WriteOptions | None = None,
    ) -> Written:
        raise NotImplementedError

    def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: bytes,
        content_type: str,
        *,
        subresource: str | None = None,
        opts: WriteOptions | None = None,
    ) -> Written:
        raise NotImplementedError

    def delete(
        self, rt: ResourceType, namespace: str | None, name: str, *, options: DeleteOptions | None = None
    ) -> dict[str, Any]:
        """Returns the object as it now is (deletionTimestamp set while finalizers remain) or as deleted."""
        raise NotImplementedError

    def add_listener(self, listener: Listener) -> None:
        raise NotImplementedError
