"""The reconcile of one MPIJob: `reconciler` strings the pure steps (desired, planning, elastic,
status) together; `applier` sends the plan; `observe` reads a job's children from the caches;
`memory` is what the reconciler remembers of each job between syncs (with `expectations`,
`recreates`, `progress_pacer`), `parsed` a process-wide cache of parsed specs. Implements the
runtime's `Reconciler` protocol (`runtime.types`). Import the modules themselves.
"""
