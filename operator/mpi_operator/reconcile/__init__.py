"""The reconcile of one MPIJob: `reconciler` strings the pure steps (desired, planning, elastic,
status) together; `applier` sends the plan; `observe` reads a job's children from the caches; and what
the reconciler remembers between syncs (`expectations`, `recreates`, `progress_pacer`, `parsed`).
Implements the runtime's `Reconciler` protocol (`runtime.types`). Import the modules themselves.
"""
