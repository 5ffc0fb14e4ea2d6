"""A lagging ConfigMap cache never names a new worker: the elastic state in the job's ConfigMap says
which incarnation, so which host name, each worker pod gets. When the operator's ConfigMap watch
lags (in backoff after API errors, or a new leader's cache), a pod planned from the cached state
could get a name Horovod has blacklisted, and the pod would be deleted as superseded once the cache
caught up: a running worker killed (found by bench/chaos.py). Before creating worker pods of an
elastic job the operator reads the ConfigMap once and plans again from it when the cache is
behind."""

from __future__ import annotations

import json
from typing import Any

from integration.reconcile.harness import NS, OPERATOR_AGENT
from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.elastic.state import STATE_ANNOTATION
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .harness import elastic_job, worker_pods


async def test_a_worker_created_while_the_config_map_cache_lags_gets_the_api_s_incarnation(
    kube: Kube, kubesim: KubeSim, operator: Manager
) -> None:
    body = elastic_job("stale", workers=2, max_replicas=3)
    # Workers that never turn Ready stay out of discovery: replacing one changes nothing in the
    # ConfigMap, so the sync that re-creates it writes no ConfigMap that a stale cache would fail.
    body["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"] = {
        "annotations": {"kubesim/ready-seconds": "3600"}
    }
    await kube.create(resources.MPIJOB, body)

    async def published() -> bool:
        items, _ = await kube.list(resources.CONFIG_MAP, NS)
        config = next((c for c in items if c["metadata"]["name"] == "stale-config"), None)
        has_state = config is not None and STATE_ANNOTATION in (
            config["metadata"].get("annotations") or {}
        )
        return has_state and len(await worker_pods(kube, "stale")) == 2

    await eventually(published, sim=kubesim, what="the elastic state and both workers")
    # The operator's ConfigMap informer goes blind: its LIST/WATCH answered 503, its watch dropped.
    kubesim.control.inject_error(
        503, method="GET", path="/configmaps$", count=None, user_agent=OPERATOR_AGENT
    )
    kubesim.control.drop_watches()
    # Behind its cache, the state moves on: worker 1's names up to incarnation 2 are used up (as
    # another replica, before a failover, would have recorded after replacing it twice).
    config = await kube.get(resources.CONFIG_MAP, "stale-config", NS)
    state = json.loads(config["metadata"]["annotations"][STATE_ANNOTATION])
    state["incarnations"] = {**state.get("incarnations", {}), "1": 3}
    annotations = config["metadata"]["annotations"]
    annotations[STATE_ANNOTATION] = json.dumps(state, sort_keys=True, separators=(",", ":"))
    await kube.replace(resources.CONFIG_MAP, config)
    old = (await worker_pods(kube, "stale"))["stale-worker-1"]["metadata"]["uid"]
    await kube.delete(resources.POD, "stale-worker-1", namespace=NS)

    async def replaced() -> dict[str, Any] | None:
        pod = (await worker_pods(kube, "stale")).get("stale-worker-1")
        return pod if pod is not None and pod["metadata"]["uid"] != old else None

    pod = await eventually(replaced, sim=kubesim, within=30, what="worker 1 created again")
    # The cached state says incarnation 0: a pod named from it would reuse a retired name.
    assert pod["spec"]["hostname"] == "stale-worker-1-r3"
    kubesim.control.clear_faults()
