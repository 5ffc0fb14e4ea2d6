"""Request bodies in Kubernetes' protobuf encoding, for the kinds kubectl's typed generators send.

`kubectl create namespace|configmap|secret|...` POSTs `application/vnd.kubernetes.protobuf`: the
`k8s\\x00` envelope around a `runtime.Unknown` whose `raw` holds the object in `generated.proto`'s
field numbers. The messages are declared here (only the fields a client sets on create) and a body
becomes the object's JSON form, admitted like any other. A field or kind not declared here is
refused, never half-read; JSON always works.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message, message_factory
from google.protobuf.unknown_fields import UnknownFieldSet

MEDIA_TYPE: Final = "application/vnd.kubernetes.protobuf"
MAGIC: Final = b"k8s\x00"

_F = descriptor_pb2.FieldDescriptorProto
_STRING, _BYTES, _BOOL = _F.TYPE_STRING, _F.TYPE_BYTES, _F.TYPE_BOOL
_INT32, _INT64 = _F.TYPE_INT32, _F.TYPE_INT64
_OPTIONAL, _REPEATED = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
_PACKAGE = "kubesim.k8s"

# (json name, field number, type, repeated) or (json name, field number, message name, repeated);
# "map:<value>" declares map<string, value> (a repeated entry message, as protobuf encodes maps).
_Field = tuple[str, int, "descriptor_pb2.FieldDescriptorProto.Type.ValueType | str", bool]
_MESSAGES: Final[dict[str, list[_Field]]] = {
    "TypeMeta": [("apiVersion", 1, _STRING, False), ("kind", 2, _STRING, False)],
    "Unknown": [
        ("typeMeta", 1, "TypeMeta", False),
        ("raw", 2, _BYTES, False),
        ("contentEncoding", 3, _STRING, False),
        ("contentType", 4, _STRING, False),
    ],
    "Time": [("seconds", 1, _INT64, False), ("nanos", 2, _INT32, False)],
    "ObjectMeta": [
        ("name", 1, _STRING, False),
        ("generateName", 2, _STRING, False),
        ("namespace", 3, _STRING, False),
        ("selfLink", 4, _STRING, False),
        ("uid", 5, _STRING, False),
        ("resourceVersion", 6, _STRING, False),
        ("generation", 7, _INT64, False),
        ("creationTimestamp", 8, "Time", False),
        ("deletionTimestamp", 9, "Time", False),
        ("deletionGracePeriodSeconds", 10, _INT64, False),
        ("labels", 11, "map:string", False),
        ("annotations", 12, "map:string", False),
        ("finalizers", 14, _STRING, True),
    ],
    "Namespace": [
        ("metadata", 1, "ObjectMeta", False),
        ("spec", 2, "NamespaceSpec", False),
        ("status", 3, "NamespaceStatus", False),
    ],
    "NamespaceSpec": [("finalizers", 1, _STRING, True)],
    "NamespaceStatus": [("phase", 1, _STRING, False)],
    "ConfigMap": [
        ("metadata", 1, "ObjectMeta", False),
        ("data", 2, "map:string", False),
        ("binaryData", 3, "map:bytes", False),
        ("immutable", 4, _BOOL, False),
    ],
    "Secret": [
        ("metadata", 1, "ObjectMeta", False),
        ("data", 2, "map:bytes", False),
        ("type", 3, _STRING, False),
        ("stringData", 4, "map:string", False),
        ("immutable", 5, _BOOL, False),
    ],
    "LocalObjectReference": [("name", 1, _STRING, False)],
    "ServiceAccount": [
        ("metadata", 1, "ObjectMeta", False),
        ("imagePullSecrets", 3, "LocalObjectReference", True),
        ("automountServiceAccountToken", 4, _BOOL, False),
    ],
    "PolicyRule": [
        ("verbs", 1, _STRING, True),
        ("apiGroups", 2, _STRING, True),
        ("resources", 3, _STRING, True),
        ("resourceNames", 4, _STRING, True),
        ("nonResourceURLs", 5, _STRING, True),
    ],
    "Role": [("metadata", 1, "ObjectMeta", False), ("rules", 2, "PolicyRule", True)],
    "ClusterRole": [("metadata", 1, "ObjectMeta", False), ("rules", 2, "PolicyRule", True)],
    "Subject": [
        ("kind", 1, _STRING, False),
        ("apiGroup", 2, _STRING, False),
        ("name", 3, _STRING, False),
        ("namespace", 4, _STRING, False),
    ],
    "RoleRef": [
        ("apiGroup", 1, _STRING, False),
        ("kind", 2, _STRING, False),
        ("name", 3, _STRING, False),
    ],
    "RoleBinding": [
        ("metadata", 1, "ObjectMeta", False),
        ("subjects", 2, "Subject", True),
        ("roleRef", 3, "RoleRef", False),
    ],
    "ClusterRoleBinding": [
        ("metadata", 1, "ObjectMeta", False),
        ("subjects", 2, "Subject", True),
        ("roleRef", 3, "RoleRef", False),
    ],
    "PriorityClass": [
        ("metadata", 1, "ObjectMeta", False),
        ("value", 2, _INT32, False),
        ("globalDefault", 3, _BOOL, False),
        ("description", 4, _STRING, False),
        ("preemptionPolicy", 5, _STRING, False),
    ],
    "IntOrString": [
        ("type", 1, _INT64, False),
        ("intVal", 2, _INT32, False),
        ("strVal", 3, _STRING, False),
    ],
    "LabelSelectorRequirement": [
        ("key", 1, _STRING, False),
        ("operator", 2, _STRING, False),
        ("values", 3, _STRING, True),
    ],
    "LabelSelector": [
        ("matchLabels", 1, "map:string", False),
        ("matchExpressions", 2, "LabelSelectorRequirement", True),
    ],
    "PodDisruptionBudgetSpec": [
        ("minAvailable", 1, "IntOrString", False),
        ("selector", 2, "LabelSelector", False),
        ("maxUnavailable", 3, "IntOrString", False),
        ("unhealthyPodEvictionPolicy", 4, _STRING, False),
    ],
    "PodDisruptionBudgetStatus": [
        ("observedGeneration", 1, _INT64, False),
        ("disruptionsAllowed", 3, _INT32, False),
        ("currentHealthy", 4, _INT32, False),
        ("desiredHealthy", 5, _INT32, False),
        ("expectedPods", 6, _INT32, False),
    ],
    "PodDisruptionBudget": [
        ("metadata", 1, "ObjectMeta", False),
        ("spec", 2, "PodDisruptionBudgetSpec", False),
        ("status", 3, "PodDisruptionBudgetStatus", False),
    ],
}

SERVER_OWNED: Final = frozenset(
    {
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    }
)
"""ObjectMeta fields the API server sets itself; Go clients always encode them (empty on a
create)."""

KEEP_ZERO: Final = frozenset(
    {
        ("ConfigMap", "immutable"),
        ("Secret", "immutable"),
        ("ServiceAccount", "automountServiceAccountToken"),
        ("PriorityClass", "value"),
        ("PriorityClass", "preemptionPolicy"),
        ("PodDisruptionBudgetSpec", "minAvailable"),
        ("PodDisruptionBudgetSpec", "maxUnavailable"),
    }
)
"""Fields whose zero value means something: Go pointers (encoded only when set) and required
numbers.

Go's protobuf encoder writes every non-pointer field, empty or not, where its JSON encoder omits the
empty ones (`omitempty`); every other zero value is therefore dropped, as the JSON form would."""

KINDS: Final[dict[tuple[str, str], str]] = {
    ("v1", "Namespace"): "Namespace",
    ("v1", "ConfigMap"): "ConfigMap",
    ("v1", "Secret"): "Secret",
    ("v1", "ServiceAccount"): "ServiceAccount",
    ("rbac.authorization.k8s.io/v1", "Role"): "Role",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "ClusterRole",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "ClusterRoleBinding",
    ("scheduling.k8s.io/v1", "PriorityClass"): "PriorityClass",
    ("policy/v1", "PodDisruptionBudget"): "PodDisruptionBudget",
}
"""(apiVersion, kind) of the envelope -> the message its `raw` holds."""


class ProtobufError(ValueError):
    """A body this module cannot read completely; the message says why."""


def _file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(
        name="kubesim_k8s.proto", package=_PACKAGE, syntax="proto2"
    )
    for name, fields in _MESSAGES.items():
        msg = proto.message_type.add(name=name)
        for json_name, number, kind, repeated in fields:
            field = msg.field.add(name=json_name, json_name=json_name, number=number)
            field.label = _REPEATED if repeated else _OPTIONAL
            if not isinstance(kind, str):
                field.type = kind
            elif kind.startswith("map:"):
                entry = msg.nested_type.add(name=f"{json_name[0].upper()}{json_name[1:]}Entry")
                entry.options.map_entry = True
                entry.field.add(name="key", number=1, type=_STRING, label=_OPTIONAL)
                value_type = _STRING if kind == "map:string" else _BYTES
                entry.field.add(name="value", number=2, type=value_type, label=_OPTIONAL)
                field.label = _REPEATED
                field.type = _F.TYPE_MESSAGE
                field.type_name = f".{_PACKAGE}.{name}.{entry.name}"
            else:
                field.type = _F.TYPE_MESSAGE
                field.type_name = f".{_PACKAGE}.{kind}"
    return proto


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())
_CLASSES: Final[dict[str, Callable[[], message.Message]]] = {
    name: message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
    for name in _MESSAGES
}


def _parse(name: str, data: bytes) -> message.Message:
    msg = _CLASSES[name]()
    try:
        msg.ParseFromString(data)
    except message.DecodeError as exc:
        raise ProtobufError(f"malformed {name}: {exc}") from exc
    _reject_unknown(msg, name)
    return msg


def _reject_unknown(msg: message.Message, path: str) -> None:
    unknown = UnknownFieldSet(msg)
    if len(unknown):
        numbers = sorted({unknown[i].field_number for i in range(len(unknown))})
        raise ProtobufError(f"{path}: field number(s) {numbers} not understood by kubesim")
    for field, value in msg.ListFields():
        nested = field.message_type
        if nested is None or nested.GetOptions().map_entry:
            continue
        children = value if field.is_repeated else [value]
        for i, child in enumerate(children):
            suffix = f"[{i}]" if field.is_repeated else ""
            _reject_unknown(child, f"{path}.{field.json_name}{suffix}")


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object; `ProtobufError` when it cannot be read
    completely."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf envelope (magic prefix 'k8s\\x00')")
    envelope: Any = _parse("Unknown", body[len(MAGIC) :])
    api_version, kind = str(envelope.typeMeta.apiVersion), str(envelope.typeMeta.kind)
    if envelope.contentEncoding:
        raise ProtobufError(f"content encoding {envelope.contentEncoding!r} is not supported")
    name = KINDS.get((api_version, kind))
    if name is None:
        readable = ", ".join(sorted(k for _, k in KINDS))
        raise ProtobufError(
            f"kubesim reads protobuf bodies of {readable} only, not {api_version} {kind}; "
            "send JSON (kubectl apply -f / kubectl create -f)"
        )
    msg = _parse(name, bytes(envelope.raw))
    obj = _json(msg)
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        for field in SERVER_OWNED:
            metadata.pop(field, None)
    return {"apiVersion": api_version, "kind": kind, **obj}


def _json(msg: message.Message) -> dict[str, Any]:
    """`msg` as the JSON a Go client would have sent: the empty values it only encodes in protobuf
    left out."""
    obj = json_format.MessageToDict(msg, preserving_proto_field_name=False)
    owner = msg.DESCRIPTOR.name
    for field, value in msg.ListFields():
        name = field.json_name
        nested = field.message_type
        if nested is not None and nested.name == "IntOrString":
            # intstr.IntOrString is a JSON int or string; type 1 is the string form.
            typed: Any = value
            obj[name] = typed.strVal if typed.type == 1 else typed.intVal
        elif nested is not None and not nested.GetOptions().map_entry:
            if field.is_repeated:
                obj[name] = [_json(child) for child in value]
            else:
                obj[name] = _json(value)
        if (owner, name) not in KEEP_ZERO and obj.get(name) in ("", 0, False, {}, [], None):
            obj.pop(name, None)
    return obj
