"""What the Horovod tests share: the compiled Horovod venv, built once per session and cached."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hvd_cache import cache_dir

BUILD = Path(__file__).resolve().parents[2] / "scripts" / "build_horovod.sh"


@pytest.fixture(scope="session")
def horovod_venv() -> Path:
    """The venv with a compiled Horovod (PyTorch + Gloo), built once and cached between runs."""
    cache = cache_dir()
    done = subprocess.run(
        ["bash", str(BUILD), cache],
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, "PYTHON": sys.executable},
        check=False,
    )
    if done.returncode == 3:
        pytest.skip(f"cannot download the horovod sdist from PyPI: {done.stderr.strip()[-300:]}")
    assert done.returncode == 0, f"building Horovod failed:\n{done.stderr[-4000:]}"
    return Path(done.stdout.strip().splitlines()[-1])
