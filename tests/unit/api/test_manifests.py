"""`mpi-operator validate`: the real command on real files (output lines, exit codes), plus edge
cases."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mpi_operator.api.constants import MAX_WORKER_REPLICAS
from mpi_operator.api.manifests import EXIT_INVALID, EXIT_OK, ManifestLoader, validate_text

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"


def _run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mpi_operator", "validate", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_multi_document_file() -> None:
    path = MANIFESTS / "mixed" / "namespace-and-jobs.yaml"
    run = _run(str(path))
    assert run.returncode == 1, run.stderr
    assert run.stderr == ""
    assert run.stdout.splitlines() == [
        f"{path}[{line}"
        for line in (
            "0]: note: skipped Namespace (not a kubeflow.org MPIJob)",
            '1]: OK MPIJob "pi" (kubeflow.org/v2beta1, 2 workers)',
            "3]: spec.slotPerWorker: unknown field, which kubectl apply refuses; "
            'did you mean "slotsPerWorker"?',
            '3]: spec.runPolicy.cleanPodPolicy: Unsupported value: "Always": '
            'supported values: "All", "Running", "None"',
            "3]: spec.mpiReplicaSpecs.Worker.replicas: must be >= 1",
            "4]: note: apiVersion: kubeflow.org/v1 -> apiVersion: kubeflow.org/v2beta1 "
            "(deprecated version, served through the v2beta1 schema)",
            "4]: note: spec.cleanPodPolicy: All -> spec.runPolicy.cleanPodPolicy: All",
            '4]: OK MPIJob "legacy" (kubeflow.org/v1, 1 worker)',
            "5]: note: skipped ConfigMap (not a kubeflow.org MPIJob)",
        )
    ]


def test_all_valid_manifests_pass() -> None:
    files = sorted(str(p) for p in (MANIFESTS / "valid").glob("*.yaml"))
    run = _run(*files, "--gpus-per-node", "8")
    assert run.returncode == 0, run.stdout
    ok = [line for line in run.stdout.splitlines() if ": OK MPIJob " in line]
    assert [line.split("[0]: ")[0] for line in ok] == files
    assert (
        f'{MANIFESTS}/valid/v1alpha1-gpus.yaml[0]: OK MPIJob "tf-resnet50-horovod-job" '
        "(kubeflow.org/v1alpha1, 2 workers)" in ok
    )
    assert (
        f'{MANIFESTS}/valid/v1-horovod-elastic.yaml[0]: OK MPIJob "tensorflow-mnist-elastic" '
        "(kubeflow.org/v1, 2 workers, elastic 1..3 inferred from horovodrun)"
    ) in ok
    assert (
        f'{MANIFESTS}/valid/v2beta1-elastic-gpu.yaml[0]: OK MPIJob "resnet50-elastic" '
        "(kubeflow.org/v2beta1, 4 workers, elastic 2..8)"
    ) in ok


def test_unreadable_file_exits_2_and_others_are_still_checked(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    run = _run(str(missing), str(MANIFESTS / "invalid" / "workers-zero.yaml"))
    assert run.returncode == 2
    assert run.stderr.strip() == f"{missing}: cannot read: No such file or directory"
    assert "spec.mpiReplicaSpecs.Worker.replicas: must be >= 1" in run.stdout


def test_max_workers_per_job_judges_as_the_operator_would() -> None:
    # v2beta1-elastic-gpu.yaml: 4 workers, elastic 2..8. At --max-workers-per-job 4 the bound
    # maxReplicas 8 is over the operator's limit, as `run --max-workers-per-job 4` would report in
    # its Invalid condition.
    path = MANIFESTS / "valid" / "v2beta1-elastic-gpu.yaml"
    assert _run(str(path), "--max-workers-per-job", "8").returncode == EXIT_OK
    run = _run(str(path), "--max-workers-per-job", "4")
    assert run.returncode == EXIT_INVALID, run.stdout
    assert (
        f"{path}[0]: spec.elasticPolicy.maxReplicas: Invalid value: 8: must be no more than 4 "
        "workers, "
        "the most this operator allows per MPIJob (--max-workers-per-job)"
    ) in run.stdout.splitlines()


@pytest.mark.parametrize("value", ["0", str(MAX_WORKER_REPLICAS + 1), "many"])
def test_max_workers_per_job_may_only_lower_the_ceiling(value: str) -> None:
    run = _run(
        str(MANIFESTS / "valid" / "v2beta1-elastic-gpu.yaml"), "--max-workers-per-job", value
    )
    assert run.returncode == 2
    assert "argument --max-workers-per-job:" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


def test_malformed_yaml_from_stdin_reports_line_and_column() -> None:
    text = "apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nspec:\n  mpiReplicaSpecs: [\n"
    run = _run("-", stdin=text)
    assert run.returncode == 1
    assert "Traceback" not in run.stdout + run.stderr
    assert run.stdout.startswith("<stdin>[0]: invalid YAML: line 5, column 1: ")


@pytest.mark.parametrize(
    ("text", "status", "lines"),
    [
        ("", EXIT_INVALID, ["f.yaml: no MPIJob found (--allow-empty accepts that)"]),
        (
            "- a\n- b\n",
            EXIT_INVALID,
            ["f.yaml[0]: <root>: must be an object (a Kubernetes manifest)"],
        ),
        (
            "apiVersion: training.kubedl.io/v1alpha1\nkind: MPIJob\n",
            EXIT_INVALID,
            [
                "f.yaml[0]: note: skipped MPIJob (not a kubeflow.org MPIJob)",
                "f.yaml: no MPIJob found",
            ],
        ),
        (
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: kubeflow.org/v2beta1\n  kind: "
            "MPIJob\n"
            "  metadata: {name: x}\n  spec: {mpiReplicaSpecs: {}}\n",
            EXIT_INVALID,
            ["f.yaml[0].items[0]: spec.mpiReplicaSpecs.Launcher: Required value"],
        ),
        (
            "kind: MPIJob\napiVersion: kubeflow.org/v2beta1\nmetadata: {name: x}\n---\nfoo: [\n",
            EXIT_INVALID,
            ["f.yaml[0]: spec: Required value", "f.yaml[1]: invalid YAML: line 6, column 1: "],
        ),
        (
            "apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nmetadata: {name: x}\nspec:\n  "
            "mpiReplicaSpecs:\n"
            "    Launcher:\n      template: {spec: {containers: [{name: l, image: i}]}}\n",
            EXIT_OK,
            ['f.yaml[0]: OK MPIJob "x" (kubeflow.org/v2beta1, 0 workers)'],
        ),
    ],
    ids=[
        "empty",
        "not-an-object",
        "other-group",
        "list-kind",
        "yaml-error-after-a-job",
        "launcher-only",
    ],
)
def test_validate_text(text: str, status: int, lines: list[str]) -> None:
    out = io.StringIO()
    assert validate_text("f.yaml", text, gpus_per_node=1, out=out) == status
    got = out.getvalue().splitlines()
    assert len(got) == len(lines), got
    for line, want in zip(got, lines, strict=True):
        assert line.startswith(want), (line, want)


TYPO = MANIFESTS / "mixed" / "slot-per-worker-typo.yaml"
SUGGESTION = 'spec.slotPerWorker: unknown field, {}; did you mean "slotsPerWorker"?'


@pytest.mark.parametrize(
    ("flags", "status", "lines"),
    [
        ((), EXIT_INVALID, [SUGGESTION.format("which kubectl apply refuses")]),
        (
            ("--validate=warn",),
            EXIT_OK,
            [
                "warning: " + SUGGESTION.format("will be dropped by the API server"),
                'OK MPIJob "pi" (kubeflow.org/v2beta1, 2 workers)',
            ],
        ),
        (("--validate=ignore",), EXIT_OK, ['OK MPIJob "pi" (kubeflow.org/v2beta1, 2 workers)']),
    ],
    ids=["strict-by-default", "warn", "ignore"],
)
def test_unknown_fields_are_errors_as_kubectl_apply_makes_them(
    flags: tuple[str, ...], status: int, lines: list[str]
) -> None:
    run = _run(str(TYPO), *flags)
    assert run.returncode == status, run.stdout
    assert run.stdout.splitlines() == [f"{TYPO}[0]: {line}" for line in lines]


def test_empty_input_fails_unless_allowed() -> None:
    # `mpi-operator generate ... | mpi-operator validate -` after generate failed: CI must not pass.
    run = _run("-", stdin="")
    assert run.returncode == EXIT_INVALID
    assert run.stdout == "<stdin>: no MPIJob found (--allow-empty accepts that)\n"
    run = _run("-", "--allow-empty", stdin="")
    assert run.returncode == EXIT_OK
    assert run.stdout == "<stdin>: note: no MPIJob found\n"


def test_timestamps_stay_strings_as_with_kubectl() -> None:
    text = "created: 2024-01-01T00:00:00Z\nday: 2024-01-01\nflag: yes\n"
    assert yaml.load(text, Loader=ManifestLoader) == {
        "created": "2024-01-01T00:00:00Z",
        "day": "2024-01-01",
        "flag": True,
    }
