"""Which served version of `kubeflow.org` MPIJobs kubectl resolves a plain `mpijob` to.

The API server ranks a CRD's versions stable first, then beta, then alpha (apimachinery's
`CompareKubeAwareVersionStrings`) and kubectl takes the first. The operator names that version in
its Events' `involvedObject`, because `kubectl events --for mpijob/NAME` selects on it exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from mpi_operator.api import constants as c

_KUBE_VERSION = re.compile(r"^v([1-9][0-9]*)(?:(alpha|beta)([1-9][0-9]*))?$")
_STABILITY = {None: 2, "beta": 1, "alpha": 0}


def priority(version: str) -> tuple[int, int, int, int, str]:
    """A sort key, highest priority first when sorted: `v2 > v1 > v2beta1 > v1beta2 > v1alpha1`;
    versions not in that form rank last, alphabetically."""
    match = _KUBE_VERSION.match(version)
    if match is None:
        return (1, 0, 0, 0, version)
    major, stability, minor = match.groups()
    return (0, -_STABILITY[stability], -int(major), -int(minor or 0), "")


def preferred(versions: Iterable[str]) -> str:
    """The version discovery lists first among `versions`."""
    return min(versions, key=priority)


PREFERRED_API_VERSION: Final = f"{c.GROUP}/{preferred(c.SERVED_VERSIONS)}"
"""`kubeflow.org/v1` while `v1` is served: what `kubectl get mpijob` reads through."""
