"""Metrics hooks (runtime.metrics): a job's elastic series go with the job, and dropping those of a
job that never had any (every static job's sync) touches nothing."""

from __future__ import annotations

from mpi_operator.runtime.metrics import Metrics, is_event_path

WORKERS = "mpi_operator_elastic_workers"


def test_elastic_series_are_dropped_once_and_only_when_set() -> None:
    metrics = Metrics()
    labels = {"namespace": "ns", "mpijob": "pi", "state": "ready"}
    metrics.remove_elastic_workers(namespace="ns", mpijob="pi")  # never set: nothing to drop
    metrics.set_elastic_workers(
        namespace="ns", mpijob="pi", desired=4, ready=3, discovered=3, min_replicas=2
    )
    assert metrics.registry.get_sample_value(WORKERS, labels) == 3
    metrics.remove_elastic_workers(namespace="ns", mpijob="pi")
    assert metrics.registry.get_sample_value(WORKERS, labels) is None
    metrics.set_elastic_workers(
        namespace="ns", mpijob="pi", desired=4, ready=4, discovered=4, min_replicas=2
    )
    assert metrics.registry.get_sample_value(WORKERS, labels) == 4, "set again after a drop"
    metrics.remove_elastic_workers(namespace="ns", mpijob="pi")
    assert metrics.registry.get_sample_value(WORKERS, labels) is None


def test_event_paths() -> None:
    assert is_event_path("/api/v1/namespaces/ns/events")
    assert is_event_path("/api/v1/namespaces/ns/events/pi.17a")
    assert is_event_path("/apis/events.k8s.io/v1/namespaces/ns/events")
    assert not is_event_path("/api/v1/namespaces/ns/pods/events"), "a pod named events"
    assert not is_event_path("/api/v1/namespaces/events/pods"), "a namespace named events"
    assert not is_event_path("/api/v1/namespaces/events")
