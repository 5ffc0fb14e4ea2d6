"""Kubernetes' version priority, and the version the operator's Events name."""

from __future__ import annotations

from mpi_operator.api import constants as c
from mpi_operator.api.versions import PREFERRED_API_VERSION, preferred, priority


def test_versions_rank_as_the_api_server_ranks_them() -> None:
    # apimachinery's own example for CompareKubeAwareVersionStrings.
    expected = ["v10", "v2", "v1", "v11beta2", "v10beta3", "v3beta1", "v12alpha1", "v11alpha2"]
    shuffled = [*expected[::2], *expected[1::2], "foo10", "foo1"]
    assert sorted(shuffled, key=priority) == [*expected, "foo1", "foo10"]


def test_events_name_the_version_a_plain_mpijob_resolves_to() -> None:
    assert preferred(["v2beta1", "v1alpha2"]) == "v2beta1"
    assert preferred(c.SERVED_VERSIONS) == "v1"
    assert PREFERRED_API_VERSION == "kubeflow.org/v1"
