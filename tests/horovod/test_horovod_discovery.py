"""Proof against Horovod 0.28.1's own code: its discovery, host manager, rank assignment and
blacklist consume the `discover_hosts.sh` the operator renders, over the elastic layer's sequence of
cluster states.

`scripts/fetch_horovod.sh` downloads the sdist from PyPI (cached) and extracts its pure-Python
runner modules; they import as they are (psutil and cloudpickle are their only third-party imports;
nothing compiled is needed, so nothing is stubbed). Each poll runs the rendered script the way
`horovodrun` does: `HostDiscoveryScript` through `safe_shell_exec` and `/bin/sh`, without
`--slots-per-host` (our lines carry the slots). Blacklisting goes through the driver's own
`WorkerStateRegistry` `_on_workers_recorded`, the code that runs when a failed worker is recorded;
the last test runs the whole `ElasticDriver` (discovery thread, Gloo rendezvous HTTP server,
worker-exit handling, resets) with thread stand-ins for the worker processes.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.request import urlopen

import pytest
from hvd_cache import cache_dir

from mpi_discovery import hostfile
from mpi_operator.desired import config
from mpi_operator.elastic import worker_host
from unit.elastic.cluster import ElasticCluster, elastic_job

REPO = Path(__file__).resolve().parents[2]
FETCH = REPO / "scripts" / "fetch_horovod.sh"


@pytest.fixture(scope="session")
def horovod() -> Iterator[SimpleNamespace]:
    pytest.importorskip("psutil", reason="Horovod's runner imports psutil (pip install psutil)")
    pytest.importorskip(
        "cloudpickle", reason="Horovod's runner imports cloudpickle (pip install cloudpickle)"
    )
    cache = cache_dir()
    try:
        done = subprocess.run(
            ["bash", str(FETCH), cache],
            capture_output=True,
            text=True,
            timeout=100,  # below the per-test timeout, so a hung download skips instead of failing
            env={**os.environ, "PYTHON": sys.executable},
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.skip("fetching the horovod 0.28.1 sdist from PyPI timed out")
    if done.returncode != 0:
        pytest.skip(
            f"cannot fetch the horovod 0.28.1 sdist from PyPI: {done.stderr.strip()[-500:]}"
        )
    root = done.stdout.strip().splitlines()[-1]
    sys.path.insert(0, root)
    try:
        import horovod.runner.common.util.hosts as hosts
        import horovod.runner.elastic.discovery as discovery
        import horovod.runner.elastic.driver as driver
        import horovod.runner.elastic.registration as registration
        import horovod.runner.elastic.rendezvous as rendezvous
        import horovod.runner.http.http_server as http_server
        from horovod.runner.elastic.worker import HostUpdateResult

        yield SimpleNamespace(
            discovery=discovery,
            driver=driver,
            hosts=hosts,
            http_server=http_server,
            registration=registration,
            rendezvous=rendezvous,
            HostUpdateResult=HostUpdateResult,
        )
    finally:
        sys.path.remove(root)


def write_script(path: Path, script: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(script)
    tmp.chmod(0o555)
    tmp.replace(path)  # atomic, like a ConfigMap volume's symlink swap


class HorovodView:
    """One `horovodrun` driver's view: its HostManager polling a script file, as `_discover_hosts`
    does."""

    def __init__(self, hvd: SimpleNamespace, path: Path, *, min_np: int, max_np: int) -> None:
        self.hvd = hvd
        self.path = path
        self.min_np, self.max_np = min_np, max_np
        self.manager: Any = hvd.discovery.HostManager(
            hvd.discovery.HostDiscoveryScript(str(path), None)
        )

    def publish(self, script: str) -> None:
        write_script(self.path, script)

    def poll(self) -> Any:
        return self.manager.update_available_hosts()

    @property
    def order(self) -> list[str]:
        return [h.split(".", 1)[0] for h in self.manager.current_hosts.host_assignment_order]

    def world_size(self) -> int:
        """`ElasticDriver._get_host_assignments` over the current hosts."""
        current = self.manager.current_hosts
        infos = [
            self.hvd.hosts.HostInfo(h, current.get_slots(h)) for h in current.host_assignment_order
        ]
        if current.count_available_slots() < self.min_np:
            return 0  # the driver waits for --min-np slots
        return len(self.hvd.hosts.get_host_assignments(infos, self.min_np, self.max_np))

    def record_failure(self, failed_host: str) -> None:
        """A worker on `failed_host` exited non-zero: the driver's registry decides, with its own
        code."""
        registration = self.hvd.registration
        calls: list[str] = []
        driver = SimpleNamespace(finished=lambda: False, stop=lambda **_: calls.append("stop"))
        driver.resume = lambda: calls.append("resume")
        registry = registration.WorkerStateRegistry(driver, self.manager)
        registry._size = len(self.manager.current_hosts.host_assignment_order)
        for host in self.manager.current_hosts.host_assignment_order:
            state = registration.FAILURE if host == failed_host else registration.READY
            registry._states[(host, 0)] = state
            registry._workers[state].add((host, 0))
        registry._on_workers_recorded()
        assert calls == ["resume"], calls  # the job goes on without the failed host
        assert self.manager.is_blacklisted(failed_host)


def script_of(cluster: ElasticCluster) -> str:
    assert cluster.config_map is not None
    return str(cluster.config_map["data"][config.DISCOVER_HOSTS_KEY])


def upstream_style_script(cluster: ElasticCluster) -> str:
    """What an operator with stable names would print for the same workers (incarnation 0
    always)."""
    listed = hostfile.parse_discover_hosts(script_of(cluster))
    names = []
    for host, slots in listed:
        short = host.split(".", 1)[0]
        index = int(short.split("-worker-", 1)[1].split("-", 1)[0])
        names.append((worker_host(cluster.job, index, 0), slots))
    return hostfile.render_discover_hosts(names)


def test_scale_out_2_to_3_then_in_3_to_1_with_grace(
    horovod: SimpleNamespace, tmp_path: Path
) -> None:
    updated = horovod.HostUpdateResult
    cluster = ElasticCluster(
        elastic_job(2, min_replicas=1, max_replicas=3, settle=5, grace=30, slots=2)
    )
    view = HorovodView(horovod, tmp_path / "discover_hosts.sh", min_np=2, max_np=6)
    cluster.step()
    view.publish(script_of(cluster))
    assert view.poll() == updated.no_update  # nothing Ready yet: an empty, valid list
    cluster.set_ready()
    cluster.step()
    view.publish(script_of(cluster))
    assert view.poll() == updated.added
    # Horovod appends the hosts of one change in set order, so only the set is ours to assert
    assert (sorted(view.order), view.world_size()) == (["hvd-worker-0", "hvd-worker-1"], 4)
    first = view.order

    cluster.scale(3)
    cluster.step()
    cluster.set_ready(2)
    cluster.tick(5)
    cluster.step()
    view.publish(script_of(cluster))
    assert view.poll() == updated.added
    assert (view.order, view.world_size()) == (
        [*first, "hvd-worker-2"],
        6,
    )  # survivors keep their ranks

    cluster.tick(5)
    cluster.scale(1)
    cluster.step()
    view.publish(script_of(cluster))
    assert view.poll() == updated.removed  # the graceful path: ranks on 1 and 2 are told to leave
    assert (view.order, view.world_size()) == (["hvd-worker-0"], 2)
    assert cluster.indices() == [0, 1, 2]  # their pods live on through the grace period
    assert not view.manager.is_blacklisted(worker_host(cluster.job, 2))

    cluster.tick(30)
    cluster.step()
    view.publish(script_of(cluster))
    assert cluster.indices() == [0]
    assert view.poll() == updated.no_update


def test_failed_worker_rejoins_under_new_identity_but_not_under_its_old_name(
    horovod: SimpleNamespace, tmp_path: Path
) -> None:
    updated = horovod.HostUpdateResult
    cluster = ElasticCluster(elastic_job(2, min_replicas=1, max_replicas=3, settle=5))
    ours = HorovodView(horovod, tmp_path / "ours.sh", min_np=1, max_np=3)
    stable = HorovodView(horovod, tmp_path / "stable-names.sh", min_np=1, max_np=3)

    def publish_and_poll() -> tuple[Any, Any]:
        ours.publish(script_of(cluster))
        stable.publish(upstream_style_script(cluster))
        return ours.poll(), stable.poll()

    cluster.step()
    cluster.set_ready()
    cluster.step()
    assert publish_and_poll() == (updated.added, updated.added)
    failed = worker_host(cluster.job, 1)
    for view in (ours, stable):
        assert sorted(view.order) == ["hvd-worker-0", "hvd-worker-1"]
        view.record_failure(failed)
        assert (view.order, view.world_size()) == (["hvd-worker-0"], 1)

    cluster.fail(1, exit_code=137)
    cluster.step()  # leaves discovery at once; the pod is replaced as hvd-worker-1-r1
    assert publish_and_poll() == (updated.removed, updated.removed)
    assert cluster.hostname(1) == "hvd-worker-1-r1"

    cluster.set_ready(1)
    cluster.tick(5)
    cluster.step()
    assert publish_and_poll() == (updated.added, updated.added)
    # the new identity is a new host to Horovod: it gets a rank
    assert (ours.order, ours.world_size()) == (["hvd-worker-0", "hvd-worker-1-r1"], 2)
    # the same name again is reported as added, yet stays blacklisted forever (no cooldown)
    assert (stable.order, stable.world_size()) == (["hvd-worker-0"], 1)
    assert stable.manager.is_blacklisted(failed)


def test_rendered_script_runs_through_horovods_shell_exec(
    horovod: SimpleNamespace, tmp_path: Path
) -> None:
    """Slots come from our lines (no --slots-per-host), FQDNs stay exact strings, empty means
    none."""
    cluster = ElasticCluster(elastic_job(3, slots=4))
    cluster.step()
    path = tmp_path / "discover_hosts.sh"
    view = HorovodView(horovod, path, min_np=1, max_np=12)
    view.publish(script_of(cluster))
    assert view.manager._discovery.find_available_hosts_and_slots() == {}
    cluster.set_ready()
    cluster.step()
    view.publish(script_of(cluster))
    found = view.manager._discovery.find_available_hosts_and_slots()
    assert found == {f"hvd-worker-{i}.hvd.ns.svc": 4 for i in range(3)}


WAIT_POLLS = 2000
"""A wait's ceiling in discovery polls (the test polls every 50 ms: 100 s on an idle machine)."""
STALL_SECONDS = 60.0


class DriverRun:
    """Horovod's real `ElasticDriver`, polling a script file, with its real Gloo rendezvous server.

    Worker processes are stand-ins (threads): each records which host it was started on, and blocks
    until the job ends or the test makes it exit. Re-rendezvous after a reset is the HTTP request a
    worker's `hvd.init()` sends (`rank_and_size/<host>:<local_rank>`), which is what records it
    READY.
    """

    def __init__(self, hvd: SimpleNamespace, path: Path, *, min_np: int, max_np: int) -> None:
        self.hvd = hvd
        self.started: list[str] = []
        self.exit_codes: dict[str, int] = {}
        self._cond = threading.Condition()
        self._ticks = 0
        self._ticked = threading.Condition()
        """Notified on each discovery poll and each worker start: what a `wait` re-checks on."""
        self.rendezvous = hvd.http_server.RendezvousServer()
        discovery = hvd.discovery.HostDiscoveryScript(str(path), None)
        self.polls = 0
        poll = discovery.find_available_hosts_and_slots

        def counted() -> Any:
            found = poll()
            self.polls += 1  # only counts: the parsing is Horovod's
            self._tick()
            return found

        discovery.find_available_hosts_and_slots = counted
        self.driver: Any = hvd.driver.ElasticDriver(
            self.rendezvous, discovery, min_np, max_np, timeout=20
        )
        self.port = self.rendezvous.start(hvd.rendezvous.create_rendezvous_handler(self.driver))

    def _worker(self, slot_info: Any, events: list[threading.Event]) -> tuple[int, int]:
        host = slot_info.hostname
        with self._cond:
            self.started.append(host.split(".", 1)[0])
            self._cond.notify_all()
        self._tick()
        with self._cond:
            while host not in self.exit_codes and not any(e.is_set() for e in events):
                self._cond.wait(0.05)
            return self.exit_codes.pop(host, 0), int(time.time())

    def start(self, num_proc: int) -> None:
        self.driver.start(num_proc, self._worker)

    def fail(self, host: str, exit_code: int) -> None:
        with self._cond:
            self.exit_codes[host] = exit_code
            self._cond.notify_all()

    def rendezvous_again(self, hosts: list[str]) -> None:
        """The surviving workers' re-init after HorovodInternalError / HostsUpdatedInterrupt."""

        def get(host: str) -> None:
            with urlopen(
                f"http://127.0.0.1:{self.port}/rank_and_size/{host}:0", timeout=20
            ) as resp:
                resp.read()

        threads = [threading.Thread(target=get, args=(h,)) for h in hosts]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)

    def wait_for_polls(self, count: int = 2) -> None:
        """Until the discovery thread has run the script `count` more times (one whole poll after
        now)."""
        target = self.polls + count
        self.wait(lambda: self.polls >= target, "discovery polls")

    def _moved_since(self, seen: int) -> bool:
        return self._ticks != seen

    def _tick(self) -> None:
        with self._ticked:
            self._ticks += 1
            self._ticked.notify_all()

    def wait(self, predicate: Any, what: str) -> None:
        """Re-checks `predicate` after each discovery poll or worker start (the driver's state
        changes only in those threads), outside any lock the driver's threads take. Its ceiling
        counts polls (`WAIT_POLLS`), not seconds, and a driver that stops polling fails after
        `STALL_SECONDS`."""
        for _ in range(WAIT_POLLS):
            with self._ticked:
                seen = self._ticks
            if predicate():
                return
            with self._ticked:
                moved = self._ticked.wait_for(
                    functools.partial(self._moved_since, seen), timeout=STALL_SECONDS
                )
            assert moved, f"no discovery poll for {STALL_SECONDS}s while waiting for {what}"
        raise AssertionError(f"not true after {WAIT_POLLS} discovery polls: {what}")

    def stop(self) -> None:
        self.driver.stop()
        self.driver.get_results()  # joins the worker threads
        self.rendezvous._httpd.server_close()


def test_real_driver_restarts_a_replacement_only_under_its_new_identity(
    horovod: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        horovod.driver, "DISCOVER_HOSTS_FREQUENCY_SECS", 0.05
    )  # as Horovod's own tests do
    cluster = ElasticCluster(elastic_job(2, min_replicas=1, max_replicas=3, settle=5))
    cluster.step()
    cluster.set_ready()
    cluster.step()
    paths = {"ours": tmp_path / "ours.sh", "stable": tmp_path / "stable.sh"}

    def publish() -> None:
        write_script(paths["ours"], script_of(cluster))
        write_script(paths["stable"], upstream_style_script(cluster))

    publish()
    runs = {name: DriverRun(horovod, path, min_np=1, max_np=3) for name, path in paths.items()}
    try:
        for run in runs.values():
            run.start(2)
            run.wait(lambda r=run: len(r.started) == 2, "two worker processes")
            assert sorted(run.started) == ["hvd-worker-0", "hvd-worker-1"]
        # worker-1's process dies (its pod failed): the driver records the failure, blacklists the
        # host
        w0, w1 = worker_host(cluster.job, 0), worker_host(cluster.job, 1)
        for run in runs.values():
            run.fail(w1, 137)
            run.rendezvous_again([w0])
            run.wait(
                lambda r=run: r.driver.world_size() == 1, "the job to re-form without worker-1"
            )
            assert run.driver._host_manager.is_blacklisted(w1)

        cluster.fail(1, exit_code=137)
        cluster.step()
        publish()
        cluster.set_ready(1)
        cluster.tick(5)
        cluster.step()
        publish()
        new = worker_host(cluster.job, 1, 1)
        for run in runs.values():
            run.wait_for_polls()
            run.rendezvous_again(
                [w0]
            )  # rank 0 was told a host was added; the job resets (returns after it)
        ours, stable = runs["ours"], runs["stable"]
        assert ours.driver.world_size() == 2
        ours.wait(lambda: len(ours.started) == 3, "a worker process on the replacement")
        assert sorted(ours.started) == ["hvd-worker-0", "hvd-worker-1", "hvd-worker-1-r1"]
        assert new in ours.driver.host_assignments
        # the same name: listed again, never given a rank, never started again
        assert stable.driver.world_size() == 1
        assert sorted(stable.started) == ["hvd-worker-0", "hvd-worker-1"]
    finally:
        for run in runs.values():
            run.stop()
