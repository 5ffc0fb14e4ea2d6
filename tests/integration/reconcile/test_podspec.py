"""Pod specs through the API, all admitted without warnings (upstream `TestNewLauncherAndWorker/
{defaults,overrides}`, e2e hostNetwork, non-root and custom cluster-domain variants): the worker's
default sshd command or the user's own, user env before the operator's, hostNetwork ->
ClusterFirstWithHostNet, a non-root sshAuthMountPath with owner-only keys, `--cluster-domain` in
hostnames and DNS search, upstream's `SetPodTemplateRestartPolicy` Warning when a template sets its
own restartPolicy, and the ssh readiness probe only on a port the spec names (else none, and one
`SSHPortUnknown` Warning)."""

from __future__ import annotations

from typing import Any

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .harness import (
    NS,
    OPERATOR_AGENT,
    container,
    events_for,
    mpijob,
    running_operator,
    settle,
    wait_condition,
    wait_event,
)


async def launcher_job(kube: Kube) -> dict[str, Any]:
    async def get() -> dict[str, Any] | None:
        items, _ = await kube.list(resources.JOB, NS)
        return items[0] if items else None

    return await eventually(get, what="the launcher Job")


async def test_defaults_and_overrides(kubesim: KubeSim, kube: Kube, operator: Manager) -> None:
    launcher = container(env=[{"name": "USER_VAR", "value": "1"}], command=["mpirun", "hostname"])
    worker = container(command=["/my/sshd"], args=["-p", "2222"])
    body = mpijob("pi", launcher_container=launcher, worker_container=worker)
    body["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["hostNetwork"] = True
    await kube.create(resources.MPIJOB, body)
    job = await launcher_job(kube)
    spec = job["spec"]["template"]["spec"]
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    env = [e["name"] for e in spec["containers"][0]["env"]]
    assert env[:2] == ["USER_VAR", "K_MPI_JOB_ROLE"]  # the operator's come after the user's
    assert spec["containers"][0]["command"] == ["mpirun", "hostname"]
    pod = await kube.get(resources.POD, "pi-worker-0", NS)
    main = pod["spec"]["containers"][0]
    assert (main["command"], main["args"]) == (["/my/sshd"], ["-p", "2222"])
    ssh = next(v for v in pod["spec"]["volumes"] if v["name"] == "ssh-auth")
    assert ssh["secret"]["defaultMode"] == 0o600
    assert kubesim.control.warnings(user_agent=OPERATOR_AGENT) == []


async def test_default_worker_command_is_sshd(kube: Kube, operator: Manager) -> None:
    await kube.create(resources.MPIJOB, mpijob("pi", workers=1))
    await launcher_job(kube)
    pod = await kube.get(resources.POD, "pi-worker-0", NS)
    assert pod["spec"]["containers"][0]["command"] == ["/usr/sbin/sshd", "-De"]


async def test_non_root_ssh_keys_are_owner_only(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    security = {"runAsUser": 1000, "runAsGroup": 1000}
    worker = container(securityContext=security)
    body = mpijob("pi", workers=1, worker_container=worker, sshAuthMountPath="/home/mpiuser/.ssh")
    await kube.create(resources.MPIJOB, body)
    # Not run to Running: kubesim's kubelet cannot yet report init container statuses (its own
    # admission rejects the status it writes: initContainerStatuses[0].imageID missing).
    await launcher_job(kube)
    pod = await kube.get(resources.POD, "pi-worker-0", NS)
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["ssh-auth-setup"]
    mount = next(
        m
        for m in pod["spec"]["containers"][0]["volumeMounts"]
        if m["mountPath"] == "/home/mpiuser/.ssh"
    )
    assert mount["subPath"] == "ssh"
    assert not any(m["name"] == "ssh-auth" for m in pod["spec"]["containers"][0]["volumeMounts"])
    secret = next(v for v in pod["spec"]["volumes"] if "secret" in v)
    assert secret["secret"]["defaultMode"] & 0o022 == 0  # nobody but the owner (and group) may read
    assert kubesim.control.warnings(user_agent=OPERATOR_AGENT) == []


async def test_cluster_domain_reaches_hostfile_and_dns_search(kubesim: KubeSim, kube: Kube) -> None:
    async with running_operator(kubesim, cluster_domain="corp.example"):
        await kube.create(resources.MPIJOB, mpijob("pi", workers=1, runLauncherAsWorker=True))
        await launcher_job(kube)
        config = await kube.get(resources.CONFIG_MAP, "pi-config", NS)
        assert config["data"]["hostfile"].splitlines() == [
            "pi-launcher slots=1",
            "pi-worker-0.pi.default.svc.corp.example slots=1",
        ]
        pod = await kube.get(resources.POD, "pi-worker-0", NS)
        assert "pi.default.svc.corp.example" in pod["spec"]["dnsConfig"]["searches"]


async def test_template_restart_policy_is_overridden_with_a_warning(
    kube: Kube, operator: Manager
) -> None:
    body = mpijob("pi", workers=1)
    body["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["restartPolicy"] = "Never"
    await kube.create(resources.MPIJOB, body)
    event = await wait_event(kube, "pi", "SetPodTemplateRestartPolicy")
    assert event["type"] == "Warning"
    assert (
        event["message"]
        == "Restart policy in pod template overridden by restart policy in replica spec"
    )
    job = await launcher_job(kube)
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"


async def test_worker_ssh_port_unknown_gets_no_probe_and_one_warning(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    """Upstream's pi.yaml: sshd reads its port from its own config file. No probe on a guessed 22
    (the job would never get its launcher), one Warning that says how to declare the port."""
    worker = container(command=["/usr/sbin/sshd"], args=["-De", "-f", "/home/mpiuser/.sshd_config"])
    body = mpijob("pi", worker_container=worker, launcherCreationPolicy="WaitForWorkersReady")
    await kube.create(resources.MPIJOB, body)
    event = await wait_event(kube, "pi", "SSHPortUnknown")
    assert event["type"] == "Warning"
    assert "ports: [{name: ssh, containerPort: 2222}]" in event["message"]
    await launcher_job(kube)
    for index in (0, 1):
        pod = await kube.get(resources.POD, f"pi-worker-{index}", NS)
        assert "readinessProbe" not in pod["spec"]["containers"][0]
    await wait_condition(kube, "pi", "Running")
    await settle(
        kube, operator, "pi"
    )  # later syncs (pods turning Ready, a poke) must not repeat it
    events = [e for e in await events_for(kube, "pi") if e["reason"] == "SSHPortUnknown"]
    assert len(events) == 1
    assert int(events[0].get("count") or 1) == 1


async def test_declared_ssh_port_is_probed_without_a_warning(kube: Kube, operator: Manager) -> None:
    worker = container(
        command=["/usr/sbin/sshd"],
        args=["-De", "-f", "/home/mpiuser/.sshd_config"],
        ports=[{"name": "ssh", "containerPort": 2222}],
    )
    await kube.create(resources.MPIJOB, mpijob("pi", worker_container=worker))
    await launcher_job(kube)
    pod = await kube.get(resources.POD, "pi-worker-0", NS)
    probe = pod["spec"]["containers"][0]["readinessProbe"]  # with the API server's defaults
    assert (probe["tcpSocket"], probe["periodSeconds"]) == ({"port": 2222}, 2)
    await wait_condition(kube, "pi", "Running")
    assert [e for e in await events_for(kube, "pi") if e["reason"] == "SSHPortUnknown"] == []
