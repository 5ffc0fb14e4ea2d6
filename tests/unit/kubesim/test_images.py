"""Stand-in images: the YAML form `mpi-operator sim --images FILE` reads, and how references match."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kubesim.images import ImageCatalog, ImageSpec


def test_a_catalog_file_gives_every_field_and_resolves_roots_against_its_folder(tmp_path: Path) -> None:
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
def test_references_match_with_or_without_the_docker_hub_prefix(reference: str, found: bool) -> None:
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


def test_mpi_operator_sim_says_what_is_wrong_with_an_images_file_and_exits_1(tmp_path: Path) -> None:
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
