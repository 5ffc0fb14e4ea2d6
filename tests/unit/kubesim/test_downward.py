"""kubesim.downward: the downward API as the kubelet resolves it for volume files and env
variables."""

from __future__ import annotations

import ast
import math
import re
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim import nodes
from kubesim.downward import (
    NODE_ALLOCATABLE,
    DownwardAPIError,
    env_resource_value,
    find_container,
    format_map,
    go_quote,
    object_field_value,
    pod_field_value,
    split_subscript,
    volume_resource_value,
)

# --- go_quote, format_map, split_subscript --------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        # Outputs of Go's strconv.Quote for the same strings.
        ("", '""'),
        ("plain", '"plain"'),
        ("tab\there\x00\x7f", '"tab\\there\\x00\\x7f"'),
        ("\a\b\f\n\r\v", '"\\a\\b\\f\\n\\r\\v"'),
        ("\u2028 \u00a0 é 日本 😀", '"\\u2028 \\u00a0 é 日本 😀"'),
        ("\x80\x9f\u200b", '"\\u0080\\u009f\\u200b"'),
        ("\U000e0001", '"\\U000e0001"'),
        ('back\\slash "q"', '"back\\\\slash \\"q\\""'),
        ('a"b\\c\n\x01é\u200b', '"a\\"b\\\\c\\n\\x01é\\u200b"'),
        # A lone surrogate reaches Go as U+FFFD (its JSON decoder replaces it), which is printable.
        ("x\ud800y", '"x\ufffdy"'),
    ],
)
def test_go_quote_matches_go(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted


@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"])))
def test_go_quote_reads_back_as_a_python_literal(text: str) -> None:
    quoted = go_quote(text)
    assert ast.literal_eval(quoted) == text
    assert all(ch.isprintable() for ch in quoted)


def parse_map(text: str) -> dict[str, str]:
    out = {}
    for line in text.split("\n") if text else []:
        key, _, quoted = line.partition("=")
        out[key] = ast.literal_eval(quoted)
    return out


KEYS = st.from_regex(
    r"([a-z0-9]([-a-z0-9.]{0,20}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,30}[A-Za-z0-9])?",
    fullmatch=True,
)


@pytest.mark.parametrize(
    ("values", "text"),
    [
        ({}, ""),
        ({"tier": "front", "app": "web"}, 'app="web"\ntier="front"'),
        (
            {"note": "two\nlines", "example.com/owner": 'Ann "the" Admin'},
            'example.com/owner="Ann \\"the\\" Admin"\nnote="two\\nlines"',
        ),
    ],
)
def test_format_map(values: dict[str, str], text: str) -> None:
    assert format_map(values) == text


@given(st.dictionaries(KEYS, st.text(max_size=40), max_size=8))
def test_label_and_annotation_files_parse_back(values: dict[str, str]) -> None:
    text = format_map(values)
    assert not text.endswith("\n")
    assert [line.partition("=")[0] for line in text.split("\n") if text] == sorted(values)
    assert parse_map(text) == values
    assert all(ch.isprintable() or ch == "\n" for ch in text)


@pytest.mark.parametrize(
    ("path", "split"),
    [
        ("metadata.labels['app']", ("metadata.labels", "app")),
        ("metadata.annotations['a.io/b']", ("metadata.annotations", "a.io/b")),
        ("metadata.labels['']", ("metadata.labels", "")),
        ("a['b']['c']", ("a", "b']['c")),  # strings.SplitN(s, "['", 2)
        ("metadata.labels", None),
        ("['app']", None),
        ("metadata.labels[app]", None),
        ("metadata.labels['app'", None),
    ],
)
def test_split_subscript(path: str, split: tuple[str, str] | None) -> None:
    assert split_subscript(path) == split


# --- field values ---------------------------------------------------------------------------------
POD: dict[str, Any] = {
    "metadata": {
        "name": "web-0",
        "namespace": "team",
        "uid": "u-1",
        "labels": {"app": "web", "tier": "front"},
        "annotations": {"example.com/owner": 'Ann "the" Admin', "Example.com/Case": "upper"},
    },
    "spec": {"nodeName": "node-a", "serviceAccountName": "builder", "restartPolicy": "Always"},
    "status": {
        "phase": "Running",
        "podIP": "10.244.0.7",
        "podIPs": [{"ip": "10.244.0.7"}, {"ip": "fd00::7"}],
        "hostIP": "172.18.0.2",
        "hostIPs": [{"ip": "172.18.0.2"}],
    },
}

# Paths both consumers serve, with the same value.
OBJECT_FIELDS = [
    ("metadata.name", "web-0"),
    ("metadata.namespace", "team"),
    ("metadata.uid", "u-1"),
    ("metadata.labels", 'app="web"\ntier="front"'),
    ("metadata.annotations", 'Example.com/Case="upper"\nexample.com/owner="Ann \\"the\\" Admin"'),
    ("metadata.labels['app']", "web"),
    ("metadata.labels['missing']", ""),
    ("metadata.annotations['example.com/owner']", 'Ann "the" Admin'),
    # Annotation keys are validated lowercased, then looked up as written.
    ("metadata.annotations['Example.com/Case']", "upper"),
]

BAD_KEY = "invalid key subscript in metadata.labels['Example.com/Case']: "


@pytest.mark.parametrize(("path", "expected"), OBJECT_FIELDS)
def test_object_fields(path: str, expected: str) -> None:
    assert object_field_value(POD, path) == expected
    assert pod_field_value(POD, path) == expected


@pytest.mark.parametrize(
    ("path", "message"),
    [
        # ExtractFieldPathAsString knows metadata only: a volume cannot serve the kubelet's own
        # fields.
        ("spec.nodeName", "unsupported fieldPath: spec.nodeName"),
        ("status.podIP", "unsupported fieldPath: status.podIP"),
        ("spec.host", "unsupported fieldPath: spec.host"),
        ("metadata.generateName", "unsupported fieldPath: metadata.generateName"),
        ("metadata.name['x']", "fieldPath \"metadata.name['x']\" does not support subscript"),
        ("metadata.labels['Example.com/Case']", BAD_KEY),
        ("metadata.labels['-bad-']", "invalid key subscript in metadata.labels['-bad-']: "),
    ],
)
def test_object_field_errors(path: str, message: str) -> None:
    with pytest.raises(DownwardAPIError) as caught:
        object_field_value(POD, path)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("spec.nodeName", "node-a"),
        ("spec.host", "node-a"),  # an old v1 client's name for it
        ("spec.serviceAccountName", "builder"),
        ("status.podIP", "10.0.0.9"),
        ("status.podIPs", "10.0.0.9,fd00::9"),
        ("status.hostIP", "172.18.0.9"),
        ("status.hostIPs", "172.18.0.9"),
    ],
)
def test_env_fields_the_kubelet_answers(path: str, expected: str) -> None:
    assert (
        pod_field_value(POD, path, pod_ips=["10.0.0.9", "fd00::9"], host_ips=["172.18.0.9"])
        == expected
    )


@pytest.mark.parametrize(
    ("status", "path", "expected"),
    [
        (POD["status"], "status.podIP", "10.244.0.7"),
        (POD["status"], "status.podIPs", "10.244.0.7,fd00::7"),
        (POD["status"], "status.hostIP", "172.18.0.2"),
        (POD["status"], "status.hostIPs", "172.18.0.2"),
        ({"podIP": "10.244.0.8"}, "status.podIPs", "10.244.0.8"),  # an older status: no list
        ({}, "status.podIP", ""),
        ({}, "status.hostIPs", ""),
    ],
)
def test_env_ips_default_to_the_pods_status(
    status: dict[str, Any], path: str, expected: str
) -> None:
    assert pod_field_value({**POD, "status": status}, path) == expected
    assert pod_field_value({**POD, "status": status}, path, pod_ips=(), host_ips=()) == ""


def test_an_unbound_pods_node_name_is_the_kubelets() -> None:
    unbound = {**POD, "spec": {}}
    assert pod_field_value(unbound, "spec.nodeName", node_name="node-b") == "node-b"
    assert pod_field_value(unbound, "spec.serviceAccountName") == ""


@pytest.mark.parametrize(
    ("path", "api_version", "message"),
    [
        ("status.phase", "v1", "unsupported fieldPath: status.phase"),
        ("spec.restartPolicy", "v1", "unsupported fieldPath: spec.restartPolicy"),
        ("spec.containers", "v1", "field label not supported: spec.containers"),
        ("metadata.generateName", "v1", "field label not supported: metadata.generateName"),
        ("metadata.name['x']", "v1", "field label does not support subscript: metadata.name['x']"),
        ("metadata.labels['Example.com/Case']", "v1", BAD_KEY),
        ("metadata.name", "v2", "unsupported pod version: v2"),
    ],
)
def test_env_field_errors(path: str, api_version: str, message: str) -> None:
    with pytest.raises(DownwardAPIError) as caught:
        pod_field_value(POD, path, api_version=api_version)
    assert str(caught.value).startswith(message)


# --- resource values ------------------------------------------------------------------------------
MAIN = {
    "name": "main",
    "resources": {"limits": {"cpu": "1500m", "memory": "1Gi"}, "requests": {"cpu": "250m"}},
}
SIDE = {"name": "side", "resources": {"limits": {"memory": "0"}, "requests": {"memory": "1500"}}}
SETUP = {"name": "setup", "resources": {"requests": {"cpu": "250m"}}}
RESOURCE_POD = {"spec": {"containers": [MAIN, SIDE], "initContainers": [SETUP]}}


@pytest.mark.parametrize(
    ("container", "resource", "divisor", "volume", "env"),
    [
        ("main", "limits.cpu", None, "2", "2"),  # 1.5 cores, rounded up
        ("main", "limits.cpu", "1m", "1500", "1500"),
        ("main", "limits.cpu", "100m", "15", "15"),
        ("main", "limits.cpu", "0", "2", "2"),  # a zero divisor means 1
        ("main", "requests.cpu", None, "1", "1"),
        ("main", "requests.cpu", "1m", "250", "250"),
        ("main", "limits.memory", None, str(2**30), str(2**30)),
        ("main", "limits.memory", "1Mi", "1024", "1024"),
        ("main", "limits.memory", "1G", "2", "2"),  # memory rounds up too
        ("main", "requests.memory", None, "0", "0"),
        ("main", "limits.ephemeral-storage", "1Gi", "1024", "1024"),  # unset: the node's 1Ti
        ("main", "requests.ephemeral-storage", None, "0", "0"),
        ("main", "limits.hugepages-2Mi", None, "0", "0"),  # never defaulted from the node
        ("side", "limits.memory", "1Gi", "512", "512"),  # a zero limit reads as the node's
        ("side", "limits.cpu", None, "64", "64"),
        ("side", "requests.memory", "1Ki", "2", "2"),  # 1500 bytes, rounded up
        # The one difference: a volume's named init container has its limits defaulted, an env var's
        # not.
        ("setup", "limits.cpu", None, "64", "0"),
        ("setup", "limits.memory", "1Gi", "512", "0"),
        ("setup", "requests.cpu", "1m", "250", "250"),
    ],
)
def test_resource_values(
    container: str, resource: str, divisor: str | None, volume: str, env: str
) -> None:
    ref: dict[str, Any] = {"containerName": container, "resource": resource}
    if divisor is not None:
        ref["divisor"] = divisor
    assert volume_resource_value(RESOURCE_POD, ref) == volume
    assert env_resource_value(ref, RESOURCE_POD, MAIN) == env


@pytest.mark.parametrize("started", [MAIN, SIDE, SETUP])
def test_an_env_var_without_container_name_reads_its_own_defaulted_container(
    started: dict[str, Any],
) -> None:
    ref = {"resource": "limits.cpu"}
    expected = "2" if started is MAIN else "64"
    assert env_resource_value(ref, RESOURCE_POD, started) == expected


def test_the_node_allocatable_can_be_given() -> None:
    allocatable = {"cpu": "8", "memory": "16Gi"}
    ref = {"containerName": "side", "resource": "limits.memory", "divisor": "1Gi"}
    assert volume_resource_value(RESOURCE_POD, ref, allocatable) == "16"
    assert env_resource_value(ref, RESOURCE_POD, MAIN, allocatable) == "16"
    storage = {"containerName": "side", "resource": "limits.ephemeral-storage"}
    assert volume_resource_value(RESOURCE_POD, storage, allocatable) == "0"


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        (
            {"containerName": "main", "resource": "limits.nvidia.com/gpu"},
            "unsupported container resource : limits.nvidia.com/gpu",
        ),
        (
            {"containerName": "main", "resource": "limits.gpu"},
            "unsupported container resource : limits.gpu",
        ),
        ({"containerName": "main", "resource": "cpu"}, "unsupported container resource : cpu"),
        ({"containerName": "ghost", "resource": "limits.cpu"}, "container ghost not found"),
    ],
)
def test_resource_errors(ref: dict[str, str], message: str) -> None:
    with pytest.raises(DownwardAPIError, match=f"^{re.escape(message)}$"):
        volume_resource_value(RESOURCE_POD, ref)
    with pytest.raises(DownwardAPIError, match=f"^{re.escape(message)}$"):
        env_resource_value(ref, RESOURCE_POD, MAIN)


def test_a_volume_needs_a_container_name() -> None:
    with pytest.raises(DownwardAPIError, match=r"^container  not found$"):
        volume_resource_value(RESOURCE_POD, {"resource": "limits.cpu"})


@pytest.mark.parametrize("divisor", ["1", "1k", "1Ki", "1M", "1Mi", "1G", "1Gi"])
@given(amount=st.integers(min_value=0, max_value=2**40))
def test_memory_is_the_ceiling_of_the_exact_quotient(divisor: str, amount: int) -> None:
    pod = {
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"memory": str(amount)}}}]}
    }
    ref = {"containerName": "c", "resource": "requests.memory", "divisor": divisor}
    units = {
        "1": 1,
        "1k": 10**3,
        "1Ki": 2**10,
        "1M": 10**6,
        "1Mi": 2**20,
        "1G": 10**9,
        "1Gi": 2**30,
    }
    assert volume_resource_value(pod, ref) == str(math.ceil(Fraction(amount, units[divisor])))


@given(millis=st.integers(min_value=0, max_value=10**7), divisor=st.sampled_from(["1", "1m"]))
def test_cpu_counts_millicores_rounded_up(millis: int, divisor: str) -> None:
    pod = {
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": f"{millis}m"}}}]}
    }
    ref = {"containerName": "c", "resource": "requests.cpu", "divisor": divisor}
    expected = str(millis if divisor == "1m" else math.ceil(Fraction(millis, 1000)))
    assert volume_resource_value(pod, ref) == env_resource_value(ref, pod, {}) == expected


def test_find_container_says_whether_it_is_an_app_container() -> None:
    assert find_container(RESOURCE_POD, "side") == (SIDE, True)
    assert find_container(RESOURCE_POD, "setup") == (SETUP, False)


def test_the_node_reports_the_allocatable_the_downward_api_falls_back_to() -> None:
    node = nodes.node_object(nodes.unlimited_node("node-a"), 0, "2024-01-01T00:00:00Z")
    assert node["status"]["allocatable"] == node["status"]["capacity"] == dict(NODE_ALLOCATABLE)
    assert {"cpu", "memory", "ephemeral-storage"} <= NODE_ALLOCATABLE.keys()
