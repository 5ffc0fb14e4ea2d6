"""desired.secret: the SSH key pair (upstream's encoding) and the Secret `<job>-ssh`."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from mpi_operator.desired.secret import (
    SSHKeyPair,
    build_secret,
    generate_ssh_keys,
    has_expected_keys,
)

from .factory import make_job


def test_generated_keys_are_a_p521_pair_in_upstream_encoding() -> None:
    keys = generate_ssh_keys()
    assert keys.private_key_pem.startswith(b"-----BEGIN EC PRIVATE KEY-----\n")
    assert keys.private_key_pem.endswith(b"-----END EC PRIVATE KEY-----\n")
    private = serialization.load_pem_private_key(keys.private_key_pem, password=None)
    assert isinstance(private, ec.EllipticCurvePrivateKey)
    assert private.curve.name == "secp521r1"
    assert keys.public_key.startswith(b"ecdsa-sha2-nistp521 AAAA")
    assert keys.public_key.endswith(b"\n")
    assert keys.public_key.count(b"\n") == 1
    public = serialization.load_ssh_public_key(keys.public_key.strip())
    assert public.public_numbers() == private.public_key().public_numbers()  # type: ignore[union-attr]


def test_every_call_draws_a_fresh_pair() -> None:
    assert generate_ssh_keys().private_key_pem != generate_ssh_keys().private_key_pem


def test_keys_never_show_in_a_repr() -> None:
    keys = SSHKeyPair(private_key_pem=b"PRIVATE-SECRET", public_key=b"PUBLIC")
    assert "PRIVATE-SECRET" not in repr(keys)
    assert "PRIVATE-SECRET" not in str(keys)


def test_secret_encodes_the_given_keys() -> None:
    keys = SSHKeyPair(private_key_pem=b"pem-bytes\n", public_key=b"ecdsa-sha2-nistp521 AAAA\n")
    secret = build_secret(make_job("pi", "default"), keys)
    assert secret["apiVersion"] == "v1"
    assert secret["kind"] == "Secret"
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert secret["metadata"]["name"] == "pi-ssh"
    assert secret["metadata"]["labels"] == {"app": "pi"}
    assert secret["data"] == {
        "ssh-privatekey": base64.b64encode(b"pem-bytes\n").decode(),
        "ssh-publickey": base64.b64encode(b"ecdsa-sha2-nistp521 AAAA\n").decode(),
    }


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"ssh-privatekey": "a", "ssh-publickey": "b"}, True),
        ({"ssh-privatekey": "a"}, False),
        ({"ssh-privatekey": "a", "ssh-publickey": "b", "extra": "c"}, False),
        (None, False),
    ],
    ids=["ours", "missing-key", "extra-key", "no-data"],
)
def test_has_expected_keys_compares_the_key_set_only(
    data: dict[str, str] | None, expected: bool
) -> None:
    assert has_expected_keys({"data": data}) is expected
