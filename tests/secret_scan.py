"""Private key material where it must never be: pure, no pytest (the plugin is
tests/secret_audit.py).

The operator generates one SSH key pair per MPIJob and keeps it in the job's Secret only. Anything
else it writes or prints (logs, Events, status, metrics, other objects) must hold neither a PEM
private key (any `-----BEGIN ... PRIVATE KEY-----`, an OpenSSH key) nor the bytes of a key it
generated, in any of the encodings it handles (the PEM text, its base64 body, the Secret's base64
value).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable
from typing import Any

MARKERS = re.compile(
    r"PRIVATE KEY-----"  # PEM: RSA, EC, PKCS#8, OPENSSH, ENCRYPTED
    r"|b3BlbnNzaC1rZXktdjE"  # base64 of "openssh-key-v1", the start of an OpenSSH private key body
    r"|LS0tLS1CRUdJTiBFQyBQUklWQVRF|LS0tLS1CRUdJTiBQUklWQVRF|LS0tLS1CRUdJTiBSU0EgUFJJVkFURS"
    # ^ base64 of "-----BEGIN EC PRIVATE", "-----BEGIN PRIVATE", "-----BEGIN RSA PRIVATE"
)
NEEDLE_LENGTH = 24
"""Long enough that no unrelated text holds it by chance, short enough to catch part of a key."""


def key_needles(secret: dict[str, Any]) -> set[str]:
    """Distinctive pieces of every private key a Secret holds: the middle of its base64 value as
    stored, and the start of the key's PEM body (where the private scalar is: an EC key's PEM also
    holds its public point, which may be shown). Pieces that occur in the Secret's public values are
    dropped."""
    texts = {k: _text(v) for k, v in (secret.get("data") or {}).items() if isinstance(v, str)}
    texts |= {k: v for k, v in (secret.get("stringData") or {}).items() if isinstance(v, str)}
    public = " ".join(t for t in texts.values() if "PRIVATE KEY-----" not in t)
    public += " ".join(
        v
        for k, v in (secret.get("data") or {}).items()
        if "PRIVATE KEY-----" not in texts.get(k, "")
    )
    needles: set[str] = set()
    for key, text in texts.items():
        if "PRIVATE KEY-----" not in text:
            continue
        raw = (secret.get("data") or {}).get(key)
        if isinstance(raw, str):
            needles.add(raw[len(raw) // 2 : len(raw) // 2 + NEEDLE_LENGTH])
        body = [line for line in text.splitlines() if line and not line.startswith("-----")]
        if body and len(body[0]) >= 2 * NEEDLE_LENGTH:
            needles |= {body[0][:NEEDLE_LENGTH], body[0][NEEDLE_LENGTH : 2 * NEEDLE_LENGTH]}
    return {n for n in needles if n not in public}


def _text(value: str) -> str:
    try:
        return base64.b64decode(value, validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ""


def leaks(text: str, needles: Iterable[str]) -> list[str]:
    """What in `text` is private key material: marker matches and generated-key pieces, with
    context."""
    found = []
    for m in MARKERS.finditer(text):
        found.append(
            f"marker {m.group(0)!r}: ...{text[max(0, m.start() - 40) : m.end() + 20]!r}..."
        )
    for needle in needles:
        at = text.find(needle)
        if at >= 0:
            found.append(f"bytes of a generated key: ...{text[max(0, at - 40) : at + 40]!r}...")
    return found


def object_leaks(objs: Iterable[dict[str, Any]], needles: Iterable[str]) -> list[str]:
    """Leaks in stored objects other than Secrets (which legitimately hold the key): Events, every
    object's status, annotations, ConfigMaps, pod specs and the rest."""
    needles = list(needles)
    found = []
    for obj in objs:
        if obj.get("kind") == "Secret":
            continue
        text = json.dumps(obj, separators=(",", ":"))
        if (
            "PRIVATE" not in text
            and "LS0tLS1CRUdJTi" not in text
            and "b3BlbnNzaC1rZXkt" not in text
            and not any(n in text for n in needles)
        ):
            continue
        meta = obj.get("metadata") or {}
        where = f"{obj.get('kind')} {meta.get('namespace', '')}/{meta.get('name', '')}"
        found += [f"{where}: {leak}" for leak in leaks(text, needles)]
    return found
