"""The MPIJob controller: async glue between the caches, the work queue and the reconciler.

Modules: `types` (the `Reconciler` protocol, `Result`, `PermanentError`, `Stores`, `ManagerDeps`),
`handlers` (watch event -> MPIJob key), `workers` (N reconcile loops over the queue), `leaderelection`
(Lease-based leader election), `metrics` (Prometheus objects and the hooks the reconciler calls),
`logging` (text/JSON logs that name the job being reconciled), `server` (/healthz, /readyz, /metrics)
and `manager` (the only wiring point: `mpi-operator run`). Import the modules themselves.
"""
