"""Design citations point into the repository: docs/architecture.md is the design, not files outside
it.

The founding design and its background notes were never part of the repository, so a pointer to them
tells a reader nothing. Two rules, each failing with every offender listed:

* no file under the scanned folders (or README.md) names the old design file, the folder it lived
  in, one of its background notes, or a numbered section of them;
* every `docs/<name>.md` (optionally `#anchor`) that the Python code under operator/, discovery/,
  sim/ and tests/ mentions exists, and so does the heading an anchor names.

The patterns are assembled from pieces, so this file does not match them itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = (
    "operator",
    "discovery",
    "sim",
    "tests",
    "docs",
    "deploy",
    "scripts",
    "bench",
    "README.md",
)
CITING_ROOTS = ("operator", "discovery", "sim", "tests")
SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"}
GENERATED = (Path("bench") / "out",)

_DESIGN = "DES" + "IGN"
_SHARED = "sha" + "red"
_NOTES = (
    "horovod-elastic",
    "kube-api-semantics",
    "upstream-mpi-operator",
    "user-pains",
    "peers",
    "code-style-anchors",
    "mpi-images-and-runtimes",
)
FORBIDDEN = (
    re.compile(_DESIGN + r"\.md"),
    re.compile(r"\b" + _DESIGN + r"\s*§"),
    re.compile(r"\.\./" + _SHARED + r"\b"),
    re.compile(_SHARED + "/" + "reference"),
    re.compile(r"(?<![\w-])(?:" + "|".join(map(re.escape, _NOTES)) + r")\.md\b"),
    # The notes' numbered sections, cited without the file name.
    re.compile(r"\b(?:reference|upstream)\s+§\s*\d"),
)
DOC_CITATION = re.compile(r"(?<![\w./-])docs/([\w.-]+\.md)(?:#([\w-]+))?")


def forbidden_mentions(text: str) -> list[tuple[int, str]]:
    """(line number, matched text) of every mention of the old design files in `text`."""
    found: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        found.extend(
            (number, match.group(0)) for pattern in FORBIDDEN for match in pattern.finditer(line)
        )
    return found


def heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of a markdown text (fenced blocks skipped)."""
    anchors: set[str] = set()
    fenced = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        match = re.match(r"#{1,6}\s+(.*)", line)
        if match and not fenced:
            title = match.group(1).strip().lower().replace("`", "")
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def files(*roots: str) -> Iterator[Path]:
    """The text files under `roots` (paths relative to the repository), caches and outputs left
    out."""
    for root in roots:
        path = ROOT / root
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for candidate in candidates:
            relative = candidate.relative_to(ROOT)
            if SKIPPED_DIRS & set(relative.parts) or any(
                p.endswith(".egg-info") for p in relative.parts
            ):
                continue
            if any(relative.is_relative_to(out) for out in GENERATED):
                continue
            yield relative


def read_text(relative: Path) -> str | None:
    try:
        return (ROOT / relative).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None  # binary: cannot cite anything


def test_the_patterns_catch_every_form_of_the_old_citations() -> None:
    samples = [
        "see " + _DESIGN + ".md §6 for why",
        "the rule (" + _DESIGN + " §5)",
        "background in ../" + _SHARED + "/notes",
        "`" + _SHARED + "/reference/x.md`",
        "(reference " + _NOTES[1] + ".md §1.3)",
        "`reference/" + _NOTES[0] + ".md` A9",
        "simple scaling (reference " + "§4)",
        "GPU pass-through (upstream " + "§5)",
    ]
    assert [bool(forbidden_mentions(sample)) for sample in samples] == [True] * len(samples)
    assert (
        forbidden_mentions("docs/architecture.md, `/" + _SHARED + "/order`, a design decision")
        == []
    )


def test_anchors_are_the_ones_github_makes() -> None:
    text = (
        "# Architecture\n## kubesim, the simulated cluster\n```text\n# no heading\n```\n### "
        "The `Phase`s"
    )
    assert heading_anchors(text) == {"architecture", "kubesim-the-simulated-cluster", "the-phases"}


def test_the_scan_sees_the_tree() -> None:
    seen = {path.as_posix() for path in files(*SCANNED)}
    assert {
        "README.md",
        "docs/architecture.md",
        "operator/mpi_operator/elastic/step.py",
        "tests/unit/test_docs_citations.py",
        "deploy/base/deployment.yaml",
    } <= seen


def test_nothing_cites_the_design_files_outside_the_repository() -> None:
    offenders = [
        f"{path}:{line}: {match}"
        for path in files(*SCANNED)
        if (text := read_text(path)) is not None
        for line, match in forbidden_mentions(text)
    ]
    assert not offenders, (
        "cite docs/architecture.md (or another page of docs/) or say why in place, instead of:\n"
        + "\n".join(offenders)
    )


@pytest.mark.parametrize("root", CITING_ROOTS)
def test_every_docs_page_the_code_cites_exists(root: str) -> None:
    anchors: dict[str, set[str]] = {}
    broken: list[str] = []
    for path in files(root):
        text = read_text(path) if path.suffix == ".py" else None
        for number, line in enumerate((text or "").splitlines(), start=1):
            for match in DOC_CITATION.finditer(line):
                page, anchor = match.group(1), match.group(2)
                target = ROOT / "docs" / page
                if not target.is_file():
                    broken.append(f"{path}:{number}: docs/{page} does not exist")
                    continue
                if anchor is None:
                    continue
                if page not in anchors:
                    anchors[page] = heading_anchors(target.read_text(encoding="utf-8"))
                if anchor not in anchors[page]:
                    broken.append(f"{path}:{number}: docs/{page} has no heading #{anchor}")
    assert not broken, "broken pointers into docs/:\n" + "\n".join(broken)
