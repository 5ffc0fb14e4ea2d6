"""The Helm chart (deploy/charts/mpi-operator), rendered and linted by the real Helm library (Helm
v4's Go SDK in helm-python-sdk's shared library, no helm binary) with default and non-default
values: objects, RBAC (no wildcards, Roles per watched namespace, gang scheduling), flags through
the operator's own CLI parser, strict kubesim admission and kubectl apply of every object, the RBAC
against the requests of a running operator, and the chart's CRD copy against `mpi-operator crds`."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest

from kubesim.app import KubeSim
from kubesim.testing import Kubectl
from mpi_operator.api import crd

from .install_checks import (
    REQUIRED,
    REQUIRED_GANG,
    REQUIRED_LEASE,
    ROOT,
    Grants,
    Obj,
    admit_strictly,
    apply_and_read_back,
    create_namespaces,
    find,
    load_all,
    not_kept,
    one,
    operator_requests,
    read_back,
    settings_from_args,
    wildcards,
)

helm = pytest.importorskip(
    "helm_python", reason="helm-python-sdk (a dev dependency) is not installed"
)

CHART = ROOT / "deploy" / "charts" / "mpi-operator"
RELEASE = "mpi-operator"
RELEASE_NS = "ops"

CASES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "namespaced": {
        "watchNamespaces": ["team-a", "team-b"],
        "namespace": {"create": False, "name": ""},
        "gangScheduling": "scheduler-plugins",
        "extraArgs": ["--workers=4", "--qps=20", "--burst=40"],
        "image": {
            "repository": "registry.example.com/ml/mpi-operator",
            "tag": "0.1.0-rc1",
            "pullPolicy": "Always",
        },
        "replicaCount": 2,
        "logFormat": "text",
        "metrics": {"enabled": False, "port": 9090},
        "resources": {
            "requests": {"cpu": "200m", "memory": "256Mi"},
            "limits": {"cpu": "2", "memory": "1Gi"},
        },
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
        ],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "pool", "operator": "In", "values": ["system"]}
                            ]
                        }
                    ]
                }
            }
        },
    },
    "gang-volcano-no-leader-election": {
        "gangScheduling": "volcano",
        "leaderElection": {"enabled": False},
        "namespace": {"name": "mpi-system"},
    },
}
IDS = list(CASES)


def operator_namespace(case: str) -> str:
    return (
        str(CASES[case].get("namespace", {}).get("name") or RELEASE_NS)
        if case != "defaults"
        else "mpi-operator"
    )


# Helm's install order (pkg/release/util/kind_sorter.go) of the kinds the chart renders: `render`
# returns manifests per template file, `helm install` sends them sorted by kind.
INSTALL_ORDER = [
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "Deployment",
]


@functools.cache
def render(case: str) -> tuple[Obj, ...]:
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(CASES[case], name=RELEASE, namespace=RELEASE_NS, is_install=True)
    objs = [
        o
        for path, text in sorted(manifests.items())
        if path.endswith(".yaml")
        for o in load_all(text)
    ]
    assert len(manifests) == len(list(CHART.glob("templates/*.yaml"))) + 1  # + NOTES.txt
    return tuple(sorted(objs, key=lambda o: INSTALL_ORDER.index(o["kind"])))


def container(objs: tuple[Obj, ...]) -> dict[str, Any]:
    (c,) = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return dict(c)


@pytest.mark.parametrize("case", IDS, ids=IDS)
def test_chart_lints_clean(case: str) -> None:
    report = helm.lint(CHART, CASES[case], strict=True, namespace=RELEASE_NS)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_crd_copy_matches_the_generator() -> None:
    """The chart's crds/ holds a generated copy: regenerate with `mpi-operator crds --out
    <chart>/crds`."""
    copy = (CHART / "crds" / crd.FILE_NAME).read_text()
    assert copy == crd.render()
    with helm.Chart.load(CHART) as chart:
        assert [c["name"] for c in chart.crds] == [f"crds/{crd.FILE_NAME}"]


def test_defaults() -> None:
    objs = render("defaults")
    assert [o["kind"] for o in objs] == INSTALL_ORDER  # one of each
    assert one(objs, "Namespace")["metadata"]["name"] == "mpi-operator"
    c = container(objs)
    assert c["image"] == "mpi-operator:0.1.0"  # the chart's appVersion
    assert c["args"] == ["--leader-elect", "--metrics-address=0.0.0.0:8080", "--log-format=json"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert one(objs, "Deployment")["spec"]["strategy"] == {"type": "Recreate"}


def test_same_rules_as_kustomize() -> None:
    """One set of rules for both installs (deploy/base/clusterrole.yaml is the reference)."""
    import yaml

    base = yaml.safe_load((ROOT / "deploy" / "base" / "clusterrole.yaml").read_text())
    assert one(render("defaults"), "ClusterRole")["rules"] == base["rules"]
    gang = yaml.safe_load_all(
        (ROOT / "deploy" / "components" / "gang-scheduling" / "rbac.yaml").read_text()
    )
    gang_rules = next(d for d in gang if d["kind"] == "ClusterRole")["rules"]
    for role in find(render("namespaced"), "Role", RELEASE):
        assert role["rules"] == [*base["rules"], gang_rules[0]]


def test_non_default_values_reach_the_objects() -> None:
    objs = render("namespaced")
    assert find(objs, "Namespace") == []  # namespace.create false
    assert find(objs, "Service") == []  # metrics.enabled false
    assert find(objs, "ClusterRoleBinding", RELEASE) == []
    deployment = one(objs, "Deployment")
    assert (
        deployment["metadata"]["namespace"] == RELEASE_NS
    )  # namespace.name "" -> the release namespace
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == CASES["namespaced"]["nodeSelector"]
    assert pod["tolerations"] == CASES["namespaced"]["tolerations"]
    assert pod["affinity"] == CASES["namespaced"]["affinity"]
    c = container(objs)
    assert c["image"] == "registry.example.com/ml/mpi-operator:0.1.0-rc1"
    assert c["imagePullPolicy"] == "Always"
    assert c["resources"] == CASES["namespaced"]["resources"]
    assert c["ports"][0]["containerPort"] == 9090
    settings = settings_from_args_only(c["args"])
    assert settings.namespaces == ("team-a", "team-b")
    assert settings.gang_scheduling == "scheduler-plugins"
    assert (settings.workers, settings.qps, settings.burst) == (4, 20.0, 40)
    assert settings.log_format == "text"
    assert settings.metrics_address == "0.0.0.0:9090"
    assert settings.leader_elect is True
    assert [r["metadata"]["namespace"] for r in find(objs, "Role", RELEASE)] == ["team-a", "team-b"]

    no_le = render("gang-volcano-no-leader-election")
    assert find(no_le, "Role") == []  # no Lease, no leader-election Role
    le_settings = settings_from_args_only(container(no_le)["args"])
    assert (le_settings.leader_elect, le_settings.gang_scheduling) == (False, "volcano")
    assert one(no_le, "Namespace")["metadata"]["name"] == "mpi-system"


def settings_from_args_only(args: list[str]) -> Any:
    from mpi_operator import cli

    return cli.run_settings(cli._build_parser().parse_args(["run", *args]))


def test_bad_gang_scheduler_is_refused() -> None:
    with (
        helm.Chart.load(CHART) as chart,
        pytest.raises(helm.HelmError, match="gangScheduling must be"),
    ):
        chart.render({"gangScheduling": "kube-batch"}, name=RELEASE, namespace=RELEASE_NS)


@pytest.mark.parametrize("case", IDS, ids=IDS)
def test_rbac_has_no_wildcards_and_covers_what_the_code_sends(case: str) -> None:
    objs = list(render(case))
    assert wildcards(objs) == []
    ns = operator_namespace(case)
    grants = Grants.of(objs, ns, RELEASE)
    values = CASES[case]
    watched = values.get("watchNamespaces") or [None]
    required = REQUIRED + (REQUIRED_GANG if values.get("gangScheduling") else ())
    for where in watched:
        assert grants.missing(required, where) == []
    if values.get("watchNamespaces"):
        assert grants.missing(REQUIRED, "default") != []  # only the watched namespaces
    lease = grants.missing(REQUIRED_LEASE, ns, name="mpi-operator")
    assert (lease == []) == values.get("leaderElection", {}).get("enabled", True)
    if not values.get("gangScheduling"):
        assert grants.missing(REQUIRED_GANG, None) == grants.missing(REQUIRED_GANG, watched[0])
        assert len(grants.missing(REQUIRED_GANG, watched[0])) == sum(
            len(v) for *_, v in REQUIRED_GANG
        )


@pytest.mark.parametrize("case", IDS, ids=IDS)
def test_every_object_passes_strict_admission(case: str) -> None:
    for obj in render(case):
        assert admit_strictly(obj) == [], (obj["kind"], obj["metadata"]["name"])


@pytest.mark.kubectl
@pytest.mark.parametrize("case", IDS, ids=IDS)
async def test_kubectl_apply_keeps_every_field(
    case: str, kubesim: KubeSim, kubectl: Kubectl
) -> None:
    objs = list(render(case))
    existing = list(CASES[case].get("watchNamespaces") or [])
    if not CASES[case].get("namespace", {}).get("create", True):
        existing.append(operator_namespace(case))
    live = await apply_and_read_back(kubectl, objs, existing)
    for rendered, got in zip(objs, live, strict=True):
        assert not_kept(rendered, got) == [], (rendered["kind"], rendered["metadata"]["name"])


@pytest.mark.kubectl
@pytest.mark.parametrize("case", IDS, ids=IDS)
async def test_helm_install_on_kubesim(case: str, kubesim: KubeSim, kubectl: Kubectl) -> None:
    """A real `helm install` (Helm's install action, server-side apply) of the chart into kubesim:
    the CRD from crds/ first, then every template's object, none refused or pruned, and Helm's
    release record stored as a Secret (its default driver; client-go writes it as protobuf)."""
    await create_namespaces(kubectl, CASES[case].get("watchNamespaces") or [])

    def install() -> dict[str, Any]:
        with (
            helm.Config(kubeconfig_path=kubesim.kubeconfig_path, storage_driver="secret") as config,
            helm.Chart.load(CHART) as chart,
        ):
            release: dict[str, Any] = config.install(
                chart, RELEASE, CASES[case], namespace=RELEASE_NS, create_namespace=True, timeout=30
            )
            return release

    release = await asyncio.wait_for(asyncio.to_thread(install), 60)
    assert release["status"] == "deployed"
    objs = list(render(case))
    live = await read_back(kubectl, objs)
    for rendered, got in zip(objs, live, strict=True):
        assert not_kept(rendered, got) == [], (rendered["kind"], rendered["metadata"]["name"])
    rc, out, err = await kubectl(
        "get", "crd", "mpijobs.kubeflow.org", "-o", "jsonpath={.spec.group}"
    )
    assert (rc, out) == (0, "kubeflow.org"), err
    rc, out, err = await kubectl(
        "get",
        "secrets",
        "-n",
        RELEASE_NS,
        "-l",
        f"owner=helm,name={RELEASE}",
        "-o",
        "jsonpath={.items[*].type}",
    )
    assert (rc, out) == (0, "helm.sh/release.v1"), err


@pytest.mark.kubectl
@pytest.mark.parametrize("case", ["defaults"], ids=["defaults"])
async def test_rbac_covers_every_request_of_a_running_operator(
    case: str, kubesim: KubeSim, kubectl: Kubectl
) -> None:
    """The chart installed on kubesim (with the chart's CRD), the operator run with the Deployment's
    args: every request it sends through a job's life is granted by the rendered RBAC."""
    import yaml

    objs = list(render(case))
    crd_obj = yaml.safe_load((CHART / "crds" / crd.FILE_NAME).read_text())
    await apply_and_read_back(kubectl, [crd_obj, *objs])
    ns = operator_namespace(case)
    settings = settings_from_args(kubesim, container(render(case))["args"], ns)
    sent = await operator_requests(kubesim, settings, "default")
    assert any(r.resource == "leases" and r.verb == "update" for r in sent)
    assert any(r.resource == "pods" and r.verb == "create" for r in sent)
    grants = Grants.of(objs, ns, RELEASE)
    assert grants.denied(sent) == []
