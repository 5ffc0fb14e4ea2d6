"""The real kubectl 1.32 against kubesim: apply, get, patch, scale, label selectors, wait, delete,
watch."""

from __future__ import annotations

import asyncio
import json

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient

from kubesim.app import KubeSim
from kubesim.testing import Kubectl, eventually

from .kubesim_contract import CRD_PATH, get_widget, merge_patch_widget

pytestmark = pytest.mark.kubectl

WIDGET = """
apiVersion: test.kubesim.io/v1
kind: Widget
metadata:
  name: w1
  labels: {app: demo}
spec:
  replicas: 2
  color: blue
"""

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: {app}}}
spec:
  terminationGracePeriodSeconds: 0
  containers: [{{name: main, image: busybox}}]
"""


@pytest.fixture
def kubesim_run_controllers() -> bool:
    return False


async def _ok(kubectl: Kubectl, *args: str, stdin: str | None = None) -> str:
    rc, out, err = await kubectl(*args, stdin=stdin)
    assert rc == 0, f"kubectl {' '.join(args)} failed: {err}"
    return out


async def _setup_widget(kubectl: Kubectl) -> None:
    assert "created" in await _ok(kubectl, "apply", "-f", str(CRD_PATH))
    assert (
        await _ok(kubectl, "apply", "-f", "-", stdin=WIDGET)
    ).strip() == "widget.test.kubesim.io/w1 created"


async def test_apply_get_and_yaml(kubectl: Kubectl, kubesim: KubeSim) -> None:
    await _setup_widget(kubectl)
    table = (await _ok(kubectl, "get", "wdg")).splitlines()
    document = yaml.safe_load(await _ok(kubectl, "get", "widget", "w1", "-o", "yaml"))
    assert table[0].split() == ["NAME", "REPLICAS", "READY", "AGE"]
    assert table[1].split()[:2] == ["w1", "2"]
    assert document["spec"] == {"replicas": 2, "color": "blue"}
    assert document["metadata"]["uid"]
    assert document["metadata"]["resourceVersion"]
    assert (
        await _ok(kubectl, "apply", "-f", "-", stdin=WIDGET)
    ).strip() == "widget.test.kubesim.io/w1 unchanged"
    posts = kubesim.control.recorded(verb="create", resource="widgets")
    assert "fieldValidation=Strict" in posts[0].query


async def test_patch_merge_json_and_strategic(kubectl: Kubectl, kube_api: ApiClient) -> None:
    await _setup_widget(kubectl)
    merged = await _ok(
        kubectl, "patch", "widget", "w1", "--type=merge", "-p", '{"spec":{"color":"red"}}'
    )
    unchanged = await _ok(
        kubectl, "patch", "widget", "w1", "--type=merge", "-p", '{"spec":{"color":"red"}}'
    )
    ops = json.dumps([{"op": "replace", "path": "/spec/replicas", "value": 7}])
    await _ok(kubectl, "patch", "widget", "w1", "--type=json", "-p", ops)
    rc, _, err = await kubectl("patch", "widget", "w1", "-p", '{"spec":{"color":"green"}}')
    assert merged.strip() == "widget.test.kubesim.io/w1 patched"
    assert unchanged.strip() == "widget.test.kubesim.io/w1 patched (no change)"
    assert rc == 1
    assert "application/strategic-merge-patch+json is not supported" in err
    assert (await get_widget(kube_api, "w1"))["spec"] == {"replicas": 7, "color": "red"}


async def test_scale(kubectl: Kubectl, kube_api: ApiClient, kubesim: KubeSim) -> None:
    await _setup_widget(kubectl)
    assert (
        await _ok(kubectl, "scale", "widget", "w1", "--replicas=5")
    ).strip() == "widget.test.kubesim.io/w1 scaled"
    await _ok(kubectl, "scale", "widget", "w1", "--current-replicas=5", "--replicas=3")
    assert (await get_widget(kube_api, "w1"))["spec"]["replicas"] == 3
    assert [r.method for r in kubesim.control.recorded(subresource="scale")] == [
        "PATCH",
        "GET",
        "PUT",
    ]


async def test_create_pods_and_select_by_label(kubectl: Kubectl) -> None:
    for name, app in [("p1", "web"), ("p2", "web"), ("p3", "db")]:
        await _ok(kubectl, "create", "-f", "-", stdin=POD.format(name=name, app=app))
    rc, _, err = await kubectl("create", "-f", "-", stdin=POD.format(name="p1", app="web"))
    web = (await _ok(kubectl, "get", "pods", "-l", "app=web", "-o", "name")).split()
    not_web = (await _ok(kubectl, "get", "pods", "-l", "app notin (web)")).splitlines()
    assert (rc, "AlreadyExists" in err) == (1, True)
    assert web == ["pod/p1", "pod/p2"]
    assert not_web[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [line.split()[0] for line in not_web[1:]] == ["p3"]


async def test_wait_for_condition_set_through_the_api(
    kubectl: Kubectl, kube_api: ApiClient, kubesim: KubeSim
) -> None:
    await _setup_widget(kubectl)
    waiter = asyncio.create_task(
        kubectl("wait", "--for=condition=Ready", "widget/w1", "--timeout=20s")
    )
    # Set the condition once kubectl watches for it, so that it is the watch that sees it.
    await eventually(
        lambda: kubesim.control.recorded(verb="watch", resource="widgets"), what="kubectl's watch"
    )
    ready = {"type": "Ready", "status": "True", "reason": "Test", "message": ""}
    await merge_patch_widget(kube_api, "w1", {"status": {"conditions": [ready]}}, status=True)
    rc, out, err = await asyncio.wait_for(waiter, 25)
    assert rc == 0, err
    assert out.strip() == "widget.test.kubesim.io/w1 condition met"


async def test_delete_waits_for_finalizers(
    kubectl: Kubectl, kube_api: ApiClient, kubesim: KubeSim
) -> None:
    await _setup_widget(kubectl)
    await merge_patch_widget(kube_api, "w1", {"metadata": {"finalizers": ["test.kubesim.io/hold"]}})
    deleter = asyncio.create_task(kubectl("delete", "widget", "w1", "--timeout=20s"))
    await eventually(
        lambda: kubesim.control.recorded(verb="watch", resource="widgets"), what="kubectl's watch"
    )
    assert not deleter.done()
    assert (await get_widget(kube_api, "w1"))["metadata"]["deletionTimestamp"]
    await merge_patch_widget(kube_api, "w1", {"metadata": {"finalizers": None}})
    rc, out, err = await asyncio.wait_for(deleter, 25)
    assert rc == 0, err
    assert out.strip() == 'widget.test.kubesim.io "w1" deleted'
    watch = kubesim.control.recorded(verb="watch", resource="widgets")[0]
    assert "fieldSelector=metadata.name%3Dw1" in watch.query


async def test_server_side_apply_upserts(kubectl: Kubectl, kube_api: ApiClient) -> None:
    assert "created" in await _ok(kubectl, "apply", "-f", str(CRD_PATH))
    first = await _ok(kubectl, "apply", "--server-side", "-f", "-", stdin=WIDGET)
    second = await _ok(
        kubectl, "apply", "--server-side", "-f", "-", stdin=WIDGET.replace("blue", "red")
    )
    assert first.strip() == second.strip() == "widget.test.kubesim.io/w1 serverside-applied"
    assert (await get_widget(kube_api, "w1"))["spec"]["color"] == "red"


async def test_get_watch_prints_table_rows_for_changes(
    kubectl: Kubectl, kube_api: ApiClient, kubesim: KubeSim
) -> None:
    await _setup_widget(kubectl)
    watcher = asyncio.create_task(kubectl("get", "widgets", "-w", "--request-timeout=3s"))
    await eventually(
        lambda: kubesim.control.recorded(verb="watch", resource="widgets"), what="kubectl's watch"
    )
    await merge_patch_widget(kube_api, "w1", {"spec": {"replicas": 4}})
    rc, out, err = await asyncio.wait_for(watcher, 10)
    rows = [line.split() for line in out.splitlines()]
    assert rc == 0, err
    assert rows[0] == ["NAME", "REPLICAS", "READY", "AGE"]  # one header: events carry Table rows
    assert [r[:2] for r in rows[1:]] == [["w1", "2"], ["w1", "4"]]


async def test_create_priorityclass_and_a_pod_of_that_class(
    kubectl: Kubectl, kubesim: KubeSim
) -> None:
    created = await _ok(
        kubectl, "create", "priorityclass", "high", "--value=1000", "--preemption-policy=Never"
    )
    assert created.strip() == "priorityclass.scheduling.k8s.io/high created"
    header, *rows = (await _ok(kubectl, "get", "pc")).splitlines()
    assert header.split() == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    assert [r.split()[:3] for r in rows if r.startswith("high")] == [["high", "1000", "false"]]
    manifest = POD.format(name="p", app="a") + "  priorityClassName: high\n"
    await _ok(kubectl, "apply", "-f", "-", stdin=manifest)
    spec = json.loads(await _ok(kubectl, "get", "pod", "p", "-o", "json"))["spec"]
    assert (spec["priority"], spec["preemptionPolicy"]) == (1000, "Never")
    rc, _, err = await kubectl(
        "run", "q", "--image=busybox", "--overrides", '{"spec":{"priorityClassName":"nope"}}'
    )
    assert rc != 0
    assert 'pods "q" is forbidden: no PriorityClass with name nope was found' in err
