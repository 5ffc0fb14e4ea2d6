"""`reconcile.recreates.MadeChildren`: which of one job's children a sync would re-create (so it
reads its job first), per job uid; pods never count; a uid's gone mark lasts until another uid takes
over (or the cache drops the job, and the reconciler its memory)."""

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
        (
            [("Pod", "pi-worker-0")],
            "u1",
            [ref("Pod", "pi-worker-0")],
            False,
        ),  # workers come back often
        ([], "u1", [ref("Service", "pi")], False),
        (
            [("Job", "pi-launcher"), ("Secret", "pi-ssh")],
            "u1",
            [ref("Pod", "x"), ref("Secret", "pi-ssh")],
            True,
        ),
    ],
)
def test_recreates(
    made: list[tuple[str, str]], uid: str, creates: list[ObjectRef], expected: bool
) -> None:
    children = MadeChildren()
    for kind, name in made:
        children.add("u1", child(kind, name))
    assert children.recreates(uid, creates) is expected


def test_gone_marks_the_uid_only() -> None:
    children = MadeChildren()
    children.add("u1", child("Service", "pi"))
    children.mark_gone("u2")
    assert not children.is_gone("u2")
    children.mark_gone("u1")
    assert children.is_gone("u1")
    assert not children.is_gone("u2")


def test_a_new_uid_under_the_name_clears_the_old_gone_mark() -> None:
    children = MadeChildren()
    children.add("u1", child("Service", "pi"))
    children.mark_gone("u1")
    children.add("u2", child("Service", "pi"))
    assert not children.is_gone("u1")
    assert not children.is_gone("u2")
    assert children.recreates("u2", [ref("Service", "pi")])
