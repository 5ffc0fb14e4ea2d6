"""Every command the docs show runs: the ```sh blocks of docs/*.md, against kubesim and the real
operator.

Rules for docs/*.md, enforced here:
  * shell commands live in fenced blocks tagged `sh`; a block tagged `sh cluster-only` needs a real
    cluster (logs, exec, port-forward, RBAC checks) and is not run; any other shell tag is an error;
  * every other `sh` block runs, line by line (`\\` continues a line, `#` lines are comments), in a
    fresh kubesim per document with the operator running in this process, the CRD installed and
    `examples/elastic/tensorflow2-mnist-elastic.yaml` applied (docs/README.md says so);
  * a command must exit 0, unless its line ends with `# fails`, then it must not;
  * `kubectl ...` runs the real kubectl, `mpi-operator ...` and `python -m ...` run this
    interpreter, `curl -s http://127.0.0.1:8080/PATH` fetches PATH from the operator's health and
    metrics server;
  * `CMD > FILE` checks that FILE already holds CMD's output (regenerating it would change nothing).
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

import operator_testing
from kubesim.app import KubeSim
from kubesim.settings import SimSettings
from kubesim.testing import Kubectl, eventually

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))
CRD = "crds/kubeflow.org_mpijobs.yaml"
EXAMPLE = "examples/elastic/tensorflow2-mnist-elastic.yaml"
DOC_METRICS_ADDRESS = "127.0.0.1:8080"
FENCE = re.compile(r"^```(\S*)\s*(.*)$")
SHELL_TAGS = {"bash", "shell", "console", "zsh", "sh-session"}
CLUSTER_ONLY = "cluster-only"
FAILS = "# fails"


@dataclass(frozen=True)
class Command:
    doc: str
    line: int
    text: str
    fails: bool

    def argv(self) -> list[str]:
        return shlex.split(self.text)

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.text}"


@dataclass(frozen=True)
class Block:
    doc: str
    line: int
    tag: str
    info: str
    lines: tuple[str, ...]

    @property
    def runnable(self) -> bool:
        return self.tag == "sh" and CLUSTER_ONLY not in self.info.split()

    def commands(self) -> list[Command]:
        out: list[Command] = []
        pending, start = "", 0
        for offset, raw in enumerate(self.lines, start=self.line + 1):
            line = raw.strip()
            if not pending and (not line or line.startswith("#")):
                continue
            if not pending:
                start = offset
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            text = pending + line
            pending = ""
            fails = text.endswith(FAILS)
            out.append(Command(self.doc, start, text.removesuffix(FAILS).strip(), fails))
        assert not pending, f"{self.doc}:{start}: a command ends with a line continuation"
        return out


def blocks(doc: str) -> list[Block]:
    out: list[Block] = []
    opened: tuple[int, str, str] | None = None
    body: list[str] = []
    for number, line in enumerate((ROOT / doc).read_text(encoding="utf-8").splitlines(), start=1):
        match = FENCE.match(line.strip())
        if match is None:
            if opened is not None:
                body.append(line)
            continue
        if opened is None:
            opened, body = (number, match.group(1), match.group(2)), []
        else:
            out.append(Block(doc, opened[0], opened[1], opened[2], tuple(body)))
            opened = None
    assert opened is None, f"{doc}:{opened[0]}: unclosed code block"
    return out


def runnable_commands(doc: str) -> list[Command]:
    return [cmd for block in blocks(doc) if block.runnable for cmd in block.commands()]


def test_the_docs_are_all_here() -> None:
    assert {
        "docs/README.md",
        "docs/api-reference.md",
        "docs/elastic.md",
        "docs/ssh-and-images.md",
        "docs/migration.md",
        "docs/metrics-and-events.md",
        "docs/troubleshooting.md",
    } <= set(DOCS)


@pytest.mark.parametrize("doc", DOCS, ids=DOCS)
def test_every_shell_block_is_tagged_sh(doc: str) -> None:
    untagged = [f"{doc}:{b.line}: ```{b.tag}" for b in blocks(doc) if b.tag in SHELL_TAGS]
    assert not untagged, "tag shell blocks `sh` (or `sh cluster-only`), so this test runs them"


@pytest.mark.parametrize("doc", DOCS, ids=DOCS)
def test_every_runnable_command_is_one_this_test_can_run(doc: str) -> None:
    for cmd in runnable_commands(doc):
        argv = cmd.argv()
        assert argv[0] in ("kubectl", "mpi-operator", "python", "curl"), (
            f"{cmd}: mark it cluster-only"
        )
        assert not {"|", "&&", ";", "&"} & set(argv), f"{cmd}: one plain command per line"


@pytest.mark.parametrize("doc", DOCS, ids=DOCS)
def test_every_link_between_docs_resolves(doc: str) -> None:
    prose = "\n".join(
        block
        for i, block in enumerate((ROOT / doc).read_text(encoding="utf-8").split("```"))
        if i % 2 == 0
    )
    text = re.sub(r"`[^`]*`", "", prose)
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target:
            continue
        assert (ROOT / doc).parent.joinpath(target).resolve().exists(), (
            f"{doc}: broken link {target}"
        )


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return SimSettings(
        start_seconds=0.1, ready_seconds=0.1, job_backoff_seconds=0.1, bookmark_seconds=0.5
    )


async def _run(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=ROOT,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(60):
            out, err = await proc.communicate()
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    return int(proc.returncode or 0), out.decode(), err.decode()


async def _install(kubectl: Kubectl) -> dict[str, str]:
    """The CRD and the quick-tour job, as docs/README.md promises; returns kubectl's environment."""
    env = {**os.environ, "HOME": str(kubectl.home), "KUBECONFIG": str(kubectl.kubeconfig)}
    for setup in (
        ["apply", "-f", CRD],
        ["wait", "--for=condition=Established", "crd/mpijobs.kubeflow.org", "--timeout=10s"],
        ["apply", "-f", EXAMPLE],
    ):
        rc, _out, err = await _run(kubectl.argv(*setup), env)
        assert rc == 0, err
    return env


def _fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def _execute(cmd: Command, kubectl: Kubectl, server_url: str) -> tuple[int, str, str]:
    argv = cmd.argv()
    redirect = None
    if ">" in argv:
        at = argv.index(">")
        argv, redirect = argv[:at], argv[at + 1]
    env = {**os.environ, "HOME": str(kubectl.home), "KUBECONFIG": str(kubectl.kubeconfig)}
    if argv[0] == "kubectl":
        rc, out, err = await _run(kubectl.argv(*argv[1:]), env)
    elif argv[0] == "mpi-operator":
        rc, out, err = await _run([sys.executable, "-m", "mpi_operator", *argv[1:]], env)
    elif argv[0] == "python":
        rc, out, err = await _run([sys.executable, *argv[1:]], env)
    else:
        url = argv[-1].replace(f"http://{DOC_METRICS_ADDRESS}", server_url)
        status, out = await asyncio.to_thread(_fetch, url)
        rc, err = (0 if status < 400 else 22), f"HTTP {status}"
    if redirect is not None and rc == 0:
        expected = (ROOT / redirect).read_text(encoding="utf-8")
        assert out == expected, (
            f"{cmd}: {redirect} is out of date; run the command to regenerate it"
        )
    return rc, out, err


@pytest.mark.parametrize("doc", DOCS, ids=DOCS)
async def test_doc_commands_run(doc: str, kubectl: Kubectl, kubesim: KubeSim) -> None:
    commands = runnable_commands(doc)
    if not commands:
        pytest.skip(f"{doc} shows no runnable commands")
    env = await _install(kubectl)
    async with operator_testing.running_operator(
        operator_testing.operator_settings(kubesim)
    ) as mgr:
        # The pages assume the quick-tour job is installed, i.e. the operator has taken it up.
        created = [
            "wait",
            "--for=condition=Created",
            "mpijob/tensorflow2-mnist-elastic",
            "--timeout=30s",
        ]
        rc, _out, err = await _run(kubectl.argv(*created), env)
        assert rc == 0, err
        for cmd in commands:
            rc, out, err = await _execute(cmd, kubectl, mgr.server.url)
            if cmd.fails:
                assert rc != 0, f"{cmd}: expected to fail, but it exited 0:\n{out}"
            else:
                assert rc == 0, f"{cmd}: exited {rc}:\n{out}\n{err}"


async def test_migration_claim_plain_get_is_quiet_and_alphas_warn(kubectl: Kubectl) -> None:
    """docs/migration.md: `kubectl get mpij` (read through v1, which Kubernetes ranks first) prints
    no warning; writing an alpha version still does."""
    env = await _install(kubectl)
    rc, out, err = await _run(kubectl.argv("get", "mpij"), env)
    assert rc == 0, err
    assert "tensorflow2-mnist-elastic" in out
    assert err == "", err
    rc, out, err = await _run(kubectl.argv("get", "mpijobs.v1alpha2.kubeflow.org"), env)
    assert rc == 0, err
    assert "tensorflow2-mnist-elastic" in out
    assert "kubeflow.org/v1alpha2 MPIJob is deprecated; use kubeflow.org/v2beta1" in err


async def test_kubectl_events_for_the_job_and_sorted_by_last_timestamp(
    kubectl: Kubectl, kubesim: KubeSim
) -> None:
    """docs/troubleshooting.md's `kubectl events --for mpijob/NAME` and `--sort-by=.lastTimestamp`:
    the first selects on involvedObject.apiVersion, which must be the version `mpijob` resolves to
    (v1, ranked above v2beta1); the second needs the Table rows' whole objects."""
    env = await _install(kubectl)
    async with operator_testing.running_operator(operator_testing.operator_settings(kubesim)):

        async def listed() -> str | None:
            argv = kubectl.argv("events", "--for", "mpijob/tensorflow2-mnist-elastic")
            rc, out, err = await _run(argv, env)
            assert rc == 0, err
            return out if "MPIJobCreated" in out else None

        out = await eventually(listed, what="the MPIJob's events through `mpijob/NAME`")
        assert "MPIJob/tensorflow2-mnist-elastic" in out, out
    rc, out, err = await _run(kubectl.argv("get", "events", "--sort-by=.lastTimestamp"), env)
    assert rc == 0, err
    assert "MPIJobCreated" in out, out
