"""The reconciler conformance tier: kubesim with pods that start and turn Ready in 0.1 s, Jobs that
back off for 0.1 s and frequent watch bookmarks, so the operator's convergence is what a test waits
on."""

import pytest

from kubesim.settings import SimSettings
from operator_testing import fast_sim_settings


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return fast_sim_settings()
