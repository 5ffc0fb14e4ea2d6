"""A tiny in-memory cluster for elastic step sequences (a test helper, not a test module).

It keeps worker pods and the ConfigMap as plain JSON, runs `elastic_step` with the state read back
from the ConfigMap (`published_state`), and applies the decision the way `decision.py` says the
reconciler must: drain patches, the ConfigMap (script + state annotation), deletions, then the
missing worker pods built by the real desired builder with the hostname of their incarnation. A
fresh `ElasticCluster` over the same objects is an operator restart: nothing is carried over but the
objects.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from mpi_discovery import hostfile
from mpi_operator.api.models import MPIJob
from mpi_operator.desired import config, naming
from mpi_operator.desired.workers import build_worker
from mpi_operator.elastic import (
    ElasticDecision,
    elastic_step,
    incarnation_annotations,
    published_state,
    worker_hostname,
)

JOB_UID = "3f1b6a6e-0000-4000-8000-0000000000e1"
T0 = datetime(2026, 11, 25, 12, 0, 0, tzinfo=UTC)


def elastic_job(
    replicas: int,
    *,
    min_replicas: int = 1,
    max_replicas: int = 8,
    grace: int = 30,
    settle: int = 5,
    max_replacements: int = 10,
    below_min_timeout: int = 60,
    slots: int | None = None,
    name: str = "hvd",
) -> MPIJob:
    spec: dict[str, Any] = {
        "mpiReplicaSpecs": {
            "Launcher": {"template": {"spec": {"containers": [{"name": "main", "image": "hvd"}]}}},
            "Worker": {
                "replicas": replicas,
                "template": {"spec": {"containers": [{"name": "main", "image": "hvd"}]}},
            },
        },
        "elasticPolicy": {
            "minReplicas": min_replicas,
            "maxReplicas": max_replicas,
            "scaleInGracePeriodSeconds": grace,
            "settleSeconds": settle,
            "maxReplacements": max_replacements,
            "belowMinTimeoutSeconds": below_min_timeout,
        },
    }
    if slots is not None:
        spec["slotsPerWorker"] = slots
    return MPIJob.model_validate(
        {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": {"name": name, "namespace": "ns", "uid": JOB_UID},
            "spec": spec,
        }
    )


def with_replicas(job: MPIJob, replicas: int) -> MPIJob:
    raw = job.model_dump(by_alias=True, exclude_none=True, mode="json")
    raw["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = replicas
    return MPIJob.model_validate(raw)


def with_suspend(job: MPIJob, suspend: bool) -> MPIJob:
    raw = job.model_dump(by_alias=True, exclude_none=True, mode="json")
    raw["spec"].setdefault("runPolicy", {})["suspend"] = suspend
    return MPIJob.model_validate(raw)


class ElasticCluster:
    """Worker pods + ConfigMap of one elastic job, and a clock."""

    def __init__(self, job: MPIJob, *, now: datetime = T0) -> None:
        self.job = job
        self.now = now
        self.pods: dict[str, dict[str, Any]] = {}
        self.config_map: dict[str, Any] | None = None
        self.decisions: list[ElasticDecision] = []
        self.deleted: list[str] = []

    # --- the world ------------------------------------------------------------------------------

    def tick(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def scale(self, replicas: int) -> None:
        self.job = with_replicas(self.job, replicas)

    def suspend(self, suspend: bool = True) -> None:
        """`runPolicy.suspend`; the planner's deletion of a suspended job's workers is
        `terminate`/`gone`."""
        self.job = with_suspend(self.job, suspend)

    def pod(self, index: int) -> dict[str, Any]:
        return self.pods[naming.worker_name(self.job, index)]

    def set_ready(self, *indices: int, ready: bool = True) -> None:
        for index in indices or tuple(self.indices()):
            pod = self.pod(index)
            if pod["status"].get("phase") in ("Pending", "Running"):
                status = "True" if ready else "False"
                before = next(
                    (c for c in pod["status"].get("conditions") or () if c["type"] == "Ready"), {}
                )
                # As a kubelet does: the time moves only when the status does.
                when = before.get("lastTransitionTime") if before.get("status") == status else None
                condition = {
                    "type": "Ready",
                    "status": status,
                    "lastTransitionTime": when or self.now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
                pod["status"] = {"phase": "Running", "conditions": [condition]}

    def set_creating(self, *indices: int) -> None:
        """Placed: Pending while its kubelet creates the containers."""
        for index in indices:
            self.pod(index)["status"]["containerStatuses"] = [
                {
                    "name": "main",
                    "restartCount": 0,
                    "state": {"waiting": {"reason": "ContainerCreating"}},
                }
            ]

    def fail(
        self, index: int, *, exit_code: int = 137, reason: str = "Error", evicted: bool = False
    ) -> None:
        status: dict[str, Any] = {
            "phase": "Failed",
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [
                {
                    "name": "main",
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": exit_code, "reason": reason}},
                }
            ],
        }
        if evicted:
            status["reason"] = "Evicted"
        self.pod(index)["status"] = status

    def terminate(self, index: int) -> None:
        """Someone deletes the pod (it lingers as terminating until `gone`)."""
        self.pod(index)["metadata"]["deletionTimestamp"] = self.now.isoformat()

    def disrupt(self, index: int, reason: str) -> None:
        """The cluster takes the pod: `DisruptionTarget=True` with `reason`, then the graceful
        delete (the kubelet's `TerminationByKubelet` ends the pod Failed/Evicted instead)."""
        if reason == "TerminationByKubelet":
            self.fail(index, evicted=True)
        else:
            self.terminate(index)
        status = self.pod(index)["status"]
        status.setdefault("conditions", []).append(
            {"type": "DisruptionTarget", "status": "True", "reason": reason}
        )

    def gone(self, index: int) -> None:
        del self.pods[naming.worker_name(self.job, index)]

    def indices(self) -> list[int]:
        out = []
        for pod in self.pods.values():
            index = config.observed_worker_index(self.job, pod)
            if index is not None:
                out.append(index)
        return sorted(out)

    def hostname(self, index: int) -> str:
        return str(self.pod(index)["spec"]["hostname"])

    def draining(self) -> list[int]:
        return [
            i
            for i in self.indices()
            if "mpi-operator.kubeflow.org/draining-since"
            in (self.pod(i)["metadata"].get("annotations") or {})
        ]

    # --- what the launcher sees ------------------------------------------------------------------

    def script(self) -> str:
        assert self.config_map is not None
        return str(self.config_map["data"][config.DISCOVER_HOSTS_KEY])

    def listed(self) -> list[str]:
        """Short hostnames `discover_hosts.sh` prints, in its order."""
        if self.config_map is None:
            return []
        return [host.split(".", 1)[0] for host, _ in hostfile.parse_discover_hosts(self.script())]

    def listed_indices(self) -> list[int]:
        return [int(h.split("-worker-", 1)[1].split("-", 1)[0]) for h in self.listed()]

    def state_json(self) -> dict[str, Any]:
        assert self.config_map is not None
        return dict(
            json.loads(
                self.config_map["metadata"]["annotations"][
                    "mpi-operator.kubeflow.org/elastic-state"
                ]
            )
        )

    # --- the operator ----------------------------------------------------------------------------

    def step(self, *, create: bool = True) -> ElasticDecision:
        published = published_state(self.job, self.config_map)
        decision = elastic_step(
            self.job, copy.deepcopy(list(self.pods.values())), published, now=self.now
        )
        self.apply(decision, create=create)
        self.decisions.append(decision)
        return decision

    def apply(self, decision: ElasticDecision, *, create: bool = True) -> None:
        for patch in decision.drain:
            meta = self.pods[patch.name]["metadata"]
            annotations = dict(meta.get("annotations") or {})
            for key, value in patch.annotations.items():
                if value is None:
                    annotations.pop(key, None)
                else:
                    annotations[key] = value
            meta["annotations"] = annotations
        cm = config.build_config_map(self.job, discovered=decision.discovered)
        cm["metadata"]["annotations"] = {
            "mpi-operator.kubeflow.org/elastic-state": decision.publish.to_json(),
        }
        self.config_map = cm
        for deletion in [*decision.replace, *decision.delete]:
            if deletion.name in self.pods:
                assert self.pods[deletion.name]["metadata"].get("uid") == deletion.uid
                self.deleted.append(deletion.name)
                del self.pods[deletion.name]
        if create:
            self.create_missing(decision)

    def create_missing(self, decision: ElasticDecision) -> None:
        """What the planner does with the desired workers built with the decision's incarnations."""
        if self.job.spec.run_policy.suspend:
            return  # a suspended job has no desired workers
        for index in range(int(decision.status["desired"])):
            name = naming.worker_name(self.job, index)
            if name in self.pods:
                continue
            incarnation = decision.incarnations.get(index, 0)
            pod = build_worker(self.job, index)
            pod["spec"]["hostname"] = worker_hostname(self.job, index, incarnation)
            pod["metadata"]["annotations"] = {
                **(pod["metadata"].get("annotations") or {}),
                **incarnation_annotations(incarnation),
            }
            pod["metadata"]["uid"] = f"uid-{name}-{incarnation}-{len(self.deleted)}"
            pod["status"] = {
                "phase": "Pending",
                "conditions": [{"type": "Ready", "status": "False"}],
            }
            self.pods[name] = pod
