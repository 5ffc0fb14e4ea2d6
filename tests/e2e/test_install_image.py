"""The operator image's Dockerfile, parsed with BuildKit's own parser (package `dockerfile`):
multi-stage (a wheel build stage, a runtime stage that installs only wheels), pinned slim Python
3.11 bases, a numeric non-root user matching the manifests' runAsUser, `ENTRYPOINT ["mpi-operator",
"run"]`, a build context limited by .dockerignore, no kubesim code (sim/ is a distribution of its
own), and one version across image tag, chart and package. No image is built here (no Docker daemon
in the test environment)."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from mpi_operator import __version__

dockerfile = pytest.importorskip(
    "dockerfile", reason="the `dockerfile` parser (a dev dependency) is not installed"
)

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "charts" / "mpi-operator"


def instructions() -> list[tuple[str, tuple[str, ...], tuple[str, ...], bool]]:
    return [
        (c.cmd.upper(), c.value, c.flags, c.json)
        for c in dockerfile.parse_file(str(ROOT / "Dockerfile"))
    ]


def stages() -> list[list[tuple[str, tuple[str, ...], tuple[str, ...], bool]]]:
    """Instructions per stage (the ARGs before the first FROM are left out)."""
    result: list[list[tuple[str, tuple[str, ...], tuple[str, ...], bool]]] = []
    for ins in instructions():
        if ins[0] == "FROM":
            result.append([])
        if result:
            result[-1].append(ins)
    return result


def global_args() -> dict[str, str]:
    args: dict[str, str] = {}
    for cmd, value, _, _ in instructions():
        if cmd == "FROM":
            break
        if cmd == "ARG":
            name, _, default = value[0].partition("=")
            args[name] = default
    return args


def base_image(from_value: tuple[str, ...]) -> str:
    image = from_value[0]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: global_args()[m.group(1) or m.group(2)], image)


def test_two_stages_on_a_pinned_slim_python_311() -> None:
    all_stages = stages()
    assert [s[0][1][2] for s in all_stages] == ["build", "runtime"]
    for stage in all_stages:
        image = base_image(stage[0][1])
        name, _, tag = image.partition(":")
        assert name == "python"
        assert tag.startswith("3.11-slim"), image
        assert "latest" not in tag


def test_runtime_stage_installs_only_the_built_wheels() -> None:
    build, runtime = stages()
    assert any(cmd == "RUN" and "pip wheel" in value[0] for cmd, value, _, _ in build)
    # Nothing of the source tree is copied into the runtime stage.
    assert [ins for ins in runtime if ins[0] in ("COPY", "ADD")] == []
    installs = [
        (value, flags)
        for cmd, value, flags, _ in runtime
        if cmd == "RUN" and "pip install" in value[0]
    ]
    assert len(installs) == 1
    value, flags = installs[0]
    assert "--no-index" in value[0]
    assert "elastic-mpi-operator" in value[0]
    assert any("from=build" in f for f in flags)


def test_runs_as_numeric_non_root_user_matching_the_manifests() -> None:
    runtime = stages()[-1]
    users = [value[0] for cmd, value, _, _ in runtime if cmd == "USER"]
    assert users, "the runtime stage sets no USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit()
    assert int(uid) > 0
    assert gid.isdigit()
    assert int(gid) > 0
    base = yaml.safe_load((ROOT / "deploy" / "base" / "deployment.yaml").read_text())
    assert base["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == int(uid)
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["podSecurityContext"]["runAsUser"] == int(uid)


def test_entrypoint_is_the_operator() -> None:
    runtime = stages()[-1]
    entrypoints = [(value, is_json) for cmd, value, _, is_json in runtime if cmd == "ENTRYPOINT"]
    assert entrypoints == [(("mpi-operator", "run"), True)]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["mpi-operator"] == "mpi_operator.cli:main"
    exposed = [value for cmd, value, _, _ in runtime if cmd == "EXPOSE"]
    assert exposed == [("8080",)]  # --metrics-address default


def test_build_context_holds_what_the_build_copies() -> None:
    """.dockerignore excludes everything but what the build stage COPYs (which must exist)."""
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and line[0] != "#"
    ]

    def included(path: str) -> bool:
        keep = True
        for pattern in patterns:
            negated = pattern.startswith("!")
            glob = pattern.removeprefix("!").rstrip("/")
            if fnmatch.fnmatch(path, glob) or path.startswith(glob + "/"):
                keep = negated
        return keep

    build = stages()[0]
    sources = [src for cmd, value, _, _ in build if cmd == "COPY" for src in value[:-1]]
    assert sources
    for src in sources:
        assert (ROOT / src).exists(), src
        assert included(src.rstrip("/")), src
    for excluded in (".venv", ".git", "tests", "bench", "sim"):
        assert not included(excluded), excluded


def test_the_image_holds_no_kubesim() -> None:
    """kubesim (sim/) is its own distribution: the build neither copies it nor asks for the `sim`
    extra, which would pull it in (tests/e2e/test_install_wheel.py checks the operator wheel's
    contents)."""
    build, runtime = stages()
    copied = [
        src.rstrip("/")
        for cmd, value, _, _ in build
        if cmd in ("COPY", "ADD")
        for src in value[:-1]
    ]
    assert copied
    assert not [src for src in copied if src == "sim" or src.startswith("sim/")], copied
    runs = [value[0] for cmd, value, _, _ in [*build, *runtime] if cmd == "RUN"]
    assert not [run for run in runs if "kubesim" in run or "[sim]" in run or "./sim" in run], runs


def test_one_version_for_package_image_and_chart() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    kustomization = yaml.safe_load((ROOT / "deploy" / "base" / "kustomization.yaml").read_text())
    (image,) = kustomization["images"]
    assert project["version"] == __version__ == chart["appVersion"] == image["newTag"]
