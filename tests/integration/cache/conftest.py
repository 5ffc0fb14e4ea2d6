"""The runtime tier's fixtures (`tests/integration/runtime/conftest.py`): cache/ runs against the
same kubesim without controllers, with the tests' own client and fake time."""

from ..runtime.conftest import (  # noqa: F401  (fixtures, found by name)
    fake_clock,
    fake_wall,
    install_mpijob_crd,
    kube,
    kubesim_run_controllers,
)
