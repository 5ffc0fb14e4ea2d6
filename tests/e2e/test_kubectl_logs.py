"""`kubectl logs` against kubesim: a simulated container's life instead of a 404, and the API
server's own refusals (kubesim.podlog)."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from kubesim.app import KubeSim
from kubesim.settings import SimSettings
from kubesim.testing import Kubectl, eventually


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return SimSettings(start_seconds=0.05, ready_seconds=0.05)


def pod(name: str, *containers: str, restart: str = "Never", **annotations: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {
                "restartPolicy": restart,
                "containers": [{"name": c, "image": f"example/{c}:1"} for c in containers],
            },
        }
    )


async def wait_for(kubectl: Kubectl, name: str, jsonpath: str, value: str) -> None:
    """`kubectl wait`: kubectl watches the pod until the field has the value."""
    rc, out, err = await kubectl(
        "wait", f"--for=jsonpath={jsonpath}={value}", f"pod/{name}", "--timeout=60s"
    )
    assert rc == 0, out + err


async def test_a_running_container_tells_it_is_simulated(
    kubesim: KubeSim, kubectl: Kubectl
) -> None:
    assert (await kubectl("apply", "-f", "-", stdin=pod("solo", "main")))[0] == 0
    await wait_for(kubectl, "solo", "{.status.phase}", "Running")
    rc, out, err = await kubectl("logs", "solo")
    assert rc == 0, err
    lines = out.splitlines()
    assert (
        lines[0]
        == '[kubesim] container "main" (image example/main:1) is simulated by kubesim: it writes '
        "no output"
    )
    assert lines[1].startswith("[kubesim] started at "), lines
    assert lines[1].endswith("; running"), lines


async def test_an_exited_container_shows_its_exit_and_previous_run(
    kubesim: KubeSim, kubectl: Kubectl
) -> None:
    body = pod(
        "crash",
        "main",
        restart="OnFailure",
        **{"kubesim/run-seconds": "0.2", "kubesim/exit-code": "3"},
    )
    assert (await kubectl("apply", "-f", "-", stdin=body))[0] == 0
    await wait_for(
        kubectl, "crash", "{.status.containerStatuses[0].lastState.terminated.exitCode}", "3"
    )
    rc, out, err = await kubectl("logs", "crash", "--previous")
    assert rc == 0, err
    assert "exited with code 3 (Error)" in out, out
    rc, out, err = await kubectl("logs", "crash")
    assert rc == 0, err
    assert "--previous shows the last run" in out, out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["logs", "duo", "-c", "c"], "container c is not valid for pod duo"),
        (
            ["logs", "duo", "-c", "a", "--previous"],
            'previous terminated container "a" in pod "duo" not found',
        ),
    ],
    ids=["unknown-container", "no-previous"],
)
async def test_refusals_are_the_api_servers(
    kubesim: KubeSim, kubectl: Kubectl, args: list[str], message: str
) -> None:
    assert (await kubectl("apply", "-f", "-", stdin=pod("duo", "a", "b")))[0] == 0
    await wait_for(kubectl, "duo", "{.status.phase}", "Running")
    rc, out, err = await kubectl(*args)
    assert rc != 0, out
    assert message in err, err


async def test_a_pod_that_has_not_started_is_waiting(kubesim: KubeSim, kubectl: Kubectl) -> None:
    body = pod("slow", "main", **{"kubesim/start-seconds": "30"})
    assert (await kubectl("apply", "-f", "-", stdin=body))[0] == 0
    rc, _, err = await kubectl("logs", "slow")
    assert rc != 0
    assert 'container "main" in pod "slow" is waiting to start: ContainerCreating' in err, err


async def test_kubectl_picks_the_first_container_of_several(
    kubesim: KubeSim, kubectl: Kubectl
) -> None:
    assert (await kubectl("apply", "-f", "-", stdin=pod("pair", "a", "b")))[0] == 0
    await wait_for(kubectl, "pair", "{.status.phase}", "Running")
    rc, out, err = await kubectl("logs", "pair")
    assert rc == 0, err
    assert 'container "a"' in out, out


@pytest.mark.kubesim_control
async def test_follow_stays_open_while_the_container_runs(
    kubesim: KubeSim, kubectl: Kubectl
) -> None:
    assert (await kubectl("apply", "-f", "-", stdin=pod("long", "main")))[0] == 0
    await wait_for(kubectl, "long", "{.status.phase}", "Running")
    following = asyncio.create_task(kubectl("logs", "-f", "long"))

    def streaming() -> bool:
        # The log request is recorded with no status until its stream ends.
        requests = kubesim.control.recorded(verb="get", resource="pods")
        return any(r.subresource == "log" and r.status is None for r in requests)

    await eventually(streaming, sim=kubesim, what="kubectl's log stream open")
    assert not following.done(), "kubectl logs -f returned while the container runs"
    assert (await kubectl("delete", "pod", "long", "--wait=false"))[0] == 0
    rc, out, err = await asyncio.wait_for(following, 60)
    assert rc == 0, err
    assert out.splitlines()[1].endswith("; running"), (
        "the stream ends with the pod, as a kubelet's does"
    )


async def test_tail_and_timestamps_act_as_the_kubelets(kubesim: KubeSim, kubectl: Kubectl) -> None:
    assert (await kubectl("apply", "-f", "-", stdin=pod("stamped", "main")))[0] == 0
    await wait_for(kubectl, "stamped", "{.status.phase}", "Running")
    rc, out, err = await kubectl("logs", "--timestamps", "--tail=1", "stamped")
    assert rc == 0, err
    (line,) = out.splitlines()
    stamp, _, text = line.partition(" ")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z", stamp), line
    assert text.startswith("[kubesim] started at ")
    assert text.endswith("; running")
    rc, out, _ = await kubectl("logs", "--since=1h", "stamped")
    assert len(out.splitlines()) == 2, "both lines are from the last hour"
    rc, out, _ = await kubectl("logs", "--tail=0", "stamped")
    assert (rc, out) == (0, "")
