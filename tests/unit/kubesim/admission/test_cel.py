"""x-kubernetes-validations (CEL) rules on custom resources."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubesim.admission import AdmissionError, AdmissionResult, admit, cel


def _schema(spec_rules: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-validations": spec_rules,
                "properties": {
                    "replicas": {"type": "integer"},
                    "minReplicas": {"type": "integer"},
                    "maxReplicas": {"type": "integer"},
                    "ratio": {"type": "number"},
                    "mode": {"type": "string"},
                    "launcher": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
                    "workers": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "slots": {"type": "integer"},
                            },
                            "x-kubernetes-validations": [
                                {"rule": "self.slots >= 1", "message": "slots must be positive"}
                            ],
                        },
                    },
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    **extra,
                },
            }
        },
    }


ELASTIC_RULES = [
    {
        "rule": "!has(self.minReplicas) || self.minReplicas <= self.replicas",
        "message": "minReplicas must be <= replicas",
    },
    {
        "rule": "!has(self.maxReplicas) || self.replicas <= self.maxReplicas",
        "message": "replicas must be <= maxReplicas",
    },
    {
        "rule": "!has(self.launcher) || self.launcher.replicas == 1",
        "message": "launcher replicas must be 1",
        "fieldPath": ".launcher.replicas",
    },
]


def _admit(
    spec: dict[str, Any],
    rules: list[dict[str, Any]],
    *,
    old_spec: dict[str, Any] | None = None,
    **extra: Any,
) -> AdmissionResult:
    def obj(s: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": {"name": "pi"},
            "spec": copy.deepcopy(s),
        }

    return admit(
        operation="UPDATE" if old_spec is not None else "CREATE",
        api_version="kubeflow.org/v2beta1",
        kind="MPIJob",
        obj=obj(spec),
        old=obj(old_spec) if old_spec is not None else None,
        schema=_schema(rules, **extra),
    )


def _refused(spec: dict[str, Any], rules: list[dict[str, Any]], **kwargs: Any) -> AdmissionError:
    with pytest.raises(AdmissionError) as err:
        _admit(spec, rules, **kwargs)
    return err.value


CASES: list[tuple[str, dict[str, Any], str]] = [
    ("in-bounds", {"replicas": 3, "minReplicas": 1, "maxReplicas": 4}, ""),
    ("optional-fields-absent", {"replicas": 3}, ""),
    (
        "below-min",
        {"replicas": 1, "minReplicas": 2},
        'spec: Invalid value: "object": minReplicas must be <= replicas',
    ),
    (
        "above-max",
        {"replicas": 5, "maxReplicas": 4},
        'spec: Invalid value: "object": replicas must be <= maxReplicas',
    ),
    (
        "field-path",
        {"replicas": 1, "launcher": {"replicas": 2}},
        'spec.launcher.replicas: Invalid value: "object": launcher replicas must be 1',
    ),
    (
        "item-rule",
        {"replicas": 1, "workers": [{"name": "a", "slots": 1}, {"name": "b", "slots": 0}]},
        'spec.workers[1]: Invalid value: "object": slots must be positive',
    ),
]


@pytest.mark.parametrize(("spec", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_elastic_bounds_rules(spec: dict[str, Any], message: str) -> None:
    if not message:
        assert _admit(spec, ELASTIC_RULES).warnings == []
        return
    err = _refused(spec, ELASTIC_RULES)
    assert err.message == f'MPIJob.kubeflow.org "pi" is invalid: {message}'
    assert err.causes[0].reason == "FieldValueInvalid"


FEATURES: list[tuple[str, str, dict[str, Any], bool]] = [
    (
        "all-macro",
        "self.workers.all(w, w.slots <= 8)",
        {"workers": [{"name": "a", "slots": 9}]},
        False,
    ),
    (
        "exists-macro",
        "self.workers.exists(w, w.name == 'a')",
        {"workers": [{"name": "a", "slots": 1}]},
        True,
    ),
    (
        "size-list",
        "size(self.workers) <= 1",
        {"workers": [{"name": "a", "slots": 1}, {"name": "b", "slots": 1}]},
        False,
    ),
    ("size-string", "size(self.mode) < 4", {"mode": "long"}, False),
    ("ints-stay-ints", "self.replicas / 2 == 1", {"replicas": 3}, True),
    ("number-is-double", "self.ratio == 2.0", {"ratio": 2}, True),
    ("in-map", "'team' in self.labels", {"labels": {"team": "a"}}, True),
    (
        "string-functions",
        "self.mode.startsWith('Open') && self.mode.matches('^[A-Z]')",
        {"mode": "OpenMPI"},
        True,
    ),
    ("ternary", "has(self.mode) ? self.mode != '' : true", {"mode": ""}, False),
]


@pytest.mark.parametrize(
    ("rule", "spec", "ok"), [c[1:] for c in FEATURES], ids=[c[0] for c in FEATURES]
)
def test_cel_features(rule: str, spec: dict[str, Any], ok: bool) -> None:
    rules = [{"rule": rule}]
    if ok:
        assert _admit(spec, rules).warnings == []
    else:
        assert _refused(spec, rules).message.endswith(f"failed rule: {rule}")


def test_message_expression_and_reason() -> None:
    rules = [
        {
            "rule": "self.replicas <= 4",
            "messageExpression": "'too many replicas: ' + string(self.replicas)",
            "reason": "FieldValueForbidden",
        }
    ]
    err = _refused({"replicas": 5}, rules)
    assert (
        err.message == 'MPIJob.kubeflow.org "pi" is invalid: spec: Forbidden: too many replicas: 5'
    )
    assert err.causes[0].reason == "FieldValueForbidden"
    required = _refused(
        {"replicas": 5},
        [{"rule": "has(self.mode)", "message": "mode is required", "reason": "FieldValueRequired"}],
    )
    assert required.message.endswith("spec: Required value: mode is required")


def test_transition_rules_skip_create_and_apply_on_update() -> None:
    rules = [{"rule": "self.mode == oldSelf.mode", "message": "mode is immutable"}]
    assert _admit({"mode": "a"}, rules).warnings == []
    _admit({"mode": "a"}, rules, old_spec={"mode": "a"})
    err = _refused({"mode": "b"}, rules, old_spec={"mode": "a"})
    assert err.message.endswith('spec: Invalid value: "object": mode is immutable')


def test_transition_rules_on_list_items_correlate_by_map_keys() -> None:
    extra = {
        "hosts": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "slots": {"type": "integer"}},
                "x-kubernetes-validations": [
                    {"rule": "self.slots >= oldSelf.slots", "message": "slots may only grow"}
                ],
            },
        }
    }
    old = {"hosts": [{"name": "a", "slots": 2}]}
    _admit(
        {"hosts": [{"name": "a", "slots": 3}, {"name": "new", "slots": 1}]},
        [],
        old_spec=old,
        **extra,
    )
    err = _refused(
        {"hosts": [{"name": "b", "slots": 9}, {"name": "a", "slots": 1}]}, [], old_spec=old, **extra
    )
    assert err.message.endswith('spec.hosts[1]: Invalid value: "object": slots may only grow')


def test_missing_field_without_has_is_an_evaluation_error() -> None:
    err = _refused({"replicas": 1}, [{"rule": "self.mode == 'x'"}])
    assert "no such key: mode" in err.message
    assert err.message.startswith(
        'MPIJob.kubeflow.org "pi" is invalid: spec: Invalid value: "object": '
    )


@pytest.mark.parametrize(
    "rule",
    ["self.?mode.orValue('') == ''", "isSorted([1, 2])", "self.replicas == 1.0"],
    ids=["optional-syntax", "k8s-list-library", "mixed-int-double"],
)
def test_rules_the_library_cannot_run_become_warnings(rule: str) -> None:
    result = _admit({"replicas": 1, "mode": "x"}, [{"rule": rule}])
    assert len(result.warnings) == 1
    assert result.warnings[0].startswith(
        f"spec: x-kubernetes-validations rule {rule!r} was not evaluated"
    )


def test_rules_are_only_evaluated_where_the_value_is_present() -> None:
    extra = {
        "elastic": {
            "type": "object",
            "properties": {"min": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.min >= 1"}],
        }
    }
    assert _admit({"replicas": 1}, [], **extra).warnings == []
    assert _refused({"elastic": {"min": 0}}, [], **extra).message.endswith(
        'spec.elastic: Invalid value: "object": failed rule: self.min >= 1'
    )


def test_root_rules_see_metadata_name() -> None:
    schema = _schema([])
    schema["x-kubernetes-validations"] = [
        {
            "rule": "self.metadata.name.size() <= 2 && self.kind == 'MPIJob'",
            "message": "short names only",
        }
    ]
    obj = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi"},
        "spec": {},
    }
    admit(
        operation="CREATE",
        api_version="kubeflow.org/v2beta1",
        kind="MPIJob",
        obj=obj,
        old=None,
        schema=schema,
    )
    obj["metadata"]["name"] = "pie"
    with pytest.raises(AdmissionError) as err:
        admit(
            operation="CREATE",
            api_version="kubeflow.org/v2beta1",
            kind="MPIJob",
            obj=obj,
            old=None,
            schema=schema,
        )
    assert err.value.message.endswith(': Invalid value: "object": short names only')


def test_cached_verdicts_stay_per_value_and_per_old_value() -> None:
    rules = [{"rule": "self.replicas <= oldSelf.replicas + 1", "message": "grow by one at most"}]
    for _ in range(2):  # the second round is answered from the verdict cache
        _admit({"replicas": 2}, rules, old_spec={"replicas": 1})
        assert _refused({"replicas": 3}, rules, old_spec={"replicas": 1}).message.endswith(
            "grow by one at most"
        )
    _admit({"replicas": 3}, rules, old_spec={"replicas": 2})


@pytest.mark.parametrize(
    ("rule", "message_expression", "self_paths", "old_paths"),
    [
        ("self.metadata.name.matches('^[a-z]+$')", "", (("metadata", "name"),), ()),
        ("!has(self.a) || self.b.c >= 1", "", (("a",), ("b", "c")), ()),
        ("self.items.all(i, i.x > 0)", "", (("items",),), ()),
        ("self.x <= oldSelf.x + 1", "'was ' + string(oldSelf.y)", (("x",),), (("x",), ("y",))),
        ("self == oldSelf", "", None, None),
        ("size(self) > 0", "", None, ()),
        ("self['odd-key'] == 'v'", "", None, ()),
    ],
)
def test_rules_read_only_the_fields_they_name(
    rule: str, message_expression: str, self_paths: cel.Paths, old_paths: cel.Paths
) -> None:
    assert cel._scope(rule, message_expression) == (self_paths, old_paths)


def test_a_verdict_is_reused_while_the_fields_the_rule_reads_are_unchanged() -> None:
    schema = _schema([])
    schema["x-kubernetes-validations"] = [
        {"rule": "self.metadata.name.size() <= 8", "message": "short"}
    ]

    def write(name: str, replicas: int) -> None:
        obj = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name}}
        obj["spec"] = {"replicas": replicas}
        admit(
            operation="CREATE",
            api_version=obj["apiVersion"],
            kind="MPIJob",
            obj=obj,
            old=None,
            schema=schema,
        )

    cel._VERDICTS.clear()
    write("cached", 1)
    write("cached", 2)  # the spec changed, the name the rule reads did not
    assert len(cel._VERDICTS) == 1
    with pytest.raises(AdmissionError):
        write("much-too-long", 2)
    assert len(cel._VERDICTS) == 2
