"""A new MPIJob through the API: every child created in upstream's order with upstream's names,
labels, owner references, mounts and env, accepted by kubesim's admission with no warnings, plus the
Created status and event (upstream `TestAllResourcesCreated/{OpenMPI,Intel,MPICH}`,
`TestMPIJobSuccess` first half, `TestNewLauncherAndWorker`, `TestNewConfigMap` through the API)."""

from __future__ import annotations

import pytest

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .harness import NS, OPERATOR_AGENT, controller_of, get_job, list_names, mpijob, wait_event

HOSTFILES = {
    "OpenMPI": "".join(f"pi-worker-{i}.pi.default.svc slots=1\n" for i in range(5)),
    "Intel": "".join(f"pi-worker-{i}.pi.default.svc:1\n" for i in range(5)),
    "MPICH": "".join(f"pi-worker-{i}.pi.default.svc:1\n" for i in range(5)),
}
SLOTS_ENV = {"OpenMPI": "OMPI_MCA_orte_set_default_slots", "Intel": "I_MPI_PERHOST", "MPICH": None}


@pytest.mark.parametrize("impl", ["OpenMPI", "Intel", "MPICH"], ids=str.lower)
async def test_all_resources_created_in_upstream_order(
    kubesim: KubeSim, kube: Kube, operator: Manager, impl: str
) -> None:
    # Workers never start, so the first sync's objects stay as created.
    body = mpijob(
        "pi",
        workers=5,
        mpiImplementation=impl,
        worker_annotations={"kubesim/start-seconds": "3600"},
    )
    created = await kube.create(resources.MPIJOB, body)

    async def launcher_created() -> bool:
        return "pi-launcher" in await list_names(kube, resources.JOB)

    await eventually(launcher_created, what="the launcher Job")
    creates = [
        r.resource
        for r in kubesim.control.recorded(verb="create", user_agent=OPERATOR_AGENT)
        if r.resource != "events"
    ]
    assert creates == ["services", "configmaps", "secrets", *["pods"] * 5, "jobs"]
    workers = [f"pi-worker-{i}" for i in range(5)]
    # The selectors of v1alpha2 recipes, of v1 recipes, and of the Kubeflow training SDK's
    # get_job_pods.
    for selector in (
        "mpi_job_name=pi,mpi_role_type=worker",
        "mpi-job-name=pi,mpi-job-role=worker",
        "training.kubeflow.org/job-name=pi,training.kubeflow.org/replica-type=worker",
    ):
        assert await list_names(kube, resources.POD, selector) == workers, selector
    assert kubesim.control.warnings(user_agent=OPERATOR_AGENT) == []

    owner = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "name": "pi",
        "uid": created["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    labels = {
        "app": "pi",
        "training.kubeflow.org/operator-name": "mpi-operator",
        "training.kubeflow.org/job-name": "pi",
    }
    service = await kube.get(resources.SERVICE, "pi", NS)
    config = await kube.get(resources.CONFIG_MAP, "pi-config", NS)
    secret = await kube.get(resources.SECRET, "pi-ssh", NS)
    launcher = await kube.get(resources.JOB, "pi-launcher", NS)
    for obj in (service, config, secret, launcher):
        assert controller_of(obj) == owner
        assert obj["metadata"]["labels"] == labels
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {
        "training.kubeflow.org/operator-name": "mpi-operator",
        "training.kubeflow.org/job-name": "pi",
    }
    assert config["data"] == {"hostfile": HOSTFILES[impl], "discover_hosts.sh": "#!/bin/sh\n"}
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert set(secret["data"]) == {"ssh-privatekey", "ssh-publickey"}

    for i in range(5):
        pod = await kube.get(resources.POD, f"pi-worker-{i}", NS)
        assert controller_of(pod) == owner
        meta_labels = pod["metadata"]["labels"]
        assert meta_labels["training.kubeflow.org/replica-index"] == str(i)
        assert meta_labels["training.kubeflow.org/job-role"] == "worker"
        assert meta_labels["mpi_job_name"] == "pi"
        assert meta_labels["mpi_role_type"] == "worker"
        assert pod["spec"]["hostname"] == f"pi-worker-{i}"
        assert pod["spec"]["subdomain"] == "pi"
        assert {"name": "K_MPI_JOB_ROLE", "value": "worker"} in pod["spec"]["containers"][0]["env"]
        assert any(v["name"] == "ssh-auth" for v in pod["spec"]["volumes"])

    template = launcher["spec"]["template"]
    assert template["metadata"]["labels"]["mpi_role_type"] == "launcher"
    assert template["metadata"]["labels"]["mpi-job-role"] == "launcher"
    assert template["metadata"]["labels"]["training.kubeflow.org/replica-type"] == "launcher"
    assert template["spec"]["hostname"] == "pi-launcher"
    main = template["spec"]["containers"][0]
    env = {e["name"]: e.get("value", "") for e in main["env"]}
    assert env["K_MPI_JOB_ROLE"] == "launcher"
    if SLOTS_ENV[impl] is not None:
        assert env[SLOTS_ENV[impl]] == "1"
    assert env["NVIDIA_VISIBLE_DEVICES"] == ""
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == ""
    mounts = {m["name"]: m["mountPath"] for m in main["volumeMounts"]}
    assert mounts == {"ssh-auth": "/root/.ssh", "mpi-job-config": "/etc/mpi"}
    assert launcher["spec"]["podReplacementPolicy"] == "Failed"

    async def status_written() -> dict[str, object] | None:
        job = await get_job(kube, "pi")
        return job if "replicaStatuses" in (job.get("status") or {}) else None

    job = await eventually(status_written, what="the first status write")
    status = job["status"]
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in status["conditions"]] == [
        ("Created", "True", "MPIJobCreated", "MPIJob default/pi is created.")
    ]
    assert status["replicaStatuses"]["Launcher"] == {}
    assert status["replicaStatuses"]["Worker"] == {
        "selector": "training.kubeflow.org/job-name=pi,training.kubeflow.org/job-role=worker,"
        "training.kubeflow.org/operator-name=mpi-operator"
    }
    assert status["observedGeneration"] == 1
    assert "startTime" in status
    event = await wait_event(kube, "pi", "MPIJobCreated")
    assert event["type"] == "Normal"
    assert event["message"] == "MPIJob default/pi is created."
    assert event["source"]["component"] == "mpi-job-controller"
    status_writes = kubesim.control.recorded(subresource="status", user_agent=OPERATOR_AGENT)
    assert {r.content_type.split(";")[0] for r in status_writes} == {"application/merge-patch+json"}
