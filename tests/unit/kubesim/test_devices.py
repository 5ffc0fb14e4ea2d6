"""GPU ids, their allocation to containers as the device manager does it, and what a container
sees through NVIDIA_VISIBLE_DEVICES."""

from __future__ import annotations

import re
from typing import Any

import pytest

from kubesim import devices
from kubesim.devices import AllocationError, NodeDevices, gpu_id


def gpus(name: str, count: int | str | None, **extra: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "x", **extra}
    if count is not None:
        container["resources"] = {"limits": {devices.GPU: str(count)}}
    return container


def spec(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    return {"initContainers": list(init), "containers": list(containers)}


def ids(node: str, *indexes: int) -> tuple[str, ...]:
    return tuple(gpu_id(node, i) for i in indexes)


def test_gpu_ids_are_named_as_the_plugin_names_them_and_reproducible() -> None:
    first = gpu_id("kubesim-1", 0)
    assert re.fullmatch(
        r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", first
    )
    assert first == gpu_id("kubesim-1", 0)
    assert len({first, gpu_id("kubesim-1", 1), gpu_id("kubesim-2", 0)}) == 3
    assert NodeDevices("kubesim-1", 2).ids() == ids("kubesim-1", 0, 1)


@pytest.mark.parametrize(
    ("container", "count"),
    [
        (gpus("c", 2), 2),
        (gpus("c", None), 0),
        (gpus("c", "1k"), 1000),
        (gpus("c", "lots"), 0),
        ({"name": "c", "resources": {"requests": {devices.GPU: "1"}}}, 0),
    ],
)
def test_container_gpus_reads_the_limit(container: dict[str, Any], count: int) -> None:
    assert devices.container_gpus(container) == count


def test_wants_gpus_looks_at_init_and_app_containers() -> None:
    assert not devices.wants_gpus(spec(gpus("a", None)))
    assert devices.wants_gpus(spec(gpus("a", None), init=(gpus("i", 1),)))
    assert devices.wants_gpus(spec(gpus("a", 1)))


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        # App containers never share; lowest free index first.
        (spec(gpus("a", 2), gpus("b", 1), gpus("c", None)), {"a": (0, 1), "b": (2,)}),
        # An init container's ids go to the app container after it (it has finished by then).
        (spec(gpus("a", 2), init=(gpus("i", 1),)), {"i": (0,), "a": (0, 1)}),
        # ... and to later init containers too; what is left of them goes on to the app ones.
        (
            spec(gpus("a", 1), gpus("b", 1), init=(gpus("i", 2), gpus("j", 1))),
            {"i": (0, 1), "j": (0,), "a": (0,), "b": (1,)},
        ),
        # A sidecar runs beside the app containers: it keeps its ids.
        (
            spec(gpus("a", 1), init=(gpus("s", 1, restartPolicy="Always"),)),
            {"s": (0,), "a": (1,)},
        ),
        (spec(gpus("a", 0)), {}),
    ],
)
def test_allocation_follows_the_device_manager(
    pod: dict[str, Any], expected: dict[str, tuple[int, ...]]
) -> None:
    node = NodeDevices("n", 4)
    given = node.allocate(("ns", "p"), pod)
    assert given == {name: ids("n", *indexes) for name, indexes in expected.items()}
    assert node.allocation(("ns", "p")) == given


def test_ids_are_exclusive_across_pods_and_freed_when_a_pod_ends() -> None:
    node = NodeDevices("n", 4)
    assert node.allocate("p1", spec(gpus("a", 2))) == {"a": ids("n", 0, 1)}
    assert node.allocate("p2", spec(gpus("a", 1))) == {"a": ids("n", 2)}
    assert node.allocate("p1", spec(gpus("a", 2))) == {"a": ids("n", 0, 1)}  # admitted once
    with pytest.raises(AllocationError) as failed:
        node.allocate("p3", spec(gpus("a", 2)))
    assert str(failed.value) == (
        "requested number of devices unavailable for nvidia.com/gpu. Requested: 2, Available: 1"
    )
    assert node.allocation("p3") is None
    node.release("p1")
    node.release("p1")  # twice is harmless
    assert node.allocate("p3", spec(gpus("a", 2))) == {"a": ids("n", 0, 1)}
    assert node.allocate("p4", spec(gpus("a", 1))) == {"a": ids("n", 3)}


def test_a_failed_allocation_takes_nothing() -> None:
    node = NodeDevices("n", 2)
    with pytest.raises(AllocationError, match="Requested: 2, Available: 1"):
        node.allocate("p", spec(gpus("a", 1), gpus("b", 2)))
    assert node.allocate("q", spec(gpus("a", 2))) == {"a": ids("n", 0, 1)}


def test_reused_init_ids_reduce_what_must_be_free() -> None:
    node = NodeDevices("n", 2)
    node.allocate("p", spec(gpus("a", 1)))
    # The init container's one id is reused: the app container needs only one more, and one is free.
    with pytest.raises(AllocationError, match="Requested: 1, Available: 0"):
        node.allocate("q", spec(gpus("a", 1), gpus("b", 1), init=(gpus("i", 1),)))


def test_a_node_without_a_count_makes_ids_on_demand() -> None:
    node = NodeDevices("kubesim-node", None)
    assert node.ids() == ()
    assert node.allocate("p1", spec(gpus("a", 3))) == {"a": ids("kubesim-node", 0, 1, 2)}
    assert node.allocate("p2", spec(gpus("a", 20)))["a"][-1] == gpu_id("kubesim-node", 22)
    node.release("p1")
    assert node.allocate("p3", spec(gpus("a", 1))) == {"a": ids("kubesim-node", 0)}
    assert len(node.ids()) == 23


NODE = ids("n", 0, 1, 2)


@pytest.mark.parametrize(
    ("value", "seen"),
    [
        (None, ()),
        ("", ()),
        ("void", ()),
        ("none", ()),
        ("all", NODE),
        (f"{NODE[2]},{NODE[0]}", (NODE[2], NODE[0])),
        ("1, 0,1", (NODE[1], NODE[0])),
        ("7,GPU-unknown", ()),
    ],
)
def test_visible_devices_as_the_container_runtime_reads_them(
    value: str | None, seen: tuple[str, ...]
) -> None:
    assert devices.visible_devices(value, NODE) == seen


def shares(node: str, *pairs: tuple[int, int]) -> tuple[str, ...]:
    return tuple(devices.replica_id(gpu_id(node, gpu), replica) for gpu, replica in pairs)


def test_a_time_sliced_node_advertises_each_gpu_once_per_replica() -> None:
    node = NodeDevices("n", 4, replicas=2)
    assert node.ids() == shares("n", (0, 0), (0, 1), (1, 0), (1, 1))
    assert node.gpus() == ids("n", 0, 1)
    assert node.ids()[1] == f"{gpu_id('n', 0)}::1"
    assert devices.physical_id(node.ids()[1]) == gpu_id("n", 0)


def test_shared_ids_go_to_the_least_used_gpu_first() -> None:
    """The plugin's default `distributed` policy: two one-id pods land on different GPUs, a
    two-id container spreads over both, and a freed share is the next one handed out."""
    node = NodeDevices("n", 6, replicas=3)
    assert node.allocate("p1", spec(gpus("a", 1))) == {"a": shares("n", (0, 0))}
    assert node.allocate("p2", spec(gpus("a", 1))) == {"a": shares("n", (1, 0))}
    assert node.allocate("p3", spec(gpus("a", 2))) == {"a": shares("n", (0, 1), (1, 1))}
    node.release("p2")
    assert node.allocate("p4", spec(gpus("a", 1))) == {"a": shares("n", (1, 0))}
    assert node.allocate("p5", spec(gpus("a", 2))) == {"a": shares("n", (0, 2), (1, 2))}
    with pytest.raises(AllocationError, match="Requested: 1, Available: 0"):
        node.allocate("p6", spec(gpus("a", 1)))


def test_a_container_sees_the_gpus_behind_its_shares_once_each() -> None:
    first, second = shares("n", (0, 0), (0, 1)), shares("n", (1, 0))
    assert devices.plugin_env(first + second) == {
        devices.VISIBLE_DEVICES: f"{gpu_id('n', 0)},{gpu_id('n', 1)}"
    }
    assert devices.plugin_env(()) == {}


def test_the_device_manager_reads_the_replicas_from_the_nodes_label() -> None:
    manager = devices.DeviceManager()
    manager.node_changed("shared", {devices.GPU: "4"}, {devices.REPLICAS_LABEL: "2"})
    manager.node_changed("plain", {devices.GPU: "4"}, {devices.REPLICAS_LABEL: "x"})
    assert manager.admit("shared", "p", spec(gpus("a", 1))) == {"a": shares("shared", (0, 0))}
    assert manager.admit("shared", "q", spec(gpus("a", 1))) == {"a": shares("shared", (1, 0))}
    assert manager.admit("plain", "r", spec(gpus("a", 1))) == {"a": ids("plain", 0)}
    assert manager.node("shared").gpus() == ids("shared", 0, 1)
