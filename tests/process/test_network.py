"""Pod network, DNS and /etc files of the process runtime: real resolvers and real connections."""

from __future__ import annotations

from typing import Any

from kubesim.app import KubeSim
from kubesim.testing import wait_for

from .procrt_helpers import create, get_pod, is_ready, log_text, phase, pod, shell

# A readiness gate the test opens from outside: the pod is Ready once /tmp/ready exists in it.
READY_FILE_PROBE = {"exec": {"command": ["test", "-e", "/tmp/ready"]}, "periodSeconds": 1}


def headless(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"clusterIP": "None", "selector": {"job": name}, **spec},
    }


def member(name: str, job: str, script: str = "sleep 1000") -> dict[str, Any]:
    return pod(
        name,
        shell("main", script, readinessProbe=READY_FILE_PROBE),
        hostname=name,
        subdomain=job,
        labels={"job": job},
    )


async def _exec(sim: KubeSim, name: str, *argv: str) -> tuple[int, str]:
    kubelet = sim.controllers.kubelet
    assert kubelet is not None
    run = kubelet._workers[("default", name)].runs["main"]  # type: ignore[attr-defined]
    code, out = await run.exec(list(argv), 20)
    return code, out.decode()


async def test_headless_dns_lists_only_ready_pods_and_pods_reach_each_other(
    kubesim: KubeSim,
) -> None:
    create(kubesim, headless("job"))
    create(kubesim, member("w-0", "job", "python3 -m http.server 8080 >/dev/null 2>&1"))
    create(kubesim, member("w-1", "job"))
    await wait_for(
        kubesim, lambda: phase(kubesim, "w-0") == "Running" and phase(kubesim, "w-1") == "Running"
    )
    fqdn = "w-0.job.default.svc.cluster.local"
    # Not Ready yet: the name does not resolve (headless Services publish Ready pods only).
    code, out = await _exec(kubesim, "w-1", "getent", "hosts", fqdn)
    assert code == 2, out
    # Ready once its server listens: Running says the shell started, not that python has bound.
    listening = (
        "import socket, time, pathlib\n"
        "deadline = time.monotonic() + 60\n"
        "while socket.socket().connect_ex(('127.0.0.1', 8080)) and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        "pathlib.Path('/tmp/ready').touch()\n"
    )
    await _exec(kubesim, "w-0", "python3", "-c", listening)
    await wait_for(kubesim, lambda: is_ready(kubesim, "w-0"))
    ip = get_pod(kubesim, "w-0")["status"]["podIP"]
    code, out = await _exec(kubesim, "w-1", "getent", "hosts", "w-0.job")  # through the search path
    assert (code, out.split()[0]) == (0, ip)
    code, out = await _exec(kubesim, "w-1", "getent", "hosts", "job.default.svc.cluster.local")
    assert (code, out.split()) == (0, [ip, "job.default.svc.cluster.local"])
    code, out = await _exec(
        kubesim,
        "w-1",
        "python3",
        "-c",
        f"import urllib.request as u; print(u.urlopen('http://{fqdn}:8080/').status)",
    )
    assert (code, out.strip()) == (0, "200")
    # /etc/hosts as the kubelet writes it: the pod's own FQDN and hostname.
    code, out = await _exec(kubesim, "w-1", "cat", "/etc/hosts")
    own_ip = get_pod(kubesim, "w-1")["status"]["podIP"]
    assert f"{own_ip}\tw-1.job.default.svc.cluster.local\tw-1" in out
    code, out = await _exec(kubesim, "w-1", "hostname")
    assert out.strip() == "w-1"


async def test_publish_not_ready_addresses_resolves_pods_before_they_are_ready(
    kubesim: KubeSim,
) -> None:
    create(kubesim, headless("eager", publishNotReadyAddresses=True))
    create(kubesim, member("e-0", "eager"))
    create(kubesim, member("e-1", "eager"))
    await wait_for(
        kubesim, lambda: phase(kubesim, "e-0") == "Running" and phase(kubesim, "e-1") == "Running"
    )
    await wait_for(kubesim, lambda: get_pod(kubesim, "e-0")["status"].get("podIP"))
    code, out = await _exec(kubesim, "e-1", "getent", "hosts", "e-0.eager")
    assert (code, out.split()[0]) == (0, get_pod(kubesim, "e-0")["status"]["podIP"])
    assert not is_ready(kubesim, "e-0")


async def test_names_outside_the_cluster_do_not_resolve(kubesim: KubeSim) -> None:
    create(
        kubesim,
        pod("lonely", shell("main", "getent hosts example.com; echo rc=$?"), restartPolicy="Never"),
    )
    await wait_for(kubesim, lambda: phase(kubesim, "lonely") == "Succeeded")
    assert log_text(kubesim, "lonely").strip() == "rc=2"
