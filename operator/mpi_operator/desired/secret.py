"""The SSH Secret `<job>-ssh` (type `kubernetes.io/ssh-auth`) and its per-job key pair.

Key generation is kept apart from the pure builder: `generate_ssh_keys()` draws a fresh ECDSA P-521
pair in upstream's exact encoding (private key: PEM `EC PRIVATE KEY`, i.e. SEC1 as Go's
`x509.MarshalECPrivateKey`; public key: one OpenSSH `authorized_keys` line, newline-terminated, as
`ssh.MarshalAuthorizedKey`), and `build_secret(job, keys)` only encodes what it is given. Keys never
appear in a repr, so they cannot reach a log by accident.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from mpi_operator.api.models import MPIJob
from mpi_operator.desired import naming
from mpi_operator.objects import KubeObject

SECRET_TYPE: Final = "kubernetes.io/ssh-auth"
PRIVATE_KEY: Final = "ssh-privatekey"
"""`corev1.SSHAuthPrivateKey`."""
PUBLIC_KEY: Final = "ssh-publickey"
SECRET_KEYS: Final = frozenset({PRIVATE_KEY, PUBLIC_KEY})


@dataclass(frozen=True)
class SSHKeyPair:
    """A private key (PEM) and its OpenSSH public line, both as bytes; never shown in a repr."""

    private_key_pem: bytes = field(repr=False)
    public_key: bytes = field(repr=False)


def generate_ssh_keys() -> SSHKeyPair:
    """A fresh ECDSA P-521 key pair in upstream's encoding (this is the only impure function
    here)."""
    key = ec.generate_private_key(ec.SECP521R1())
    private_pem = key.private_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PrivateFormat.TraditionalOpenSSL,
        encryption_algorithm=serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        encoding=serialization.Encoding.OpenSSH, format=serialization.PublicFormat.OpenSSH
    )
    return SSHKeyPair(private_key_pem=private_pem, public_key=public + b"\n")


def build_secret(job: MPIJob, keys: SSHKeyPair) -> KubeObject:
    """The Secret `<job>-ssh` holding `keys` (base64 `data`, as the API server stores it)."""
    data = {
        PRIVATE_KEY: base64.b64encode(keys.private_key_pem).decode("ascii"),
        PUBLIC_KEY: base64.b64encode(keys.public_key).decode("ascii"),
    }
    return naming.owned_object(
        job, "v1", "Secret", naming.ssh_secret_name(job), type=SECRET_TYPE, data=data
    )


def has_expected_keys(secret: Mapping[str, Any]) -> bool:
    """Upstream's resync test: the Secret is fine when its set of data keys is exactly ours.

    Values are not compared, so a reconcile never needs to generate a key pair for an existing
    Secret.
    """
    data = secret.get("data")
    return isinstance(data, Mapping) and set(data) == SECRET_KEYS
