"""pytest plugin (`pytest_plugins = ["kubesim.testing"]`): a simulated cluster per test, clients for
it.

Fixtures: `kubesim` (a started `KubeSim` with its kubeconfig under tmp_path), `kube_api` (a
kubernetes_asyncio ApiClient for it), `kubectl` (the real kubectl, skipped when absent) and
`process_runtime` (skips unless the process runtime can run here). Override `kubesim_settings` or
`kubesim_run_controllers` in a module or conftest to change the cluster. `eventually(check, within=,
what=, sim=)` is the suite's one polling helper, `wait_for(sim, check)` the same re-checked on every
committed change; `decode_changes` says what admission would change in an object written with
`decoded=True`.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast, overload

import pytest
import pytest_asyncio
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient

from kubesim.admission.schema import builtin_schema
from kubesim.admission.structural import Walker
from kubesim.app import KubeSim
from kubesim.errors import StatusError
from kubesim.procrt import missing_requirements
from kubesim.settings import SimSettings

T = TypeVar("T")


def decode_changes(obj: dict[str, Any], api_version: str, kind: str) -> str | None:
    """None when admission's decode of the built-in `kind` leaves `obj` as it is, with nothing
    unknown, undecodable or invalid: what a write with `decoded=True` promises (`admission.admit`);
    else what the decode would change."""
    node = builtin_schema(api_version, kind)
    assert node is not None, f"no built-in schema for {api_version} {kind}"
    walker = Walker(builtin=True)
    walked = walker.walk(obj, node, go=(kind, ""))
    found = (walker.unknown, walker.decode_error, walker.errors.causes)
    if walked == obj and found == ([], None, []):
        return None
    return f"decodes to {walked}; unknown, decode error, invalid: {found}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kubesim_control: uses kubesim's in-process control handle (faults, compaction); kubesim "
        "only",
    )


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return SimSettings()


@pytest.fixture
def kubesim_run_controllers() -> bool:
    return True


@pytest_asyncio.fixture
async def kubesim(
    kubesim_settings: SimSettings, kubesim_run_controllers: bool, tmp_path: Path
) -> AsyncIterator[KubeSim]:
    sim = KubeSim(kubesim_settings, run_controllers=kubesim_run_controllers)
    await sim.start()
    try:
        sim.write_kubeconfig(tmp_path / "kubeconfig")
        yield sim
    finally:
        await sim.stop()


@pytest_asyncio.fixture
async def kube_api(kubesim: KubeSim) -> AsyncIterator[ApiClient]:
    client = await kube_config.new_client_from_config(config_file=str(kubesim.kubeconfig_path))
    try:
        yield client
    finally:
        await client.close()


@dataclass
class Kubectl:
    """Runs the real kubectl against one kubesim; `await kubectl("get", "pods")` -> (rc, stdout,
    stderr)."""

    binary: str
    kubeconfig: Path
    cache_dir: Path
    home: Path

    def argv(self, *args: str) -> list[str]:
        return [
            self.binary,
            f"--kubeconfig={self.kubeconfig}",
            f"--cache-dir={self.cache_dir}",
            *args,
        ]

    async def __call__(
        self, *args: str, stdin: str | None = None, limit: float = 60.0
    ) -> tuple[int, str, str]:
        """Runs kubectl with `args`; kills it and raises TimeoutError after `limit` seconds."""
        env = {**os.environ, "HOME": str(self.home), "KUBECONFIG": str(self.kubeconfig)}
        proc = await asyncio.create_subprocess_exec(
            *self.argv(*args),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        try:
            async with asyncio.timeout(limit):
                out, err = await proc.communicate(stdin.encode() if stdin is not None else None)
        except BaseException:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            raise
        return int(proc.returncode or 0), out.decode(), err.decode()


@pytest.fixture
def kubectl(kubesim: KubeSim, tmp_path: Path) -> Kubectl:
    assert kubesim.kubeconfig_path is not None
    return kubectl_for(kubesim.kubeconfig_path, tmp_path)


def kubectl_for(kubeconfig: Path, tmp_path: Path) -> Kubectl:
    """The real kubectl against the cluster of `kubeconfig`, with its own HOME and cache under
    `tmp_path`; skips the test where kubectl is not installed."""
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.skip("the kubectl binary is not installed on this machine")
    home = tmp_path / "kubectl-home"
    home.mkdir(exist_ok=True)
    return Kubectl(binary, kubeconfig, tmp_path / "kubectl-cache", home)


@pytest.fixture
def process_runtime() -> None:
    """Skips the test with the reason when the process runtime cannot run on this machine."""
    problem = missing_requirements()
    if problem is not None:
        pytest.skip(problem)


@overload
async def eventually(
    check: Callable[[], Awaitable[T | None]],
    *,
    within: float = ...,
    what: str = ...,
    sim: KubeSim | None = ...,
) -> T: ...


@overload
async def eventually(
    check: Callable[[], T | None],
    *,
    within: float = ...,
    what: str = ...,
    sim: KubeSim | None = ...,
) -> T: ...


async def eventually(
    check: Callable[[], T | Awaitable[T | None] | None],
    *,
    within: float = 10.0,
    what: str = "",
    sim: KubeSim | None = None,
) -> T:
    """The one polling helper of the test suite: waits until `check()` returns something truthy and
    returns it; at the deadline its last failure is raised, saying `what`.

    `check` may be a plain or an async callable, and may raise AssertionError, KeyError or a kubesim
    404 `StatusError` while the state is not there yet. With `sim`, it is re-run after every
    committed change of that cluster (and once a second, for state outside it), so nothing waits
    longer than the event it needs; without, it is re-run on a short back-off (a few ms growing to
    50 ms), which a loaded machine only stretches. `within` is a ceiling for a broken run, never a
    speed requirement.
    """
    changed = asyncio.Event()

    def listener(*_args: Any) -> None:
        changed.set()

    if sim is not None:
        sim.cluster.add_listener(listener)
    last: BaseException | None = None
    pause = 0.002
    try:
        async with asyncio.timeout(within):
            while True:
                changed.clear()
                try:
                    result = check()
                    if inspect.isawaitable(result):
                        result = await result
                    if result:
                        return cast(T, result)
                    last = AssertionError(f"still {result!r}")
                except (AssertionError, KeyError, StatusError) as exc:
                    last = exc
                if sim is None:
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, 0.05)
                    continue
                try:
                    async with asyncio.timeout(1.0):
                        await changed.wait()
                except TimeoutError:
                    pass
    except TimeoutError:
        label = f" waiting for {what}" if what else ""
        raise AssertionError(f"not true after {within} s{label}: {last!r}") from last
    finally:
        if sim is not None:
            sim.cluster.remove_listener(listener)


async def wait_for(sim: KubeSim, check: Callable[[], T | None], within: float = 60.0) -> T:
    """`eventually(check, sim=sim)`: re-checks on every committed change of `sim`'s cluster."""
    return await eventually(check, within=within, sim=sim)
