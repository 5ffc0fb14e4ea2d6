"""The generated and the code-derived docs stay in step with the code.

`docs/api-reference.md` must equal `docgen.api_reference()` (regenerate with the command in its
header); `docs/metrics-and-events.md` must list every metric (name, type, labels) of
`runtime.metrics.Metrics` and every Event / condition reason constant of the modules that record
them, and nothing else.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import pytest
from prometheus_client.metrics import MetricWrapperBase

from mpi_operator import elastic, reasons
from mpi_operator.api import docgen
from mpi_operator.api.legacy import LEGACY_SPEC_KEYS
from mpi_operator.api.models import MPIJob
from mpi_operator.reconcile import reconciler
from mpi_operator.runtime.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
API_REFERENCE = ROOT / "docs" / "api-reference.md"
METRICS_AND_EVENTS = ROOT / "docs" / "metrics-and-events.md"

# Every module that records events or sets conditions: the shared reasons, the reconciler, and the
# whole elastic package (new elastic modules are picked up automatically).
REASON_MODULES: tuple[ModuleType, ...] = (
    reasons,
    reconciler,
    *(
        importlib.import_module(info.name)
        for info in pkgutil.iter_modules(elastic.__path__, prefix=f"{elastic.__name__}.")
    ),
)
NOT_REASONS = {
    "Normal": "an event type",
    "Warning": "an event type",
    "Evicted": "the kubelet's pod status reason, read, never written",
    "Failed": "a pod phase (elastic/hosts.py reads it)",
    "Succeeded": "a pod phase (elastic/hosts.py reads it)",
    "Pending": "a pod phase (elastic/hosts.py reads it)",
    "Running": "a pod phase (elastic/hosts.py reads it)",
    "Invalid": "a condition type (documented with the conditions)",
    "Superseded": "a pod deletion cause in the elastic decision, not an event or condition reason",
    "ScaledIn": "a pod deletion cause in the elastic decision, not an event or condition reason",
    "StuckTerminating": "a pod deletion cause in the elastic decision (a force delete)",
    "DisruptionTarget": "a pod condition type (elastic/losses.py reads it)",
    "PreemptionByScheduler": "a DisruptionTarget reason on a pod, read, never written",
    "DeletionByTaintManager": "a DisruptionTarget reason on a pod, read, never written",
    "EvictionByEvictionAPI": "a DisruptionTarget reason on a pod, read, never written",
    "TerminationByKubelet": "a DisruptionTarget reason on a pod, read, never written",
    "DeletionByPodGC": "a DisruptionTarget reason on a pod, read, never written",
    "Unknown": "a lost container's reason (a node reboot), read, never written",
    "ContainerStatusUnknown": "a lost container's reason, read, never written",
    "Deleted": "the loss of a pod deleted without DisruptionTarget, in WorkerDisrupted's message",
    "WorkerReplaced": "defined in elastic/replacement.py but recorded by no code path",
}
_CAMEL = re.compile(r"[A-Z][A-Za-z]+")
_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|([^|]*)\|([^|]*)\|")


def test_api_reference_is_up_to_date() -> None:
    assert API_REFERENCE.read_text(encoding="utf-8") == docgen.api_reference(), (
        f"docs/api-reference.md drifted from the models: run `{docgen.REGENERATE}`"
    )


def test_every_legacy_field_has_its_v2beta1_equivalent() -> None:
    assert set(docgen.LEGACY_EQUIVALENTS) == set(LEGACY_SPEC_KEYS)


def _fields(schema: dict[str, object]) -> set[str]:
    found: set[str] = set()
    defs = schema.get("$defs", {})
    assert isinstance(defs, dict)
    for node in [schema, *defs.values()]:
        properties = node.get("properties", {}) if isinstance(node, dict) else {}
        found |= set(properties)
    return found


def test_every_model_field_appears_in_the_reference() -> None:
    text = docgen.api_reference()
    for field in _fields(MPIJob.model_json_schema(by_alias=True)):
        assert f"| `{field}` |" in text, field


@pytest.mark.parametrize(
    ("prop", "expected"),
    [
        ({"$ref": "#/$defs/RunPolicy"}, "[RunPolicy](#runpolicy)"),
        (
            {"type": "array", "items": {"$ref": "#/$defs/JobCondition"}},
            "[][JobCondition](#jobcondition)",
        ),
        (
            {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": True}},
            "map[string]quantity (int or string)",
        ),
        ({"type": "object", "x-kubernetes-embedded-resource": True}, "object (PodTemplateSpec)"),
        ({"type": "string", "format": "date-time"}, "string (RFC 3339 time)"),
        ({"type": "integer"}, "integer"),
    ],
    ids=["ref", "list", "quantity-map", "pod-template", "time", "scalar"],
)
def test_type_names(prop: dict[str, object], expected: str) -> None:
    assert docgen._type(prop) == expected


def test_validation_column_escapes_nothing_it_should_not() -> None:
    cell = docgen._validation(
        {"enum": ["A", "B"], "minimum": 1, "maximum": 1, "minLength": 1}, True
    )
    assert cell == "required; one of `A`, `B`; ≥ 1; ≤ 1; length ≥ 1"
    assert docgen._row(("a|b",)) == "| a\\|b |"


def _section(title: str) -> list[tuple[str, str, str]]:
    """The table rows (first three cells) under the `## title` heading of metrics-and-events.md."""
    text = METRICS_AND_EVENTS.read_text(encoding="utf-8")
    _, _, rest = text.partition(f"## {title}\n")
    assert rest, f"metrics-and-events.md has no '## {title}' section"
    body = rest.split("\n## ", 1)[0]
    return [
        (m.group(1), m.group(2).strip(), m.group(3).strip())
        for line in body.splitlines()
        if (m := _ROW.match(line))
    ]


def _exposed_name(metric: MetricWrapperBase) -> str:
    return str(metric._name) + ("_total" if metric._type == "counter" else "")


def test_metrics_table_matches_the_registry() -> None:
    metrics = [m for m in vars(Metrics()).values() if isinstance(m, MetricWrapperBase)]
    expected = {
        (_exposed_name(m), m._type, ", ".join(f"`{x}`" for x in m._labelnames) or "—")
        for m in metrics
    }
    assert len(expected) >= 10
    assert set(_section("Metrics")) == expected


def _reason_constants() -> set[str]:
    return {
        value
        for module in REASON_MODULES
        for name, value in vars(module).items()
        if name.isupper()
        and isinstance(value, str)
        and _CAMEL.fullmatch(value)
        and value not in NOT_REASONS
    }


def test_reasons_tables_match_the_code() -> None:
    documented = {row[0] for row in _section("Events")} | {
        row[0] for row in _section("Condition reasons")
    }
    code = _reason_constants()
    assert {"MPIJobCreated", "LegacyFieldsMapped", "WorkerFailed", "DiscoveryHostsAdded"} <= code
    assert code - documented == set(), "reasons the code records but the doc does not explain"
    # Failed reasons copied from the launcher Job (`BackoffLimitExceeded/<pod reason>`) are
    # documented too.
    assert documented - code <= {"DeadlineExceeded"}, "documented reasons the code never records"


def test_event_types_are_normal_or_warning() -> None:
    rows = _section("Events")
    assert rows
    for reason, kind, _ in rows:
        assert kind in {"Normal", "Warning"}, (reason, kind)
