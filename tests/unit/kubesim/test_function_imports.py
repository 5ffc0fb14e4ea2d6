"""kubesim imports at module level: an import inside a function, which import-linter's cycle and
layer contracts cannot tell from any other, is allowed only with a reason other than dodging a
cycle, named here and in a `# lazy: <reason>` comment on or just above the import."""

from __future__ import annotations

import ast
from pathlib import Path

SIM = Path(__file__).resolve().parents[3] / "sim"

ALLOWED: dict[tuple[str, str], str] = {
    ("kubesim.app", "kubesim.procrt.kubelet"): (
        "optional-runtime: the process runtime (its 17 modules, dnslib) loads only for a cluster "
        "that runs it"
    ),
}
"""(importing module, imported module) -> why the import waits for the function to run."""


def _module(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = module.split(".") if is_package else module.split(".")[:-1]
    prefix = ".".join(base[: len(base) - node.level + 1]) if node.level else ""
    return [".".join(p for p in (prefix, node.module or "") if p)]


def function_level_imports(root: Path = SIM) -> dict[tuple[str, str], tuple[Path, int]]:
    """Every import inside a function body of kubesim under `root`: (module, imported) -> (file,
    line)."""
    found: dict[tuple[str, str], tuple[Path, int]] = {}
    for path in sorted((root / "kubesim").rglob("*.py")):
        module = _module(path, root)
        tree = ast.parse(path.read_text(), str(path))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    for name in _imported(node, module, path.name == "__init__.py"):
                        found[(module, name)] = (path, node.lineno)
    return found


def test_function_level_imports_have_an_allowed_reason() -> None:
    found = function_level_imports()
    unexplained = sorted(
        f"{path.relative_to(SIM)}:{line}: {key[1]}"
        for key, (path, line) in found.items()
        if key not in ALLOWED
    )
    assert unexplained == [], (
        "import these at module level (or name a reason other than a cycle here)"
    )
    assert set(ALLOWED) <= set(found), "an allowed lazy import is gone: drop it from ALLOWED"


def test_each_allowed_lazy_import_says_why_on_its_line() -> None:
    for key, (path, line) in function_level_imports().items():
        lines = path.read_text().splitlines()
        near = " ".join(lines[max(0, line - 3) : line])
        reason = ALLOWED[key].split(":")[0]
        assert f"# lazy: {reason}" in near, (
            f"{path.relative_to(SIM)}:{line}: no `# lazy: {reason}` comment"
        )


def test_the_walk_finds_nested_and_relative_function_level_imports(tmp_path: Path) -> None:
    package = tmp_path / "kubesim" / "procrt"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("import os\n")
    (package / "probes.py").write_text(
        "class P:\n    async def start(self) -> None:\n        if True:\n"
        "            from .prober import run_probe\n"
    )
    found = function_level_imports(tmp_path)
    assert set(found) == {("kubesim.procrt.probes", "kubesim.procrt.prober")}
    assert found[("kubesim.procrt.probes", "kubesim.procrt.prober")][1] == 4
