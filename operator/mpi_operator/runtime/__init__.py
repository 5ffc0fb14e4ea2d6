"""The operator's runtime: what runs any reconciler, knowing nothing of how an MPIJob converges.

`manager` (the only wiring point of `mpi-operator run`), `loops` (N reconcile loops over the work
queue), `handlers` (which informers run and how their events map to an MPIJob key: the manager needs
them before any reconciler exists), `leaderelection`, `server` (/healthz, /readyz, /metrics),
`metrics`, `logging`, `tuning` (GC and malloc settings), and `types`: the `Reconciler` protocol that
`reconcile/` implements and the factory through which the manager takes it. Import the modules
themselves.
"""
