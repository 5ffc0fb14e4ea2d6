"""Upstream's TestDoNothingWithInvalidKey and TestDoNothingWithNonexistentMPIJob, through the
manager.

A malformed key or the key of a job that does not exist is reconciled as a no-op: no API writes, no
error (so no requeue), and the operator keeps serving other jobs.
"""

from __future__ import annotations

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .harness import idle, mpijob, operator_writes, reconciles, wait_condition


def _errors(mgr: Manager) -> float:
    value = mgr.metrics.registry.get_sample_value(
        "mpi_operator_reconcile_total", {"result": "error"}
    )
    return value or 0.0


async def test_invalid_key_and_nonexistent_job_do_nothing(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    kubesim.control.clear_requests()
    before = reconciles(operator)
    operator.queue.add("foo/bar/baz")
    operator.queue.add("default/no-such-job")
    await eventually(
        lambda: reconciles(operator) >= before + 2 and idle(operator), what="both keys reconciled"
    )
    assert operator_writes(kubesim) == []
    assert _errors(operator) == 0
    assert operator.queue.num_requeues("foo/bar/baz") == 0
    assert operator.queue.num_requeues("default/no-such-job") == 0
    # The operator is still working: a real job after the junk keys is reconciled.
    await kube.create(resources.MPIJOB, mpijob("pi"), "default")
    await wait_condition(kube, "pi", "Created")
    writes = operator_writes(kubesim)
    assert "create services/" in writes, writes
