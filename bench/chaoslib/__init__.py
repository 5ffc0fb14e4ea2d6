"""The parts of a chaos run on kubesim that more than one driver uses: the invariant checker
(`invariants`), the steps that disturb a cluster and the user's writes that ride them out (`steps`),
and, for `bench/chaos.py`, its operator processes (`replicas`), its schedule (`plan`) and its
MPIJobs (`jobs`).

`tests/integration/elastic/chaos_driver.py` (the in-process seeded test) and `bench/chaos.py` (the
long run with two operator processes) share `steps`; `tests/unit/bench/test_chaos_invariants.py`
feeds the checker bad event sequences to prove it sees each violation.
"""
