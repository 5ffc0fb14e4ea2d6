"""The `--host-discovery-script` of the real-Horovod end-to-end test (run by `horovodrun`, not by
pytest).

`horovodrun` plays the launcher container here, so its discovery script must be the launcher pod's
own `/etc/mpi/discover_hosts.sh` as the kubelet has mounted it, not the ConfigMap: this program
fetches that file through kubesim's file endpoint and runs it with /bin/sh, passing on its output
and exit status. Any failure to fetch exits 1, which Horovod treats as "keep the last host set"
after the first poll.

Environment: HVD_KUBESIM_URL, HVD_NAMESPACE, HVD_LAUNCHER_POD. Standard library only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request


def main() -> int:
    base = os.environ["HVD_KUBESIM_URL"].rstrip("/")
    namespace = os.environ.get("HVD_NAMESPACE", "default")
    pod = os.environ["HVD_LAUNCHER_POD"]
    url = f"{base}/kubesim/v1/namespaces/{namespace}/pods/{pod}/files/etc/mpi/discover_hosts.sh"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            script = response.read()
    except OSError as error:
        print(f"discover_hosts: cannot read {url}: {error}", file=sys.stderr)
        return 1
    return subprocess.run(["/bin/sh", "-s"], input=script, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
