"""The process runtime of kubesim's kubelet: pods whose containers are real programs.

Chosen per simulation (`SimSettings.runtime == "process"`, `mpi-operator sim --runtime process`); the
timer model (`controllers/podstate.py`) stays the default. docs/kubesim-process-runtime.md is the design:
the sandbox and bridge namespaces, the per-container shim, volumes on disk, DNS, probes, logs, cleanup.
"""
