"""What the installed package carries and leaves out: the demo's example is package data (a copy of
examples/, kept equal here), and `mpi-operator run` never imports kubesim or its dependencies, which
only the `sim` extra (kubesim, its own distribution) installs (tests/e2e/test_install_wheel.py
installs the wheels for real)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from mpi_operator import demo
from operator_testing import run_python

ROOT = Path(__file__).resolve().parents[2]
# Top-level modules of kubesim and of the `sim` extra's distributions.
KUBESIM_MODULES = {"kubesim", "jsonpatch", "jsonschema", "kubernetes_validate", "celpy", "dnslib"}


def test_the_demo_example_is_the_one_in_examples() -> None:
    source = ROOT / "examples" / "elastic" / "tensorflow2-mnist-elastic.yaml"
    assert demo.EXAMPLE.read_bytes() == source.read_bytes(), (
        f"the demo's package data drifted from {source.relative_to(ROOT)}: "
        f"cp {source.relative_to(ROOT)} operator/mpi_operator/data/"
    )


def test_package_data_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = project["tool"]["setuptools"]["package-data"]["mpi_operator"]
    data = ROOT / "operator" / "mpi_operator" / "data"
    shipped = {
        path for pattern in patterns for path in (ROOT / "operator" / "mpi_operator").glob(pattern)
    }
    assert set(data.iterdir()) <= shipped


def _names(requirements: list[str]) -> set[str]:
    return {
        req.split(";")[0].split(">")[0].split("=")[0].split("[")[0].strip() for req in requirements
    }


def test_the_sim_extra_is_kubesim_which_holds_its_own_dependencies() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert _names(project["optional-dependencies"]["sim"]) == {"kubesim"}
    kubesim = tomllib.loads((ROOT / "sim" / "pyproject.toml").read_text())["project"]
    assert kubesim["name"] == "kubesim"
    sim_only = {
        "jsonpatch",
        "jsonschema",
        "kubernetes-validate",
        "cel-python",
        "protobuf",
        "dnslib",
    }
    assert sim_only <= _names(kubesim["dependencies"])
    assert not sim_only & _names(project["dependencies"])


def test_run_needs_nothing_of_kubesim() -> None:
    # A fresh interpreter in which kubesim and the `sim` extra are not importable, as in the
    # operator image (kubernetes_asyncio imports kubernetes_validate when it can, and copes when it
    # cannot). `run` goes all the way into the manager, which stops at the missing kubeconfig.
    script = f"""
import importlib.abc, sys

class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {sorted(KUBESIM_MODULES)!r} or name.startswith("google.protobuf"):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
from mpi_operator import cli
code = cli.main(["run", "--kubeconfig", "/nonexistent/kubeconfig", "--no-leader-elect",
                 "--metrics-address", "127.0.0.1:0"])
assert code == 1, code
assert "mpi_operator.runtime.manager" in sys.modules
"""
    result = run_python(script)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert (
        "fatal: cannot configure the Kubernetes client from /nonexistent/kubeconfig"
        in result.stderr
    )
