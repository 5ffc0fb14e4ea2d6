"""No command of the CLI ends in a traceback on a user error: bad flags, unreadable or unwritable
files and no cluster each end in one line on stderr saying what is wrong, with exit 2 for a bad
command line and 1 for a failure. (`run` against a cluster without the CRD:
tests/e2e/test_run_cli.py; `generate`'s options: tests/e2e/test_generate_cli.py; a missing `sim`
extra: tests/e2e/test_install_wheel.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mpi_operator import cli
from operator_testing import source_env


def _last_error(err: str) -> str:
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sim", "--port", "99999"], "argument --port: port 99999 is not in 0..65535"),
        (["sim", "--port", "http"], "argument --port: not a whole number: 'http'"),
        (["sim", "--fault-rate", "2"], "argument --fault-rate: 2 is not in 0..1"),
        (
            ["sim", "--start-seconds", "-1"],
            "argument --start-seconds: -1: must be zero or more seconds",
        ),
        (
            ["sim", "--ready-seconds", "nan"],
            "argument --ready-seconds: nan: must be zero or more seconds",
        ),
        (["run", "--bogus"], "unrecognized arguments: --bogus"),
        (["bogus"], "invalid choice: 'bogus'"),
    ],
)
def test_bad_flags_exit_2_with_usage(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    assert message in _last_error(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--workers", "0"], "mpi-operator run: --workers: must be at least 1, got 0"),
        (["run", "--workers", "x"], "mpi-operator run: --workers: not a whole number: 'x'"),
        (
            ["run", "--gpus-per-node", "0"],
            "mpi-operator run: --gpus-per-node: must be at least 1, got 0",
        ),
        (
            ["run", "--metrics-address", "8080"],
            "mpi-operator run: --metrics-address must be HOST:PORT, got '8080'",
        ),
    ],
)
def test_bad_run_values_exit_2_before_connecting(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    assert _last_error(capsys.readouterr().err) == message


def test_crds_into_an_unwritable_place_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert cli.main(["crds", "--out", str(blocker / "dir")]) == 1
    line = _last_error(capsys.readouterr().err)
    assert line.startswith(f"mpi-operator crds: cannot write {blocker / 'dir'}/")


def test_validate_a_missing_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["validate", str(tmp_path / "nope.yaml")]) == 2
    assert (
        _last_error(capsys.readouterr().err)
        == f"{tmp_path / 'nope.yaml'}: cannot read: No such file or directory"
    )


@pytest.mark.parametrize("kubeconfig", ["missing", "not-yaml"])
def test_run_with_a_bad_kubeconfig_ends_in_one_line(tmp_path: Path, kubeconfig: str) -> None:
    # A process: `run` sets up logging for the whole interpreter.
    path = tmp_path / "kubeconfig"
    if kubeconfig == "not-yaml":
        path.write_text("clusters: [\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mpi_operator",
            "run",
            "--kubeconfig",
            str(path),
            "--no-leader-elect",
            "--metrics-address",
            "127.0.0.1:0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=source_env(),
        check=False,
    )
    assert result.returncode == 1
    line = _last_error(result.stderr)
    assert f"fatal: cannot configure the Kubernetes client from {path}: " in line


def test_sim_with_an_unreadable_images_file_ends_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    images = tmp_path / "images.yaml"
    images.write_text("images: [\n")
    assert cli.main(["sim", "--images", str(images)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"kubesim: {images}: while parsing")
