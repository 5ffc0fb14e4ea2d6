"""What `mpi-operator run` imports: none of kubesim and its dependencies, and of kubernetes_asyncio
only the configuration, `ApiClient` and the config loaders (`kube.sdk`), not its ~850 generated API
and model modules or its dynamic client; and code that does want the whole SDK still gets it."""

from __future__ import annotations

import json

from operator_testing import run_python

EXCLUDED = (
    "kubesim",
    "jsonschema",
    "kubernetes_validate",
    "jsonpatch",
    "kubernetes_asyncio.dynamic",
    "kubernetes_asyncio.client.api.core_v1_api",
    "kubernetes_asyncio.client.models.v1_pod",
    "kubernetes_asyncio.stream",
)
SDK_MODULES_AT_MOST = 30
"""kubernetes_asyncio modules `run` may import (15 today); the whole package is about 870."""


def test_run_imports_only_what_it_runs() -> None:
    # `run` goes all the way into the manager, which stops at the missing kubeconfig.
    result = run_python(
        """
import json, sys
from mpi_operator import cli
code = cli.main(["run", "--kubeconfig", "/nonexistent/kubeconfig", "--no-leader-elect",
                 "--metrics-address", "127.0.0.1:0"])
assert code == 1, code
assert "mpi_operator.runtime.manager" in sys.modules
print(json.dumps(sorted(sys.modules)))
"""
    )
    assert result.returncode == 0, result.stderr
    modules = json.loads(result.stdout.splitlines()[-1])
    imported = [m for m in modules if any(m == x or m.startswith(x + ".") for x in EXCLUDED)]
    assert imported == [], f"mpi-operator run imported {imported}"
    sdk = [m for m in modules if m.startswith("kubernetes_asyncio")]
    assert len(sdk) <= SDK_MODULES_AT_MOST, sdk


def test_the_whole_sdk_is_still_there_for_who_asks() -> None:
    result = run_python(
        """
import mpi_operator.kube.client
from kubernetes_asyncio import client, watch
import kubernetes_asyncio
import kubernetes_asyncio.dynamic
from kubernetes_asyncio.client.api_client import ApiClient
assert client.CoreV1Api.__name__ == "CoreV1Api"
assert client.models.V1Pod is client.V1Pod
assert kubernetes_asyncio.client.ApiClient is ApiClient
assert kubernetes_asyncio.dynamic.DynamicClient and watch.Watch and kubernetes_asyncio.utils
assert kubernetes_asyncio.__version__
print("ok")
"""
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
