"""Properties of normalization: it never raises anything but InvalidMPIJob, it is the identity on
canonical objects, and every error it reports starts with a field path."""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mpi_operator.api import (
    InvalidMPIJob,
    normalize,
    parse_and_validate,
    to_canonical_dict,
    validate,
)
from mpi_operator.api import constants as c
from mpi_operator.api.validation import FieldError

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
SEEDS = [yaml.safe_load(p.read_text()) for p in sorted((MANIFESTS / "valid").glob("*.yaml"))]
# A path: `<root>`, or names joined by dots with [index] / [key] segments (odd keys JSON-quoted).
_NAME = r"[A-Za-z_][\w-]*"
_KEY = r'\[(?:\d+|"(?:[^"\\]|\\.)*"|[^\]"]+)\]'
PATH = re.compile(rf"^(?:<root>|(?:{_NAME}|{_KEY})(?:\.{_NAME}|{_KEY})*): \S", re.DOTALL)
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = (
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats() | st.text(max_size=12)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
FIELD_NAMES = [
    "apiVersion", "kind", "metadata", "name", "spec", "status", "mpiReplicaSpecs", "Launcher",
    "Worker", "replicas", "template", "containers", "restartPolicy", "runPolicy", "cleanPodPolicy",
    "elasticPolicy", "minReplicas", "maxReplicas", "slotsPerWorker", "gpus", "gpusPerNode",
    "processingUnits", "mainContainer", "mpiDistribution", "launcherOnMaster", "conditions",
    "replicaStatuses", "schedulingPolicy", "minResources",
]  # fmt: skip
# Objects shaped like manifests (known keys, random values) reach deeper than random dictionaries.
manifest_like = st.recursive(
    scalars | st.sampled_from([*c.SERVED_API_VERSIONS, "MPIJob", "Never", "OnFailure", "All"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(FIELD_NAMES), inner, max_size=5)
    ),
    max_leaves=30,
)


def _assert_paths(errors: list[FieldError]) -> None:
    assert errors, "InvalidMPIJob must say why"
    for error in errors:
        assert PATH.match(str(error)), str(error)
        assert "internal error" not in error.message, str(error)


def _normalize_or_errors(obj: Any) -> None:
    for call in (normalize, parse_and_validate):
        try:
            call(obj, gpus_per_node=4)
        except InvalidMPIJob as exc:
            _assert_paths(exc.errors)


@SETTINGS
@given(json_values | manifest_like)
def test_normalize_raises_only_invalid_mpijob_on_any_value(obj: Any) -> None:
    _normalize_or_errors(obj)


def _locations(node: Any, loc: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [loc]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _locations(value, (*loc, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _locations(value, (*loc, i))
    return found


@st.composite
def mutated_manifests(draw: st.DrawFn) -> Any:
    doc = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        locations = _locations(doc)
        loc = draw(st.sampled_from(locations))
        if not loc:
            continue
        parent = doc
        for part in loc[:-1]:
            parent = parent[part]
        if draw(st.booleans()):
            del parent[loc[-1]]
        else:
            parent[loc[-1]] = draw(json_values | manifest_like)
    return doc


@SETTINGS
@given(mutated_manifests())
@example(  # found by a longer run: a v1alpha1 template whose containers is not a list
    {
        "apiVersion": "kubeflow.org/v1alpha1",
        "kind": "MPIJob",
        "spec": {"gpus": 16, "template": {"spec": {"containers": False}}},
    }
)
def test_normalize_raises_only_invalid_mpijob_on_mutated_manifests(obj: Any) -> None:
    _normalize_or_errors(obj)


# ---- canonical objects within valid ranges
# ---------------------------------------------------------

names = st.from_regex(r"[a-z]([-a-z0-9]{0,18}[a-z0-9])?", fullmatch=True)
times = st.datetimes(datetime(1971, 1, 1), datetime(2099, 1, 1), timezones=st.just(UTC)).map(
    lambda t: t.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
)
# Pod template content is kept as is: any JSON without nulls (the API server prunes them).
template_values = st.recursive(
    st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
containers = st.lists(
    st.fixed_dictionaries(
        {"name": names, "image": st.text(min_size=1, max_size=20)}, optional={"x": template_values}
    ),
    min_size=1,
    max_size=3,
)
templates = st.builds(
    lambda cs, extra, meta: {"metadata": meta, "spec": {"containers": cs} | extra},
    containers,
    st.dictionaries(
        st.sampled_from(["nodeSelector", "tolerations", "hostNetwork"]), template_values, max_size=2
    ),
    st.dictionaries(
        st.sampled_from(["labels", "annotations"]), st.dictionaries(names, st.text(max_size=8))
    ),
)


def _optional(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


non_negative = st.integers(0, 2**31 - 1)
scheduling = _optional(
    minAvailable=st.integers(0, c.MAX_GANG_MEMBERS),
    queue=st.text(max_size=8),
    minResources=st.dictionaries(
        st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), st.sampled_from([1, "500m", "4Gi"])
    ),
    priorityClass=st.text(max_size=8),
    scheduleTimeoutSeconds=non_negative,
)
run_policies = st.builds(
    lambda required, optional: required | optional,
    st.fixed_dictionaries(
        {"cleanPodPolicy": st.sampled_from(c.CLEAN_POD_POLICIES), "suspend": st.booleans()}
    ),
    _optional(
        ttlSecondsAfterFinished=non_negative,
        activeDeadlineSeconds=non_negative,
        backoffLimit=non_negative,
        schedulingPolicy=scheduling,
        managedBy=st.sampled_from(c.MANAGED_BY_VALUES),
    ),
)
replica_statuses = st.builds(
    lambda counts, optional: counts | optional,
    st.fixed_dictionaries(
        {k: st.integers(0, 100) for k in ("active", "succeeded", "failed", "ready")}
    ),
    _optional(selector=st.text(max_size=10), labelSelector=st.just({"matchLabels": {"a": "b"}})),
)
statuses = st.builds(
    lambda required, optional: required | optional,
    st.fixed_dictionaries(
        {
            "conditions": st.lists(
                st.builds(
                    lambda required, optional: required | optional,
                    st.fixed_dictionaries(
                        {
                            "type": st.sampled_from(c.CONDITION_TYPES),
                            "status": st.sampled_from(c.CONDITION_STATUSES),
                        }
                    ),
                    _optional(
                        reason=st.text(max_size=8),
                        message=st.text(max_size=20),
                        lastUpdateTime=times,
                        lastTransitionTime=times,
                    ),
                ),
                max_size=3,
            ),
            "replicaStatuses": _optional(Launcher=replica_statuses, Worker=replica_statuses),
        }
    ),
    _optional(
        startTime=times,
        completionTime=times,
        lastReconcileTime=times,
        observedGeneration=non_negative,
    ),
)


@st.composite
def canonical_jobs(draw: st.DrawFn) -> dict[str, Any]:
    """A fully defaulted, valid v2beta1 MPIJob."""
    workers = draw(st.none() | st.integers(1, 50))
    spec: dict[str, Any] = draw(_optional(slotsPerWorker=st.integers(0, 16))) | {
        "runLauncherAsWorker": draw(st.booleans()),
        "runPolicy": draw(run_policies),
        "mpiReplicaSpecs": {
            "Launcher": {
                "replicas": 1,
                "template": draw(templates),
                "restartPolicy": draw(st.sampled_from(c.RESTART_POLICIES)),
            }
        },
        "sshAuthMountPath": draw(st.sampled_from(["/root/.ssh", "/home/mpiuser/.ssh"])),
        "launcherCreationPolicy": draw(st.sampled_from(c.LAUNCHER_CREATION_POLICIES)),
        "mpiImplementation": draw(st.sampled_from(c.MPI_IMPLEMENTATIONS)),
    }
    if workers is not None:
        spec["mpiReplicaSpecs"]["Worker"] = {
            "replicas": workers,
            "template": draw(templates),
            "restartPolicy": draw(st.sampled_from(c.RESTART_POLICIES)),
        }
        if draw(st.booleans()):
            low = draw(st.integers(1, workers))
            spec["elasticPolicy"] = {
                "minReplicas": low,
                "maxReplicas": draw(st.integers(workers, 99)),
                "scaleInGracePeriodSeconds": draw(non_negative),
                "settleSeconds": draw(non_negative),
                "maxReplacements": draw(non_negative),
                "belowMinTimeoutSeconds": draw(non_negative),
            }
    metadata = {"name": draw(names)} | draw(
        _optional(namespace=names, generation=st.integers(1, 10), uid=names)
    )
    job = {"apiVersion": c.API_VERSION, "kind": c.KIND, "metadata": metadata, "spec": spec}
    if draw(st.booleans()):
        job["status"] = draw(statuses)
    return job


@SETTINGS
@given(canonical_jobs())
def test_normalize_is_the_identity_on_canonical_jobs(obj: dict[str, Any]) -> None:
    result = parse_and_validate(copy.deepcopy(obj), gpus_per_node=8)
    assert to_canonical_dict(result.job) == obj
    assert result.notes == []
    assert result.warnings == []
    assert validate(result.job) == []


def _drop_defaults(obj: dict[str, Any], draw: st.DrawFn) -> dict[str, Any]:
    spec = obj["spec"]
    for key in (
        "runLauncherAsWorker",
        "sshAuthMountPath",
        "launcherCreationPolicy",
        "mpiImplementation",
    ):
        if draw(st.booleans()):
            spec.pop(key)
    for rtype in ("Launcher", "Worker"):
        if rtype in spec["mpiReplicaSpecs"] and draw(st.booleans()):
            spec["mpiReplicaSpecs"][rtype].pop("restartPolicy")
    return obj


def _is_subset(small: Any, big: Any) -> bool:
    if isinstance(small, dict):
        return isinstance(big, dict) and all(
            k in big and _is_subset(v, big[k]) for k, v in small.items()
        )
    return bool(small == big)


@SETTINGS
@given(st.data())
def test_defaults_only_add_and_normalizing_twice_changes_nothing(data: st.DataObject) -> None:
    obj = _drop_defaults(data.draw(canonical_jobs()), data.draw)
    once = to_canonical_dict(normalize(copy.deepcopy(obj)).job)
    assert _is_subset(obj, once)
    assert to_canonical_dict(normalize(once).job) == once
