"""One walk over an object and its compiled schema: decode/validate, prune unknown fields, defaults.

Built-in kinds (`Walker.builtin`) behave like Go's JSON decoder plus defaulting: a type mismatch is
a 400 decode error, nulls are dropped, quantities stored canonically, unknown fields dropped and
reported. Custom resources behave like apiextensions-apiserver: non-nullable nulls pruned, defaults
applied top-down, unknown fields pruned unless preserved, then OpenAPI value validation in
kube-openapi's wording, list-type uniqueness, and the `x-kubernetes-validations` nodes collected for
CEL. The walk builds a new value (the input is never mutated); for built-in kinds a part equal to
the stored version's is taken as it is.
"""

from __future__ import annotations

import binascii
import copy
import json
import re
from dataclasses import dataclass, field
from sys import intern
from typing import Any

from kubesim.admission.fielderrors import FieldErrors, go_quote
from kubesim.admission.quantity import QuantityError, canonical_quantity
from kubesim.admission.schema import MISSING, Node

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_B64 = re.compile(r"[A-Za-z0-9+/=]")
_B64_TEXT = re.compile(r"[A-Za-z0-9+/=\r\n]*")


@dataclass
class CelSite:
    """A schema node with `x-kubernetes-validations` and the value (and old value) found there."""

    node: Node
    path: str
    value: Any
    old: Any = MISSING


_TYPE_NAMES: dict[type, str] = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}


def json_type(value: Any) -> str:
    return _TYPE_NAMES.get(type(value)) or _slow_json_type(value)


def _slow_json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _go_json_kind(value: Any) -> str:
    kind = json_type(value)
    if kind in ("integer", "number"):
        return f"number {json.dumps(value)}"
    return {"boolean": "bool"}.get(kind, kind)


def _leaf(node: Node) -> type | None:
    """The type (str or bool) whose values of a built-in node decode as they are: no format, enum or
    other check applies to them. None when every value needs its walk."""
    simple = not (node.int_or_string or node.enum is not None or node.validations or node.all_of)
    simple = simple and node.format in (None, "", "date-time")
    if simple and node.types == frozenset({"string"}):
        return str
    if simple and node.types == frozenset({"boolean"}):
        return bool
    return None


@dataclass(slots=True)
class _Plan:
    """What the walk of a built-in node needs, derived once per node (kept on `Node.walk_plan`): its
    properties with their leaf types, so the common field (a string) costs one lookup and no
    call."""

    fields: dict[str, tuple[Node, type | None]]
    additional_leaf: type | None
    item_leaf: type | None
    struct: str


def _plan(node: Node) -> _Plan:
    # Built-in schemas are compiled in full before their first walk and never change afterwards.
    plan = node.walk_plan
    if plan is None:
        props = node.properties or {}
        plan = node.walk_plan = _Plan(
            fields={key: (child, _leaf(child)) for key, child in props.items()},
            additional_leaf=None if node.additional is None else _leaf(node.additional),
            item_leaf=None if node.items is None else _leaf(node.items),
            struct=node.go_type.rpartition(".")[2],
        )
    return plan  # type: ignore[no-any-return]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


@dataclass
class Walker:
    builtin: bool
    defaults: bool = True
    errors: FieldErrors = field(default_factory=FieldErrors)
    unknown: list[str] = field(default_factory=list)
    decode_error: str | None = None
    cel_sites: list[CelSite] = field(default_factory=list)
    collect_cel: bool = False

    # ------------------------------------------------------------------ entry points

    def walk(
        self,
        value: Any,
        node: Node,
        path: str = "",
        old: Any = MISSING,
        go: tuple[str, str] = ("", ""),
    ) -> Any:
        """Returns the cleaned value, or MISSING when the value is to be dropped."""
        if self.builtin:
            return self._builtin(value, node, path, old, go)
        if value is None:
            return self._null(node, path)
        if node.int_or_string:
            return self._int_or_string(value, node, path)
        if node.format == "quantity":
            return self._quantity(value, go)
        types = node.types
        kind = json_type(value)
        if types and kind not in types:
            if kind == "integer" and "number" in types:
                pass
            elif kind == "number" and "integer" in types and value.is_integer():
                value, kind = (
                    int(value),
                    "integer",
                )  # what the JSON decoder of unstructured objects does
            else:
                self._type_error(value, node, path, go, kind)
                return MISSING
        if kind == "object":
            result: Any = self._object(value, node, path, old, go)
        elif kind == "array":
            result = self._array(value, node, path, old, go)
        else:
            result = self._scalar(value, node, path, go)
        if result is not MISSING:
            if node.enum is not None:
                self._enum(result, node, path)
            if node.validations and self.collect_cel:
                self.cel_sites.append(CelSite(node, path, result, old))
            for sub in node.all_of:
                self._check_only(result, sub, path)
        return result

    # ------------------------------------------------------------------ built-in kinds (Go's
    # decoder)

    def _builtin(self, value: Any, node: Node, path: str, old: Any, go: tuple[str, str]) -> Any:
        """`walk` for built-in kinds: decode errors for wrong types, nulls dropped, enums checked;
        built-in schemas carry no defaults, CEL rules or allOf."""
        if value is None:
            return MISSING
        if old is not MISSING and value == old:
            # Unchanged since the stored version, which was decoded, pruned and defaulted already: a
            # second decode would give the same value back (a status write leaves the spec alone).
            return value
        if node.int_or_string:
            return self._int_or_string(value, node, path)
        if node.format == "quantity":
            return self._quantity(value, go)
        kind = _TYPE_NAMES.get(type(value)) or _slow_json_type(value)
        types = node.types
        if types and kind not in types and not (kind == "integer" and "number" in types):
            self._decode(value, node, go)
            return MISSING
        if kind == "object":
            result: Any = self._builtin_object(value, node, path, old, go)
        elif kind == "array":
            result = self._builtin_array(value, node, path, old, go)
        else:
            result = self._scalar(value, node, path, go)
        if node.enum is not None and result is not MISSING:
            self._enum(result, node, path)
        return result

    def _builtin_object(
        self, value: dict[str, Any], node: Node, path: str, old: Any, go: tuple[str, str]
    ) -> dict[str, Any]:
        plan = node.walk_plan or _plan(node)
        fields = plan.fields
        props = node.properties
        additional = node.additional
        out: dict[str, Any] = {}
        old_map = old if isinstance(old, dict) else None
        # Go names a field by its struct; map values by the map field itself
        # (`ObjectMeta.metadata.labels`)
        struct = plan.struct if props is not None else go[0]
        go_prefix = go[1] + "." if go[1] else ""
        prefix = path + "." if path else ""
        walk = self._builtin
        for key, item in value.items():
            # One string per field name (and label key) for all stored objects, not one per object.
            key = intern(key)
            entry = fields.get(key)
            if entry is not None:
                child, leaf = entry
            elif additional is not None:
                child, leaf = additional, plan.additional_leaf
            else:
                self._unknown_field(out, node, key, item, prefix)
                continue
            if type(item) is leaf:
                out[key] = item  # the common leaf (a string), decoded as it is without a walk
                continue
            cleaned = walk(
                item,
                child,
                prefix + key,
                MISSING if old_map is None else old_map.get(key, MISSING),
                (struct, go_prefix + key) if props is not None else go,
            )
            if cleaned is not MISSING:
                out[key] = cleaned
        for key in node.required:
            present = out.get(key)
            if present is None or (not present and isinstance(present, str | list | dict)):
                self.errors.required(_join(path, key))
        return out

    def _unknown_field(
        self, out: dict[str, Any], node: Node, key: str, item: Any, prefix: str
    ) -> None:
        """A field the schema does not name: kept where the schema lets unknown fields through, else
        listed in `unknown` (pruned, or refused under strict field validation)."""
        if (
            node.preserve_unknown
            or node.additional_any
            or (node.embedded and key in ("apiVersion", "kind", "metadata"))
            or (node.properties is None and not node.types)
        ):
            out[key] = item
        else:
            self.unknown.append(prefix + key)

    def _builtin_array(
        self, value: list[Any], node: Node, path: str, old: Any, go: tuple[str, str]
    ) -> list[Any]:
        item_node = node.items
        if item_node is None:
            return list(value)
        leaf = (node.walk_plan or _plan(node)).item_leaf
        # `old` serves only to skip unchanged parts, so the item at the same index will do.
        old_list = old if isinstance(old, list) else ()
        known = len(old_list)
        out: list[Any] = []
        walk = self._builtin
        for i, item in enumerate(value):
            if type(item) is leaf:
                out.append(item)
                continue
            cleaned = walk(
                item, item_node, f"{path}[{i}]", old_list[i] if i < known else MISSING, go
            )
            if cleaned is not MISSING:
                out.append(cleaned)  # a null item is dropped, as Go decodes it to a zero value
        return out

    # ------------------------------------------------------------------ kinds of values

    def _null(self, node: Node, path: str) -> Any:
        if node.nullable or not node.types:
            return None
        return MISSING  # apiextensions prunes nulls of non-nullable fields (before defaulting)

    def _type_error(
        self, value: Any, node: Node, path: str, go: tuple[str, str], kind: str
    ) -> None:
        expected = ",".join(sorted(node.types))
        self.errors.invalid_shown(
            path, go_quote(kind), f"{path} in body must be of type {expected}: {go_quote(kind)}"
        )

    def _decode(self, value: Any, node: Node, go: tuple[str, str]) -> None:
        if self.decode_error is not None:
            return
        where = f"Go struct field {go[0]}.{go[1]}" if go[1] else "Go value"
        self.decode_error = (
            f"json: cannot unmarshal {_go_json_kind(value)} into {where} of type {node.go_type}"
        )

    def _int_or_string(self, value: Any, node: Node, path: str) -> Any:
        if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        if self.builtin:
            if self.decode_error is None:
                self.decode_error = (
                    f"json: cannot unmarshal {_go_json_kind(value)} into Go value "
                    "of type intstr.IntOrString"
                )
            return MISSING
        if isinstance(value, float) and value.is_integer():
            return int(value)
        kind = json_type(value)
        self.errors.invalid_shown(
            path, go_quote(kind), f"{path} in body must be of type integer,string: {go_quote(kind)}"
        )
        return MISSING

    def _quantity(self, value: Any, go: tuple[str, str]) -> Any:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            self._decode(value, Node(go_type="resource.Quantity"), go)
            return MISSING
        try:
            return canonical_quantity(value)
        except QuantityError as e:
            if self.decode_error is None:
                self.decode_error = str(e)
            return MISSING

    def _scalar(self, value: Any, node: Node, path: str, go: tuple[str, str]) -> Any:
        if self.builtin:
            if isinstance(value, int) and not isinstance(value, bool) and "integer" in node.types:
                lo, hi = _INT32 if node.format == "int32" else _INT64
                if not lo <= value <= hi:
                    self._decode(value, node, go)
                    return MISSING
            if node.format == "byte" and isinstance(value, str):
                err = _base64_error(value)
                if err and self.decode_error is None:
                    self.decode_error = err
                    return MISSING
            return value
        self._value_checks(value, node, path)
        return value

    def _object(
        self, value: dict[str, Any], node: Node, path: str, old: Any, go: tuple[str, str]
    ) -> Any:
        props = node.properties
        additional = node.additional
        out: dict[str, Any] = {}
        old_map = old if isinstance(old, dict) else None
        prefix = path + "." if path else ""
        walk = self.walk
        for key, item in value.items():
            # One string per field name (and label key) for all stored objects, not one per object.
            key = intern(key)
            child = props.get(key) if props is not None else None
            if child is None:
                child = additional
                if child is None:
                    self._unknown_field(out, node, key, item, prefix)
                    continue
            cleaned = walk(
                item,
                child,
                prefix + key,
                MISSING if old_map is None else old_map.get(key, MISSING),
                go,
            )
            if cleaned is not MISSING:
                out[key] = cleaned
        old_map = old_map or {}
        if props is not None and self.defaults:
            for key, child in props.items():
                if key not in out and child.default is not MISSING:
                    out[key] = self.walk(
                        copy.deepcopy(child.default),
                        child,
                        _join(path, key),
                        old_map.get(key, MISSING),
                    )
        for key in node.required:
            if key not in out:
                self.errors.required(_join(path, key))
        self._object_checks(out, node, path)
        return out

    def _array(self, value: list[Any], node: Node, path: str, old: Any, go: tuple[str, str]) -> Any:
        item_node = node.items
        out: list[Any] = []
        old_items = _correlate(old, node) if old is not MISSING else {}
        for i, item in enumerate(value):
            if item_node is None:
                out.append(item)
                continue
            if item is None and item_node.types and not item_node.nullable:
                # nulls are pruned from objects only; in a list they are a type error
                self._type_error(item, item_node, f"{path}[{i}]", go, "null")
                out.append(None)
                continue
            old_item = old_items.get(_identity(item, node), MISSING) if old_items else MISSING
            cleaned = self.walk(item, item_node, f"{path}[{i}]", old_item, go)
            out.append(None if cleaned is MISSING else cleaned)
        self._array_checks(out, node, path)
        return out

    # ------------------------------------------------------------------ value validations (CRDs)

    def _enum(self, value: Any, node: Node, path: str) -> None:
        assert node.enum is not None
        if value in node.enum or (self.builtin and value == ""):
            return
        if isinstance(value, dict | list):
            return
        self.errors.not_supported(path, value, node.enum)

    def _value_checks(self, value: Any, node: Node, path: str) -> None:
        errs = self.errors
        if isinstance(value, int | float) and not isinstance(value, bool):
            if node.minimum is not None:
                if node.exclusive_minimum and value <= node.minimum:
                    errs.invalid(
                        path, value, f"{path} in body should be greater than {_num(node.minimum)}"
                    )
                elif value < node.minimum:
                    errs.invalid(
                        path,
                        value,
                        f"{path} in body should be greater than or equal to {_num(node.minimum)}",
                    )
            if node.maximum is not None:
                if node.exclusive_maximum and value >= node.maximum:
                    errs.invalid(
                        path, value, f"{path} in body should be less than {_num(node.maximum)}"
                    )
                elif value > node.maximum:
                    errs.invalid(
                        path,
                        value,
                        f"{path} in body should be less than or equal to {_num(node.maximum)}",
                    )
            if node.format == "int32" and not _INT32[0] <= value <= _INT32[1]:
                errs.invalid(
                    path, value, f"{path} in body must be of type int32: {go_quote(str(value))}"
                )
        elif isinstance(value, str):
            if node.max_length is not None and len(value) > node.max_length:
                errs.too_long(path, node.max_length)
            if node.min_length is not None and len(value) < node.min_length:
                errs.invalid(
                    path, value, f"{path} in body should be at least {node.min_length} chars long"
                )
            if node.pattern is not None and not node.pattern.search(value):
                errs.invalid(path, value, f"{path} in body should match '{node.pattern_text}'")
            if node.format == "date-time" and not _DATE_TIME.match(value):
                errs.invalid(
                    path, value, f"{path} in body must be of type date-time: {go_quote(value)}"
                )

    def _object_checks(self, value: dict[str, Any], node: Node, path: str) -> None:
        n = len(value)
        if node.max_properties is not None and n > node.max_properties:
            self.errors.too_many(path, n, node.max_properties)
        if node.min_properties is not None and n < node.min_properties:
            self.errors.invalid_shown(
                path,
                go_quote("object"),
                f"{path} in body should have at least {node.min_properties} properties",
            )

    def _array_checks(self, value: list[Any], node: Node, path: str) -> None:
        n = len(value)
        if node.max_items is not None and n > node.max_items:
            self.errors.too_many(path, n, node.max_items)
        if node.min_items is not None and n < node.min_items:
            self.errors.invalid(
                path, n, f"{path} in body should have at least {node.min_items} items"
            )
        if node.list_type in ("set", "map") or node.unique_items:
            seen: list[Any] = []
            for i, item in enumerate(value):
                ident = _identity(item, node) if node.list_type == "map" else item
                if ident in seen:
                    shown = ident
                    if node.list_type == "map":
                        keys = {
                            k: json.loads(v) for k, v in zip(node.list_map_keys, ident, strict=True)
                        }
                        self.errors.duplicate(f"{path}[{i}]", keys)
                    else:
                        self.errors.duplicate(f"{path}[{i}]", shown)
                else:
                    seen.append(ident)

    def _check_only(self, value: Any, node: Node, path: str) -> None:
        """allOf members constrain the value but never prune or default it."""
        sub = Walker(builtin=False, defaults=False)
        sub.walk(value, node, path)
        self.errors.extend(sub.errors)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _identity(item: Any, node: Node) -> Any:
    if node.list_type == "map" and isinstance(item, dict):
        return tuple(json.dumps(item.get(k), sort_keys=True) for k in node.list_map_keys)
    return json.dumps(item, sort_keys=True) if isinstance(item, dict | list) else item


def _correlate(old: Any, node: Node) -> dict[Any, Any]:
    """Old list items by identity: only map and set lists correlate (atomic lists have no
    oldSelf)."""
    if not isinstance(old, list) or node.list_type not in ("map", "set"):
        return {}
    return {_identity(item, node): item for item in old}


def _base64_error(value: str) -> str | None:
    if not _B64_TEXT.fullmatch(value):
        for i, ch in enumerate(value):
            if not _B64.match(ch) and ch not in "\r\n":
                return f"illegal base64 data at input byte {i}"
    try:
        binascii.a2b_base64(value.encode())
        stripped = value.replace("\r", "").replace("\n", "")
        if len(stripped) % 4:
            return f"illegal base64 data at input byte {len(stripped) // 4 * 4}"
    except binascii.Error:
        return f"illegal base64 data at input byte {len(value)}"
    return None
