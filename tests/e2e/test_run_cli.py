"""`mpi-operator run` as a process against `mpi-operator sim`: exits 1 with a clear message without
the CRD; with it, becomes ready on /readyz, serves /metrics, and exits 0 on SIGTERM. Also: flags ->
Settings."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio
import yaml

from kubesim.testing import eventually
from mpi_operator import cli, runflags
from mpi_operator.api.constants import MAX_WORKER_REPLICAS
from mpi_operator.flowcontrol import TokenBucket
from mpi_operator.kube.client import Kube
from mpi_operator.kube.resources import MPIJOB, Resource
from mpi_operator.settings import FALLBACK_BURST, FALLBACK_QPS, Settings, client_limit
from operator_testing import TEST_AGENT, sim_process, source_env

ROOT = Path(__file__).resolve().parents[2]
CRD = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", False, "CustomResourceDefinition"
)

_TEMPLATE = {"spec": {"containers": [{"name": "main", "image": "mpioperator/mpi-pi:openmpi"}]}}
MPIJOB_BODY = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "metadata": {"name": "pi", "namespace": "default"},
    "spec": {
        "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": _TEMPLATE},
            "Worker": {"replicas": 1, "template": _TEMPLATE},
        }
    },
}

needs_sim = pytest.mark.skipif(
    importlib.util.find_spec("kubesim.cli") is None,
    reason="`mpi-operator sim` needs kubesim.cli, which is not importable yet",
)


async def stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.kill()
        await proc.wait()


@pytest_asyncio.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Path]:
    """A `mpi-operator sim` subprocess; yields the kubeconfig it wrote."""
    kubeconfig = tmp_path / "sim.kubeconfig"
    async with sim_process(kubeconfig, tmp_path / "sim.out"):
        yield kubeconfig


async def start_operator(kubeconfig: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mpi_operator",
        "run",
        "--kubeconfig",
        str(kubeconfig),
        "--no-leader-elect",
        "--metrics-address",
        "127.0.0.1:0",
        "--log-format",
        "json",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=source_env(),
    )


async def next_log(
    proc: asyncio.subprocess.Process, seen: list[dict[str, object]]
) -> dict[str, object]:
    assert proc.stderr is not None
    raw = await proc.stderr.readline()
    assert raw, f"operator exited ({await proc.wait()}); logs: {seen}"
    entry = json.loads(raw)
    seen.append(entry)
    return entry


async def becomes_ready(
    proc: asyncio.subprocess.Process, seen: list[dict[str, object]], within: float
) -> str:
    """Reads the operator's JSON log until it serves health, then waits for /readyz 200; its base
    URL."""
    while "serving /healthz" not in str((entry := await next_log(proc, seen))["msg"]):
        pass
    url = str(entry["msg"]).rsplit(" ", 1)[-1]
    async with aiohttp.ClientSession() as session:

        async def ready() -> bool:
            async with session.get(f"{url}/readyz") as response:
                return response.status == 200

        await eventually(ready, within=within, what="/readyz to answer 200")
    return url


async def reconciles_an_mpijob(
    proc: asyncio.subprocess.Process, sim: Path, seen: list[dict[str, object]]
) -> None:
    """Creates an MPIJob and reads the operator's JSON log until it writes the job's first child."""
    kube = await Kube.from_kubeconfig(str(sim), qps=0, burst=1, user_agent=TEST_AGENT)
    try:
        await kube.create(MPIJOB, MPIJOB_BODY)
    finally:
        await kube.close()
    # The reconciler logs each write; the JSON line names the job it was reconciling.
    while (entry := await next_log(proc, seen)).get("key") != "default/pi":
        pass
    assert str(entry["msg"]) == "create Service default/pi"


@needs_sim
async def test_run_without_the_crd_exits_1_with_a_clear_message(sim: Path) -> None:
    proc = await start_operator(sim)
    try:
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        await stop(proc)
    assert proc.returncode == 1
    last = json.loads(err.decode().strip().splitlines()[-1])
    assert last["level"] == "error"
    assert "mpijobs.kubeflow.org" in str(last["msg"])
    assert "not installed" in str(last["msg"])


@needs_sim
async def test_run_becomes_ready_and_exits_0_on_sigterm(sim: Path) -> None:
    kube = await Kube.from_kubeconfig(str(sim), qps=0, burst=1, user_agent=TEST_AGENT)
    try:
        crd = yaml.safe_load((ROOT / "crds" / "kubeflow.org_mpijobs.yaml").read_text())
        await kube.create(CRD, crd)
    finally:
        await kube.close()
    proc = await start_operator(sim)
    seen: list[dict[str, object]] = []
    try:
        async with asyncio.timeout(30):
            url = await becomes_ready(proc, seen, within=30)
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"{url}/metrics") as response,
            ):
                assert "mpi_operator_is_leader 1.0" in await response.text()
            await reconciles_an_mpijob(proc, sim, seen)
            # uvloop's loop, a dependency: its C transports are part of the CPU per write
            assert "started 2 workers (event loop uvloop.Loop)" in [e["msg"] for e in seen]
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        await stop(proc)
    assert proc.returncode == 0, err.decode()
    last = json.loads(err.decode().splitlines()[-1])
    assert (last["logger"], last["msg"]) == ("mpi_operator.cli", "stopped")


FLAG_CASES = [
    (
        [],
        {
            "namespaces": (),
            "workers": 2,
            "leader_elect": True,
            "lease_namespace": "from-env",
            "qps": None,
            "max_workers_per_job": None,  # the API's ceiling
        },
    ),
    (["--qps", "-1"], {"qps": -1.0, "burst": None}),
    (
        [
            "--namespace",
            "a",
            "--namespace",
            "b",
            "--namespace",
            "a",
            "--workers",
            "8",
            "--no-leader-elect",
        ],
        {"namespaces": ("a", "b"), "workers": 8, "leader_elect": False},
    ),
    (["--namespace", ""], {"namespaces": ()}),
    (
        ["--qps", "50", "--burst", "100", "--metrics-address", ":9090", "--log-format", "json"],
        {"qps": 50.0, "burst": 100, "metrics_address": ":9090", "log_format": "json"},
    ),
    (
        [
            "--cluster-domain",
            "cluster.local",
            "--gpus-per-node",
            "4",
            "--gang-scheduling",
            "volcano",
        ],
        {"cluster_domain": "cluster.local", "gpus_per_node": 4, "gang_scheduling": "volcano"},
    ),
    (
        ["--kubeconfig", "/k", "--lease-namespace", "ops"],
        {"kubeconfig": "/k", "lease_namespace": "ops"},
    ),
    (["--max-workers-per-job", "64"], {"max_workers_per_job": 64}),
]


@pytest.mark.parametrize(
    ("argv", "expected"),
    FLAG_CASES,
    ids=[
        "defaults",
        "no-client-limit",
        "namespaces-workers-no-le",
        "empty-namespace-is-all",
        "api-serving-logs",
        "mpi",
        "paths",
        "worker-limit",
    ],
)
def test_run_flags_become_settings(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], expected: dict[str, object]
) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "from-env")
    settings = cli.run_settings(cli._build_parser().parse_args(["run", *argv]))
    assert {name: getattr(settings, name) for name in expected} == expected


def test_lease_namespace_falls_back_to_mpi_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    assert (
        cli.run_settings(cli._build_parser().parse_args(["run"])).lease_namespace == "mpi-operator"
    )


def test_run_rejects_zero_workers(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--workers", "0"]) == 2
    assert "--workers: must be at least 1, got 0" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("qps", "burst", "expected"),
    [
        (None, None, (FALLBACK_QPS, FALLBACK_BURST, True)),
        (None, 5, (FALLBACK_QPS, 5, True)),
        (50.0, None, (50.0, FALLBACK_BURST, False)),
        (50.0, 100, (50.0, 100, False)),
        (-1.0, None, (-1.0, FALLBACK_BURST, False)),
        (0.0, None, (0.0, FALLBACK_BURST, False)),
    ],
    ids=[
        "unset-lifts-with-apf",
        "burst-only",
        "opt-in",
        "opt-in-with-burst",
        "negative-opts-out",
        "zero",
    ],
)
def test_the_client_limit_of_the_settings(
    qps: float | None, burst: int | None, expected: tuple[float, int, bool]
) -> None:
    """Unset: limited only until the server shows API Priority and Fairness; set: as set, whatever
    the server (zero or negative: `TokenBucket` never waits)."""
    assert client_limit(Settings(qps=qps, burst=burst)) == expected
    assert TokenBucket(*expected[:2]).unlimited is (expected[0] <= 0)


# --- upstream's flags (issue 14, item 2) ----------------------------------------------------------

UPSTREAM_ARGS = ["-alsologtostderr", "--lock-namespace=mpi-operator"]
"""Upstream's manifests/base/deployment.yaml args plus its overlays' --lock-namespace, exactly."""

UPSTREAM_CASES: list[tuple[list[str], dict[str, str], dict[str, object]]] = [
    (UPSTREAM_ARGS, {}, {"lease_namespace": "mpi-operator", "log_level": "info", "workers": 2}),
    (
        ["--kubeConfig", "/k", "--master=https://api:6443", "--threadiness=4"],
        {},
        {"kubeconfig": "/k", "master": "https://api:6443", "workers": 4},
    ),
    (
        ["-kubeConfig=/k", "-master", "http://127.0.0.1:8001", "-threadiness", "5"],
        {},
        {"kubeconfig": "/k", "workers": 5},
    ),
    (
        [
            "--kube-api-qps=7",
            "--kube-api-burst",
            "9",
            "--controller-queue-rate-limit=3",
            "-controller-queue-burst=4",
        ],
        {},
        {"qps": 7.0, "burst": 9, "queue_qps": 3.0, "queue_burst": 4},
    ),
    (["--qps", "-1"], {}, {"qps": -1.0}),
    (["-monitoring-port=9443"], {}, {"metrics_address": "0.0.0.0:9443"}),
    (["--monitoring-port", "0"], {}, {"metrics_address": "0.0.0.0:8080"}),
    (["-lock-namespace", "kubeflow"], {"POD_NAMESPACE": "pod-ns"}, {"lease_namespace": "kubeflow"}),
    (["-namespace=team-a"], {}, {"namespaces": ("team-a",)}),
    (["--gang-scheduling=volcano"], {}, {"gang_scheduling": "volcano"}),
    (
        ["--gang-scheduling", "scheduler-plugins-scheduler"],
        {},
        {
            "gang_scheduling": "scheduler-plugins",
            "scheduler_plugins_name": "scheduler-plugins-scheduler",
        },
    ),
    (
        ["-gang-scheduling=my-coscheduler"],
        {},
        {"gang_scheduling": "scheduler-plugins", "scheduler_plugins_name": "my-coscheduler"},
    ),
    (["--gang-scheduling="], {}, {"gang_scheduling": None}),
    (["-v=4"], {}, {"log_level": "debug"}),
    (["-v", "2"], {}, {"log_level": "info"}),
    (["--v=6", "--log-level=warning"], {}, {"log_level": "warning"}),
    (["-v=5"], {"MPI_OPERATOR_LOG_LEVEL": "error"}, {"log_level": "debug"}),
    (
        [
            "-logtostderr=false",
            "-stderrthreshold",
            "INFO",
            "-vmodule=foo=2",
            "--log_dir=/tmp",
            "-one_output",
        ],
        {},
        {"log_level": "info"},
    ),
    # The container's environment: defaults that flags override.
    (
        [],
        {
            "MPI_OPERATOR_WORKERS": "6",
            "MPI_OPERATOR_NAMESPACE": "a,b",
            "MPI_OPERATOR_LOG_FORMAT": "json",
            "MPI_OPERATOR_LOG_LEVEL": "debug",
            "MPI_OPERATOR_LEADER_ELECT": "false",
            "MPI_OPERATOR_METRICS_ADDRESS": ":9090",
            "MPI_OPERATOR_GANG_SCHEDULING": "volcano",
            "MPI_OPERATOR_QPS": "50",
            "MPI_OPERATOR_CLUSTER_DOMAIN": "cluster.local",
        },
        {
            "workers": 6,
            "namespaces": ("a", "b"),
            "log_format": "json",
            "log_level": "debug",
            "leader_elect": False,
            "metrics_address": ":9090",
            "gang_scheduling": "volcano",
            "qps": 50.0,
            "cluster_domain": "cluster.local",
        },
    ),
    (
        ["--threadiness=3", "--leader-elect", "--namespace", "c"],
        {
            "MPI_OPERATOR_WORKERS": "6",
            "MPI_OPERATOR_LEADER_ELECT": "false",
            "MPI_OPERATOR_NAMESPACE": "a",
        },
        {"workers": 3, "leader_elect": True, "namespaces": ("c",)},
    ),
    ([], {"KUBEFLOW_NAMESPACE": "kubeflow"}, {"namespaces": ("kubeflow",)}),
    (
        [],
        {"KUBEFLOW_NAMESPACE": "kubeflow", "MPI_OPERATOR_NAMESPACE": "ours"},
        {"namespaces": ("ours",)},
    ),
    (
        [],
        {"POD_NAMESPACE": "pod-ns", "MPI_OPERATOR_LEASE_NAMESPACE": "leases"},
        {"lease_namespace": "leases"},
    ),
]


@pytest.mark.parametrize(("argv", "environ", "expected"), UPSTREAM_CASES)
def test_upstream_flags_become_settings(
    argv: list[str], environ: dict[str, str], expected: dict[str, object]
) -> None:
    settings = runflags.settings(runflags.parse(argv), environ)
    assert {name: getattr(settings, name) for name in expected} == expected


def test_the_klog_notice_names_the_ignored_flags() -> None:
    assert runflags.klog_notice(runflags.parse(["-v=4", "--lock-namespace=x"])) is None
    notice = runflags.klog_notice(runflags.parse([*UPSTREAM_ARGS, "-log_dir=/var/log", "-v=2"]))
    assert notice is not None
    assert "\n" not in notice
    assert "--alsologtostderr --log_dir" in notice


@pytest.mark.parametrize(
    ("argv", "environ", "message"),
    [
        (["--threadiness", "0"], {}, "--threadiness: must be at least 1, got 0"),
        (["-threadiness=two"], {}, "--threadiness: not a whole number: 'two'"),
        (["--kube-api-burst=0"], {}, "--kube-api-burst: must be at least 1, got 0"),
        (
            ["--controller-queue-rate-limit", "0"],
            {},
            "--controller-queue-rate-limit: must be more than 0",
        ),
        (["--monitoring-port=70000"], {}, "--monitoring-port: port 70000 is not in 0..65535"),
        (
            ["--monitoring-port=9443", "--metrics-address=:9090"],
            {},
            "--monitoring-port and --metrics-address both set the address of /metrics: give one",
        ),
        (["--log-format=yaml"], {}, "--log-format: must be json or text, got 'yaml'"),
        ([], {"MPI_OPERATOR_WORKERS": "0"}, "$MPI_OPERATOR_WORKERS: must be at least 1, got 0"),
        (
            [],
            {"MPI_OPERATOR_LEADER_ELECT": "maybe"},
            "$MPI_OPERATOR_LEADER_ELECT: not a boolean: 'maybe'",
        ),
        (["-v=-1"], {}, "--v: must be at least 0, got -1"),
        (
            ["--cluster-domain=Corp_Example"],
            {},
            "--cluster-domain: 'Corp_Example' is not a DNS name",
        ),
        (
            [],
            {"MPI_OPERATOR_CLUSTER_DOMAIN": "a..b"},
            "$MPI_OPERATOR_CLUSTER_DOMAIN: 'a..b' is not a DNS name",
        ),
    ],
)
def test_bad_values_are_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    environ: dict[str, str],
    message: str,
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["run", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("mpi-operator run: ")
    assert message in err


def test_go_style_leaves_values_and_unknown_names_alone() -> None:
    assert runflags.go_style(
        ["-threadiness=2", "-v", "4", "--qps", "-1", "-h", "--", "-master"]
    ) == [
        "--threadiness=2",
        "--v",
        "4",
        "--qps",
        "-1",
        "-h",
        "--",
        "-master",
    ]


def test_abbreviations_are_refused_as_go_does(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["run", "--thread=2"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --thread=2" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv", [["run", "-version"], ["run", "--version"], ["--version"]], ids=" ".join
)
def test_version_prints_and_exits_0(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("mpi-operator 0.")
    assert "kubeflow.org/v2beta1" in out
    assert "Python 3." in out


def test_every_run_flag_has_help_with_its_default() -> None:
    parser = runflags._parser()
    for action in parser._actions:
        if action.dest in ("help", "version"):
            continue
        assert action.help, action.option_strings
        assert "default:" in action.help, action.option_strings


@needs_sim
async def test_upstream_deployment_args_run_and_reconcile(sim: Path) -> None:
    """`mpi-operator run` with upstream's exact args, configured as in a pod: KUBECONFIG and the
    container's MPI_OPERATOR_* variables (a free port, JSON logs to read); with leader election."""
    kube = await Kube.from_kubeconfig(str(sim), qps=0, burst=1, user_agent=TEST_AGENT)
    try:
        await kube.create(
            CRD, yaml.safe_load((ROOT / "crds" / "kubeflow.org_mpijobs.yaml").read_text())
        )
        namespaces = Resource("", "v1", "namespaces", False, "Namespace")
        await kube.create(
            namespaces,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "mpi-operator"}},
        )
    finally:
        await kube.close()
    env = {
        **source_env(),
        "KUBECONFIG": str(sim),
        "MPI_OPERATOR_METRICS_ADDRESS": "127.0.0.1:0",
        "MPI_OPERATOR_LOG_FORMAT": "json",
    }
    env.pop("POD_NAMESPACE", None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mpi_operator", "run", *UPSTREAM_ARGS,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    seen: list[dict[str, object]] = []
    try:
        async with asyncio.timeout(60):
            entry = await next_log(proc, seen)
            assert str(entry["msg"]).startswith(
                "klog flags accepted and ignored: --alsologtostderr"
            )
            await becomes_ready(proc, seen, within=60)
            kube = await Kube.from_kubeconfig(str(sim), qps=0, burst=1, user_agent=TEST_AGENT)
            try:
                lease = Resource("coordination.k8s.io", "v1", "leases", True, "Lease")
                assert (await kube.get(lease, "mpi-operator", "mpi-operator"))["spec"][
                    "holderIdentity"
                ]
            finally:
                await kube.close()
            await reconciles_an_mpijob(proc, sim, seen)
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        await stop(proc)
    assert proc.returncode == 0, err.decode()


@pytest.mark.parametrize("value", [str(MAX_WORKER_REPLICAS + 1), "0", "2147483647"])
def test_run_refuses_a_worker_limit_that_would_raise_the_ceiling(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    assert cli.main(["run", "--max-workers-per-job", value]) == 2
    err = capsys.readouterr().err
    assert f"--max-workers-per-job: must be between 1 and {MAX_WORKER_REPLICAS}, got {value}" in err
    assert "may only lower the ceiling" in err
