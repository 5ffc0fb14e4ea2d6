"""The reconciler conformance tier: kubesim with pods that start and turn Ready in 0.1 s, Jobs that
back off for 0.1 s and frequent watch bookmarks, so the operator's convergence is what a test waits
on."""

import pytest

from kubesim.settings import SimSettings


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return SimSettings(
        start_seconds=0.1, ready_seconds=0.1, job_backoff_seconds=0.1, bookmark_seconds=0.5
    )
