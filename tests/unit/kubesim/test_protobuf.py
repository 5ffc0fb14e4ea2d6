"""kubesim.protobuf on bodies encoded here by hand, field by field, the way Go's generated
marshallers write them (every non-pointer field, empty or not). The real-kubectl check is
tests/e2e/test_kubectl_create_typed.py; this covers the refusals and the round trip of arbitrary
data."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim import protobuf


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, value: bytes | str | int) -> bytes:
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    data = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(data)) + data


def entry(number: int, key: str, value: bytes | str) -> bytes:
    return field(number, field(1, key) + field(2, value))


def meta(name: str, *extra: bytes) -> bytes:
    # What Go writes for a fresh object: name, then the empty strings, zero numbers and empty time
    # of the server-owned fields.
    return (
        field(1, name)
        + field(2, "")
        + field(3, "")
        + field(4, "")
        + field(5, "")
        + field(6, "")
        + (field(7, 0) + field(8, b"") + b"".join(extra))
    )


def envelope(api_version: str, kind: str, raw: bytes, encoding: str = "") -> bytes:
    type_meta = field(1, api_version) + field(2, kind)
    return protobuf.MAGIC + field(1, type_meta) + field(2, raw) + field(3, encoding) + field(4, "")


def test_a_configmap_reads_as_its_json_form() -> None:
    raw = (
        field(1, meta("cfg", entry(11, "app", "pi")))
        + entry(2, "a", "1")
        + entry(3, "bin", b"\x00\xff")
    )
    assert protobuf.decode(envelope("v1", "ConfigMap", raw)) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "labels": {"app": "pi"}},
        "data": {"a": "1"},
        "binaryData": {"bin": base64.b64encode(b"\x00\xff").decode()},
    }


def test_a_pointer_false_is_kept_a_plain_empty_value_is_not() -> None:
    raw = field(1, meta("s")) + field(3, "") + field(5, 0)
    assert protobuf.decode(envelope("v1", "Secret", raw)) == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "immutable": False,
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"kind": "ConfigMap"}', "missing the k8s protobuf envelope"),
        (protobuf.MAGIC + b"\x0a\xff", "malformed Unknown"),
        (envelope("apps/v1", "Deployment", b""), "not apps/v1 Deployment; send JSON"),
        (
            envelope("v1", "ConfigMap", field(1, meta("c")), encoding="gzip"),
            "content encoding 'gzip'",
        ),
        (
            envelope("v1", "ConfigMap", field(1, meta("c")) + field(9, "x")),
            "ConfigMap: field number(s) [9]",
        ),
        (
            envelope("v1", "Secret", field(1, meta("s", field(13, b"\x0a\x01x")))),
            "Secret.metadata: field number(s) [13]",
        ),
        (
            envelope(
                "rbac.authorization.k8s.io/v1", "Role", field(2, field(1, "get") + field(7, "x"))
            ),
            "Role.rules[0]: field number(s) [7]",
        ),
    ],
    ids=[
        "json",
        "truncated",
        "other-kind",
        "encoded",
        "unknown-field",
        "unknown-meta",
        "unknown-nested",
    ],
)
def test_what_cannot_be_read_completely_is_refused(body: bytes, message: str) -> None:
    with pytest.raises(protobuf.ProtobufError) as raised:
        protobuf.decode(body)
    assert message in str(raised.value)


keys = st.from_regex(r"[a-z][a-z0-9._-]{0,20}", fullmatch=True)


@given(
    data=st.dictionaries(keys, st.text(max_size=30), max_size=5),
    binary=st.dictionaries(keys, st.binary(min_size=1, max_size=30), max_size=5),
)
def test_configmap_data_round_trips(data: dict[str, str], binary: dict[str, bytes]) -> None:
    raw = field(1, meta("cfg"))
    raw += b"".join(entry(2, k, v) for k, v in data.items())
    raw += b"".join(entry(3, k, v) for k, v in binary.items())
    decoded = protobuf.decode(envelope("v1", "ConfigMap", raw))
    assert decoded.get("data", {}) == data
    assert {k: base64.b64decode(v) for k, v in decoded.get("binaryData", {}).items()} == binary
