"""The process-runtime tier: kubesim pods that run real programs (root only; skipped elsewhere)."""

from __future__ import annotations

import pytest
from procrt_helpers import PROCESS_TIME_SCALE

from kubesim.settings import SimSettings


@pytest.fixture
def kubesim_settings(process_runtime: None) -> SimSettings:
    return SimSettings(runtime="process", time_scale=PROCESS_TIME_SCALE, volume_sync_seconds=5.0)
