"""The shared-cluster scenario reads Horovod's world from the launcher's log; these lines are what
Horovod 0.28.1 wrote in one of its runs (shortened). Without `current_size` forgetting the old
world at a reset, "Horovod trains on the survivors" could be concluded from the world before the
loss."""

from __future__ import annotations

from hvd_shared import current_size, started

HOST = "elastic-worker-{}.elastic.default.svc"
LOG = [
    "INFO:root:wait for available slots: 2",
    "INFO:root:reset workers: 6",
    *(f"INFO:root:start worker process: {HOST.format(i)}[0]" for i in (4, 1, 3, 5, 2, 0)),
    "[0]<stdout>:iteration 0: 278.9 img/sec per process, 1673.5 img/sec on 6 processes",
    f"[3]<stderr>:Connection to {HOST.format(5)} closed by remote host.",
    f"INFO:root:_get_rank_and_size: {HOST.format(4)} 0",
    f"INFO:root:record state: {HOST.format(5)}[0] = FAILURE",
    f"INFO:root:blacklist failing host: {HOST.format(5)}",
    "INFO:root:reset workers: 5",
    "INFO:root:rank and size: 1 5",
]


def test_the_current_world_is_the_size_rank_0_printed_since_the_last_reset() -> None:
    assert current_size(LOG[:9]) == 6
    assert current_size(LOG) is None, "the reset ended the world of six"
    trained = [
        *LOG,
        "[0]<stdout>:iteration 9: 97.8 img/sec per process, 488.8 img/sec on 5 processes",
    ]
    assert current_size(trained) == 5


def test_started_lists_the_hosts_the_driver_gave_a_rank() -> None:
    assert started(LOG) == [HOST.format(i) for i in (4, 1, 3, 5, 2, 0)]
    replacement = "elastic-worker-5-r1.elastic.default.svc"
    assert started([f"INFO:root:start worker process: {replacement}[0]"]) == [replacement]
