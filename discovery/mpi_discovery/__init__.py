"""Host discovery for elastic Horovod: renders and reads `hostfile` / `discover_hosts.sh`.

Runs inside the launcher image too, so this package uses the standard library only.
"""
