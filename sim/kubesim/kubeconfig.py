"""Kubeconfig files pointing kubectl and kubernetes-asyncio at a kubesim server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

CONTEXT = "kubesim"
DUMMY_TOKEN = "kubesim-token"  # kubesim does no authentication; clients just need some credentials


def kubeconfig(url: str, *, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": {"server": url}}],
        "users": [{"name": CONTEXT, "user": {"token": DUMMY_TOKEN}}],
        "contexts": [
            {
                "name": CONTEXT,
                "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": namespace},
            }
        ],
        "current-context": CONTEXT,
        "preferences": {},
    }


def write_kubeconfig(path: str | Path, url: str, *, namespace: str = "default") -> Path:
    """Writes a kubeconfig for `url` (created with mode 0600, like kubectl's own) and returns its
    path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(kubeconfig(url, namespace=namespace), sort_keys=False))
    target.chmod(0o600)
    return target
