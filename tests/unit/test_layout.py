"""Guards the source-root layout: `operator/` must never become a package (docs/architecture.md)."""

import operator
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_operator_folder_is_a_source_root_not_a_package() -> None:
    assert not (ROOT / "operator" / "__init__.py").exists()
    assert not (ROOT / "discovery" / "__init__.py").exists()
    assert not (ROOT / "sim" / "__init__.py").exists()


def test_stdlib_operator_module_is_not_shadowed() -> None:
    assert Path(operator.__file__).parent == Path(sys.modules["os"].__file__).parent
    assert operator.eq(1, 1)


def test_packages_import_from_their_source_roots() -> None:
    import kubesim
    import mpi_discovery
    import mpi_operator

    assert Path(mpi_operator.__file__).is_relative_to(ROOT / "operator")
    assert Path(mpi_discovery.__file__).is_relative_to(ROOT / "discovery")
    assert Path(kubesim.__file__).is_relative_to(ROOT / "sim")
