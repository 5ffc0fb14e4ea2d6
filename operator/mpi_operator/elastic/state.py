"""The elastic layer's memory, stored in the API: `PublishedState` in an annotation of
`<job>-config`.

In the same object as `discover_hosts.sh`, so "what is published" and "what we remember publishing"
are one atomic write, and a restarted operator or a new leader continues from it. It records the
listed members, when they changed and whom the last change dropped, each index's incarnation, the
replacements used (and the disruptions, which use none), the below-minimum clock, the recent losses
and the last out-of-bounds replicas reported; the fields are listed in
docs/architecture.md#the-elastic-state-machine ("The published state"). Draining is recorded on the
pod instead (`scalein.py`). Times are epoch seconds (floats) in the JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from mpi_operator.elastic.losses import describe_disruption

STATE_ANNOTATION: Final = "mpi-operator.kubeflow.org/elastic-state"
"""On the ConfigMap `<job>-config`: the JSON of `PublishedState`."""
MAX_FAILURES_KEPT: Final = 10

Member = tuple[int, int]
"""A listed worker: `(index, incarnation)`."""


@dataclass(frozen=True)
class WorkerFailure:
    """One worker lost to a failure of its program or taken by the cluster (`disruption`), and
    why."""

    index: int
    incarnation: int
    pod: str
    host: str
    reason: str
    exit_code: int | None = None
    at: float = 0.0
    disruption: bool = False

    def describe(self) -> str:
        if self.disruption:
            return f"{self.pod} (host {self.host}): {describe_disruption(self.reason)}"
        code = f", exit code {self.exit_code}" if self.exit_code is not None else ""
        return f"{self.pod} (host {self.host}): {self.reason}{code}"


@dataclass(frozen=True)
class PublishedState:
    """What the elastic layer published and remembers; see the module docstring."""

    members: tuple[Member, ...] = ()
    changed_at: float | None = None
    incarnations: Mapping[int, int] = field(default_factory=dict)
    replacements: int = 0
    disruptions: int = 0
    reached_min: bool = False
    below_min_since: float | None = None
    failures: tuple[WorkerFailure, ...] = ()
    out_of_bounds_reported: int | None = None
    removed: tuple[Member, ...] = ()
    """The members the last change dropped from the script gracefully (a scale-in): their drain
    stamps are written after the script, and a crash in between must not cut their grace short."""

    def incarnation(self, index: int) -> int:
        return self.incarnations.get(index, 0)

    def to_json(self) -> str:
        """Compact, key-sorted JSON: equal states give equal annotation values (no spurious
        writes)."""
        doc: dict[str, Any] = {"members": [list(m) for m in self.members]}
        if self.changed_at is not None:
            doc["changedAt"] = self.changed_at
        incarnations = {str(i): n for i, n in sorted(self.incarnations.items()) if n}
        if incarnations:
            doc["incarnations"] = incarnations
        if self.replacements:
            doc["replacements"] = self.replacements
        if self.disruptions:
            doc["disruptions"] = self.disruptions
        if self.reached_min:
            doc["reachedMin"] = True
        if self.below_min_since is not None:
            doc["belowMinSince"] = self.below_min_since
        if self.failures:
            doc["failures"] = [
                {
                    "index": f.index,
                    "incarnation": f.incarnation,
                    "pod": f.pod,
                    "host": f.host,
                    "reason": f.reason,
                    **({"exitCode": f.exit_code} if f.exit_code is not None else {}),
                    **({"disruption": True} if f.disruption else {}),
                    "at": f.at,
                }
                for f in self.failures
            ]
        if self.out_of_bounds_reported is not None:
            doc["outOfBoundsReported"] = self.out_of_bounds_reported
        if self.removed:
            doc["removed"] = [list(m) for m in self.removed]
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> PublishedState:
        """The state an annotation holds; ValueError when it is not one this module wrote."""
        try:
            doc = json.loads(text)
            members = tuple(sorted((int(i), int(n)) for i, n in doc.get("members", [])))
            failures = tuple(
                WorkerFailure(
                    index=int(f["index"]),
                    incarnation=int(f.get("incarnation", 0)),
                    pod=str(f["pod"]),
                    host=str(f.get("host", "")),
                    reason=str(f.get("reason", "")),
                    exit_code=int(f["exitCode"]) if f.get("exitCode") is not None else None,
                    at=float(f.get("at", 0.0)),
                    disruption=bool(f.get("disruption", False)),
                )
                for f in doc.get("failures", [])
            )
            return cls(
                members=members,
                changed_at=_float_or_none(doc.get("changedAt")),
                incarnations={
                    int(i): int(n) for i, n in doc.get("incarnations", {}).items() if int(n)
                },
                replacements=int(doc.get("replacements", 0)),
                disruptions=int(doc.get("disruptions", 0)),
                reached_min=bool(doc.get("reachedMin", False)),
                below_min_since=_float_or_none(doc.get("belowMinSince")),
                failures=failures,
                out_of_bounds_reported=_int_or_none(doc.get("outOfBoundsReported")),
                removed=tuple(sorted((int(i), int(n)) for i, n in doc.get("removed", []))),
            )
        except (TypeError, KeyError, AttributeError, ValueError) as exc:
            raise ValueError(f"not an elastic state annotation: {exc}") from exc


def _float_or_none(value: Any) -> float | None:
    return float(value) if value is not None else None


def _int_or_none(value: Any) -> int | None:
    return int(value) if value is not None else None


def state_from_config_map(config_map: Mapping[str, Any] | None) -> PublishedState | None:
    """The state stored on the observed ConfigMap; None when there is none (or it is unreadable).

    None makes `elastic_step` start afresh from the observed pods (incarnations found on pods are
    kept), which is what a first reconcile, or one after someone removed the annotation, needs.
    """
    if config_map is None:
        return None
    metadata = config_map.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    text = annotations.get(STATE_ANNOTATION) if isinstance(annotations, Mapping) else None
    if not isinstance(text, str):
        return None
    try:
        return PublishedState.from_json(text)
    except ValueError:
        return None


def state_annotations(state: PublishedState) -> dict[str, str]:
    """The annotation to set on the desired ConfigMap so the state is written with the script."""
    return {STATE_ANNOTATION: state.to_json()}
