"""The cluster's shape: --node-allocatable, cluster files, uniform clusters and the Node objects."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from kubesim import nodes
from kubesim.cli import nodes_from_args
from kubesim.settings import SimSettings


def test_parse_allocatable_adds_the_default_pods() -> None:
    assert nodes.parse_allocatable("cpu=16,memory=64Gi,nvidia.com/gpu=4") == {
        "cpu": "16",
        "memory": "64Gi",
        "nvidia.com/gpu": "4",
        "pods": "110",
    }


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("cpu=16,memory", "--node-allocatable: 'memory' is not resource=quantity"),
        ("cpu=lots", "--node-allocatable.cpu: 'lots' is not a quantity"),
        ("cpu=-1", "--node-allocatable.cpu: '-1' is not a quantity"),
        ("bad name=1", "--node-allocatable: 'bad name' is not a resource name"),
    ],
)
def test_parse_allocatable_names_the_bad_item(text: str, error: str) -> None:
    with pytest.raises(nodes.ShapeError, match="^" + error.replace(".", r"\.")):
        nodes.parse_allocatable(text)


def test_uniform_names_nodes_from_one() -> None:
    shapes = nodes.uniform(3, {"cpu": "1"})
    assert [s.name for s in shapes] == ["kubesim-1", "kubesim-2", "kubesim-3"]
    assert not any(s.unlimited for s in shapes)


def test_a_cluster_file(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(
        "nodes:\n"
        "- name: gpu-1\n"
        "  labels: {accelerator: a100}\n"
        "  taints: [{key: gpu, value: 'true', effect: NoSchedule}]\n"
        "  allocatable: {cpu: 32, memory: 128Gi, nvidia.com/gpu: 8}\n"
        "- name: cpu-1\n"
        "  allocatable: {cpu: 500m}\n"
    )
    gpu, cpu = nodes.load_cluster_file(path)
    assert (gpu.labels, gpu.taints) == (
        {"accelerator": "a100"},
        (nodes.Taint("gpu", "NoSchedule", "true"),),
    )
    assert gpu.allocatable == {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "8", "pods": "110"}
    assert cpu.allocatable == {"cpu": "500m", "pods": "110"}


@pytest.mark.parametrize(
    ("document", "error"),
    [
        ({}, "c: nodes: a list of nodes is required"),
        ({"nodes": []}, "c: nodes: at least one node is required"),
        (
            {"nodes": [{"name": "Bad_Name"}]},
            "c: nodes[0].name: 'Bad_Name' is not a DNS subdomain name",
        ),
        ({"nodes": [{"name": "a", "cpu": 1}]}, "c: nodes[0].cpu: unknown field"),
        (
            {"nodes": [{"name": "a", "allocatable": {"cpu": "x"}}]},
            "c: nodes[0].allocatable.cpu: 'x' is not",
        ),
        (
            {"nodes": [{"name": "a", "taints": [{"key": "k", "effect": "Never"}]}]},
            "c: nodes[0].taints[0].effect",
        ),
        ({"nodes": [{"name": "a"}, {"name": "a"}]}, "c: nodes[1].name: 'a' is listed twice"),
    ],
)
def test_cluster_file_errors_name_the_field(document: object, error: str) -> None:
    with pytest.raises(nodes.ShapeError) as err:
        nodes.shapes_from_document(document, "c")
    assert str(err.value).startswith(error)


def test_the_default_cluster_is_one_unlimited_node_named_as_always() -> None:
    (shape,) = SimSettings().node_shapes()
    assert (shape.name, shape.unlimited) == ("kubesim-node", True)
    assert nodes.is_default_shape((shape,))
    assert not nodes.is_default_shape(nodes.uniform(1, {}))


def test_a_node_object_reads_like_a_registered_kubelets() -> None:
    shape = nodes.NodeShape(
        "kubesim-2",
        {"cpu": "4", "pods": "110"},
        labels={"zone": "b"},
        taints=(nodes.Taint("k", "NoExecute"),),
    )
    node = nodes.node_object(shape, 1, "2024-01-01T00:00:00Z")
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == "kubesim-2"
    assert (labels["kubernetes.io/os"], labels["kubernetes.io/arch"], labels["zone"]) == (
        "linux",
        "amd64",
        "b",
    )
    assert not any(key.startswith("node-role.kubernetes.io/") for key in labels)
    assert node["spec"] == {"taints": [{"key": "k", "effect": "NoExecute"}]}
    status = node["status"]
    assert status["capacity"] == status["allocatable"] == {"cpu": "4", "pods": "110"}
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [
        ("MemoryPressure", "False"),
        ("DiskPressure", "False"),
        ("PIDPressure", "False"),
        ("Ready", "True"),
    ]
    assert status["conditions"][-1]["reason"] == "KubeletReady"
    assert status["addresses"] == [
        {"type": "InternalIP", "address": "172.18.0.3"},
        {"type": "Hostname", "address": "kubesim-2"},
    ]
    assert status["nodeInfo"]["kubeletVersion"] == "v1.32.0"


def test_a_shape_without_pods_still_reports_the_kubelets_110() -> None:
    """A shape built in code with only `cpu` (not through the parsers) must not read as a node
    that takes no pods at all ("Too many pods")."""
    node = nodes.node_object(nodes.NodeShape("kubesim-1", {"cpu": "4"}), 1, "2024-01-01T00:00:00Z")
    assert node["status"]["allocatable"] == {"pods": "110", "cpu": "4"}


def test_a_time_sliced_node_advertises_its_gpus_times_the_replicas() -> None:
    """As the NVIDIA device plugin with `sharing.timeSlicing` and GPU feature discovery show it."""
    shape = nodes.NodeShape("kubesim-1", {"cpu": "8", "nvidia.com/gpu": "4"}, gpu_replicas=2)
    node = nodes.node_object(shape, 0, "2024-01-01T00:00:00Z")
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "8"
    labels = node["metadata"]["labels"]
    assert (
        labels["nvidia.com/gpu.count"],
        labels["nvidia.com/gpu.replicas"],
        labels["nvidia.com/gpu.sharing-strategy"],
    ) == ("4", "2", "time-slicing")
    plain = nodes.node_object(nodes.NodeShape("kubesim-1", dict(shape.allocatable)), 0, "t")
    assert plain["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    assert not any(key.startswith("nvidia.com/") for key in plain["metadata"]["labels"])


def test_gpu_replicas_from_flags_and_from_a_cluster_file() -> None:
    assert {s.gpu_replicas for s in nodes.uniform(2, {"nvidia.com/gpu": "4"}, gpu_replicas=3)} == {
        3
    }
    (shape,) = nodes.shapes_from_document(
        {"nodes": [{"name": "a", "allocatable": {"nvidia.com/gpu": 1}, "gpuReplicas": 4}]}
    )
    assert shape.gpu_replicas == 4
    (default,) = nodes.shapes_from_document({"nodes": [{"name": "a"}]})
    assert default.gpu_replicas == 1


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        (
            {"allocatable": {"nvidia.com/gpu": 1}, "gpuReplicas": 0},
            "c: nodes[0].gpuReplicas: 0 must be a whole number, at least 1",
        ),
        (
            {"allocatable": {"nvidia.com/gpu": 1}, "gpuReplicas": "2"},
            "c: nodes[0].gpuReplicas: '2' must be a whole number",
        ),
        (
            {"allocatable": {"cpu": 1}, "gpuReplicas": 2},
            "c: nodes[0].gpuReplicas: time-slicing needs a whole number of nvidia.com/gpu",
        ),
        (
            {"allocatable": {"nvidia.com/gpu": "500m"}, "gpuReplicas": 2},
            "c: nodes[0].gpuReplicas: time-slicing needs a whole number of nvidia.com/gpu",
        ),
    ],
)
def test_gpu_replicas_errors_name_the_field(entry: dict[str, object], error: str) -> None:
    with pytest.raises(nodes.ShapeError) as err:
        nodes.shapes_from_document({"nodes": [{"name": "a", **entry}]}, "c")
    assert str(err.value).startswith(error)
    with pytest.raises(nodes.ShapeError, match=r"^--gpu-replicas: "):
        nodes.uniform(1, {"cpu": "1"}, gpu_replicas=2)


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        ({"cluster": "c.yaml", "gpu_replicas": 2}, "--cluster describes every node"),
        ({"gpu_replicas": 2}, "--gpu-replicas: needs --nodes or --node-allocatable"),
    ],
)
def test_gpu_replicas_flag_needs_uniform_nodes(flags: dict[str, object], error: str) -> None:
    with pytest.raises(nodes.ShapeError, match="^" + error):
        nodes_from_args(argparse.Namespace(**flags))


def test_gpu_replicas_flag_shares_every_node() -> None:
    flags = {"nodes": 2, "node_allocatable": "nvidia.com/gpu=2", "gpu_replicas": 2}
    shapes = nodes_from_args(argparse.Namespace(**flags))
    assert [(s.name, s.gpu_replicas) for s in shapes] == [("kubesim-1", 2), ("kubesim-2", 2)]
