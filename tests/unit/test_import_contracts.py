"""Every contract in `.importlinter` can fail: one deliberate violating import in a copy of the
packages, and import-linter reports that contract, by name, as broken; the unpatched copy keeps them
all.

A contract that could never fail (a typo in a module name, a layer nobody imports across, an ignore
that swallows everything) would pass the real tree vacuously; this is what catches it.
"""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / ".importlinter"
SOURCE_ROOTS = {"operator": "mpi_operator", "discovery": "mpi_discovery", "sim": "kubesim"}
LINT_IMPORTS = (
    "import sys; from importlinter.cli import lint_imports_command; "
    "sys.exit(lint_imports_command())"
)
"""`lint-imports` run by this interpreter (the script may not sit next to it)."""


@dataclass(frozen=True)
class Violation:
    contract: str
    """The contract's id (`[importlinter:contract:<id>]`)."""
    path: str
    """The module to patch, relative to the source roots' parent."""
    code: str
    """Appended to the module: the import that breaks the contract."""
    why: str


LAZY_KUBESIM = """
def _simulate() -> None:
    import kubesim  # lazy, as `mpi-operator sim` does it: still an import to import-linter
"""

TYPE_CHECKING_CYCLE = """
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # client.py imports this module at run time
    from mpi_operator.kube.client import Kube
"""

VIOLATIONS = [
    Violation(
        "layers",
        "operator/mpi_operator/settings.py",
        "import mpi_operator.generate\n",
        "the bottom layer reaches up (no cycle and no forbidden contract: only the layers see it)",
    ),
    Violation(
        "layers",
        "operator/mpi_operator/unplaced.py",
        '"""A new top-level module nobody gave a layer."""\n',
        "exhaustive: every top-level module must have its place",
    ),
    Violation(
        "layers",
        "operator/mpi_operator/reasons.py",
        "import mpi_operator.settings\n",
        "siblings of one `|` layer stay independent",
    ),
    Violation(
        "acyclic",
        "operator/mpi_operator/kube/resources.py",
        TYPE_CHECKING_CYCLE,
        "a cycle through a TYPE_CHECKING import is still a cycle",
    ),
    Violation(
        "pure-core",
        "operator/mpi_operator/elastic/pacing.py",
        "import asyncio\n",
        "elastic is pure",
    ),
    Violation(
        "objects-stdlib",
        "operator/mpi_operator/objects.py",
        "import pydantic\n",
        "standard library only",
    ),
    Violation(
        "only-kube-talks-http",
        "operator/mpi_operator/runtime/loops.py",
        "import kubernetes_asyncio\n",
        "the controller goes through kube.client",
    ),
    Violation(
        "generic-runtime",
        "operator/mpi_operator/kube/events.py",
        "import mpi_operator.conditions\n",
        "kube/ knows nothing of MPIJob conditions (the layers would allow it)",
    ),
    Violation(
        "cache-knows-no-mpi",
        "operator/mpi_operator/cache/store.py",
        "import mpi_operator.api.constants\n",
        "the cache is generic (the layers would allow it)",
    ),
    Violation(
        "runtime-knows-no-reconcile-logic",
        "operator/mpi_operator/runtime/handlers.py",
        "import mpi_operator.status\n",
        "the runtime maps events, it does not compute status",
    ),
    Violation(
        "kubesim-only-cli-and-demo",
        "operator/mpi_operator/reconcile/reconciler.py",
        LAZY_KUBESIM,
        "the reconciler must work against any API server",
    ),
    Violation(
        "discovery-standalone",
        "discovery/mpi_discovery/hostfile.py",
        "import yaml\n",
        "the launcher image has only the standard library",
    ),
    Violation(
        "sim-independent",
        "sim/kubesim/settings.py",
        "import mpi_discovery\n",
        "kubesim is the cluster",
    ),
    Violation(
        "runtime-layers",
        "operator/mpi_operator/runtime/metrics.py",
        "import mpi_operator.runtime.handlers\n",
        "metrics sit below handlers",
    ),
]

# kubesim's own contracts (sim/kubesim).
LAZY_PROBER = """
def _attempt() -> None:
    from kubesim.procrt.prober import run_probe  # a function-level import is still a cycle
"""

VIOLATIONS += [
    Violation(
        "kubesim-layers",
        "sim/kubesim/control.py",
        "import kubesim.podlog\n",
        "test control sits beside the cluster, below the pod logs (no cycle: only the layers see "
        "it)",
    ),
    Violation(
        "kubesim-layers",
        "sim/kubesim/unplaced.py",
        '"""A new top-level module nobody gave a layer."""\n',
        "exhaustive: every top-level module of kubesim must have its place",
    ),
    Violation(
        "kubesim-layers",
        "sim/kubesim/clock.py",
        "import kubesim.errors\n",
        "primitives of one `|` layer stay independent",
    ),
    Violation(
        "kubesim-acyclic",
        "sim/kubesim/procrt/probes.py",
        LAZY_PROBER,
        "probe specs sit below the attempt that runs them (within procrt: only the cycle check "
        "sees it)",
    ),
]


def contract_names() -> dict[str, str]:
    """Contract id -> name, as `.importlinter` declares them."""
    parser = configparser.ConfigParser()
    parser.read(CONFIG)
    prefix = "importlinter:contract:"
    return {
        section[len(prefix) :]: parser[section]["name"]
        for section in parser.sections()
        if section.startswith(prefix)
    }


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the three packages under their source roots, as the repository lays them out."""
    for root, package in SOURCE_ROOTS.items():
        shutil.copytree(
            REPO / root / package,
            tmp_path / root / package,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    shutil.copy(CONFIG, tmp_path / ".importlinter")
    return tmp_path


def lint(tree: Path) -> tuple[int, dict[str, str]]:
    """import-linter's exit code and each contract's verdict (KEPT / BROKEN) by name, on `tree`.

    A contract counts as BROKEN only when the summary says so *and* the report of broken contracts
    names it, so a change in the output format fails here rather than passing quietly."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(tree / root) for root in SOURCE_ROOTS),
        "COLUMNS": "1000",  # no wrapped contract names
        "NO_COLOR": "1",
    }
    result = subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS, "--config", str(tree / ".importlinter"), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = " ".join(result.stdout.split())
    assert "Contracts" in output, result.stdout + result.stderr
    _, _, broken_report = output.partition("Broken contracts")
    verdicts: dict[str, str] = {}
    for name in contract_names().values():
        flat = " ".join(name.split())
        found = re.findall(re.escape(flat) + r" (KEPT|BROKEN)", output)
        assert len(found) == 1, f"{name!r} not reported once:\n{result.stdout}{result.stderr}"
        assert (found[0] == "BROKEN") == (flat in broken_report), result.stdout
        verdicts[name] = found[0]
    return result.returncode, verdicts


def test_every_contract_has_a_violation_here() -> None:
    assert set(contract_names()) == {v.contract for v in VIOLATIONS}


def test_the_copied_tree_keeps_every_contract(tree: Path) -> None:
    code, verdicts = lint(tree)
    assert verdicts == dict.fromkeys(contract_names().values(), "KEPT")
    assert code == 0


@pytest.mark.parametrize("violation", VIOLATIONS, ids=lambda v: f"{v.contract}:{Path(v.path).stem}")
def test_a_violating_import_breaks_its_contract(tree: Path, violation: Violation) -> None:
    module = tree / violation.path
    module.write_text((module.read_text() if module.exists() else "") + "\n" + violation.code)
    code, verdicts = lint(tree)
    name = contract_names()[violation.contract]
    assert verdicts[name] == "BROKEN", f"{violation.why}: {verdicts}"
    assert code != 0
