"""The packages as a user gets them: the operator's wheel built from the Dockerfile's build context
and kubesim's wheel built from sim/ (a distribution of its own), installed into fresh virtualenvs
outside the repository.

- Exactly as the Dockerfile installs it (its own `pip wheel` and `pip install` commands, read from
  it): only the operator's dependencies, nothing of kubesim; `mpi-operator run --help` exits 0 and
  `run` gets as far as the kubeconfig; `demo` and `sim` say in one line which extra to install.
- Both wheels, `pip install <kubesim.whl> '<operator.whl>[sim]'`: `mpi-operator demo` runs to its
  end, from the package data alone.
- Neither wheel carries the other's modules.

Slow (pip resolves and installs from the package index; under a minute in all with a warm pip
cache), so both venvs are built once per module and every check reuses them. Marked `install` (runs
by default, as in CI; `-m "not install"` leaves it out locally).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

dockerfile = pytest.importorskip(
    "dockerfile", reason="the `dockerfile` parser (a dev dependency) is not installed"
)

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION = "elastic-mpi-operator"
# What only kubesim needs (sim/pyproject.toml): none of it may reach the operator image.
KUBESIM_ONLY = {
    "kubesim",
    "jsonpatch",
    "jsonschema",
    "kubernetes-validate",
    "cel-python",
    "protobuf",
    "dnslib",
}
SIM_HINT = "pip install 'elastic-mpi-operator[sim]'"
INSTALL_TIMEOUT = 600
# Installers, not dependencies: a fresh venv has pip; the image uninstalls these after installing.
TOOLING = {"pip", "setuptools", "wheel"}

pytestmark = [pytest.mark.install, pytest.mark.timeout(INSTALL_TIMEOUT * 2)]


def _clean_env() -> dict[str, str]:
    """The environment without anything that points Python at the source tree."""
    return {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }


def _run(
    argv: list[str], *, cwd: Path, timeout: float = INSTALL_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=timeout
    )


def _checked(argv: list[str], *, cwd: Path) -> str:
    result = _run(argv, cwd=cwd)
    assert result.returncode == 0, f"{shlex.join(argv)}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _stages() -> dict[str, list[tuple[str, tuple[str, ...]]]]:
    """The Dockerfile's instructions by stage name."""
    stages: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    current: list[tuple[str, tuple[str, ...]]] | None = None
    for ins in dockerfile.parse_file(str(ROOT / "Dockerfile")):
        if ins.cmd.upper() == "FROM":
            current = stages.setdefault(ins.value[2], [])
        if current is not None:
            current.append((ins.cmd.upper(), ins.value))
    return stages


def _pip_command(run: str, verb: str) -> list[str]:
    """The `pip <verb> ...` command of a RUN line (the part before any `&&`)."""
    for part in run.split("&&"):
        argv = shlex.split(part)
        if argv[:2] == ["pip", verb]:
            return argv[1:]
    raise AssertionError(f"no `pip {verb}` in RUN {run!r}")


def _copy_sources(origin: Path, dest: Path) -> None:
    """A source folder as a build context holds it (.dockerignore leaves bytecode out)."""
    shutil.copytree(
        origin, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), dirs_exist_ok=True
    )


def _top_level(wheel: Path) -> set[str]:
    """The top-level modules and packages a wheel installs (its .dist-info left out)."""
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
    return {top.removesuffix(".py") for top in tops if not top.endswith((".dist-info", ".data"))}


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=INSTALL_TIMEOUT)
    return path / "bin"


def _installed(bin_dir: Path, cwd: Path) -> dict[str, list[str]]:
    """Every distribution in a venv: canonical name -> its Requires-Dist lines."""
    script = (
        "import importlib.metadata as m, json; "
        "print(json.dumps({d.metadata['Name']: d.requires or [] for d in m.distributions()}))"
    )
    found = json.loads(_checked([str(bin_dir / "python"), "-c", script], cwd=cwd))
    return {canonicalize_name(name): requires for name, requires in found.items()}


def _closure(installed: dict[str, list[str]], root: str, extras: set[str]) -> set[str]:
    """The distributions `root[extras]` needs, following Requires-Dist with markers evaluated here
    (the venvs run this interpreter's Python)."""
    needed: set[str] = set()
    todo: list[tuple[str, set[str]]] = [(canonicalize_name(root), extras)]
    while todo:
        name, wanted = todo.pop()
        if name in needed and not wanted:
            continue
        needed.add(name)
        for line in installed.get(name, []):
            requirement = Requirement(line)
            environments = [{"extra": extra} for extra in wanted] or [{"extra": ""}]
            if requirement.marker is None or any(
                requirement.marker.evaluate(env) for env in environments
            ):
                todo.append((canonicalize_name(requirement.name), set(requirement.extras)))
    return needed


def _sim_extra(installed: dict[str, list[str]]) -> set[str]:
    """The distributions the package's `sim` extra adds, by name."""
    added: set[str] = set()
    for line in installed[canonicalize_name(DISTRIBUTION)]:
        requirement = Requirement(line)
        marker = requirement.marker
        if (
            marker is not None
            and marker.evaluate({"extra": "sim"})
            and not marker.evaluate({"extra": ""})
        ):
            added.add(canonicalize_name(requirement.name))
    return added


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory outside the repository (pytest's temporary root)."""
    path = tmp_path_factory.mktemp("install-wheel")
    assert not path.resolve().is_relative_to(ROOT.resolve())
    return path


@pytest.fixture(scope="module")
def image_venv(work: Path) -> Path:
    """A venv holding what the operator image holds: the Dockerfile's own pip commands, run with the
    build stage's COPY sources as the context and a local folder for /wheels. Returns its bin/."""
    stages = _stages()
    src = work / "src"
    src.mkdir()
    wheels = work / "wheels"
    for cmd, value in stages["build"]:
        if cmd == "COPY":
            *sources, dest = value
            for source in sources:
                origin = ROOT / source
                if origin.is_dir():
                    _copy_sources(origin, src / dest)
                else:
                    shutil.copy2(origin, src / dest / origin.name)
    (build_run,) = [
        value[0] for cmd, value in stages["build"] if cmd == "RUN" and "pip wheel" in value[0]
    ]
    (install_run,) = [
        value[0] for cmd, value in stages["runtime"] if cmd == "RUN" and "pip install" in value[0]
    ]
    bin_dir = _venv(work / "image-venv")
    pip = [str(bin_dir / "python"), "-m", "pip"]
    build = [str(wheels) if arg == "/wheels" else arg for arg in _pip_command(build_run, "wheel")]
    _checked([*pip, *build], cwd=src)
    install = [
        str(wheels) if arg == "/wheels" else arg for arg in _pip_command(install_run, "install")
    ]
    _checked([*pip, *install], cwd=work)
    return bin_dir


@pytest.fixture(scope="module")
def kubesim_wheel(work: Path) -> Path:
    """kubesim's wheel, built from a copy of sim/ (a build writes into its source folder)."""
    src = work / "sim-src"
    _copy_sources(ROOT / "sim", src)
    wheels = work / "sim-wheels"
    build = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--wheel-dir",
        str(wheels),
        str(src),
    ]
    _checked(build, cwd=work)
    (wheel,) = wheels.glob("kubesim-*.whl")
    return wheel


@pytest.fixture(scope="module")
def operator_wheel(work: Path, image_venv: Path) -> Path:
    """The operator's wheel, the one the image build made."""
    (wheel,) = (work / "wheels").glob("elastic_mpi_operator-*.whl")
    return wheel


@pytest.fixture(scope="module")
def sim_venv(work: Path, operator_wheel: Path, kubesim_wheel: Path) -> Path:
    """A venv with both wheels: the operator's with its `sim` extra, which kubesim's wheel
    satisfies."""
    bin_dir = _venv(work / "sim-venv")
    pip = [str(bin_dir / "python"), "-m", "pip", "install"]
    _checked([*pip, str(kubesim_wheel), f"{operator_wheel}[sim]"], cwd=work)
    return bin_dir


def test_the_image_installs_the_operator_and_its_dependencies_only(
    image_venv: Path, work: Path
) -> None:
    installed = _installed(image_venv, work)
    needed = _closure(installed, DISTRIBUTION, set())
    assert set(installed) - TOOLING == needed
    assert _sim_extra(installed) == {"kubesim"}
    assert not KUBESIM_ONLY & set(installed)


def test_neither_wheel_carries_the_others_modules(
    operator_wheel: Path, kubesim_wheel: Path
) -> None:
    assert _top_level(operator_wheel) == {"mpi_operator", "mpi_discovery"}
    assert _top_level(kubesim_wheel) == {"kubesim"}
    with zipfile.ZipFile(kubesim_wheel) as archive:
        assert "kubesim/py.typed" in archive.namelist()


def test_run_works_without_the_extra(image_venv: Path, work: Path) -> None:
    mpi_operator = str(image_venv / "mpi-operator")
    result = _run([mpi_operator, "run", "--help"], cwd=work, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "--kubeconfig" in result.stdout
    # The whole `run` path imports without kubesim's dependencies: it gets as far as reading the
    # kubeconfig, and ends in one line saying what is wrong with it.
    missing = work / "no-such-kubeconfig"
    result = _run(
        [
            mpi_operator,
            "run",
            "--kubeconfig",
            str(missing),
            "--no-leader-elect",
            "--metrics-address",
            ":0",
        ],
        cwd=work,
        timeout=60,
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert (
        f"fatal: cannot configure the Kubernetes client from {missing}"
        in result.stderr.splitlines()[-1]
    )


@pytest.mark.parametrize("command", ["demo", "sim"])
def test_kubesim_commands_without_the_extra_say_what_to_install(
    image_venv: Path, work: Path, command: str
) -> None:
    result = _run([str(image_venv / "mpi-operator"), command], cwd=work, timeout=60)
    assert result.returncode == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"mpi-operator {command} needs kubesim")
    assert line.endswith(SIM_HINT)


def test_demo_runs_from_the_installed_wheels(sim_venv: Path, work: Path) -> None:
    # Run from outside the repository, so nothing but the installed packages (and their data) is
    # found.
    where = _checked(
        [str(sim_venv / "python"), "-c", "import kubesim; print(kubesim.__file__)"], cwd=work
    )
    assert Path(where.strip()).is_relative_to(sim_venv.parent), where
    result = _run([str(sim_venv / "mpi-operator"), "demo"], cwd=work, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any("scaled in to 1" in line for line in lines)
    assert "demo finished" in lines[-1]
