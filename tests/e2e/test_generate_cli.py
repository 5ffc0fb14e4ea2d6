"""`mpi-operator generate` as a process: its stdout is a manifest `mpi-operator validate -` accepts;
a bad option exits 2 with the reason on stderr and nothing on stdout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mpi_operator", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


GOOD: dict[str, list[str]] = {
    "simple-16-gpus-8-per-node": ["simple", "--name", "tf", "--gpus", "16", "--gpus-per-node", "8"],
    "simple-with-command": [
        "simple", "--name", "tf", "--gpus", "2", "--namespace", "ml",
        "--command", "mpirun -np 2 python /benchmarks/tf_cnn_benchmarks.py",
        "--args=--batch_size=64,--model=resnet50",
    ],
    "custom": [
        "custom", "--name", "bert", "--replicas", "3", "--gpus-per-replica", "2", "--image",
        "my/bert:1",
    ],
    "openmpi": [
        "openmpi", "--name", "pi", "--workers", "2", "--gpu", "1", "--cpu", "2", "--memory", "4Gi",
        "--node-selector", "cloud.google.com/gke-accelerator=nvidia-tesla-t4,disk=ssd",
        "--init-timeout", "120", "--exec", "python /opt/pi.py --iterations 100",
    ],
    "elastic": ["elastic", "--name", "hvd", "--min", "1", "--max", "4", "--replicas", "2"],
    "elastic-gpu": [
        "elastic", "--name", "hvd-gpu", "--min", "2", "--max", "8", "--gpus-per-worker", "4",
        "--script", "/examples/elastic/pytorch_synthetic_elastic.py",
    ],
    "elastic-root-image": [
        "elastic", "--name", "hvd-root", "--max", "2",
        "--image", "docker.io/horovod/horovod:0.28.1",
        "--run-as-user", "0", "--ssh-port", "22", "--ssh-auth-mount-path", "/root/.ssh",
        "--script", "/horovod/examples/elastic/tensorflow2/tensorflow2_mnist_elastic.py",
    ],
    # examples/elastic/README.md, verbatim
    "readme-elastic": [
        "elastic", "--name", "my-elastic", "--min", "1", "--max", "4", "--replicas", "2",
    ],
    "readme-elastic-gpu": [
        "elastic", "--name", "my-elastic-gpu", "--min", "1", "--max", "4", "--gpus-per-worker", "2",
        "--script", "/examples/elastic/pytorch_synthetic_elastic.py",
    ],
}  # fmt: skip


def test_readme_generate_commands_are_the_tested_ones() -> None:
    readme = (
        Path(__file__).resolve().parents[2] / "examples" / "elastic" / "README.md"
    ).read_text()
    joined = readme.replace("\\\n  ", "")
    for case in ("readme-elastic", "readme-elastic-gpu"):
        assert "mpi-operator generate " + " ".join(GOOD[case]) in joined


@pytest.mark.parametrize("case", list(GOOD), ids=list(GOOD))
def test_generated_manifest_passes_validate(case: str) -> None:
    generated = _cli("generate", *GOOD[case])
    assert generated.returncode == 0, generated.stderr
    assert generated.stderr == ""
    job = yaml.safe_load(generated.stdout)
    assert job["apiVersion"] == "kubeflow.org/v2beta1"
    assert job["metadata"]["name"] == GOOD[case][2]
    checked = _cli("validate", "-", stdin=generated.stdout)
    assert checked.returncode == 0, checked.stdout
    assert f'OK MPIJob "{job["metadata"]["name"]}"' in checked.stdout


def test_simple_16_gpus_8_per_node_prints_two_workers_of_eight_gpus() -> None:
    job = yaml.safe_load(_cli("generate", *GOOD["simple-16-gpus-8-per-node"]).stdout)
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 2
    assert worker["template"]["spec"]["containers"][0]["resources"] == {
        "limits": {"nvidia.com/gpu": 8}
    }
    assert job["spec"]["slotsPerWorker"] == 8


def test_elastic_validate_reports_the_bounds() -> None:
    generated = _cli("generate", *GOOD["elastic"])
    checked = _cli("validate", "-", stdin=generated.stdout)
    assert "2 workers, elastic 1..4" in checked.stdout


BAD: dict[str, tuple[list[str], str]] = {
    "gpus-not-divisible": (
        ["simple", "--name", "x", "--gpus", "12", "--gpus-per-node", "8"],
        "--gpus: ",
    ),
    "zero-workers": (
        ["openmpi", "--name", "x", "--workers", "0", "--exec", "hostname"],
        "--workers: ",
    ),
    "zero-replicas": (["custom", "--name", "x", "--replicas", "0"], "--replicas: "),
    "min-above-max": (["elastic", "--name", "x", "--min", "3", "--max", "2"], "--min: "),
    "negative-gpu": (["openmpi", "--name", "x", "--gpu", "-1", "--exec", "hostname"], "--gpu: "),
    "bad-node-selector": (
        ["openmpi", "--name", "x", "--node-selector", "gpu", "--exec", "hostname"],
        "--node-selector: ",
    ),
    "bad-name": (["custom", "--name", "1-job"], "--name: "),
    "not-a-number": (
        ["simple", "--name", "x", "--gpus", "many"],
        "argument --gpus: invalid int value",
    ),
    "missing-name": (["custom"], "the following arguments are required: --name"),
    "missing-max": (["elastic", "--name", "x"], "the following arguments are required: --max"),
    "unknown-flavour": (["ksonnet", "--name", "x"], "invalid choice: 'ksonnet'"),
    "flag-of-another-flavour": (
        ["simple", "--name", "x", "--workers", "2"],
        "unrecognized arguments: --workers",
    ),
}


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_bad_options_exit_2_with_the_reason_on_stderr(case: str) -> None:
    args, message = BAD[case]
    done = _cli("generate", *args)
    assert done.returncode == 2
    assert done.stdout == ""
    assert message in done.stderr
