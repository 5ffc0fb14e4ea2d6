"""Stand-in images: the YAML form `mpi-operator sim --images FILE` reads, and how references
match."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kubesim.images import ImageCatalog, ImageSpec
from kubesim.procrt import hidden_from_containers
from kubesim.procrt.shim import CONTAINER_OWN_DIRS


def test_a_catalog_file_gives_every_field_and_resolves_roots_against_its_folder(
    tmp_path: Path,
) -> None:
    (tmp_path / "images.yaml").write_text(
        """
images:
  mpioperator/mpi-pi:openmpi:
    root: roots/openmpi
    entrypoint: [/entrypoint.sh]
    cmd: [bash]
    env: {PATH: /opt/bin:/usr/bin, N: 1}
    workingDir: /home/mpiuser
    passwd: ["mpiuser:x:1000:1000::/home/mpiuser:/bin/sh"]
    group: ["mpiuser:x:1000:"]
  plain: {}
"""
    )
    catalog = ImageCatalog.load(tmp_path / "images.yaml")
    assert catalog.get("mpioperator/mpi-pi:openmpi") == ImageSpec(
        root=tmp_path / "roots" / "openmpi",
        entrypoint=("/entrypoint.sh",),
        cmd=("bash",),
        env=(("PATH", "/opt/bin:/usr/bin"), ("N", "1")),
        working_dir="/home/mpiuser",
        passwd=("mpiuser:x:1000:1000::/home/mpiuser:/bin/sh",),
        group=("mpiuser:x:1000:",),
    )
    assert catalog.get("plain") == ImageSpec()


@pytest.mark.parametrize(
    ("reference", "found"),
    [
        ("debian:bookworm", True),
        ("docker.io/library/debian:bookworm", True),
        ("docker.io/debian:bookworm", True),
        ("debian:trixie", False),
        ("quay.io/debian:bookworm", False),
    ],
)
def test_references_match_with_or_without_the_docker_hub_prefix(
    reference: str, found: bool
) -> None:
    spec = ImageSpec(working_dir="/w")
    catalog = ImageCatalog({"debian:bookworm": spec})
    # A reference with no stand-in runs on the machine's own filesystem: the empty image.
    assert catalog.get(reference) == (spec if found else ImageSpec())


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("images: [a, b]\n", "expected a mapping under 'images'"),
        ("images:\n  x:\n    env: [A=1]\n", "images['x']: image env must be a mapping"),
        ("images:\n  x:\n    cmd: sshd -De\n", "images['x']: image cmd must be a list of strings"),
        ("images: {x: [\n", "while parsing"),
    ],
)
def test_a_bad_catalog_is_refused_naming_the_image_and_field(
    tmp_path: Path, text: str, fragment: str
) -> None:
    path = tmp_path / "images.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"images\.yaml") as raised:
        ImageCatalog.load(path)
    assert fragment in str(raised.value)


def test_mpi_operator_sim_says_what_is_wrong_with_an_images_file_and_exits_1(
    tmp_path: Path,
) -> None:
    path = tmp_path / "images.yaml"
    path.write_text("images:\n  x:\n    env: [A=1]\n")
    done = subprocess.run(
        [sys.executable, "-m", "mpi_operator", "sim", "--images", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "image env must be a mapping" in done.stderr
    assert "Traceback" not in done.stderr


ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("path", "hidden_by"),
    [
        ("/tmp/mpi", "/tmp"),
        ("/tmp", "/tmp"),
        ("/dev/shm/x/y", "/dev/shm"),
        ("/proc/self", "/proc"),
        ("/tmp/../proc/1", "/proc"),
        ("/opt/kubesim-mpi", None),
        ("/tmpfoo/mpi", None),
        ("/dev/mpi", None),
    ],
)
def test_host_paths_that_containers_mount_afresh_are_named(
    path: str, hidden_by: str | None
) -> None:
    reason = hidden_from_containers(Path(path))
    if hidden_by is None:
        assert reason is None
    else:
        assert (
            reason
            == f"{path} is under {hidden_by}, which every container of the process runtime mounts "
            "afresh"
        )


@pytest.mark.skipif(os.geteuid() != 0, reason="scripts/setup_mpi.sh does nothing but as root")
@pytest.mark.parametrize("own", CONTAINER_OWN_DIRS)
def test_setup_mpi_refuses_a_root_the_pods_cannot_see_before_installing_anything(own: str) -> None:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "setup_mpi.sh")],
        env={**os.environ, "KUBESIM_MPI_ROOT": f"{own}/mpi"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert f"KUBESIM_MPI_ROOT '{own}/mpi' is under a directory that every container" in done.stderr
    assert "/opt/kubesim-mpi" in done.stderr
