"""Every manifest under examples/ and every `generate` flavour: `mpi-operator validate` accepts it,
a running kubesim with the CRD admits it with nothing pruned, and the operator (in process, against
kubesim) runs it: Ready workers, discover_hosts.sh listing them with their slots, the launcher Job.
Also: the workers of every example get the ssh readiness probe, the training scripts compile and the
README's kubectl commands work.

New examples are picked up from the folder (`EXAMPLES`); new flavours go in `GENERATED`.
"""

from __future__ import annotations

import py_compile
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

import operator_testing
from kubesim.app import KubeSim
from kubesim.settings import SimSettings
from kubesim.testing import Kubectl, eventually
from mpi_operator import generate
from mpi_operator.api import parse_and_validate
from mpi_operator.api.defaults import slots_per_worker
from mpi_operator.desired import workers
from mpi_operator.generate import CommonOptions

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = ROOT / "examples"
EXAMPLES = sorted(p.relative_to(ROOT).as_posix() for p in EXAMPLES_DIR.rglob("*.yaml"))
SCRIPTS = sorted(p.relative_to(ROOT).as_posix() for p in EXAMPLES_DIR.rglob("*.py"))
CRD_FILE = ROOT / "crds" / "kubeflow.org_mpijobs.yaml"


GENERATED: dict[str, Callable[[], dict[str, Any]]] = {
    "simple": lambda: generate.simple(
        CommonOptions(name="gen-simple", image=IMAGE), gpus=16, gpus_per_node=8
    ),
    "custom": lambda: generate.custom(CommonOptions(name="gen-custom", image=IMAGE), replicas=3),
    "openmpi": lambda: generate.openmpi(
        CommonOptions(name="gen-openmpi", image=IMAGE, ssh_port=2222),
        workers=2,
        gpu=1,
        cpu="2",
        memory="4Gi",
        node_selector="kubernetes.io/os=linux",
        exec_="python /opt/pi.py",
    ),
    "elastic": lambda: generate.elastic(
        CommonOptions(
            name="gen-elastic",
            image=IMAGE,
            run_as_user=1000,
            ssh_port=2222,
            ssh_auth_mount_path="/home/mpiuser/.ssh",
        ),
        min_replicas=1,
        max_replicas=4,
        replicas=2,
        gpus_per_worker=2,
    ),
}
IMAGE = "registry.example/train:1"


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return SimSettings(
        start_seconds=0.1, ready_seconds=0.1, job_backoff_seconds=0.1, bookmark_seconds=0.5
    )


def _documents(path: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((ROOT / path).read_text(encoding="utf-8")) if doc]


def test_the_elastic_examples_are_all_here() -> None:
    assert {
        "examples/elastic/tensorflow2-mnist-elastic.yaml",
        "examples/elastic/tensorflow2-mnist-elastic-gpu.yaml",
        "examples/elastic/pytorch-synthetic-elastic.yaml",
        "examples/elastic/legacy-v1-tensorflow2-mnist-elastic.yaml",
    } <= set(EXAMPLES)
    assert {
        "examples/elastic/tensorflow2_mnist_elastic.py",
        "examples/elastic/pytorch_synthetic_elastic.py",
    } <= set(SCRIPTS)


@pytest.mark.parametrize("path", EXAMPLES, ids=EXAMPLES)
def test_example_passes_validate(path: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mpi_operator", "validate", path],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(": OK MPIJob ") == len(_documents(path))


@pytest.mark.parametrize("path", EXAMPLES, ids=EXAMPLES)
def test_example_workers_get_the_ssh_readiness_probe(path: str) -> None:
    """Every example declares the port its workers' sshd listens on, so the operator probes it
    (Ready means sshd answers: Horovod blacklists a host listed before) and never warns
    `SSHPortUnknown`."""
    for doc in _documents(path):
        job = parse_and_validate(doc).job
        assert job.worker is not None
        [main, *_] = job.worker.template["spec"]["containers"]
        [declared] = [p["containerPort"] for p in main.get("ports") or [] if p.get("name") == "ssh"]
        assert not workers.ssh_port_unknown(job)
        probe = workers.build_worker(job, 0)["spec"]["containers"][0]["readinessProbe"]
        assert probe == {"tcpSocket": {"port": declared}, "periodSeconds": 2}


@pytest.mark.parametrize("path", SCRIPTS, ids=SCRIPTS)
def test_training_script_compiles(path: str, tmp_path: Path) -> None:
    py_compile.compile(str(ROOT / path), cfile=str(tmp_path / "script.pyc"), doraise=True)


async def _install_crd(api: ApiClient) -> None:
    ext = client.ApiextensionsV1Api(api)
    await ext.create_custom_resource_definition(
        body=yaml.safe_load(CRD_FILE.read_text(encoding="utf-8"))
    )

    async def established() -> bool:  # a real API server establishes a CRD asynchronously
        crd = await ext.read_custom_resource_definition("mpijobs.kubeflow.org")
        return any(
            c.type == "Established" and c.status == "True" for c in crd.status.conditions or []
        )

    await eventually(established, what="the MPIJob CRD Established")


def _leaves(value: Any, path: str = "") -> dict[str, Any]:
    """Every scalar of a JSON document by path, to tell whether the API server pruned anything."""
    if isinstance(value, dict):
        return {
            k: v for key, item in value.items() for k, v in _leaves(item, f"{path}.{key}").items()
        }
    if isinstance(value, list):
        return {
            k: v for i, item in enumerate(value) for k, v in _leaves(item, f"{path}[{i}]").items()
        }
    return {path: value}


@pytest.mark.parametrize("path", EXAMPLES, ids=EXAMPLES)
async def test_example_is_admitted_by_kubesim_unpruned(path: str, kube_api: ApiClient) -> None:
    await _install_crd(kube_api)
    objects = client.CustomObjectsApi(kube_api)
    for doc in _documents(path):
        group, version = doc["apiVersion"].split("/")
        await objects.create_namespaced_custom_object(
            group, version, "default", "mpijobs", doc, field_validation="Strict"
        )
        stored = await objects.get_namespaced_custom_object(
            group, version, "default", "mpijobs", doc["metadata"]["name"]
        )
        assert stored["kind"] == "MPIJob"
        expected, got = _leaves(doc["spec"]), _leaves(stored["spec"])
        assert {k: got.get(k) for k in expected} == expected


async def _ok(kubectl: Kubectl, *args: str) -> str:
    rc, out, err = await kubectl(*args)
    assert rc == 0, f"kubectl {' '.join(args)} failed: {err}"
    return out


def _editor(tmp_path: Path, replicas: int) -> str:
    """A KUBE_EDITOR that sets Worker.replicas in the file `kubectl edit` hands it, as a person
    would."""
    script = tmp_path / f"edit-{replicas}.py"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys, yaml\n"
        "doc = yaml.safe_load(open(sys.argv[1]))\n"
        f"doc['spec']['mpiReplicaSpecs']['Worker']['replicas'] = {replicas}\n"
        "yaml.safe_dump(doc, open(sys.argv[1], 'w'))\n"
    )
    script.chmod(0o755)
    return str(script)


def _kept_edit(err: str) -> str:
    """The copy kubectl keeps of a refused edit: the API server's reasons are comments at its
    top."""
    found = re.search(r'stored to "([^"]+)"', err)
    assert found is not None, err
    return Path(found[1]).read_text()


async def test_readme_kubectl_commands(
    kubectl: Kubectl, kubesim: KubeSim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """examples/elastic/README.md: apply, get, patch, scale and edit within the bounds; beyond them,
    refused."""
    name = "tensorflow2-mnist-elastic"
    path = str(EXAMPLES_DIR / "elastic" / f"{name}.yaml")
    assert "created" in await _ok(kubectl, "apply", "-f", str(CRD_FILE))
    await _ok(
        kubectl, "wait", "--for=condition=Established", "crd/mpijobs.kubeflow.org", "--timeout=10s"
    )
    assert (
        await _ok(kubectl, "apply", "-f", path)
    ).strip() == f"mpijob.kubeflow.org/{name} created"
    assert name in await _ok(kubectl, "get", "mpijob", name)

    async def replicas() -> int:
        out = await _ok(
            kubectl, "get", "mpijob", name, "-o", "jsonpath={.spec.mpiReplicaSpecs.Worker.replicas}"
        )
        return int(out)

    patch = '{"spec":{"mpiReplicaSpecs":{"Worker":{"replicas":3}}}}'
    await _ok(kubectl, "patch", "mpijob", name, "--type=merge", "-p", patch)
    assert await replicas() == 3
    await _ok(kubectl, "scale", "mpijob", name, "--replicas=1")
    assert await replicas() == 1
    rc, _out, err = await kubectl("scale", "mpijob", name, "--replicas=5")
    assert rc != 0
    assert "maxReplicas" in err
    assert await replicas() == 1
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where kubectl edit keeps a refused edit
    monkeypatch.setenv("KUBE_EDITOR", _editor(tmp_path, 2))
    assert "edited" in await _ok(kubectl, "edit", f"mpijobs.v2beta1.kubeflow.org/{name}")
    assert await replicas() == 2
    monkeypatch.setenv("KUBE_EDITOR", _editor(tmp_path, 5))
    rc, _out, err = await kubectl("edit", f"mpijobs.v2beta1.kubeflow.org/{name}")
    assert rc != 0
    assert "is invalid" in err, err
    assert "maxReplicas" in _kept_edit(err)
    assert await replicas() == 2


async def _runs_on_the_operator(
    kubesim: KubeSim, kube_api: ApiClient, docs: list[dict[str, Any]], *, within: float = 30.0
) -> None:
    """Creates the jobs, then waits for Ready workers, discover_hosts.sh listing them and the
    launcher Job."""
    await _install_crd(kube_api)
    objects, core, batch = (
        client.CustomObjectsApi(kube_api),
        client.CoreV1Api(kube_api),
        client.BatchV1Api(kube_api),
    )
    async with operator_testing.running_operator(operator_testing.operator_settings(kubesim)):
        for doc in docs:
            group, version = doc["apiVersion"].split("/")
            await objects.create_namespaced_custom_object(group, version, "default", "mpijobs", doc)
        for doc in docs:
            job = parse_and_validate(doc).job
            assert job.worker is not None
            name, workers, slots = job.name, job.worker.replicas, slots_per_worker(job.spec)

            async def started(name: str = name, workers: int = workers) -> list[str]:
                pods = await core.list_namespaced_pod(
                    "default",
                    label_selector=f"training.kubeflow.org/job-name={name},mpi_role_type=worker",
                )
                ready = [
                    p.metadata.name
                    for p in pods.items
                    if any(
                        c.type == "Ready" and c.status == "True" for c in p.status.conditions or []
                    )
                ]
                config = await core.list_namespaced_config_map(
                    "default", field_selector=f"metadata.name={name}-config"
                )
                script = config.items[0].data["discover_hosts.sh"] if config.items else ""
                hosts = [
                    line.removeprefix("echo ")
                    for line in script.splitlines()
                    if line.startswith("echo ")
                ]
                launchers = await batch.list_namespaced_job(
                    "default", field_selector=f"metadata.name={name}-launcher"
                )
                seen = (sorted(ready), hosts, len(launchers.items))
                assert len(ready) == workers, seen
                assert len(hosts) == workers, seen
                assert launchers.items, seen
                return hosts

            hosts = await eventually(
                started,
                within=within,
                sim=kubesim,
                what=f"{name}: {workers} Ready workers, listed, a launcher",
            )
            assert hosts == [
                f"{name}-worker-{i}.{name}.default.svc:{slots}" for i in range(workers)
            ]


def _non_root(docs: list[dict[str, Any]]) -> bool:
    return any(parse_and_validate(doc).job.spec.ssh_auth_mount_path != "/root/.ssh" for doc in docs)


RUN_CASES = [pytest.param(("example", path), id=path) for path in EXAMPLES] + [
    pytest.param(("generated", flavour), id=f"generate-{flavour}") for flavour in GENERATED
]


@pytest.mark.parametrize("case", RUN_CASES)
async def test_runs_on_the_operator(
    case: tuple[str, str], kubesim: KubeSim, kube_api: ApiClient
) -> None:
    kind, name = case
    docs = _documents(name) if kind == "example" else [GENERATED[name]()]
    await _runs_on_the_operator(kubesim, kube_api, docs)
    if _non_root(docs):
        # A non-root SSH user's workers got Ready through the operator's `ssh-auth-setup` init
        # container.
        pods = await client.CoreV1Api(kube_api).list_namespaced_pod(
            "default", label_selector="mpi_role_type=worker"
        )
        inits = [
            (s.name, s.state.terminated.reason)
            for p in pods.items
            for s in p.status.init_container_statuses
        ]
        assert pods.items
        assert inits == [("ssh-auth-setup", "Completed")] * len(pods.items)
