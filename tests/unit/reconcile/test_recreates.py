"""`reconcile.recreates.MadeChildren`: which children a sync would re-create (so it reads its job first),
per job key and uid; pods never count; a job's gone mark lasts until the cache drops it."""

from __future__ import annotations

import pytest

from mpi_operator.planning import ObjectRef
from mpi_operator.reconcile.recreates import MadeChildren


def child(kind: str, name: str) -> dict[str, object]:
    return {"kind": kind, "metadata": {"name": name}}


def ref(kind: str, name: str) -> ObjectRef:
    return ObjectRef(api_version="v1", kind=kind, namespace="default", name=name)


@pytest.mark.parametrize(
    ("made", "uid", "creates", "expected"),
    [
        ([("Service", "pi")], "u1", [ref("Service", "pi")], True),
        ([("Service", "pi")], "u1", [ref("ConfigMap", "pi-config")], False),
        ([("Service", "pi")], "u2", [ref("Service", "pi")], False),  # a new job of that name
        ([("Pod", "pi-worker-0")], "u1", [ref("Pod", "pi-worker-0")], False),  # workers come back often
        ([], "u1", [ref("Service", "pi")], False),
        (
            [("Job", "pi-launcher"), ("Secret", "pi-ssh")],
            "u1",
            [ref("Pod", "x"), ref("Secret", "pi-ssh")],
            True,
        ),
    ],
)
def test_recreates(made: list[tuple[str, str]], uid: str, creates: list[ObjectRef], expected: bool) -> None:
    children = MadeChildren()
    for kind, name in made:
        children.add("default/pi", "u1", child(kind, name))
    assert children.recreates("default/pi", uid, creates) is expected
    assert children.recreates("default/other", "u1", creates) is False


def test_gone_lasts_until_the_cache_drops_the_job() -> None:
    children = MadeChildren()
    children.add("default/pi", "u1", child("Service", "pi"))
    children.mark_gone("u1")
    assert children.is_gone("u1")
    assert not children.is_gone("u2")
    children.forget("default/pi")
    assert not children.is_gone("u1")
    assert not children.recreates("default/pi", "u1", [ref("Service", "pi")])


def test_a_new_uid_under_the_name_clears_the_old_gone_mark() -> None:
    children = MadeChildren()
    children.add("default/pi", "u1", child("Service", "pi"))
    children.mark_gone("u1")
    children.add("default/pi", "u2", child("Service", "pi"))
    assert not children.is_gone("u1")
    assert children.recreates("default/pi", "u2", [ref("Service", "pi")])
