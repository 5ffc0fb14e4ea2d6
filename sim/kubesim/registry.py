"""Which resource types the simulated apiserver serves: built-in kinds and CRD-registered ones.

CONTRACT STUB written by the lead; the kubesim core helper implements it (it may add more).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ScaleSubresource:
    spec_replicas_path: str
    status_replicas_path: str
    label_selector_path: str | None = None


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    builtin: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status_subresource: bool = False
    scale: ScaleSubresource | None = None
    printer_columns: tuple[dict[str, Any], ...] = ()
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    """openAPIV3Schema of this version for custom resources; None for built-in kinds."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


class Registry:
    def by_plural(self, group: str, version: str, plural: str) -> ResourceType | None:
        raise NotImplementedError

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        raise NotImplementedError

    def all(self) -> list[ResourceType]:
        raise NotImplementedError
