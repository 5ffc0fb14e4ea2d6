"""The monitoring kit (deploy/monitoring/): every PromQL expression of the alerts and of the
dashboard's panels parsed by a real PromQL parser (PyPI `promql-parser`, the Rust `promql-parser`
crate), and every metric they select served by the real operator's /metrics while it runs a static
and an elastic MPIJob on kubesim; the alerts' shape (for, severity, summary, description, a runbook
section that exists); the kustomize component rendered by the real `kubectl kustomize` and the Helm
values rendered by the real Helm library, selecting the metrics Service that is really rendered
beside them.

kubesim has no prometheus-operator CRDs, so the ServiceMonitor and PrometheusRule are checked field
by field here (what prometheus-operator reads), not admitted by an API server."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from integration.reconcile.harness import NS, mpijob, wait_condition
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .install_checks import ROOT, Obj, find, load_all, one

promql = pytest.importorskip(
    "promql_parser", reason="promql-parser (a dev dependency) is not installed"
)

KIT = ROOT / "deploy" / "monitoring"
CHART = ROOT / "deploy" / "charts" / "mpi-operator"
RULES = KIT / "prometheusrule.yaml"
DASHBOARD = KIT / "mpi-operator-dashboard.json"
RUNBOOKS = KIT / "README.md"
SEVERITIES = {"critical", "warning", "info"}
ALERTS = {
    "MPIOperatorNoLeader",
    "MPIOperatorReconcileErrors",
    "MPIJobsFailed",
    "MPIElasticJobBelowMinReplicas",
    "MPIElasticDiscoveryNotConverging",
    "MPIElasticConvergenceSlow",
}
# What Grafana puts in place of its variables before a query reaches Prometheus.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__range": "6h", "$job": "mpi-operator"}
# The sample names each metric type exposes (OpenMetrics' suffixes; `_created` is
# prometheus_client's).
SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
}


def rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RULES.read_text())["spec"]["groups"] for r in g["rules"]]


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panel_queries(board: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(panel title, PromQL with Grafana's variables substituted) of every target."""
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            assert "$" not in expr, (
                f"{panel['title']}: a Grafana variable the test does not know: {expr}"
            )
            yield panel["title"], expr


def expressions() -> list[tuple[str, str]]:
    return [(r["alert"], r["expr"]) for r in rules()] + list(panel_queries(dashboard()))


def selected_metrics(expr: str) -> set[str]:
    """The metric names an expression selects, from the parser's syntax tree."""
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql.VectorSelector) and node.name:
            names.add(node.name)

    promql.walk(promql.parse(expr), visit)
    return names


@pytest.mark.parametrize(("where", "expr"), expressions(), ids=[w for w, _ in expressions()])
def test_every_expression_parses(where: str, expr: str) -> None:
    assert selected_metrics(expr), f"{where}: selects no metric"


def test_alerts_have_for_severity_annotations_and_a_runbook() -> None:
    runbook_text = RUNBOOKS.read_text()
    anchors = {
        re.sub(r"[^a-z0-9-]", "", h.strip().lower().replace(" ", "-"))
        for h in re.findall(r"^#+ (.+)$", runbook_text, re.M)
    }
    seen = set()
    for rule in rules():
        name = rule["alert"]
        seen.add(name)
        assert promql.parse_duration(rule["for"]).total_seconds() > 0, name
        assert rule["labels"]["severity"] in SEVERITIES, name
        assert rule["annotations"]["summary"], name
        assert rule["annotations"]["description"], name
        runbook = rule["annotations"]["runbook"]
        assert runbook == f"deploy/monitoring/README.md#{name.lower()}", name
        assert name.lower() in anchors, f"no runbook section for {name} in {RUNBOOKS}"
    assert seen == ALERTS


def test_dashboard_is_grafana_json_with_a_query_per_panel() -> None:
    board = dashboard()
    assert board["uid"] == "mpi-operator"
    assert board["schemaVersion"] >= 36
    panels = [p for p in board["panels"] if p["type"] != "row"]
    assert panels
    assert all(p.get("targets") for p in panels)
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])
    for p in panels:
        assert [t["refId"] for t in p["targets"]] == [chr(65 + i) for i in range(len(p["targets"]))]
    shown = {name for _, expr in panel_queries(board) for name in selected_metrics(expr)}
    alerted = {name for rule in rules() for name in selected_metrics(rule["expr"])}
    assert alerted <= shown, f"alerted on but not on the dashboard: {alerted - shown}"


def test_the_chart_holds_identical_copies() -> None:
    """A chart cannot read outside its directory: files/ holds copies; refresh them with `cp
    deploy/monitoring/{prometheusrule.yaml,mpi-operator-dashboard.json}
    deploy/charts/mpi-operator/files/`."""
    for source in (RULES, DASHBOARD):
        assert (CHART / "files" / source.name).read_text() == source.read_text(), source.name


def check_service_monitor(monitor: Obj, service: Obj) -> None:
    """What prometheus-operator reads: the selector must match the metrics Service's labels, in its
    namespace, and the endpoint must name its port."""
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    selector = monitor["spec"]["selector"]
    assert set(selector) == {"matchLabels"}
    assert selector["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    assert endpoint["honorLabels"] is True
    assert promql.parse_duration(endpoint["interval"]).total_seconds() > 0


def check_kit(objs: list[Obj], namespace: str) -> None:
    service = one(objs, "Service")
    check_service_monitor(one(objs, "ServiceMonitor"), service)
    rule = one(objs, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == namespace
    assert rule["spec"] == yaml.safe_load(RULES.read_text())["spec"]
    (config_map,) = [
        c for c in find(objs, "ConfigMap") if c["metadata"]["labels"].get("grafana_dashboard")
    ]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["namespace"] == namespace
    assert json.loads(config_map["data"][DASHBOARD.name]) == dashboard()
    # Other monitors must not select the operator's Deployment pods' Service by accident: only one
    # Service.
    assert len(find(objs, "Service")) == 1


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs the kubectl binary")
def test_kustomize_component() -> None:
    target = Path(os.environ.get("TMPDIR", "/tmp")) / f"mpi-operator-monitoring-{os.getpid()}"
    target.mkdir(exist_ok=True)
    rel = os.path.relpath(ROOT / "deploy", target)
    (target / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [{rel}/overlays/cluster-wide]\ncomponents: [{rel}/monitoring]\n"
    )
    try:
        done = subprocess.run(
            ["kubectl", "kustomize", str(target)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        shutil.rmtree(target)
    assert done.returncode == 0, done.stderr
    check_kit(load_all(done.stdout), "mpi-operator")


HELM_ON = {
    "monitoring": {
        "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
        "prometheusRule": {"enabled": True},
        "dashboard": {"enabled": True},
    }
}


def helm_render(values: dict[str, Any]) -> list[Obj]:
    helm = pytest.importorskip(
        "helm_python", reason="helm-python-sdk (a dev dependency) is not installed"
    )
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(values, name="mpi-operator", namespace="ops", is_install=True)
    return [
        o
        for path, text in sorted(manifests.items())
        if path.endswith(".yaml")
        for o in load_all(text)
    ]


def test_helm_values() -> None:
    helm = pytest.importorskip(
        "helm_python", reason="helm-python-sdk (a dev dependency) is not installed"
    )
    defaults = helm_render({})
    assert not find(defaults, "ServiceMonitor")
    assert not find(defaults, "PrometheusRule")
    assert not find(defaults, "ConfigMap"), "the kit is off by default"
    objs = helm_render(HELM_ON)
    check_kit(objs, "mpi-operator")
    assert one(objs, "ServiceMonitor")["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    report = helm.lint(CHART, HELM_ON, strict=True, namespace="ops")
    assert report["errors"] == []
    elsewhere = helm_render(
        {"monitoring": {"dashboard": {"enabled": True, "namespace": "grafana"}}}
    )
    assert one(elsewhere, "ConfigMap")["metadata"]["namespace"] == "grafana"
    with pytest.raises(Exception, match=r"needs metrics\.enabled"):
        helm_render(
            {"metrics": {"enabled": False}, "monitoring": {"serviceMonitor": {"enabled": True}}}
        )


def test_plain_scrape_config_keeps_the_metrics_service() -> None:
    config = yaml.safe_load((KIT / "prometheus-scrape.yaml").read_text())
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["honor_labels"] is True
    (keep,) = [r for r in job["relabel_configs"] if r.get("action") == "keep"]
    service = one(load_all((ROOT / "deploy" / "base" / "service.yaml").read_text()), "Service")
    # The base's `labels:` transformer adds app.kubernetes.io/name to every object.
    labels = {"app.kubernetes.io/name": "mpi-operator", **service["metadata"]["labels"]}
    port = service["spec"]["ports"][0]["name"]
    assert re.fullmatch(
        keep["regex"],
        f"{labels['app.kubernetes.io/name']};{labels['app.kubernetes.io/component']};{port}",
    )


def exposed_sample_names(text: str) -> dict[str, set[str]]:
    """Every sample name /metrics may carry, per family, from its `# TYPE` (so a labelled counter
    that has no child yet still counts), and the names that do carry samples."""
    declared: set[str] = set()
    sampled: set[str] = set()
    for family in text_string_to_metric_families(text):
        declared.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
        sampled.update(s.name for s in family.samples)
    return {"declared": declared, "sampled": sampled}


def elastic_job(name: str) -> dict[str, Any]:
    body = mpijob(name, workers=2, elasticPolicy={"minReplicas": 1, "maxReplicas": 3})
    body["spec"]["mpiReplicaSpecs"]["Worker"]["restartPolicy"] = "Never"
    return body


async def test_every_selected_metric_is_served(
    kube: Kube, operator: Manager, http: aiohttp.ClientSession
) -> None:
    await kube.create(resources.MPIJOB, mpijob("static"))
    await kube.create(resources.MPIJOB, elastic_job("elastic"))
    await wait_condition(kube, "static", "Running")

    async def scrape_with_ready_workers() -> str | None:
        async with http.get(operator.server.url + "/metrics") as response:
            assert response.status == 200
            text = await response.text()
        ready = (
            f'mpi_operator_elastic_workers{{mpijob="elastic",namespace="{NS}",state="ready"}} 2.0'
        )
        return text if ready in text else None

    text = await eventually(
        scrape_with_ready_workers, what="/metrics with the elastic job's 2 ready workers"
    )
    exposed = exposed_sample_names(text)
    assert f'mpi_operator_elastic_min_replicas{{mpijob="elastic",namespace="{NS}"}} 1.0' in text
    static = [line for line in text.splitlines() if 'mpijob="static"' in line]
    assert static == [
        f'mpi_operator_job_pending_workers{{mpijob="static",namespace="{NS}"}} 0.0'
    ], "static jobs have no elastic series"
    missing = {
        f"{where}: {name}"
        for where, expr in expressions()
        for name in selected_metrics(expr)
        if name not in exposed["declared"]
    }
    assert missing == set()
    # Beyond declared: what the alerts compare has samples while jobs run (unlabelled counters
    # always do).
    for name in (
        "mpi_operator_is_leader",
        "mpi_operator_reconcile_errors_total",
        "mpi_operator_jobs_failed_total",
    ):
        assert name in exposed["sampled"], name

    async def series_of(job: str) -> bool:
        async with http.get(operator.server.url + "/metrics") as response:
            return f'mpijob="{job}"' in await response.text()

    async def dropped(job: str) -> bool:
        return not await series_of(job)

    # A suspended job has no ready workers on purpose: no series, so no below-minReplicas alert.
    await kube.patch(
        resources.MPIJOB, "elastic", {"spec": {"runPolicy": {"suspend": True}}}, namespace=NS
    )
    await eventually(lambda: dropped("elastic"), what="the suspended elastic job's series dropped")
    await kube.patch(
        resources.MPIJOB, "elastic", {"spec": {"runPolicy": {"suspend": False}}}, namespace=NS
    )
    await eventually(lambda: series_of("elastic"), what="the resumed elastic job's series back")
    await kube.delete(resources.MPIJOB, "elastic", namespace=NS)
    await eventually(lambda: dropped("elastic"), what="the deleted elastic job's series dropped")
