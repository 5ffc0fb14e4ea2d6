"""`reconcile.reconciler.ends_differently`: a status write asks for one more sync only when it
changed what a sync plans from the job's own status (the watch event of a status write brings no
sync: `runtime.handlers.mpijob_update_matters`)."""

from __future__ import annotations

from typing import Any

import pytest

from mpi_operator.reconcile.reconciler import ends_differently


def status(*conditions: tuple[str, str, str], completion: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "conditions": [{"type": t, "status": s, "reason": r} for t, s, r in conditions],
        "replicaStatuses": {"Worker": {"active": 2}},
    }
    if completion is not None:
        out["completionTime"] = completion
    return out


CREATED = ("Created", "True", "MPIJobCreated")
RUNNING = ("Running", "True", "MPIJobRunning")
SUCCEEDED = ("Succeeded", "True", "MPIJobSucceeded")
FAILED_BELOW_MIN = ("Failed", "True", "BelowMinReplicas")
FAILED = ("Failed", "True", "MPIJobFailed")

# (id, old, new, again)
WRITES = [
    ("first-status", None, status(CREATED), False),
    ("running", status(CREATED), status(CREATED, RUNNING), False),
    ("counts-only", status(CREATED), {**status(CREATED), "replicaStatuses": {}}, False),
    ("succeeded", status(CREATED, RUNNING), status(CREATED, SUCCEEDED), True),
    ("completion-time", status(SUCCEEDED), status(SUCCEEDED, completion="t"), True),
    ("failed-below-min", status(RUNNING), status(FAILED_BELOW_MIN), True),
    ("failed-reason", status(FAILED_BELOW_MIN), status(FAILED), True),
    (
        "finished-counts",
        status(SUCCEEDED, completion="t"),
        status(SUCCEEDED, completion="t"),
        False,
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "again"), [w[1:] for w in WRITES], ids=[w[0] for w in WRITES]
)
def test_a_status_write_asks_for_one_more_sync_only_when_the_jobs_ending_changed(
    old: dict[str, Any] | None, new: dict[str, Any], again: bool
) -> None:
    assert ends_differently(old, new) is again
