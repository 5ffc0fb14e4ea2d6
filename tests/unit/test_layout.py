"""Guards the source-root layout: `operator/` must never become a package (docs/architecture.md)."""

import ast
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


def test_test_folders_are_packages_so_test_names_mirror_the_source() -> None:
    """tests/unit/kube/test_events.py and tests/integration/kubesim/test_events.py may both exist
    only when their folders are packages. tests/horovod is not one: a package `horovod` on the path
    would shadow Horovod itself, which its tests import."""
    tests = ROOT / "tests"
    missing = sorted(
        str(folder.relative_to(ROOT))
        for folder in {p.parent for p in tests.rglob("test_*.py")}
        if folder != tests / "horovod" and not (folder / "__init__.py").exists()
    )
    assert missing == []
    assert not (tests / "horovod" / "__init__.py").exists()


def test_module_docstrings_say_what_a_module_owns_in_at_most_12_lines() -> None:
    """Figures and incident stories belong in bench/REPORT.md, docs/architecture.md's decisions or a
    commit message, not in the header a newcomer reads first."""
    too_long = {}
    for root in ("operator", "discovery", "sim"):
        for path in sorted((ROOT / root).rglob("*.py")):
            body = ast.parse(path.read_text()).body
            first = body[0] if body else None
            # Counted as a reader sees it: the source lines from the opening to the closing quotes.
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                lines = (first.end_lineno or first.lineno) - first.lineno + 1
                if isinstance(first.value.value, str) and lines > 12:
                    too_long[str(path.relative_to(ROOT))] = lines
    assert too_long == {}
