"""The generated MPIJob CRD as a user meets it through the real kubectl, on kubesim.

Install, explain, get (printer columns, short names), scale within and beyond the elastic bounds
(CEL at admission), and legacy manifests whose old fields the superset schema keeps.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kubesim.testing import Kubectl

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "kubeflow.org_mpijobs.yaml"
EXAMPLE = ROOT / "examples" / "elastic" / "tensorflow2-mnist-elastic.yaml"
NAME = "tensorflow2-mnist-elastic"

LEGACY_V1 = """
apiVersion: kubeflow.org/v1
kind: MPIJob
metadata:
  name: legacy-v1
spec:
  slotsPerWorker: 1
  cleanPodPolicy: Running
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: launcher
            image: horovod/horovod:0.28.1
            command: [horovodrun, -np, "2", --min-np, "1", --max-np, "3",
                      --host-discovery-script, /etc/mpi/discover_hosts.sh, python, train.py]
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: worker
            image: horovod/horovod:0.28.1
"""


async def _ok(kubectl: Kubectl, *args: str, stdin: str | None = None) -> str:
    rc, out, err = await kubectl(*args, stdin=stdin)
    assert rc == 0, f"kubectl {' '.join(args)} failed: {err}"
    return out


@pytest.fixture
async def installed(kubectl: Kubectl) -> Kubectl:
    await _ok(kubectl, "apply", "-f", str(CRD))
    await _ok(
        kubectl, "wait", "--for=condition=Established", "crd/mpijobs.kubeflow.org", "--timeout=10s"
    )
    await _ok(kubectl, "apply", "-f", str(EXAMPLE))
    return kubectl


async def test_explain_describes_the_elastic_policy(installed: Kubectl) -> None:
    out = await _ok(installed, "explain", "mpijob.spec.elasticPolicy")
    assert "KIND:       MPIJob" in out
    assert "Makes the job elastic" in out
    for field in ("minReplicas", "maxReplicas", "scaleInGracePeriodSeconds", "maxReplacements"):
        assert field in out
    assert "maxReplicas\t<integer> -required-" in out


async def test_get_shows_the_printer_columns_by_every_short_name(installed: Kubectl) -> None:
    for name in ("mpijobs", "mpij", "mj"):
        lines = (await _ok(installed, "get", name)).splitlines()
        assert lines[0].split() == ["NAME", "STATE", "WORKERS", "READY", "DISCOVERED", "AGE"]
        assert lines[1].split()[:2] == [NAME, "2"]
    assert NAME in await _ok(installed, "get", "kubeflow", "-o", "name")


async def test_scale_within_bounds_and_refused_beyond_them(installed: Kubectl) -> None:
    await _ok(installed, "scale", "mpijob", NAME, "--replicas=4")
    rc, _, err = await installed("scale", "mpijob", NAME, "--replicas=5")
    assert rc == 1
    assert "Worker replicas must be <= elasticPolicy.maxReplicas (4)" in err
    # One mistake, one error: the schema's minimum, not also the elastic bound's rule.
    patch = json.dumps({"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": -1}}}})
    rc, _, err = await installed("patch", "mpijob", NAME, "--type=merge", "-p", patch)
    assert rc == 1
    assert "should be greater than or equal to 1" in err
    assert err.count("Invalid value") == 1, err
    too_many = json.dumps({"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 100000}}}})
    rc, _, err = await installed("patch", "mpijob", NAME, "--type=merge", "-p", too_many)
    assert rc == 1
    assert err.count("Invalid value") == 1, err
    stored = yaml.safe_load(await _ok(installed, "get", "mpijob", NAME, "-o", "yaml"))
    assert stored["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 4


async def test_min_above_max_and_bad_names_are_refused_at_admission(installed: Kubectl) -> None:
    bad_bounds = EXAMPLE.read_text().replace("minReplicas: 1", "minReplicas: 6")
    rc, _, err = await installed("apply", "-f", "-", stdin=bad_bounds.replace(NAME, "bad-bounds"))
    assert rc == 1
    assert "minReplicas (6) must be <= maxReplicas (4)" in err
    rc, _, err = await installed(
        "apply", "-f", "-", stdin=EXAMPLE.read_text().replace(NAME, "1-starts-digit")
    )
    assert rc == 1
    assert "DNS-1035" in err


async def test_legacy_v1_manifest_keeps_its_old_fields(installed: Kubectl) -> None:
    rc, _, err = await installed("apply", "-f", "-", stdin=LEGACY_V1)
    assert rc == 0, err
    assert "Warning" not in err, (
        "v1 is not marked deprecated: the operator's LegacyFieldsMapped says it"
    )
    stored = yaml.safe_load(
        await _ok(installed, "get", "mpijobs.v1.kubeflow.org", "legacy-v1", "-o", "yaml")
    )
    assert stored["spec"]["cleanPodPolicy"] == "Running"
    assert stored["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
