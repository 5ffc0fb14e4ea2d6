"""The size guard (`planning.limits`): every object a plan would create or replace is checked
against the API's limits (ConfigMap / Secret data 1 MiB, annotations 256 KiB, label values 63
characters, a whole object 1.5 MiB) before anything is sent, and says so for a ConfigMap past the
worker ceiling (whose own arithmetic tests/unit/api/test_ceiling.py checks)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from mpi_operator.api import constants as c
from mpi_operator.desired import config, naming
from mpi_operator.planning import (
    Create,
    Delete,
    ObjectRef,
    Observed,
    Patch,
    Phase,
    Plan,
    plan_problems,
)
from mpi_operator.planning.limits import (
    ANNOTATIONS_MAX_BYTES,
    DATA_MAX_BYTES,
    LABEL_VALUE_MAX_LENGTH,
    OBJECT_MAX_BYTES,
    object_problems,
)

from .factory import make_job, plan_for

MiB = 1024 * 1024


def obj(
    kind: str = "Pod", *, labels: dict[str, str] | None = None, **fields: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "x", "namespace": "default"}
    if labels is not None:
        meta["labels"] = labels
    annotations = fields.pop("annotations", None)
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": kind, "metadata": meta, **fields}


def b64(size: int) -> str:
    return base64.b64encode(b"k" * size).decode()


def annotations_of(total: int) -> dict[str, str]:
    """Annotations whose keys and values add up to `total` bytes."""
    return {"big": "v" * (total - len("big"))}


# name -> (object, {field: words of the problem}); {} means the API would take it.
CASES: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "ConfigMap data at 1 MiB": (obj("ConfigMap", data={"hostfile": "h" * DATA_MAX_BYTES}), {}),
    "ConfigMap data one byte over": (
        obj("ConfigMap", data={"hostfile": "h" * (MiB - 10), "discover_hosts.sh": "d" * 11}),
        {"data": f"{MiB + 1} bytes, more than the 1048576 bytes (1 MiB) the API allows"},
    ),
    # The API counts bytes: half a MiB of two-byte characters is over.
    "ConfigMap data in multi-byte characters": (
        obj("ConfigMap", data={"hostfile": "é" * (MiB // 2 + 1)}),
        {"data": "more than the 1048576 bytes (1 MiB)"},
    ),
    "ConfigMap binaryData counts decoded": (
        obj("ConfigMap", data={"a": "x"}, binaryData={"b": b64(MiB)}),
        {"data": f"{MiB + 1} bytes"},
    ),
    "Secret data at 1 MiB decoded": (obj("Secret", data={"k": b64(MiB)}), {}),
    "Secret data over 1 MiB decoded": (obj("Secret", data={"k": b64(MiB + 1)}), {"data": "1 MiB"}),
    "annotations at 256 KiB": (obj(annotations=annotations_of(ANNOTATIONS_MAX_BYTES)), {}),
    "annotations one byte over": (
        obj(annotations=annotations_of(ANNOTATIONS_MAX_BYTES + 1)),
        {
            "metadata.annotations": "262145 bytes, more than the 262144 bytes (256 KiB) the API "
            "allows"
        },
    ),
    "label value at 63": (obj(labels={"team": "a" * LABEL_VALUE_MAX_LENGTH}), {}),
    "label value of 64": (
        obj(labels={"team": "a" * 64}),
        {"metadata.labels[team]": "is 64 characters, more than the 63 a label value may have"},
    ),
    "label value with a space": (
        obj(labels={"team": "ml ops"}),
        {"metadata.labels[team]": 'value "ml ops" must be empty or alphanumeric characters'},
    ),
    "label key with a bad prefix": (
        obj(labels={"Example.com/team": "ml"}),
        {"metadata.labels[Example.com/team]": "the key's prefix must be a DNS subdomain"},
    ),
    "label key name too long": (
        obj(labels={"example.com/" + "n" * 64: "ml"}),
        {f"metadata.labels[example.com/{'n' * 64}]": "the key's name must be 1 to 63"},
    ),
    "a Job's pod template annotations": (
        obj(
            "Job",
            spec={
                "template": {"metadata": {"annotations": annotations_of(ANNOTATIONS_MAX_BYTES + 1)}}
            },
        ),
        {"spec.template.metadata.annotations": "256 KiB"},
    ),
    "a whole object over 1.5 MiB": (
        obj(
            spec={
                "containers": [
                    {"name": "m", "env": [{"name": "E", "value": "v" * OBJECT_MAX_BYTES}]}
                ]
            }
        ),
        {"<object>": "1.5 MiB, etcd's request limit"},
    ),
    "an ordinary pod": (
        obj(labels={"app": "pi", "example.com/role": "w"}, annotations={"a": "b"}),
        {},
    ),
}


@pytest.mark.parametrize(("subject", "expected"), CASES.values(), ids=list(CASES))
def test_objects_over_an_api_limit_are_found(
    subject: dict[str, Any], expected: dict[str, str]
) -> None:
    found = dict(object_problems(subject))
    assert set(found) == set(expected), found
    for field, words in expected.items():
        assert words in found[field], (field, found[field])


def test_pods_built_from_one_template_are_reported_once_with_their_number() -> None:
    huge = {
        "metadata": {"annotations": annotations_of(ANNOTATIONS_MAX_BYTES + 1)},
        "spec": {"containers": []},
    }
    huge["spec"]["containers"] = [{"name": "main", "image": "mpi:1"}]
    job = make_job("big", workers=3, worker_template=huge)
    problems = plan_problems(plan_for(job, Observed()))
    assert [str(p) for p in problems] == [
        "Pod default/big-worker-0 (and 2 more Pods): metadata.annotations: 262145 bytes, more than "
        "the "
        "262144 bytes (256 KiB) the API allows"
    ]


def test_a_plan_of_ordinary_objects_has_no_problem() -> None:
    assert plan_problems(plan_for(make_job("pi", workers=4), Observed())) == []


def test_patches_and_deletes_are_not_checked() -> None:
    ref = ObjectRef("v1", "Pod", "default", "pi-worker-0")
    huge = {"metadata": {"annotations": annotations_of(ANNOTATIONS_MAX_BYTES + 1)}}
    plan = Plan(
        actions=(
            Patch(ref=ref, patch=huge, phase=Phase.DRAIN, why="drain"),
            Delete(ref=ref, uid="u"),
        )
    )
    assert plan_problems(plan) == []
    # The same content created is found.
    assert plan_problems(
        Plan(actions=(Create.of(obj(annotations=huge["metadata"]["annotations"])),))
    )


LONGEST_DOMAIN = (
    "a" * 63 + ".test"
)  # makes every worker's FQDN the 253 characters a DNS name may have


def ceiling_config_map(workers: int, name_length: int) -> dict[str, Any]:
    """The ConfigMap of a job of `workers` workers, every host line as long as it can be: the
    longest worker host name (63), job name and namespace (63), a 253-character FQDN, 10-digit
    slots, and every worker in discover_hosts.sh as well as in the hostfile."""
    job = make_job(
        "j" * name_length,
        "n" * c.DNS1035_LABEL_MAX_LENGTH,
        workers=workers,
        slotsPerWorker=c.INT32_MAX,
        runLauncherAsWorker=True,
    )
    everyone = [(naming.worker_fqdn(job, i, LONGEST_DOMAIN), c.INT32_MAX) for i in range(workers)]
    return config.build_config_map(job, cluster_domain=LONGEST_DOMAIN, discovered=everyone)


def test_the_ceiling_at_253_character_host_names_could_not_be_stored_and_the_guard_says_so() -> (
    None
):
    # Validation refuses such a job (tests/unit/api/test_ceiling.py); the guard is the backstop.
    ceiling = c.MAX_WORKER_REPLICAS
    config_map = ceiling_config_map(
        ceiling, c.DNS1035_LABEL_MAX_LENGTH - len(f"-worker-{ceiling - 1}")
    )
    assert [field for field, _ in object_problems(config_map)] == ["data"]


@pytest.mark.parametrize(
    "value",
    ["caf\u00e9 \u2603 \U0001f600", 'quotes " and \\ and \n', 2**70, 1.5, None, [1, {"k": True}]],
)
def test_an_objects_size_is_its_compact_utf8_json(value: Any) -> None:
    """Measured as the request carries it: compact, UTF-8 (not ASCII escapes), whatever the
    encoder."""
    from mpi_operator.planning.limits import _json_size

    big = obj(spec={"value": value})
    expected = len(json.dumps(big, separators=(",", ":"), ensure_ascii=False).encode())
    assert _json_size(big) == expected
