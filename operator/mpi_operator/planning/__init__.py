"""Pure planning: the desired and observed children of one MPIJob -> the ordered writes that
converge them.

`plan()` (in `planner`) is the entry point the reconciler calls; `actions` defines what a plan
holds, `observed` what the stores hold for a job (and what they will hold after a plan), `window`
which missing workers one sync creates, `owned` which fields of each child are ours to compare and
rewrite, `limits` which of a plan's objects the API would refuse for their size. No I/O here:
`reconcile.applier` sends the actions.
"""

from mpi_operator.planning.actions import (
    Action,
    Conflict,
    Create,
    Delete,
    ElasticWrites,
    ObjectRef,
    Patch,
    Phase,
    Plan,
    PropagationPolicy,
    Update,
    UpdateStatus,
)
from mpi_operator.planning.limits import TooLarge, plan_problems
from mpi_operator.planning.observed import Observed, observed_after
from mpi_operator.planning.owned import secret_needs_keys
from mpi_operator.planning.planner import is_completed, plan
from mpi_operator.planning.window import WORKER_WINDOW, WorkerWindow, worker_window

__all__ = [
    "WORKER_WINDOW",
    "Action",
    "Conflict",
    "Create",
    "Delete",
    "ElasticWrites",
    "ObjectRef",
    "Observed",
    "Patch",
    "Phase",
    "Plan",
    "PropagationPolicy",
    "TooLarge",
    "Update",
    "UpdateStatus",
    "WorkerWindow",
    "is_completed",
    "observed_after",
    "plan",
    "plan_problems",
    "secret_needs_keys",
    "worker_window",
]
